#include "mme/inputs/megatron_args.hpp"

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include "mme/sdk/error.hpp"
#include "mme/sdk/json_text.hpp"

namespace mme {

namespace {

std::string normalise(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

bool truthy(const std::string& v) {
  std::string l;
  for (char c : v) l.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return l.empty() || l == "true" || l == "1" || l == "yes" || l == "on";
}

// Splits shell-ish text into words. Returns the words; throws on an unterminated quote.
std::vector<std::string> shell_words(std::string_view text, const std::string& source) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < text.size() &&
                 (text[i + 1] == '"' || text[i + 1] == '\\' || text[i + 1] == '$')) {
        cur.push_back(text[++i]);
      } else {
        cur.push_back(c);
      }
      continue;
    }
    if (c == '\\' && i + 1 < text.size()) {
      if (text[i + 1] == '\n') {  // line continuation
        ++i;
        continue;
      }
      if (text[i + 1] == '\r' && i + 2 < text.size() && text[i + 2] == '\n') {
        i += 2;
        continue;
      }
      cur.push_back(text[++i]);
      in_word = true;
      continue;
    }
    if (c == '#' && !in_word) {  // comment to the end of the line
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(std::move(cur));
      cur.clear();
      in_word = false;
      continue;
    }
    if (c == '\0') throw UsageError(fmt::format("{}: contains a NUL byte", source));
    cur.push_back(c);
    in_word = true;
  }
  if (quote) throw UsageError(fmt::format("{}: unterminated {} quote", source, quote));
  if (in_word) words.push_back(std::move(cur));
  return words;
}

bool is_flag(const std::string& w) { return w.size() > 2 && w[0] == '-' && w[1] == '-'; }

bool is_env_name(const std::string& n) {
  return !n.empty() && !std::isdigit(static_cast<unsigned char>(n[0])) &&
         std::all_of(n.begin(), n.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// Flags (or environment variables) in first-seen order, a later value replacing an earlier
// one, with a hash index: linear in the number of words, where MegatronArgs::set is linear per
// call (100 000 flags took 25 s through set()).
template <class Item, class NameOf>
class OrderedTable {
 public:
  explicit OrderedTable(NameOf name_of) : name_of_(name_of) {}
  void put(Item item) {
    const auto [it, fresh] = index_.try_emplace(name_of_(item), items_.size());
    if (fresh) items_.push_back(std::move(item));
    else items_[it->second] = std::move(item);
  }
  std::vector<Item> take() && { return std::move(items_); }

 private:
  NameOf name_of_;
  std::vector<Item> items_;
  std::unordered_map<std::string, std::size_t> index_;
};

auto flag_table() {
  auto name = [](const MegatronArgs::Flag& f) { return f.name; };
  return OrderedTable<MegatronArgs::Flag, decltype(name)>(name);
}
auto env_table() {
  auto name = [](const std::pair<std::string, std::string>& e) { return e.first; };
  return OrderedTable<std::pair<std::string, std::string>, decltype(name)>(name);
}

// Bash-array punctuation and assignments around an argument list: ARGS=( ... ).
bool is_separator(const std::string& w) {
  return w == "(" || w == ")" || w == ";" || w == "&&" || w == "|" || (w.size() >= 2 && w.substr(w.size() - 2) == "=(");
}

}  // namespace

void MegatronArgs::set(std::string name, std::vector<std::string> values) {
  name = normalise(name);
  for (auto& f : flags_) {
    if (f.name == name) {
      f.values = std::move(values);
      return;
    }
  }
  flags_.push_back({std::move(name), std::move(values)});
}

void MegatronArgs::set_env(const std::string& name, const std::string& value) {
  for (auto& e : env_) {
    if (e.first == name) {
      e.second = value;
      return;
    }
  }
  env_.emplace_back(name, value);
}

bool MegatronArgs::has(std::string_view name) const {
  const std::string n = normalise(name);
  return std::any_of(flags_.begin(), flags_.end(), [&](const Flag& f) { return f.name == n; });
}

std::optional<std::string> MegatronArgs::value(std::string_view name) const {
  const std::string n = normalise(name);
  for (const auto& f : flags_) {
    if (f.name != n) continue;
    std::string out;
    for (const auto& v : f.values) out += (out.empty() ? "" : " ") + v;
    return out;
  }
  return std::nullopt;
}

bool MegatronArgs::enabled(std::string_view name) const {
  auto v = value(name);
  return v && truthy(*v);
}

nlohmann::json MegatronArgs::to_config() const {
  nlohmann::json args = nlohmann::json::object();
  for (const auto& f : flags_) {
    if (f.values.empty()) {
      args[f.name] = true;
    } else {
      std::string joined;
      for (const auto& v : f.values) joined += (joined.empty() ? "" : " ") + v;
      args[f.name] = joined;
    }
  }
  return {{"mme_source", "megatron-args"}, {"args", args}};
}

MegatronArgs MegatronArgs::from_config(const nlohmann::json& config) {
  MegatronArgs out;
  const auto it = config.find("args");
  if (it == config.end() || !it->is_object()) return out;
  auto flags = flag_table();  // "num_layers" and "num-layers" are one flag
  for (const auto& [k, v] : it->items()) {
    if (v.is_boolean()) {
      if (v.get<bool>()) flags.put({normalise(k), {}});
      else flags.put({normalise(k), {"false"}});
    } else if (v.is_string()) {
      flags.put({normalise(k), {v.get<std::string>()}});
    } else if (v.is_number()) {
      flags.put({normalise(k), {json_text(v)}});
    }
  }
  out.flags_ = std::move(flags).take();
  return out;
}

bool is_megatron_args_config(const nlohmann::json& config) {
  if (!config.is_object()) return false;
  const auto it = config.find("mme_source");
  return it != config.end() && it->is_string() && it->get<std::string>() == "megatron-args";
}

MegatronArgs parse_megatron_args(std::string_view text, const std::string& source) {
  const auto words = shell_words(text, source);
  auto flags = flag_table();
  auto env = env_table();
  std::optional<MegatronArgs::Flag> cur;
  auto flush = [&] {
    if (cur) flags.put({normalise(cur->name), std::move(cur->values)});
    cur.reset();
  };
  bool after_export = false;
  for (const auto& w : words) {
    if (is_separator(w)) {
      flush();
      after_export = false;
      continue;
    }
    if (w == "export") {
      flush();
      after_export = true;
      continue;
    }
    // `export NAME=VALUE`, or `NAME=VALUE` of a variable that decides memory (a command prefix
    // such as `NVTE_FLASH_ATTN=0 torchrun ...`). Values are checked when the setup is built.
    if (const auto eq = w.find('='); !is_flag(w) && eq != std::string::npos && is_env_name(w.substr(0, eq)) &&
                                     (after_export || is_modelled_environment(w.substr(0, eq)))) {
      flush();
      env.put({w.substr(0, eq), w.substr(eq + 1)});
      after_export = false;
      continue;
    }
    after_export = false;
    if (is_flag(w)) {
      flush();
      const auto eq = w.find('=');
      if (eq != std::string::npos) {
        flags.put({normalise(w.substr(2, eq - 2)), {w.substr(eq + 1)}});
      } else {
        cur = MegatronArgs::Flag{w.substr(2), {}};
      }
      continue;
    }
    if (cur) {
      if (!w.empty() && w[0] == '$')
        spdlog::warn("{}: --{} {}: shell variables are not expanded; the flag is ignored", source, cur->name, w);
      cur->values.push_back(w);
    }
    // Words before the first flag (python, torchrun, pretrain_gpt.py) are not Megatron flags.
  }
  flush();
  // Drop flags whose value is an unexpanded shell variable (the names are unique already).
  MegatronArgs clean;
  for (auto& f : std::move(flags).take()) {
    const bool unexpanded = std::any_of(f.values.begin(), f.values.end(),
                                        [](const std::string& v) { return !v.empty() && v[0] == '$'; });
    if (!unexpanded) clean.flags_.push_back(std::move(f));
  }
  clean.env_ = std::move(env).take();
  return clean;
}

namespace {

std::int64_t int_arg(const MegatronArgs& a, std::string_view name, std::int64_t min = 1) {
  const auto v = a.value(name);
  if (!v) return 0;
  try {
    std::size_t pos = 0;
    const long long n = std::stoll(*v, &pos);
    if (pos != v->size() || n < min) throw std::invalid_argument("range");
    return n;
  } catch (const std::exception&) {
    throw UsageError(fmt::format("--{}: expected an integer of at least {}, got '{}'", name, min, *v));
  }
}

double double_arg(const MegatronArgs& a, std::string_view name) {
  const auto v = a.value(name);
  try {
    std::size_t pos = 0;
    const double d = std::stod(*v, &pos);
    if (pos != v->size()) throw std::invalid_argument("junk");
    return d;
  } catch (const std::exception&) {
    throw UsageError(fmt::format("--{}: expected a number, got '{}'", name, *v));
  }
}

}  // namespace

TrainingSetup setup_from_megatron_args(const MegatronArgs& a, TrainingSetup s) {
  auto& p = s.parallel;
  if (a.has("tensor-model-parallel-size")) p.tp = int_arg(a, "tensor-model-parallel-size");
  if (a.has("pipeline-model-parallel-size")) p.pp = int_arg(a, "pipeline-model-parallel-size");
  if (a.has("expert-model-parallel-size")) p.ep = int_arg(a, "expert-model-parallel-size");
  if (a.has("expert-tensor-parallel-size")) p.etp = int_arg(a, "expert-tensor-parallel-size");
  if (a.has("context-parallel-size")) p.cp = int_arg(a, "context-parallel-size");
  if (a.has("num-virtual-stages-per-pipeline-rank")) p.vpp = int_arg(a, "num-virtual-stages-per-pipeline-rank");
  if (a.has("virtual-pipeline-model-parallel-size")) p.vpp = int_arg(a, "virtual-pipeline-model-parallel-size");
  if (a.has("num-layers-per-virtual-pipeline-stage"))
    s.pipeline.layers_per_virtual_stage = int_arg(a, "num-layers-per-virtual-pipeline-stage");
  if (a.has("world-size")) p.world_size = int_arg(a, "world-size");
  if (a.has("nnodes") && a.has("nproc-per-node")) {
    const std::int64_t nodes = int_arg(a, "nnodes"), per_node = int_arg(a, "nproc-per-node");
    if (__builtin_mul_overflow(nodes, per_node, &p.world_size) || p.world_size > kMaxWorldSize)
      throw UsageError(fmt::format("--nnodes {} x --nproc-per-node {} is more than {} GPUs, which no real run uses",
                                   nodes, per_node, kMaxWorldSize));
  }
  // Megatron-LM's defaults: sequence parallelism and the distributed optimizer are off
  // unless asked for.
  p.sequence_parallel = a.enabled("sequence-parallel");
  s.optimizer.distributed = a.enabled("use-distributed-optimizer");
  if (a.has("num-distributed-optimizer-instances"))
    s.optimizer.instances = int_arg(a, "num-distributed-optimizer-instances");

  if (a.has("micro-batch-size")) s.micro_batch_size = int_arg(a, "micro-batch-size");
  if (a.has("global-batch-size")) s.global_batch_size = int_arg(a, "global-batch-size");
  if (a.has("seq-length")) s.seq_length = int_arg(a, "seq-length");
  if (a.has("make-vocab-size-divisible-by"))
    s.make_vocab_size_divisible_by = int_arg(a, "make-vocab-size-divisible-by");

  // Precision: fp32 unless --bf16/--fp16; --fp8-format on top of bf16 = FP8 GEMMs.
  s.precision = Precision::kFP32;
  if (a.enabled("bf16")) s.precision = Precision::kBF16;
  if (a.enabled("fp16")) s.precision = Precision::kFP16;
  if (a.has("fp8-format") || a.has("fp8")) s.precision = Precision::kFP8;
  s.fp8_param_gather = a.enabled("fp8-param-gather");
  if (s.precision == Precision::kFP16 && a.enabled("accumulate-allreduce-grads-in-fp32"))
    s.optimizer.main_grads = DType::kFP32;
  if (a.enabled("grad-reduce-in-bf16")) s.optimizer.main_grads = DType::kBF16;
  if (auto v = a.value("main-grads-dtype")) s.optimizer.main_grads = parse_dtype(*v);
  s.optimizer.precision_aware = a.enabled("use-precision-aware-optimizer");
  if (auto v = a.value("main-params-dtype")) s.optimizer.main_params = parse_dtype(*v);
  if (auto v = a.value("exp-avg-dtype")) s.optimizer.exp_avg = parse_dtype(*v);
  if (auto v = a.value("exp-avg-sq-dtype")) s.optimizer.exp_avg_sq = parse_dtype(*v);
  // Sharded data parallelism (arguments.py _add_distributed_args).
  auto& f = s.fsdp;
  if (a.enabled("use-megatron-fsdp")) {
    f.kind = FsdpKind::kMegatron;
    s.optimizer.distributed = true;  // arguments.py: Megatron-FSDP forces the distributed optimizer
  }
  if (a.enabled("use-torch-fsdp2")) {
    if (f.kind == FsdpKind::kMegatron) throw UsageError("--use-torch-fsdp2 and --use-megatron-fsdp exclude each other");
    // arguments.py: "--use-torch-fsdp2 is not supported with MCore's distributed optimizer".
    if (s.optimizer.distributed)
      throw UsageError("--use-torch-fsdp2 is not supported with --use-distributed-optimizer (Megatron-LM refuses it)");
    f.kind = FsdpKind::kTorchFsdp2;
  }
  {
    // Megatron-LM checks the values (argparse choices) and ignores them without FSDP.
    FsdpSettings given;
    if (auto v = a.value("data-parallel-sharding-strategy"))
      given.strategy = parse_fsdp_sharding(*v, "--data-parallel-sharding-strategy");
    if (auto v = a.value("outer-dp-sharding-strategy"))
      given.outer = parse_fsdp_sharding(*v, "--outer-dp-sharding-strategy");
    if (auto v = a.value("megatron-fsdp-main-params-dtype"))
      given.main_params = *parse_fsdp_dtype(*v, "--megatron-fsdp-main-params-dtype", f.kind != FsdpKind::kMegatron);
    if (auto v = a.value("megatron-fsdp-main-grads-dtype"))
      given.main_grads = parse_fsdp_dtype(*v, "--megatron-fsdp-main-grads-dtype", true);
    if (auto v = a.value("megatron-fsdp-grad-comm-dtype"))
      given.grad_comm = parse_fsdp_dtype(*v, "--megatron-fsdp-grad-comm-dtype", true);
    // --use-nccl-ub and --megatron-fsdp-max-pool-double-buffer switch the double buffer on too.
    given.double_buffer = a.enabled("fsdp-double-buffer") || a.enabled("use-nccl-ub") ||
                          a.enabled("megatron-fsdp-max-pool-double-buffer");
    if (a.has("suggested-communication-unit-size"))
      given.communication_unit_size = int_arg(a, "suggested-communication-unit-size");
    given.reshard_after_forward = !a.enabled("torch-fsdp2-no-reshard-after-forward");
    if (f.kind == FsdpKind::kMegatron) {
      given.kind = f.kind;
      given.reshard_after_forward = true;
      f = given;
    } else if (f.kind == FsdpKind::kTorchFsdp2) {
      f.reshard_after_forward = given.reshard_after_forward;
    }
  }
  if (a.enabled("optimizer-cpu-offload"))
    s.optimizer.cpu_offload_fraction = a.has("optimizer-offload-fraction") ? double_arg(a, "optimizer-offload-fraction") : 1.0;
  if (auto v = a.value("optimizer")) {
    if (*v != "adam" && *v != "sgd" && *v != "muon")
      throw UsageError(fmt::format("--optimizer: unknown value '{}' (adam, sgd, muon)", *v));
    s.optimizer.name = *v;
  }

  // Attention backend: auto/flash/fused use flash or cuDNN fused attention; unfused/local keep
  // the score tensors.
  if (auto v = a.value("attention-backend")) s.attention_backend = parse_attention_backend(*v, "--attention-backend");

  // MoE: Megatron-LM's default dispatcher is allgather.
  s.dispatcher = TokenDispatcher::kAllGather;
  if (auto v = a.value("moe-token-dispatcher-type")) {
    if (*v == "alltoall" || *v == "alltoall_seq") s.dispatcher = TokenDispatcher::kAllToAll;
    else if (*v == "flex") s.dispatcher = TokenDispatcher::kFlex;
    else if (*v == "allgather") s.dispatcher = TokenDispatcher::kAllGather;
    else throw UsageError(fmt::format("--moe-token-dispatcher-type: unknown value '{}' (allgather, alltoall, flex)", *v));
  }
  if (a.has("moe-expert-capacity-factor")) s.moe_capacity_factor = double_arg(a, "moe-expert-capacity-factor");
  s.moe_pad_to_capacity = a.enabled("moe-pad-expert-input-to-capacity");
  s.cross_entropy_fusion = a.enabled("cross-entropy-loss-fusion");
  if (auto v = a.value("cross-entropy-fusion-impl"))
    s.cross_entropy_te = parse_cross_entropy_fusion_impl(*v, "--cross-entropy-fusion-impl");
  if (auto v = a.value("cp-comm-type")) {
    // nargs='+' (arguments.py): one type for every layer, or one per layer.
    std::vector<std::string> types;
    for (std::size_t pos = 0; pos < v->size();) {
      const std::size_t end = std::min(v->find(' ', pos), v->size());
      if (end > pos) types.push_back(v->substr(pos, end - pos));
      pos = end + 1;
    }
    if (types.empty()) throw UsageError("--cp-comm-type: expected a type (p2p, all_gather, a2a, a2a+p2p)");
    s.cp_comm_type = parse_cp_comm_type(types.front(), "--cp-comm-type");
    for (const auto& t : types) {
      if (parse_cp_comm_type(t, "--cp-comm-type") != s.cp_comm_type)
        throw UsageError(fmt::format("--cp-comm-type: per-layer lists of different types ('{}' and '{}') are not "
                                     "modelled; give one type for every layer",
                                     types.front(), t));
    }
  }
  if (a.has("no-gradient-accumulation-fusion") && a.enabled("no-gradient-accumulation-fusion"))
    s.gradient_accumulation_fusion = false;
  s.defer_embedding_wgrad = a.enabled("defer-embedding-wgrad-compute");
  if (a.enabled("no-masked-softmax-fusion")) s.masked_softmax_fusion = false;
  // arguments.py: --apply-query-key-layer-scaling also sets attention_softmax_in_fp32.
  s.attention_softmax_in_fp32 = a.enabled("attention-softmax-in-fp32") || a.enabled("apply-query-key-layer-scaling");
  if (a.has("wgrad-deferral-limit")) s.wgrad_deferral_limit = int_arg(a, "wgrad-deferral-limit", 0);
  s.moe_grouped_gemm = a.enabled("moe-grouped-gemm");
  if (auto v = a.value("transformer-impl")) {
    if (*v == "local") s.transformer_engine = false;
    else if (*v == "transformer_engine") s.transformer_engine = true;
    else throw UsageError(fmt::format("--transformer-impl: unknown value '{}' (transformer_engine, local)", *v));
  }

  auto& r = s.recompute;
  if (a.enabled("recompute-activations")) r.granularity = RecomputeGranularity::kSelective;
  if (auto v = a.value("recompute-granularity")) {
    if (*v == "full") r.granularity = RecomputeGranularity::kFull;
    else if (*v == "selective") r.granularity = RecomputeGranularity::kSelective;
  }
  if (auto v = a.value("recompute-granularity"); v && *v != "full" && *v != "selective")
    throw UsageError(fmt::format("--recompute-granularity: unknown value '{}' (full, selective)", *v));
  if (auto v = a.value("recompute-method")) {
    if (*v == "block") r.method = RecomputeMethod::kBlock;
    else if (*v == "uniform") r.method = RecomputeMethod::kUniform;
    else throw UsageError(fmt::format("--recompute-method: unknown value '{}' (uniform, block)", *v));
  }
  if (a.has("recompute-num-layers")) r.num_layers = int_arg(a, "recompute-num-layers");
  if (auto v = a.value("recompute-modules")) r.modules = parse_recompute_modules(*v);
  if (a.enabled("moe-layer-recompute")) {
    r.granularity = RecomputeGranularity::kSelective;
    r.modules |= kRecomputeMoe;
  }

  auto& pl = s.pipeline;
  if (a.has("decoder-first-pipeline-num-layers"))
    pl.first_stage_layers = int_arg(a, "decoder-first-pipeline-num-layers", 0);
  if (a.has("decoder-last-pipeline-num-layers"))
    pl.last_stage_layers = int_arg(a, "decoder-last-pipeline-num-layers", 0);
  if (auto v = a.value("pipeline-model-parallel-layout")) pl.layout = *v;
  pl.account_for_embedding = a.enabled("account-for-embedding-in-pipeline-split");
  pl.account_for_loss = a.enabled("account-for-loss-in-pipeline-split");
  if (a.has("microbatch-group-size-per-virtual-pipeline-stage"))
    pl.microbatch_group_size = int_arg(a, "microbatch-group-size-per-virtual-pipeline-stage");

  // --deterministic-mode fills its defaults; variables the run sets itself (below) win.
  if (a.enabled("deterministic-mode")) apply_deterministic_mode(s);
  for (const auto& [name, value] : a.env())
    if (!apply_environment(s, name, value)) s.environment_ignored.push_back(name + "=" + value);
  return s;
}

std::vector<int> parse_moe_layer_freq(const std::string& text, std::int64_t num_layers) {
  std::string t;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) t.push_back(c);
  while (t.size() >= 2 && t.front() == '(' && t.back() == ')') t = t.substr(1, t.size() - 2);
  auto fail = [&](const std::string& why) -> std::vector<int> {
    throw ConfigError(fmt::format("--moe-layer-freq '{}': {}", text, why));
  };
  if (t.empty()) return fail("empty");
  if (std::all_of(t.begin(), t.end(), [](unsigned char c) { return std::isdigit(c); })) {
    // Every N-th layer: an N beyond the layer count means only layer 0 (and 18 digits fit a long).
    const std::size_t digits = t.size() - std::min(t.find_first_not_of('0'), t.size());
    if (digits > 18) return fail("the interval is larger than any model's layer count");
    const long n = std::stol(t);
    if (n <= 0) return fail("must be positive");
    std::vector<int> out(static_cast<std::size_t>(num_layers));
    for (std::int64_t i = 0; i < num_layers; ++i) out[static_cast<std::size_t>(i)] = (i % n == 0) ? 1 : 0;
    return out;
  }
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos < t.size()) {
    if (t[pos] != '[') return fail("expected '[' at position " + std::to_string(pos));
    const auto close = t.find(']', pos);
    if (close == std::string::npos) return fail("missing ']'");
    std::vector<int> items;
    std::string body = t.substr(pos + 1, close - pos - 1);
    std::size_t start = 0;
    while (start <= body.size()) {
      const auto comma = body.find(',', start);
      const std::string item = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (item != "0" && item != "1") return fail("list items must be 0 or 1");
      items.push_back(item == "1" ? 1 : 0);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    pos = close + 1;
    long repeat = 1;
    if (pos < t.size() && t[pos] == '*') {
      std::size_t end = pos + 1;
      while (end < t.size() && std::isdigit(static_cast<unsigned char>(t[end]))) ++end;
      if (end == pos + 1 || end - pos > 7) return fail("bad repeat count");
      repeat = std::stol(t.substr(pos + 1, end - pos - 1));
      pos = end;
    }
    // Checked before the list is built: "[1,1,1]*999999" must not allocate millions of entries.
    if (static_cast<std::int64_t>(items.size()) * repeat > num_layers - static_cast<std::int64_t>(out.size()))
      return fail("longer than the number of layers");
    for (long k = 0; k < repeat; ++k) out.insert(out.end(), items.begin(), items.end());
    if (pos < t.size()) {
      if (t[pos] != '+') return fail("expected '+' at position " + std::to_string(pos));
      ++pos;
    }
  }
  if (static_cast<std::int64_t>(out.size()) != num_layers)
    return fail(fmt::format("gives {} entries for {} layers", out.size(), num_layers));
  return out;
}

}  // namespace mme
