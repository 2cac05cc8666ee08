// The training-setup schema (setup_schema.hpp): the table of knobs, and the readers and writers
// every input and output of a TrainingSetup is derived from.
#include "mme/inputs/setup_schema.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <unordered_map>

#include <fmt/core.h>

#include "mme/inputs/megatron_args.hpp"
#include "mme/inputs/megatron_flags.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/number_text.hpp"

#include "setup_knobs.hpp"

namespace mme {

using J = nlohmann::json;
using setup_knobs_detail::env_decides_determinism;
using setup_knobs_detail::must;

namespace {

std::vector<SetupKnob> build_knobs() {
  using namespace setup_knobs_detail;
  std::vector<SetupKnob> k;
  add_tensor_and_pipeline_knobs(k);
  add_expert_and_context_knobs(k);
  add_batch_knobs(k);
  add_sharding_knobs(k);
  add_sharding_detail_knobs(k);
  add_optimizer_and_recompute_knobs(k);
  add_offload_knobs(k);
  add_lora_knobs(k);
  add_moe_knobs(k);
  add_communication_knobs(k);
  add_graph_knobs(k);
  add_kernel_knobs(k);
  add_implementation_knobs(k);
  add_infrastructure_knobs(k);
  add_precision_knobs(k);
  add_model_override_knobs(k);
  return k;
}

// The order of flags on a command line: --help, docs/cli.md and the planner's printed
// commands (the layout first, then batch, pipeline split, recompute, optimizer, precision,
// kernels, MoE, environment, FSDP).
constexpr const char* kFlagOrder[] = {
    "tp",
    "pp",
    "vpp",
    "ep",
    "etp",
    "cp",
    "cp-comm-type",
    "num-gpus",
    "sequence-parallel",
    "micro-batch-size",
    "seq-length",
    "global-batch-size",
    "num-layers-in-first-pipeline-stage",
    "num-layers-in-last-pipeline-stage",
    "account-for-embedding-in-pipeline-split",
    "account-for-loss-in-pipeline-split",
    "pipeline-layout",
    "num-layers-per-virtual-pipeline-stage",
    "microbatch-group-size-per-virtual-pipeline-stage",
    "recompute-granularity",
    "recompute-method",
    "recompute-num-layers",
    "recompute-modules",
    "cpu-offloading",
    "cpu-offloading-num-layers",
    "cpu-offloading-activations",
    "cpu-offloading-weights",
    "fine-grained-activation-offloading",
    "offload-modules",
    "min-offloaded-tensor-size",
    "activation-offload-fraction",
    "delta-offload-bytes-across-pp-ranks",
    "use-distributed-optimizer",
    "num-distributed-optimizer-instances",
    "main-grads-dtype",
    "use-precision-aware-optimizer",
    "main-params-dtype",
    "exp-avg-dtype",
    "exp-avg-sq-dtype",
    "optimizer-cpu-offload-fraction",
    "overlap-cpu-optimizer-d2h-h2d",
    "optimizer",
    "lora-rank",
    "lora-alpha",
    "lora-target-modules",
    "lora-dropout",
    "lora-dropout-position",
    "lora-dtype",
    "lora-a-init-method",
    "lora-b-init-method",
    "lora-a2a-experimental",
    "precision",
    "fp8-param-gather",
    "fp8-format",
    "fp8-recipe",
    "fp8-amax-history-len",
    "first-last-layers-bf16",
    "num-layers-at-start-in-bf16",
    "num-layers-at-end-in-bf16",
    "fp4-format",
    "fp4-param-gather",
    "attention-backend",
    "transformer-impl",
    "moe-token-dispatcher",
    "moe-capacity-factor",
    "moe-pad-expert-input-to-capacity",
    "moe-router-force-load-balancing",
    "moe-routing-imbalance",
    "moe-grouped-gemm",
    "moe-flex-dispatcher-backend",
    "moe-shared-expert-overlap",
    "overlap-moe-expert-parallel-comm",
    "tp-comm-overlap",
    "overlap-grad-reduce",
    "overlap-param-gather",
    "ddp-bucket-size",
    "ddp-pad-buckets-for-high-nccl-busbw",
    "cuda-graph-impl",
    "cuda-graph-modules",
    "cuda-graph-warmup-steps",
    "cross-entropy-loss-fusion",
    "cross-entropy-fusion-impl",
    "cublas-workspace-config",
    "empty-unused-memory-level",
    "deterministic-mode",
    "env",
    "make-vocab-size-divisible-by",
    "hidden-dropout",
    "attention-dropout",
    "gradient-accumulation-fusion",
    "masked-softmax-fusion",
    "bias-swiglu-fusion",
    "bias-gelu-fusion",
    "use-fused-weighted-squared-relu",
    "rope-fusion",
    "bias-dropout-fusion",
    "create-attention-mask-in-dataloader",
    "attention-softmax-in-fp32",
    "defer-embedding-wgrad-compute",
    "wgrad-deferral-limit",
    "use-torch-fsdp2",
    "torch-fsdp2-reshard-after-forward",
    "use-megatron-fsdp",
    "data-parallel-sharding-strategy",
    "outer-dp-sharding-strategy",
    "megatron-fsdp-main-params-dtype",
    "megatron-fsdp-main-grads-dtype",
    "megatron-fsdp-grad-comm-dtype",
    "fsdp-double-buffer",
    "suggested-communication-unit-size",
};

}  // namespace

const std::vector<SetupKnob>& setup_knobs() {
  static const std::vector<SetupKnob> knobs = build_knobs();
  return knobs;
}

const std::vector<const SetupKnob*>& setup_knobs_in_flag_order() {
  static const std::vector<const SetupKnob*> order = [] {
    std::vector<const SetupKnob*> out;
    for (const char* id : kFlagOrder) {
      const auto& all = setup_knobs();
      const auto it =
          std::find_if(all.begin(), all.end(), [&](const SetupKnob& k) { return id == std::string_view(k.id); });
      if (it == all.end()) throw std::logic_error(std::string("kFlagOrder names no knob ") + id);
      out.push_back(&*it);
    }
    if (out.size() != setup_knobs().size()) throw std::logic_error("kFlagOrder misses a knob");
    return out;
  }();
  return order;
}

const SetupKnob* find_knob(std::string_view name) {
  // A knob's own name first: another knob may read the same Megatron-LM flag (cpu-offloading
  // follows --cpu-offloading-num-layers).
  for (const auto& k : setup_knobs())
    if (name == k.id) return &k;
  for (const auto& k : setup_knobs()) {
    if ((k.flag && name == k.flag) || (k.off_flag && name == k.off_flag)) return &k;
    for (const char* a : k.aliases)
      if (name == a) return &k;
    for (const auto* list : {&k.megatron, &k.megatron_off, &k.megatron_extra})
      for (const char* m : *list)
        if (name == m) return &k;
    for (const auto& sw : k.switches)
      if (name == sw.flag) return &k;
  }
  return nullptr;
}

// -------------------------------------------------------------------------------------------------
// Values as text.

namespace {

std::string number_text(double d) { return fmt::format("{}", d); }

std::string range_text(const SetupKnob& k) {
  return fmt::format("{}{}, {}{}", k.lo_open ? "(" : "[", number_text(k.lo), number_text(k.hi), k.hi_open ? ")" : "]");
}

// The canonical JSON value of an enum knob's text, or nullopt when the knob does not take it.
std::optional<J> enum_choice(const SetupKnob& k, const std::string& text) {
  const std::string t = lower(text);
  if (k.null_name && t == k.null_name) return J();
  const auto v = enum_value(*k.table, t);
  if (!v) return std::nullopt;
  for (const char* listed : k.values)
    if (enum_value(*k.table, listed) == v) return J(enum_name(*k.table, *v));
  return std::nullopt;
}

}  // namespace

std::string knob_values_text(const SetupKnob& k) {
  std::string out;
  for (const char* v : k.values) out += (out.empty() ? "" : ", ") + std::string(v);
  return out;
}

double parse_number(std::string_view flag, const std::string& text, double min, double max) {
  const auto parsed = parse_decimal(text);
  if (!parsed || !std::isfinite(*parsed)) throw UsageError(fmt::format("{}: expected a number, got '{}'", flag, text));
  if (*parsed < min || *parsed > max)
    throw UsageError(fmt::format("{}: {} is out of range [{}, {}]", flag, text, min, max));
  return *parsed;
}

std::int64_t parse_int(std::string_view flag, const std::string& text, std::int64_t min, std::int64_t max,
                       bool megatron) {
  bool too_large = false;
  const auto parsed = parse_integer(text, &too_large);
  if (!parsed && !too_large) throw UsageError(fmt::format("{}: expected an integer, got '{}'", flag, text));
  const std::int64_t v = parsed.value_or(0);
  if (too_large || v > max) {
    if (megatron) throw LayoutError(fmt::format("{} {} is larger than {}, which no real run uses", flag, text, max));
    throw UsageError(fmt::format("{}: {} is too large (at most {})", flag, text, max));
  }
  if (v < min) {
    if (min == 1) throw UsageError(fmt::format("{}: expected a positive integer, got {}", flag, text));
    throw UsageError(fmt::format("{}: expected an integer of at least {}, got {}", flag, min, text));
  }
  return v;
}

J parse_knob_text(const SetupKnob& k, std::string_view flag, const std::string& text, bool megatron) {
  switch (k.kind) {
    case KnobKind::kInt: return J(parse_int(flag, text, k.min, k.max, megatron));
    case KnobKind::kNumber: {
      const auto parsed = parse_decimal(text);
      if (!parsed || !std::isfinite(*parsed))
        throw UsageError(fmt::format("{}: expected a number, got '{}'", flag, text));
      const double v = *parsed;
      const bool low = k.lo_open ? v <= k.lo : v < k.lo;
      const bool high = k.hi_open ? v >= k.hi : v > k.hi;
      if (low || high) throw UsageError(fmt::format("{}: {} is out of range {}", flag, text, range_text(k)));
      return J(v);
    }
    case KnobKind::kEnum: {
      for (const auto& [spelling, why] : k.refused)
        if (lower(text) == spelling) throw UsageError(fmt::format(fmt::runtime(why), flag));
      if (auto v = enum_choice(k, text)) return *v;
      throw UsageError(fmt::format("{}: unknown value '{}' ({})", flag, text, knob_values_text(k)));
    }
    case KnobKind::kString:
      if (k.check) k.check(text, flag);
      return J(text);
    case KnobKind::kModules: try { return J(knob_modules_text(k, knob_modules(k, text)));
      } catch (const UsageError& e) {
        throw UsageError(fmt::format("{}: {}", flag, e.what()));
      }
    case KnobKind::kEnv: (void)split_env_assignment(text, flag); return J::array({text});
    case KnobKind::kBool: break;
  }
  throw std::logic_error(fmt::format("{}: a switch has no value text", flag));
}

std::string knob_text(const SetupKnob&, const J& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  if (v.is_number()) return number_text(v.get<double>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return v.dump();
}

J knob_spec_value(const SetupKnob& k, const TrainingSetup& s) { return k.spec_get ? k.spec_get(s) : k.get(s); }

// -------------------------------------------------------------------------------------------------
// mme flags.

std::optional<std::string> MmeFlags::agreed_value(const std::vector<const char*>& names) const {
  std::optional<std::string> out;
  const char* first = nullptr;
  for (const char* n : names) {
    const auto v = value(n);
    if (!v) continue;
    if (out && *out != *v) throw UsageError(fmt::format("--{} {} and --{} {} disagree", first, *out, n, *v));
    out = v;
    first = n;
  }
  return out;
}

namespace {

class ArgFlags final : public MmeFlags {
 public:
  explicit ArgFlags(const std::vector<std::string>& args) {
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (args[i].rfind("--", 0) != 0) throw UsageError(fmt::format("expected a flag, got '{}'", args[i]));
      const std::string name = args[i].substr(2);
      const SetupKnob* k = find_knob(name);
      if (!k) throw UsageError(fmt::format("unknown setup flag --{}", name));
      const bool is_switch = k->kind == KnobKind::kBool || (k->flag && name != k->flag && k->kind == KnobKind::kEnum &&
                                                            std::none_of(k->aliases.begin(), k->aliases.end(),
                                                                         [&](const char* a) { return name == a; }));
      if (is_switch) {
        switches_.insert(name);
      } else {
        if (i + 1 >= args.size()) throw UsageError(fmt::format("--{} needs a value", name));
        values_[name].push_back(args[++i]);
      }
    }
  }
  std::optional<std::string> value(std::string_view name) const override {
    const auto it = values_.find(std::string(name));
    if (it == values_.end()) return std::nullopt;
    return it->second.back();
  }
  bool on(std::string_view name) const override { return switches_.count(std::string(name)) > 0; }
  std::vector<std::string> values(std::string_view name) const override {
    const auto it = values_.find(std::string(name));
    return it == values_.end() ? std::vector<std::string>{} : it->second;
  }

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::set<std::string> switches_;
};

}  // namespace

std::unique_ptr<MmeFlags> mme_flags_from_args(const std::vector<std::string>& args) {
  return std::make_unique<ArgFlags>(args);
}

TrainingSetup setup_from_mme_flags(const MmeFlags& flags, TrainingSetup s) {
  for (const auto& k : setup_knobs()) {
    auto apply = [&](const J& v) {
      if (k.mme_set)
        k.mme_set(s, v, flags);
      else
        k.set(s, v);
    };
    if (k.kind == KnobKind::kBool) {
      const bool on = k.flag && flags.on(k.flag), off = k.off_flag && flags.on(k.off_flag);
      if (on && off) throw UsageError(fmt::format("--{} and --{} contradict each other", k.flag, k.off_flag));
      if (on) apply(J(true));
      if (off) apply(J(false));
      continue;
    }
    if (k.kind == KnobKind::kEnv) {
      for (const auto& text : flags.values(k.flag)) apply(parse_knob_text(k, "--" + std::string(k.flag), text));
      continue;
    }
    // A value flag given under its name or an alias; two spellings must agree.
    std::vector<const char*> names{k.flag};
    names.insert(names.end(), k.aliases.begin(), k.aliases.end());
    const std::optional<std::string> value = flags.agreed_value(names);
    if (value) apply(parse_knob_text(k, "--" + std::string(k.flag), *value));
    const SetupKnob::ValueSwitch* chosen = nullptr;
    for (const auto& sw : k.switches) {
      if (!flags.on(sw.flag)) continue;
      if (chosen) throw UsageError(fmt::format("--{} and --{} contradict each other", chosen->flag, sw.flag));
      chosen = &sw;
    }
    if (chosen) apply(J(chosen->value));
  }
  return s;
}

std::vector<std::string> setup_to_mme_args(const TrainingSetup& s) {
  const TrainingSetup d;
  std::vector<std::string> a;
  for (const SetupKnob* k : setup_knobs_in_flag_order()) {
    if (k->args_when && !k->args_when(s)) continue;
    const auto value = [&](const TrainingSetup& x) { return k->args_get ? k->args_get(x) : k->get(x); };
    const J v = value(s);
    if (!k->args_always && v == value(d)) continue;
    if (v.is_null()) continue;
    switch (k->kind) {
      case KnobKind::kBool:
        if (const char* f = v.get<bool>() ? k->flag : k->off_flag) a.push_back(fmt::format("--{}", f));
        break;
      case KnobKind::kEnv:
        for (const auto& e : v) {
          a.push_back(fmt::format("--{}", k->flag));
          a.push_back(e.get<std::string>());
        }
        break;
      default: a.push_back(fmt::format("--{}", k->flag)); a.push_back(knob_text(*k, v));
    }
  }
  return a;
}

// -------------------------------------------------------------------------------------------------
// The JSON `setup` block.

J setup_to_json_block(const TrainingSetup& s) {
  J j = J::object();
  for (const auto& k : setup_knobs()) {
    if (!k.json_key || (k.json_when && !k.json_when(s))) continue;
    j[k.json_key] = k.json_get ? k.json_get(s) : k.get(s);
  }
  // Derived by resolve_setup, not knobs.
  j["dp"] = s.parallel.dp;
  j["expert_dp"] = s.parallel.expert_dp;
  j["num_micro_batches"] = s.num_micro_batches > 0 ? J(s.num_micro_batches) : J();
  return j;
}

TrainingSetup setup_from_json_block(const J& block, TrainingSetup s) {
  for (const auto& k : setup_knobs()) {
    if (!k.json_key) continue;
    const auto it = block.find(k.json_key);
    if (it == block.end()) continue;
    if (std::string_view(k.json_key) == "sharded_data_parallel") {
      s.fsdp.kind = must<FsdpKind>(kFsdpKindNames, *it);
      continue;
    }
    if (k.kind != KnobKind::kEnum || it->is_null()) {
      k.set(s, *it);
      continue;
    }
    // The JSON spells enums by name, "none" and "auto" included.
    k.set(s, enum_choice(k, it->get<std::string>()).value_or(J()));
  }
  return s;
}

// -------------------------------------------------------------------------------------------------
// Megatron-LM flags.

TrainingSetup setup_from_megatron_args(const MegatronArgs& a, TrainingSetup s) {
  // arguments.py validate_args ("Batch size."): a batch-size schedule and an explicit global
  // batch size are refused together (ValueError).
  if (a.has("step-batch-size-schedule") && a.has("global-batch-size"))
    throw UsageError(
        "--step-batch-size-schedule and --global-batch-size are given together, which Megatron-LM refuses "
        "('Cannot specify both --step-batch-size-schedule and --global-batch-size'): keep one of them");
  const FsdpSettings base_fsdp = s.fsdp;
  for (const auto& k : setup_knobs()) {
    if (k.megatron_read) {
      k.megatron_read(a, s);
      continue;
    }
    if (k.megatron_default) k.set(s, *k.megatron_default);
    if (k.kind == KnobKind::kBool) {
      for (const char* f : k.megatron)
        if (a.enabled(f)) k.set(s, J(true));
      for (const char* f : k.megatron_off)
        if (a.enabled(f)) k.set(s, J(false));
      continue;
    }
    std::optional<std::string> value;
    const char* first = nullptr;
    for (const char* f : k.megatron) {
      const auto v = a.value(f);
      if (!v) continue;
      if (value && *value != *v) throw UsageError(fmt::format("--{} {} and --{} {} disagree", first, *value, f, *v));
      value = v;
      first = f;
    }
    if (value) k.set(s, parse_knob_text(k, "--" + std::string(first), *value, true));
  }
  // The Megatron-FSDP / FSDP2 settings count only with their kind of sharding: Megatron-LM
  // checks the values (argparse choices) and ignores them otherwise.
  if (s.fsdp.kind == FsdpKind::kNone) {
    s.fsdp = base_fsdp;
  } else if (s.fsdp.kind == FsdpKind::kTorchFsdp2) {
    const bool reshard = s.fsdp.reshard_after_forward;
    s.fsdp = base_fsdp;
    s.fsdp.kind = FsdpKind::kTorchFsdp2;
    s.fsdp.reshard_after_forward = reshard;
  } else {
    s.fsdp.reshard_after_forward = true;
  }
  setup_knobs_detail::check_megatron_prerequisites(a, s);
  return s;
}

std::vector<std::string> setup_to_megatron_args(const TrainingSetup& s, bool resolved) {
  std::vector<std::string> a;
  auto flag = [&](std::string f) { a.push_back("--" + f); };
  for (const auto& k : setup_knobs()) {
    const std::string_view id = k.id;
    if (id == "precision") {
      if (s.precision == Precision::kFP16) flag("fp16");
      if (s.precision == Precision::kBF16 || s.precision == Precision::kFP8) flag("bf16");
      if (s.precision == Precision::kFP8) {
        flag("fp8-format");
        a.push_back(to_string(s.low_precision.fp8_format.value_or(Fp8Format::kE4M3)));
      }
      continue;
    }
    if (id == "fp8-format") continue;  // printed with --bf16 above
    if (id == "optimizer-cpu-offload-fraction") {
      if (s.optimizer.cpu_offload_fraction > 0) {
        flag("optimizer-cpu-offload");
        flag("optimizer-offload-fraction");
        a.push_back(knob_text(k, J(s.optimizer.cpu_offload_fraction)));
      }
      continue;
    }
    if (k.kind == KnobKind::kEnv) {
      for (const auto& e : s.environment_used) a.insert(a.end(), {"export", e});
      for (const auto& e : s.environment_ignored) a.insert(a.end(), {"export", e});
      continue;
    }
    // Determinism the environment decides is printed as its variable (--deterministic-mode
    // would add the cuBLAS default).
    if (id == "deterministic-mode" && env_decides_determinism(s)) continue;
    J v = k.get(s);
    if (k.spec_get) {
      // A knob that does not apply to this setup (--recompute-method without full recompute,
      // which Megatron-LM refuses) is not written.
      const J applied = k.spec_get(s);
      if (applied.is_null() && !v.is_null()) continue;
      // Resolved: an unset knob at the value mme gives it (sequence parallelism with TP > 1),
      // which Megatron-LM's own default may not be.
      if (resolved && v.is_null()) v = applied;
    }
    if (v.is_null()) continue;
    if (k.kind == KnobKind::kBool) {
      if (v.get<bool>() && !k.megatron.empty()) flag(k.megatron.front());
      if (!v.get<bool>() && !k.megatron_off.empty()) flag(k.megatron_off.front());
      continue;
    }
    if (k.megatron.empty()) continue;
    if (k.kind == KnobKind::kModules) {
      // A list flag of Megatron-LM (nargs '+': --recompute-modules core_attn mlp): one word per
      // module, and no flag for none (argparse needs a value).
      std::vector<std::string> items;
      const std::string text = knob_text(k, v);
      for (std::size_t b = 0; b < text.size();) {
        const std::size_t e = std::min(text.find(',', b), text.size());
        if (e > b) items.push_back(text.substr(b, e - b));
        b = e + 1;
      }
      if (items.empty()) continue;
      flag(k.megatron.front());
      a.insert(a.end(), items.begin(), items.end());
      continue;
    }
    flag(k.megatron.front());
    a.push_back(knob_text(k, v));
  }
  return a;
}

// -------------------------------------------------------------------------------------------------
// The other flags of a Megatron-LM launch line.

namespace {

struct NotModelled {
  std::string_view flag;
  std::string_view what;
  std::string_view neutral = {};  // the value without a memory effect; empty: none
};

#include "megatron_flag_review.inc"

// A flag's given value is its neutral one: the same number where both parse as decimals (1 and
// 1.0, 0 and 0.0), else the same text.
bool is_neutral_value(const MegatronArgs::Flag& f, std::string_view neutral) {
  if (neutral.empty() || !f.unknown.empty()) return false;
  std::string given;
  for (const auto& v : f.values) given += (given.empty() ? "" : " ") + v;
  const auto a = parse_decimal(given), b = parse_decimal(neutral);
  return a && b ? *a == *b : given == neutral;
}

}  // namespace

const std::vector<std::string_view>& megatron_model_flags() {
  static const std::vector<std::string_view> v = [] {
    std::vector<std::string_view> out;
    for (const auto& m : model_flags()) out.push_back(m.name);
    return out;
  }();
  return v;
}

const std::vector<std::string_view>& megatron_no_effect_flags() {
  static const std::vector<std::string_view> v(std::begin(kNoEffectFlags), std::end(kNoEffectFlags));
  return v;
}

const std::vector<std::string_view>& megatron_not_modelled_flags() {
  static const std::vector<std::string_view> v = [] {
    std::vector<std::string_view> out;
    for (const auto& n : kNotModelled) out.push_back(n.flag);
    return out;
  }();
  return v;
}

MegatronFlagReview review_megatron_flags(const MegatronArgs& args) {
  static const std::set<std::string_view> known = [] {
    std::set<std::string_view> k;
    for (const auto& m : model_flags()) k.insert(m.name);
    k.insert(std::begin(kNoEffectFlags), std::end(kNoEffectFlags));
    for (const auto& knob : setup_knobs())
      for (const auto* list : {&knob.megatron, &knob.megatron_off, &knob.megatron_extra})
        for (const char* f : *list) k.insert(f);
    return k;
  }();
  MegatronFlagReview r;
  for (const auto& f : args.flags()) {
    const std::string_view name = f.name;
    if (known.count(name)) continue;
    const NotModelled* listed = nullptr;
    for (const auto& n : kNotModelled)
      if (n.flag == name) listed = &n;
    if (listed && is_neutral_value(f, listed->neutral)) continue;  // at its neutral value: no effect
    std::string_view what = listed ? listed->what : std::string_view{};
    for (const auto& n : kNotModelledPrefixes)
      if (what.empty() && name.rfind(n.flag, 0) == 0) what = n.what;
    if (!what.empty()) {
      r.not_modelled.push_back(fmt::format("--{} is not modelled: {} (its memory is not in the estimate)", name, what));
      continue;
    }
    if (std::any_of(std::begin(kNoEffectPrefixes), std::end(kNoEffectPrefixes),
                    [&](std::string_view p) { return name.rfind(p, 0) == 0; }))
      continue;
    r.unknown.push_back("--" + f.name);
  }
  return r;
}

// -------------------------------------------------------------------------------------------------
// docs/cli.md.

namespace {
std::string row(std::initializer_list<std::string> cells) {
  std::string out = "|";
  for (const auto& c : cells) out += c.empty() ? " |" : " " + c + " |";
  return out + "\n";
}
std::string code(std::string_view flag, std::string_view value = "") {
  return fmt::format("`--{}{}{}`", flag, value.empty() ? "" : " ", value);
}
}  // namespace

std::string setup_flags_markdown() {
  std::string out = "| flag | Megatron-LM alias | meaning | default |\n|---|---|---|---|\n";
  for (const SetupKnob* k : setup_knobs_in_flag_order()) {
    if (k->kind == KnobKind::kBool || !k->flag) continue;
    std::string aliases;
    for (const char* a : k->aliases) aliases += (aliases.empty() ? "" : ", ") + code(a);
    out += row({code(k->flag, k->doc_value), aliases, k->doc, k->doc_default});
  }
  return out;
}

std::string setup_switches_markdown() {
  std::string out = "| switch | meaning |\n|---|---|\n";
  for (const SetupKnob* k : setup_knobs_in_flag_order()) {
    if (k->kind == KnobKind::kBool) {
      if (k->flag && k->off_flag)
        out += row({code(k->flag) + " / " + code(k->off_flag), std::string(k->doc) + " / " + k->off_doc});
      else if (k->flag)
        out += row({code(k->flag), k->doc});
      else
        out += row({code(k->off_flag), k->off_doc});
    } else if (!k->switches.empty()) {
      std::string names;
      for (const auto& sw : k->switches) names += (names.empty() ? "" : ", ") + code(sw.flag);
      out += row({names, k->off_doc});
    }
  }
  return out;
}

}  // namespace mme
