// The training-setup schema (setup_schema.hpp): the table of knobs, and the readers and writers
// every input and output of a TrainingSetup is derived from.
#include "mme/setup_schema.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <sstream>
#include <unordered_map>

#include <fmt/core.h>

#include "mme/error.hpp"
#include "mme/megatron_args.hpp"

namespace mme {

using J = nlohmann::json;

// -------------------------------------------------------------------------------------------------
// One table per enum.

namespace {

constexpr EnumName kPrecisionArr[] = {{"bf16", static_cast<int>(Precision::kBF16)},
                                      {"fp16", static_cast<int>(Precision::kFP16)},
                                      {"fp8", static_cast<int>(Precision::kFP8)},
                                      {"fp32", static_cast<int>(Precision::kFP32)}};
// The torch spellings are accepted too (PyTorch dtype names; "uint8" is how FP8 states are stored).
constexpr EnumName kDTypeArr[] = {{"fp32", static_cast<int>(DType::kFP32)},
                                  {"bf16", static_cast<int>(DType::kBF16)},
                                  {"fp16", static_cast<int>(DType::kFP16)},
                                  {"fp8", static_cast<int>(DType::kFP8)},
                                  {"float32", static_cast<int>(DType::kFP32), true},
                                  {"bfloat16", static_cast<int>(DType::kBF16), true},
                                  {"float16", static_cast<int>(DType::kFP16), true},
                                  {"uint8", static_cast<int>(DType::kFP8), true}};
constexpr EnumName kAttentionBackendArr[] = {{"flash", static_cast<int>(AttentionBackend::kFlash)},
                                             {"fused", static_cast<int>(AttentionBackend::kFlash), true},
                                             {"unfused", static_cast<int>(AttentionBackend::kUnfused)},
                                             {"local", static_cast<int>(AttentionBackend::kUnfused), true},
                                             {"auto", static_cast<int>(AttentionBackend::kAuto)}};
// alltoall_seq: Megatron-LM's older sequence-parallel all-to-all, the same buffers.
constexpr EnumName kTokenDispatcherArr[] = {{"alltoall", static_cast<int>(TokenDispatcher::kAllToAll)},
                                            {"alltoall_seq", static_cast<int>(TokenDispatcher::kAllToAll), true},
                                            {"allgather", static_cast<int>(TokenDispatcher::kAllGather)},
                                            {"flex", static_cast<int>(TokenDispatcher::kFlex)}};
// Transformer Engine's names (attn_forward_func_with_cp takes exactly these).
constexpr EnumName kCpCommTypeArr[] = {{"p2p", static_cast<int>(CpCommType::kP2P)},
                                       {"all_gather", static_cast<int>(CpCommType::kAllGather)},
                                       {"a2a", static_cast<int>(CpCommType::kA2A)},
                                       {"a2a+p2p", static_cast<int>(CpCommType::kA2AP2P)}};
constexpr EnumName kRecomputeGranularityArr[] = {{"none", static_cast<int>(RecomputeGranularity::kNone)},
                                                 {"selective", static_cast<int>(RecomputeGranularity::kSelective)},
                                                 {"full", static_cast<int>(RecomputeGranularity::kFull)}};
constexpr EnumName kRecomputeMethodArr[] = {{"uniform", static_cast<int>(RecomputeMethod::kUniform)},
                                            {"block", static_cast<int>(RecomputeMethod::kBlock)}};
// arguments.py: the choices of --data-parallel-sharding-strategy.
constexpr EnumName kFsdpShardingArr[] = {{"no_shard", static_cast<int>(FsdpSharding::kNoShard)},
                                         {"optim", static_cast<int>(FsdpSharding::kOptim)},
                                         {"optim_grads", static_cast<int>(FsdpSharding::kOptimGrads)},
                                         {"optim_grads_params", static_cast<int>(FsdpSharding::kOptimGradsParams)}};
constexpr EnumName kFsdpKindArr[] = {{"none", static_cast<int>(FsdpKind::kNone)},
                                     {"megatron_fsdp", static_cast<int>(FsdpKind::kMegatron)},
                                     {"torch_fsdp2", static_cast<int>(FsdpKind::kTorchFsdp2)}};
constexpr EnumName kTransformerImplArr[] = {{"transformer_engine", 1}, {"local", 0}};
constexpr EnumName kCrossEntropyImplArr[] = {{"native", 0}, {"te", 1}};
constexpr EnumName kOptimizerArr[] = {{"adam", 0}, {"sgd", 1}, {"muon", 2}};

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const EnumTable kPrecisionNames = kPrecisionArr;
const EnumTable kDTypeNames = kDTypeArr;
const EnumTable kAttentionBackendNames = kAttentionBackendArr;
const EnumTable kTokenDispatcherNames = kTokenDispatcherArr;
const EnumTable kCpCommTypeNames = kCpCommTypeArr;
const EnumTable kRecomputeGranularityNames = kRecomputeGranularityArr;
const EnumTable kRecomputeMethodNames = kRecomputeMethodArr;
const EnumTable kFsdpShardingNames = kFsdpShardingArr;
const EnumTable kFsdpKindNames = kFsdpKindArr;
const EnumTable kTransformerImplNames = kTransformerImplArr;
const EnumTable kCrossEntropyImplNames = kCrossEntropyImplArr;
const EnumTable kOptimizerNames = kOptimizerArr;

const char* enum_name(EnumTable table, int value) {
  for (const auto& n : table)
    if (n.value == value && !n.alias) return n.name;
  return "?";
}

std::optional<int> enum_value(EnumTable table, std::string_view text) {
  const std::string t = lower(text);
  for (const auto& n : table)
    if (lower(n.name) == t) return n.value;
  return std::nullopt;
}

// -------------------------------------------------------------------------------------------------
// Helpers of the table: values in and out of the setup.

namespace {

J opt(const std::optional<std::int64_t>& v) { return v ? J(*v) : J(); }
J opt(const std::optional<double>& v) { return v ? J(*v) : J(); }
J positive_or_null(std::int64_t v) { return v > 0 ? J(v) : J(); }
J text_or_null(const std::string& v) { return v.empty() ? J() : J(v); }

template <class E>
J name(EnumTable t, E v) {
  return J(enum_name(t, static_cast<int>(v)));
}
// The enum value of a (checked) name; nullopt for null and the knob's "auto"/"none".
template <class E>
std::optional<E> value_of(EnumTable t, const J& v, const char* null_name = nullptr) {
  if (v.is_null()) return std::nullopt;
  const std::string text = v.get<std::string>();
  if (null_name && lower(text) == null_name) return std::nullopt;
  const auto n = enum_value(t, text);
  if (!n) throw std::logic_error("unchecked enum value " + text);
  return static_cast<E>(*n);
}
template <class E>
E must(EnumTable t, const J& v) {
  return *value_of<E>(t, v);
}
J opt_dtype(const std::optional<DType>& d) { return d ? name(kDTypeNames, *d) : J(); }

std::int64_t as_int(const J& v) { return v.get<std::int64_t>(); }
std::optional<std::int64_t> as_opt_int(const J& v) {
  return v.is_null() ? std::nullopt : std::optional<std::int64_t>(v.get<std::int64_t>());
}
std::optional<double> as_opt_double(const J& v) {
  return v.is_null() ? std::nullopt : std::optional<double>(v.get<double>());
}

// Recompute modules as a list (spec files) and as text ("core_attn,mlp").
J modules_list(std::uint32_t modules) {
  J list = J::array();
  std::stringstream ss(recompute_modules_to_string(modules));
  std::string item;
  while (std::getline(ss, item, ',')) list.push_back(item);
  return list;
}
std::uint32_t modules_of(const J& v) {
  if (v.is_string()) return parse_recompute_modules(v.get<std::string>());
  std::string text;
  for (const auto& m : v) text += m.get<std::string>() + ",";
  return parse_recompute_modules(text);
}

bool megatron_fsdp(const TrainingSetup& s) { return s.fsdp.kind == FsdpKind::kMegatron; }
bool torch_fsdp2(const TrainingSetup& s) { return s.fsdp.kind == FsdpKind::kTorchFsdp2; }
bool full_recompute(const TrainingSetup& s) { return s.recompute.granularity == RecomputeGranularity::kFull; }
bool selective_recompute(const TrainingSetup& s) {
  return s.recompute.granularity == RecomputeGranularity::kSelective;
}
// NVTE_ALLOW_NONDETERMINISTIC_ALGO among the run's variables: it decides determinism itself.
bool env_decides_determinism(const TrainingSetup& s) {
  return std::any_of(s.environment_used.begin(), s.environment_used.end(), [](const std::string& e) {
    return e.rfind("NVTE_ALLOW_NONDETERMINISTIC_ALGO=", 0) == 0;
  });
}

std::string params_dtype_name(Precision p) {
  switch (p) {
    case Precision::kFP16: return "fp16";
    case Precision::kFP32: return "fp32";
    default: return "bf16";
  }
}

// --env / `export NAME=VALUE`: a modelled variable changes the setup, any other is listed.
void add_environment(TrainingSetup& s, const std::string& name, const std::string& value) {
  if (!apply_environment(s, name, value)) s.environment_ignored.push_back(name + "=" + value);
}

// ---- Megatron-LM readers of the knobs it spells in several flags ----------------------------------

std::optional<std::string> given(const MegatronArgs& a, const char* flag) { return a.value(flag); }

void megatron_world_size(const MegatronArgs& a, TrainingSetup& s) {
  const SetupKnob& k = *find_knob("num-gpus");
  if (auto v = given(a, "world-size")) s.parallel.world_size = as_int(parse_knob_text(k, "--world-size", *v, true));
  if (a.has("nnodes") && a.has("nproc-per-node")) {
    SetupKnob count = k;  // torchrun's counts: at least 1 each
    count.max = std::numeric_limits<std::int64_t>::max();
    const std::int64_t nodes = as_int(parse_knob_text(count, "--nnodes", a.value("nnodes").value_or(""), true));
    const std::int64_t per_node =
        as_int(parse_knob_text(count, "--nproc-per-node", a.value("nproc-per-node").value_or(""), true));
    if (__builtin_mul_overflow(nodes, per_node, &s.parallel.world_size) || s.parallel.world_size > kMaxWorldSize)
      throw UsageError(fmt::format("--nnodes {} x --nproc-per-node {} is more than {} GPUs, which no real run uses",
                                   nodes, per_node, kMaxWorldSize));
  }
}

// Precision: fp32 unless --bf16/--fp16; --fp8-format on top of bf16 = FP8 GEMMs.
void megatron_precision(const MegatronArgs& a, TrainingSetup& s) {
  s.precision = Precision::kFP32;
  if (a.enabled("bf16")) s.precision = Precision::kBF16;
  if (a.enabled("fp16")) s.precision = Precision::kFP16;
  if (auto v = given(a, "fp8-format")) {
    // arguments.py: --fp8-format choices e4m3, hybrid.
    if (lower(*v) != "e4m3" && lower(*v) != "hybrid")
      throw UsageError(fmt::format("--fp8-format: unknown value '{}' (e4m3, hybrid)", *v));
    s.precision = Precision::kFP8;
  }
  if (a.has("fp8")) s.precision = Precision::kFP8;
}

void megatron_main_grads(const MegatronArgs& a, TrainingSetup& s) {
  if (s.precision == Precision::kFP16 && a.enabled("accumulate-allreduce-grads-in-fp32"))
    s.optimizer.main_grads = DType::kFP32;
  if (a.enabled("grad-reduce-in-bf16")) s.optimizer.main_grads = DType::kBF16;
  if (auto v = given(a, "main-grads-dtype"))
    s.optimizer.main_grads =
        value_of<DType>(kDTypeNames, parse_knob_text(*find_knob("main-grads-dtype"), "--main-grads-dtype", *v, true));
}

void megatron_use_megatron_fsdp(const MegatronArgs& a, TrainingSetup& s) {
  if (!a.enabled("use-megatron-fsdp")) return;
  s.fsdp.kind = FsdpKind::kMegatron;
  s.optimizer.distributed = true;  // arguments.py: Megatron-FSDP forces the distributed optimizer
}

void megatron_use_torch_fsdp2(const MegatronArgs& a, TrainingSetup& s) {
  if (!a.enabled("use-torch-fsdp2")) return;
  if (s.fsdp.kind == FsdpKind::kMegatron) throw UsageError("--use-torch-fsdp2 and --use-megatron-fsdp exclude each other");
  // arguments.py: "--use-torch-fsdp2 is not supported with MCore's distributed optimizer".
  if (s.optimizer.distributed)
    throw UsageError("--use-torch-fsdp2 is not supported with --use-distributed-optimizer (Megatron-LM refuses it)");
  s.fsdp.kind = FsdpKind::kTorchFsdp2;
}

// Without Megatron-FSDP, Megatron-LM checks the value (argparse choices) and ignores it: so
// is `auto`, which mme does not model.
void megatron_fsdp_main_params(const MegatronArgs& a, TrainingSetup& s) {
  const auto v = given(a, "megatron-fsdp-main-params-dtype");
  if (!v) return;
  if (lower(*v) == "auto" && s.fsdp.kind != FsdpKind::kMegatron) return;
  s.fsdp.main_params =
      must<DType>(kDTypeNames, parse_knob_text(*find_knob("megatron-fsdp-main-params-dtype"),
                                               "--megatron-fsdp-main-params-dtype", *v, true));
}

void megatron_cpu_offload(const MegatronArgs& a, TrainingSetup& s) {
  if (!a.enabled("optimizer-cpu-offload")) return;
  const SetupKnob& k = *find_knob("optimizer-cpu-offload-fraction");
  const auto v = given(a, "optimizer-offload-fraction");
  s.optimizer.cpu_offload_fraction = v ? parse_knob_text(k, "--optimizer-offload-fraction", *v, true).get<double>() : 1.0;
}

void megatron_recompute_granularity(const MegatronArgs& a, TrainingSetup& s) {
  auto& r = s.recompute;
  if (a.enabled("recompute-activations")) r.granularity = RecomputeGranularity::kSelective;
  if (auto v = given(a, "recompute-granularity"))
    r.granularity = value_of<RecomputeGranularity>(
                        kRecomputeGranularityNames,
                        parse_knob_text(*find_knob("recompute-granularity"), "--recompute-granularity", *v, true), "none")
                        .value_or(RecomputeGranularity::kNone);
}

void megatron_recompute_modules(const MegatronArgs& a, TrainingSetup& s) {
  auto& r = s.recompute;
  if (auto v = given(a, "recompute-modules"))
    r.modules = modules_of(parse_knob_text(*find_knob("recompute-modules"), "--recompute-modules", *v, true));
  if (a.enabled("moe-layer-recompute")) {
    r.granularity = RecomputeGranularity::kSelective;
    r.modules |= kRecomputeMoe;
  }
}

void megatron_cp_comm_type(const MegatronArgs& a, TrainingSetup& s) {
  const auto v = given(a, "cp-comm-type");
  if (!v) return;
  // nargs='+' (arguments.py): one type for every layer, or one per layer.
  std::vector<std::string> types;
  for (std::size_t pos = 0; pos < v->size();) {
    const std::size_t end = std::min(v->find(' ', pos), v->size());
    if (end > pos) types.push_back(v->substr(pos, end - pos));
    pos = end + 1;
  }
  const SetupKnob& k = *find_knob("cp-comm-type");
  if (types.empty()) throw UsageError(fmt::format("--cp-comm-type: expected a type ({})", knob_values_text(k)));
  s.cp_comm_type = must<CpCommType>(kCpCommTypeNames, parse_knob_text(k, "--cp-comm-type", types.front(), true));
  for (const auto& t : types)
    if (must<CpCommType>(kCpCommTypeNames, parse_knob_text(k, "--cp-comm-type", t, true)) != s.cp_comm_type)
      throw UsageError(fmt::format("--cp-comm-type: per-layer lists of different types ('{}' and '{}') are not "
                                   "modelled; give one type for every layer",
                                   types.front(), t));
}

void megatron_env(const MegatronArgs& a, TrainingSetup& s) {
  for (const auto& [n, v] : a.env()) add_environment(s, n, v);
}

// ---- mme command-line rules -------------------------------------------------------------------------

void mme_recompute_method(TrainingSetup& s, const J& v, const MmeFlags&) {
  s.recompute.method = must<RecomputeMethod>(kRecomputeMethodNames, v);
  if (!full_recompute(s)) throw UsageError("--recompute-method needs --recompute-granularity full");
}

void mme_recompute_modules(TrainingSetup& s, const J& v, const MmeFlags&) {
  auto& r = s.recompute;
  r.modules = modules_of(v);
  if (r.granularity == RecomputeGranularity::kNone) r.granularity = RecomputeGranularity::kSelective;
  if (r.granularity == RecomputeGranularity::kFull)
    throw UsageError("--recompute-modules applies to --recompute-granularity selective, not full");
}

void mme_use_torch_fsdp2(TrainingSetup& s, const J& v, const MmeFlags& flags) {
  if (!v.get<bool>()) return;
  if (flags.on("use-megatron-fsdp")) throw UsageError("--use-megatron-fsdp and --use-torch-fsdp2 exclude each other");
  if (flags.on("use-distributed-optimizer"))
    throw UsageError("--use-torch-fsdp2 is not supported with --use-distributed-optimizer (Megatron-LM refuses it)");
  // FSDP2 replaces the distributed optimizer and needs separate weight gradients (arguments.py).
  s.fsdp.kind = FsdpKind::kTorchFsdp2;
  s.optimizer.distributed = false;
  s.gradient_accumulation_fusion = false;
}

void check_cublas(const std::string& text, std::string_view) { (void)parse_cublas_workspace_config(text); }

// -------------------------------------------------------------------------------------------------
// The table.

std::vector<SetupKnob> build_knobs() {
  using K = KnobKind;
  using S = TrainingSetup;
  std::vector<SetupKnob> k;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };

  // parallelism ---------------------------------------------------------------------------------
  add({.id = "tp", .kind = K::kInt, .flag = "tp", .aliases = {"tensor-model-parallel-size"},
       .help = "tensor parallel size (default 1)", .doc_value = "N", .doc = "tensor parallel size",
       .doc_default = "1", .max = kMaxParallelSize, .megatron = {"tensor-model-parallel-size"},
       .spec_section = "parallelism", .spec_name = "tensor_model_parallel_size", .spec_required = true,
       .spec_default = "required", .spec_summary = "TP: splits weights across GPUs", .json_key = "tp",
       .args_always = true, .get = [](const S& s) { return J(s.parallel.tp); },
       .set = [](S& s, const J& v) { s.parallel.tp = as_int(v); }});
  add({.id = "pp", .kind = K::kInt, .flag = "pp", .aliases = {"pipeline-model-parallel-size"},
       .help = "pipeline parallel size (default 1)", .doc_value = "N", .doc = "pipeline parallel size",
       .doc_default = "1", .max = kMaxParallelSize, .megatron = {"pipeline-model-parallel-size"},
       .spec_section = "parallelism", .spec_name = "pipeline_model_parallel_size", .spec_required = true,
       .spec_default = "required", .spec_summary = "PP: splits layers across stages", .json_key = "pp",
       .args_always = true, .get = [](const S& s) { return J(s.parallel.pp); },
       .set = [](S& s, const J& v) { s.parallel.pp = as_int(v); }});
  add({.id = "vpp", .kind = K::kInt, .flag = "vpp",
       .aliases = {"virtual-pipeline-model-parallel-size", "num-virtual-stages-per-pipeline-rank"},
       .help = "virtual pipeline chunks per pipeline rank (interleaved schedule)", .doc_value = "N",
       .doc = "virtual pipeline chunks per pipeline rank (interleaved schedule)", .doc_default = "1",
       .max = kMaxParallelSize,
       .megatron = {"virtual-pipeline-model-parallel-size", "num-virtual-stages-per-pipeline-rank"},
       .spec_section = "parallelism", .spec_name = "virtual_pipeline_model_parallel_size", .spec_default = "null",
       .spec_summary = "interleaved schedule: model chunks per pipeline rank",
       .spec_get = [](const S& s) { return s.parallel.vpp > 1 ? J(s.parallel.vpp) : J(); }, .json_key = "vpp",
       .get = [](const S& s) { return J(s.parallel.vpp); }, .set = [](S& s, const J& v) { s.parallel.vpp = as_int(v); }});
  add({.id = "num-layers-per-virtual-pipeline-stage", .kind = K::kInt,
       .flag = "num-layers-per-virtual-pipeline-stage",
       .help = "Megatron-LM's way to set VPP: layers per virtual chunk", .doc_value = "N",
       .doc = "Megatron-LM's way to set VPP: layers per virtual chunk", .max = kMaxParallelSize,
       .megatron = {"num-layers-per-virtual-pipeline-stage"}, .spec_section = "parallelism",
       .spec_name = "num_layers_per_virtual_pipeline_stage", .spec_default = "null",
       .spec_summary = "the other way to set the interleaved schedule: layers per model chunk",
       .json_key = "num_layers_per_virtual_pipeline_stage",
       .get = [](const S& s) { return opt(s.pipeline.layers_per_virtual_stage); },
       .set = [](S& s, const J& v) { s.pipeline.layers_per_virtual_stage = as_opt_int(v); }});
  add({.id = "microbatch-group-size-per-virtual-pipeline-stage", .kind = K::kInt,
       .flag = "microbatch-group-size-per-virtual-pipeline-stage",
       .help = "interleaved schedule: micro-batches per group (default PP)", .doc_value = "N",
       .doc = "interleaved schedule: micro-batches per group (at least PP)", .doc_default = "PP",
       .max = kMaxParallelSize, .megatron = {"microbatch-group-size-per-virtual-pipeline-stage"},
       .spec_section = "parallelism", .spec_name = "microbatch_group_size_per_virtual_pipeline_stage",
       .spec_default = "null (PP)", .spec_summary = "interleaved schedule: micro-batches per group, at least PP",
       .json_key = "microbatch_group_size_per_virtual_pipeline_stage",
       .get = [](const S& s) { return opt(s.pipeline.microbatch_group_size); },
       .set = [](S& s, const J& v) { s.pipeline.microbatch_group_size = as_opt_int(v); }});
  add({.id = "num-layers-in-first-pipeline-stage", .kind = K::kInt, .flag = "num-layers-in-first-pipeline-stage",
       .aliases = {"decoder-first-pipeline-num-layers"}, .help = "layers of the first pipeline stage",
       .doc_value = "N", .doc = "layers of the first pipeline stage", .doc_default = "even split", .min = 0,
       .max = kMaxParallelSize, .megatron = {"decoder-first-pipeline-num-layers", "num-layers-in-first-pipeline-stage"},
       .spec_section = "parallelism", .spec_name = "num_layers_in_first_pipeline_stage", .spec_default = "null",
       .spec_summary = "layers of the first stage (uneven split)", .json_key = "num_layers_in_first_pipeline_stage",
       .get = [](const S& s) { return opt(s.pipeline.first_stage_layers); },
       .set = [](S& s, const J& v) { s.pipeline.first_stage_layers = as_opt_int(v); }});
  add({.id = "num-layers-in-last-pipeline-stage", .kind = K::kInt, .flag = "num-layers-in-last-pipeline-stage",
       .aliases = {"decoder-last-pipeline-num-layers"}, .help = "layers of the last pipeline stage",
       .doc_value = "N", .doc = "layers of the last pipeline stage", .doc_default = "even split", .min = 0,
       .max = kMaxParallelSize, .megatron = {"decoder-last-pipeline-num-layers", "num-layers-in-last-pipeline-stage"},
       .spec_section = "parallelism", .spec_name = "num_layers_in_last_pipeline_stage", .spec_default = "null",
       .spec_summary = "layers of the last stage (uneven split)", .json_key = "num_layers_in_last_pipeline_stage",
       .get = [](const S& s) { return opt(s.pipeline.last_stage_layers); },
       .set = [](S& s, const J& v) { s.pipeline.last_stage_layers = as_opt_int(v); }});
  add({.id = "pipeline-layout", .kind = K::kString, .flag = "pipeline-layout",
       .aliases = {"pipeline-model-parallel-layout"},
       .help = "Megatron pipeline layout string, e.g. 'Et*3|(tt|)*6mL'", .doc_value = "S",
       .doc = "Megatron pipeline layout string, e.g. `Et*3\\|(tt\\|)*6mL`", .megatron = {"pipeline-model-parallel-layout"},
       .spec_section = "parallelism", .spec_name = "pipeline_model_parallel_layout", .spec_default = "null",
       .spec_summary = "Megatron pipeline layout, e.g. \"Et*3|(tt|)*6mL\"", .json_key = "pipeline_layout",
       .get = [](const S& s) { return text_or_null(s.pipeline.layout); },
       .set = [](S& s, const J& v) { s.pipeline.layout = v.is_null() ? "" : v.get<std::string>(); }});
  add({.id = "account-for-embedding-in-pipeline-split", .kind = K::kBool,
       .flag = "account-for-embedding-in-pipeline-split",
       .help = "count the embedding as a layer when splitting the pipeline",
       .doc = "count the embedding as a layer when splitting the pipeline",
       .megatron = {"account-for-embedding-in-pipeline-split"}, .megatron_default = J(false),
       .spec_section = "parallelism", .spec_name = "account_for_embedding_in_pipeline_split", .spec_default = "false",
       .spec_summary = "count the embedding as a layer when splitting the pipeline",
       .json_key = "account_for_embedding_in_pipeline_split",
       .get = [](const S& s) { return J(s.pipeline.account_for_embedding); },
       .set = [](S& s, const J& v) { s.pipeline.account_for_embedding = v.get<bool>(); }});
  add({.id = "account-for-loss-in-pipeline-split", .kind = K::kBool, .flag = "account-for-loss-in-pipeline-split",
       .help = "count the loss as a layer when splitting the pipeline",
       .doc = "count the loss as a layer when splitting the pipeline",
       .megatron = {"account-for-loss-in-pipeline-split"}, .megatron_default = J(false),
       .spec_section = "parallelism", .spec_name = "account_for_loss_in_pipeline_split", .spec_default = "false",
       .spec_summary = "count the loss as a layer when splitting the pipeline",
       .json_key = "account_for_loss_in_pipeline_split",
       .get = [](const S& s) { return J(s.pipeline.account_for_loss); },
       .set = [](S& s, const J& v) { s.pipeline.account_for_loss = v.get<bool>(); }});
  add({.id = "ep", .kind = K::kInt, .flag = "ep", .aliases = {"expert-model-parallel-size"},
       .help = "expert parallel size (default 1)", .doc_value = "N", .doc = "expert parallel size",
       .doc_default = "1", .max = kMaxParallelSize, .megatron = {"expert-model-parallel-size"},
       .spec_section = "parallelism", .spec_name = "expert_model_parallel_size", .spec_default = "1",
       .spec_summary = "EP: splits the experts; num_experts must be divisible by it", .json_key = "ep",
       .get = [](const S& s) { return J(s.parallel.ep); }, .set = [](S& s, const J& v) { s.parallel.ep = as_int(v); }});
  add({.id = "etp", .kind = K::kInt, .flag = "etp", .aliases = {"expert-tensor-parallel-size"},
       .help = "expert tensor parallel size (default 1, as the seed tool and spec files; --megatron-args: TP, as "
               "Megatron-LM)",
       .doc_value = "N", .doc = "expert tensor parallel size",
       .doc_default = "1 (the seed's and spec files' default); TP with `--megatron-args` (Megatron-LM's)",
       .max = kMaxParallelSize, .megatron = {"expert-tensor-parallel-size"}, .spec_section = "parallelism",
       .spec_name = "expert_tensor_parallel_size", .spec_default = "1",
       .spec_summary = "ETP: tensor parallelism within each expert",
       .spec_get = [](const S& s) { return J(effective_etp(s.parallel)); }, .json_key = "etp",
       .json_get = [](const S& s) { return J(effective_etp(s.parallel)); },
       // Always spelled out: `mme estimate`'s flags default ETP to the seed's 1, Megatron-LM's to TP.
       .args_always = true, .args_get = [](const S& s) { return J(effective_etp(s.parallel)); },
       .get = [](const S& s) { return positive_or_null(s.parallel.etp); },
       .set = [](S& s, const J& v) { s.parallel.etp = v.is_null() ? 0 : as_int(v); }});
  add({.id = "cp", .kind = K::kInt, .flag = "cp", .aliases = {"context-parallel-size"},
       .help = "context parallel size (default 1)", .doc_value = "N", .doc = "context parallel size",
       .doc_default = "1", .max = kMaxParallelSize, .megatron = {"context-parallel-size"},
       .spec_section = "parallelism", .spec_name = "context_parallel_size", .spec_default = "1",
       .spec_summary = "CP: splits the sequence", .json_key = "cp", .get = [](const S& s) { return J(s.parallel.cp); },
       .set = [](S& s, const J& v) { s.parallel.cp = as_int(v); }});
  add({.id = "cp-comm-type", .kind = K::kEnum, .flag = "cp-comm-type",
       .help = "with --cp > 1, how TE exchanges the sequence: p2p (default) | all_gather | a2a | a2a+p2p",
       .doc_value = "T",
       .doc = "with `--cp` > 1: how Transformer Engine exchanges the sequence, `p2p`, `all_gather`, `a2a` or "
              "`a2a+p2p` (TE's spellings; Megatron-LM's help text says `allgather`, which TE rejects)",
       .doc_default = "p2p", .table = kCpCommTypeNames, .values = {"p2p", "all_gather", "a2a", "a2a+p2p"},
       .refused = {{"allgather", "{}: 'allgather' (the spelling of Megatron-LM's help text) is rejected by "
                                 "Transformer Engine; use all_gather"}},
       .megatron = {"cp-comm-type"}, .megatron_read = megatron_cp_comm_type, .spec_section = "parallelism",
       .spec_name = "cp_comm_type", .spec_default = "p2p",
       .spec_summary = "with CP: how Transformer Engine exchanges the sequence shards", .json_key = "cp_comm_type",
       .get = [](const S& s) { return name(kCpCommTypeNames, s.cp_comm_type); },
       .set = [](S& s, const J& v) { s.cp_comm_type = must<CpCommType>(kCpCommTypeNames, v); }});

  // training ------------------------------------------------------------------------------------
  add({.id = "micro-batch-size", .kind = K::kInt, .flag = "micro-batch-size", .help = "micro-batch size (default 1)",
       .doc_value = "N", .doc = "micro-batch size", .doc_default = "1", .max = kMaxSequenceSize,
       .megatron = {"micro-batch-size"}, .spec_section = "training", .spec_name = "micro_batch_size",
       .spec_required = true, .spec_default = "required", .spec_summary = "sequences per GPU per forward pass",
       .json_key = "micro_batch_size", .args_always = true, .get = [](const S& s) { return J(s.micro_batch_size); },
       .set = [](S& s, const J& v) { s.micro_batch_size = as_int(v); }});
  add({.id = "seq-length", .kind = K::kInt, .flag = "seq-length", .help = "sequence length (default 4096)",
       .doc_value = "N", .doc = "sequence length", .doc_default = "4096", .max = kMaxSequenceSize,
       .megatron = {"seq-length"}, .spec_section = "training", .spec_name = "seq_length", .spec_required = true,
       .spec_default = "required", .spec_summary = "training sequence length; must be <= max_position_embeddings",
       .json_key = "seq_length", .get = [](const S& s) { return J(s.seq_length); },
       .set = [](S& s, const J& v) { s.seq_length = as_int(v); }});
  add({.id = "global-batch-size", .kind = K::kInt, .flag = "global-batch-size",
       .help = "global batch size: sets the number of micro-batches per step", .doc_value = "N",
       .doc = "global batch size: sets the number of micro-batches per step",
       .doc_default = "unknown: pipeline assumed full", .max = kMaxWorldSize, .megatron = {"global-batch-size"},
       .spec_section = "training", .spec_name = "global_batch_size", .spec_default = "null",
       .spec_summary = "sets the micro-batches per step; null = enough to fill the pipeline",
       .json_key = "global_batch_size", .get = [](const S& s) { return positive_or_null(s.global_batch_size); },
       .set = [](S& s, const J& v) { s.global_batch_size = v.is_null() ? 0 : as_int(v); }});
  add({.id = "sequence-parallel", .kind = K::kBool, .flag = "sequence-parallel",
       .help = "sequence parallelism (default: on when TP > 1)", .off_flag = "no-sequence-parallel",
       .off_help = "turn sequence parallelism off", .doc = "sequence parallelism (default: on when TP > 1)",
       .off_doc = "off", .megatron = {"sequence-parallel"}, .megatron_default = J(false),
       .spec_section = "training", .spec_name = "sequence_parallel", .spec_default = "false",
       .spec_summary = "shard activations along the sequence; requires tensor_model_parallel_size > 1",
       .spec_get = [](const S& s) { return J(sequence_parallel_on(s.parallel)); }, .json_key = "sequence_parallel",
       .json_get = [](const S& s) { return J(sequence_parallel_on(s.parallel)); },
       .get = [](const S& s) { return s.parallel.sequence_parallel ? J(*s.parallel.sequence_parallel) : J(); },
       .set =
           [](S& s, const J& v) {
             s.parallel.sequence_parallel = v.is_null() ? std::nullopt : std::optional<bool>(v.get<bool>());
           }});
  add({.id = "use-distributed-optimizer", .kind = K::kBool, .flag = "use-distributed-optimizer",
       .help = "the distributed optimizer (the default)", .off_flag = "no-distributed-optimizer",
       .off_help = "plain Adam on every rank (18 bytes/param) instead of the distributed optimizer",
       .doc = "the distributed optimizer (the default)", .off_doc = "plain Adam on every rank",
       .megatron = {"use-distributed-optimizer"}, .megatron_default = J(false), .spec_section = "training",
       .spec_name = "use_distributed_optimizer", .spec_default = "true",
       .spec_summary = "shard optimizer state across data-parallel ranks", .json_key = "distributed_optimizer",
       .get = [](const S& s) { return J(s.optimizer.distributed); },
       .set = [](S& s, const J& v) { s.optimizer.distributed = v.get<bool>(); }});
  add({.id = "use-megatron-fsdp", .kind = K::kBool, .flag = "use-megatron-fsdp",
       .help = "Megatron-FSDP: weights, gradients and optimizer states sharded over data parallel",
       .doc = "Megatron-FSDP: weights, gradients and optimizer states sharded over data parallel "
              "(docs/memory-model.md)",
       .megatron = {"use-megatron-fsdp"}, .megatron_read = megatron_use_megatron_fsdp, .spec_section = "training",
       .spec_name = "use_megatron_fsdp", .spec_default = "false",
       .spec_summary = "Megatron-FSDP: shard over data parallel per data_parallel_sharding_strategy",
       // The JSON names the kind of sharded data parallelism in one key, for both knobs.
       .json_key = "sharded_data_parallel", .json_get = [](const S& s) { return name(kFsdpKindNames, s.fsdp.kind); },
       .get = [](const S& s) { return J(megatron_fsdp(s)); },
       .set =
           [](S& s, const J& v) {
             if (v.get<bool>()) s.fsdp.kind = FsdpKind::kMegatron;
             else if (megatron_fsdp(s)) s.fsdp.kind = FsdpKind::kNone;
           }});
  add({.id = "use-torch-fsdp2", .kind = K::kBool, .flag = "use-torch-fsdp2",
       .help = "PyTorch FSDP2 (implies no distributed optimizer and no gradient accumulation fusion)",
       .doc = "PyTorch FSDP2; implies no distributed optimizer and no gradient accumulation fusion, as Megatron-LM "
              "requires",
       .megatron = {"use-torch-fsdp2"}, .megatron_read = megatron_use_torch_fsdp2, .spec_section = "training",
       .spec_name = "use_torch_fsdp2", .spec_default = "false",
       .spec_summary = "PyTorch FSDP2 (needs use_distributed_optimizer: false; implies no gradient accumulation fusion)",
       .spec_set =
           [](S& s, const J& v) {
             if (!v.get<bool>()) return;
             if (megatron_fsdp(s)) throw LayoutError("use_torch_fsdp2 and use_megatron_fsdp exclude each other");
             s.fsdp.kind = FsdpKind::kTorchFsdp2;
             s.gradient_accumulation_fusion = false;  // arguments.py refuses FSDP2 with it
           },
       .get = [](const S& s) { return J(torch_fsdp2(s)); },
       .set =
           [](S& s, const J& v) {
             if (v.get<bool>()) s.fsdp.kind = FsdpKind::kTorchFsdp2;
             else if (torch_fsdp2(s)) s.fsdp.kind = FsdpKind::kNone;
           },
       .mme_set = mme_use_torch_fsdp2,
       .why_not = "JSON: the key sharded_data_parallel (of use-megatron-fsdp) names the kind for both"});
  add({.id = "data-parallel-sharding-strategy", .kind = K::kEnum, .flag = "data-parallel-sharding-strategy",
       .help = "with --use-megatron-fsdp: no_shard | optim | optim_grads | optim_grads_params (default: all sharded, "
               "ZeRO-3)",
       .doc_value = "S",
       .doc = "with `--use-megatron-fsdp`: `no_shard`, `optim`, `optim_grads`, `optim_grads_params`",
       .doc_default = "optim_grads_params", .table = kFsdpShardingNames,
       .values = {"no_shard", "optim", "optim_grads", "optim_grads_params"},
       .megatron = {"data-parallel-sharding-strategy"}, .spec_section = "training",
       .spec_name = "data_parallel_sharding_strategy", .spec_default = "optim_grads_params",
       .spec_summary = "Megatron-FSDP: what is sharded", .json_key = "data_parallel_sharding_strategy",
       .json_when = megatron_fsdp, .args_when = megatron_fsdp,
       .get = [](const S& s) { return name(kFsdpShardingNames, s.fsdp.strategy); },
       .set = [](S& s, const J& v) { s.fsdp.strategy = must<FsdpSharding>(kFsdpShardingNames, v); }});
  add({.id = "outer-dp-sharding-strategy", .kind = K::kEnum, .flag = "outer-dp-sharding-strategy",
       .help = "Megatron-FSDP with optimizer instances (HSDP): no_shard (default) | optim", .doc_value = "S",
       .doc = "Megatron-FSDP with optimizer instances (HSDP): `no_shard` or `optim`", .doc_default = "no_shard",
       .table = kFsdpShardingNames, .values = {"no_shard", "optim"}, .megatron = {"outer-dp-sharding-strategy"},
       .spec_section = "training", .spec_name = "outer_dp_sharding_strategy", .spec_default = "no_shard",
       .spec_summary = "Megatron-FSDP with optimizer instances (HSDP): the outer sharding",
       .json_key = "outer_dp_sharding_strategy", .json_when = megatron_fsdp, .args_when = megatron_fsdp,
       .get = [](const S& s) { return name(kFsdpShardingNames, s.fsdp.outer); },
       .set = [](S& s, const J& v) { s.fsdp.outer = must<FsdpSharding>(kFsdpShardingNames, v); }});
  add({.id = "megatron-fsdp-main-params-dtype", .kind = K::kEnum, .flag = "megatron-fsdp-main-params-dtype",
       .help = "Megatron-FSDP main weights: fp32 (default) | bf16 | fp16", .doc_value = "D",
       .doc = "Megatron-FSDP main weights: `fp32`, `bf16`, `fp16` (`auto` is refused: not modelled)",
       .doc_default = "fp32", .table = kDTypeNames, .values = {"fp32", "bf16", "fp16"},
       .refused = {{"auto", "{} auto (no fp32 main weights; the optimizer steps the model weights) is not modelled; "
                            "give fp32, bf16 or fp16"}},
       .megatron = {"megatron-fsdp-main-params-dtype"}, .megatron_read = megatron_fsdp_main_params,
       .spec_section = "training", .spec_name = "megatron_fsdp_main_params_dtype", .spec_default = "fp32",
       .spec_summary = "Megatron-FSDP main weights", .json_key = "megatron_fsdp_main_params_dtype",
       .json_when = megatron_fsdp, .args_when = megatron_fsdp,
       .get = [](const S& s) { return name(kDTypeNames, s.fsdp.main_params); },
       .set = [](S& s, const J& v) { s.fsdp.main_params = must<DType>(kDTypeNames, v); }});
  add({.id = "megatron-fsdp-main-grads-dtype", .kind = K::kEnum, .flag = "megatron-fsdp-main-grads-dtype",
       .help = "Megatron-FSDP gradient buffer: auto (default: the param dtype) | fp32 | bf16 | fp16",
       .doc_value = "D", .doc = "Megatron-FSDP gradient buffer: `auto` (the param dtype), `fp32`, `bf16`, `fp16`",
       .doc_default = "auto", .table = kDTypeNames, .values = {"auto", "fp32", "bf16", "fp16"}, .null_name = "auto",
       .megatron = {"megatron-fsdp-main-grads-dtype"}, .spec_section = "training",
       .spec_name = "megatron_fsdp_main_grads_dtype", .spec_default = "auto",
       .spec_summary = "Megatron-FSDP gradient buffer; auto = the param dtype",
       .spec_get = [](const S& s) { return s.fsdp.main_grads ? name(kDTypeNames, *s.fsdp.main_grads) : J("auto"); },
       .json_key = "megatron_fsdp_main_grads_dtype",
       .json_get = [](const S& s) { return s.fsdp.main_grads ? name(kDTypeNames, *s.fsdp.main_grads) : J("auto"); },
       .json_when = megatron_fsdp, .args_when = megatron_fsdp,
       .get = [](const S& s) { return opt_dtype(s.fsdp.main_grads); },
       .set = [](S& s, const J& v) { s.fsdp.main_grads = value_of<DType>(kDTypeNames, v, "auto"); }});
  add({.id = "megatron-fsdp-grad-comm-dtype", .kind = K::kEnum, .flag = "megatron-fsdp-grad-comm-dtype",
       .help = "Megatron-FSDP reduce-scatter dtype: auto (default: the gradients') | fp32 | bf16 | fp16",
       .doc_value = "D",
       .doc = "Megatron-FSDP reduce-scatter dtype: `auto` (the gradients'), `fp32`, `bf16`, `fp16`",
       .doc_default = "auto", .table = kDTypeNames, .values = {"auto", "fp32", "bf16", "fp16"}, .null_name = "auto",
       .megatron = {"megatron-fsdp-grad-comm-dtype"}, .spec_section = "training",
       .spec_name = "megatron_fsdp_grad_comm_dtype", .spec_default = "auto",
       .spec_summary = "Megatron-FSDP reduce-scatter dtype; auto = the gradients'",
       .spec_get = [](const S& s) { return s.fsdp.grad_comm ? name(kDTypeNames, *s.fsdp.grad_comm) : J("auto"); },
       .json_key = "megatron_fsdp_grad_comm_dtype",
       .json_get = [](const S& s) { return s.fsdp.grad_comm ? name(kDTypeNames, *s.fsdp.grad_comm) : J("auto"); },
       .json_when = megatron_fsdp, .args_when = megatron_fsdp,
       .get = [](const S& s) { return opt_dtype(s.fsdp.grad_comm); },
       .set = [](S& s, const J& v) { s.fsdp.grad_comm = value_of<DType>(kDTypeNames, v, "auto"); }});
  add({.id = "fsdp-double-buffer", .kind = K::kBool, .flag = "fsdp-double-buffer",
       .help = "Megatron-FSDP: two persistent gather/gradient slots of the largest layer",
       .doc = "Megatron-FSDP: two persistent gather/gradient slots of the largest layer",
       // --use-nccl-ub and --megatron-fsdp-max-pool-double-buffer switch the double buffer on too.
       .megatron = {"fsdp-double-buffer", "use-nccl-ub", "megatron-fsdp-max-pool-double-buffer"},
       .spec_section = "training", .spec_name = "fsdp_double_buffer", .spec_default = "false",
       .spec_summary = "Megatron-FSDP: two persistent slots of the largest layer", .json_key = "fsdp_double_buffer",
       .json_when = megatron_fsdp, .args_when = megatron_fsdp, .get = [](const S& s) { return J(s.fsdp.double_buffer); },
       .set = [](S& s, const J& v) { s.fsdp.double_buffer = v.get<bool>(); }});
  add({.id = "suggested-communication-unit-size", .kind = K::kInt, .flag = "suggested-communication-unit-size",
       .help = "Megatron-FSDP: parameters per communication unit (default: max(1e9, 2 x the average layer))",
       .doc_value = "N", .doc = "Megatron-FSDP: parameters per communication unit (the prefetch reaches N/2 ahead)",
       .doc_default = "max(1e9, 2 x the average layer)", .max = kMaxWorldSize,
       .megatron = {"suggested-communication-unit-size"}, .spec_section = "training",
       .spec_name = "suggested_communication_unit_size", .spec_default = "null",
       .spec_summary = "Megatron-FSDP: parameters per communication unit",
       .json_key = "suggested_communication_unit_size", .json_when = megatron_fsdp, .args_when = megatron_fsdp,
       .get = [](const S& s) { return positive_or_null(s.fsdp.communication_unit_size); },
       .set = [](S& s, const J& v) { s.fsdp.communication_unit_size = v.is_null() ? 0 : as_int(v); }});
  add({.id = "torch-fsdp2-reshard-after-forward", .kind = K::kBool,
       .off_flag = "torch-fsdp2-no-reshard-after-forward",
       .off_help = "FSDP2: keep every layer gathered from its forward to its backward",
       .off_doc = "FSDP2: every layer stays gathered from its forward to its backward",
       .megatron_off = {"torch-fsdp2-no-reshard-after-forward"}, .spec_section = "training",
       .spec_name = "torch_fsdp2_reshard_after_forward", .spec_default = "true",
       .spec_summary = "FSDP2: free each layer's gathered weights after its forward",
       .json_key = "torch_fsdp2_reshard_after_forward", .json_when = torch_fsdp2, .args_when = torch_fsdp2,
       .get = [](const S& s) { return J(s.fsdp.reshard_after_forward); },
       .set = [](S& s, const J& v) { s.fsdp.reshard_after_forward = v.get<bool>(); }});
  add({.id = "num-distributed-optimizer-instances", .kind = K::kInt, .flag = "num-distributed-optimizer-instances",
       .help = "distributed optimizer instances (default 1)", .doc_value = "N",
       .doc = "distributed optimizer instances", .doc_default = "1", .max = kMaxParallelSize,
       .megatron = {"num-distributed-optimizer-instances"}, .spec_section = "training",
       .spec_name = "num_distributed_optimizer_instances", .spec_default = "1",
       .spec_summary = "distributed optimizer instances", .json_key = "num_distributed_optimizer_instances",
       .get = [](const S& s) { return J(s.optimizer.instances); },
       .set = [](S& s, const J& v) { s.optimizer.instances = as_int(v); }});
  add({.id = "optimizer", .kind = K::kEnum, .flag = "optimizer", .help = "adam (default) | sgd | muon",
       .doc_value = "O", .doc = "`adam`, `sgd`, `muon`", .doc_default = "adam", .table = kOptimizerNames,
       .values = {"adam", "sgd", "muon"}, .megatron = {"optimizer"}, .spec_section = "training",
       .spec_name = "optimizer", .spec_default = "adam", .spec_summary = "optimizer", .json_key = "optimizer",
       .get = [](const S& s) { return J(s.optimizer.name); },
       .set = [](S& s, const J& v) { s.optimizer.name = enum_name(kOptimizerNames, must<int>(kOptimizerNames, v)); }});
  add({.id = "use-precision-aware-optimizer", .kind = K::kBool, .flag = "use-precision-aware-optimizer",
       .help = "TE FusedAdam with the dtypes of --main-params/--exp-avg(-sq)-dtype",
       .doc = "TE FusedAdam with the dtypes of `--main-params-dtype`, `--exp-avg-dtype`, `--exp-avg-sq-dtype`",
       .megatron = {"use-precision-aware-optimizer"}, .megatron_default = J(false), .spec_section = "training",
       .spec_name = "use_precision_aware_optimizer", .spec_default = "false",
       .spec_summary = "TE FusedAdam with the dtypes of the precision section",
       .json_key = "use_precision_aware_optimizer", .get = [](const S& s) { return J(s.optimizer.precision_aware); },
       .set = [](S& s, const J& v) { s.optimizer.precision_aware = v.get<bool>(); }});
  add({.id = "optimizer-cpu-offload-fraction", .kind = K::kNumber, .flag = "optimizer-cpu-offload-fraction",
       .aliases = {"optimizer-offload-fraction"}, .help = "fraction of optimizer state kept on the host",
       .doc_value = "F", .doc = "fraction of optimizer state kept on the host, 0 to 1", .doc_default = "0", .lo = 0,
       .hi = 1, .megatron = {"optimizer-offload-fraction"}, .megatron_read = megatron_cpu_offload,
       .megatron_extra = {"optimizer-cpu-offload"}, .spec_section = "training",
       .spec_name = "optimizer_cpu_offload_fraction", .spec_default = "0.0",
       .spec_summary = "share of optimizer state kept on the host", .json_key = "optimizer_cpu_offload_fraction",
       .get = [](const S& s) { return J(s.optimizer.cpu_offload_fraction); },
       .set = [](S& s, const J& v) { s.optimizer.cpu_offload_fraction = v.get<double>(); }});
  add({.id = "recompute-granularity", .kind = K::kEnum, .flag = "recompute-granularity",
       .help = "activation recompute: full | selective", .doc_value = "G",
       .doc = "activation recompute: `full`, `selective` (also `none`)", .doc_default = "none",
       .table = kRecomputeGranularityNames, .values = {"full", "selective"}, .null_name = "none",
       .megatron = {"recompute-granularity"}, .megatron_read = megatron_recompute_granularity,
       .megatron_extra = {"recompute-activations"}, .spec_section = "training", .spec_name = "recompute_granularity",
       .spec_default = "null", .spec_summary = "activation recomputation: null (none), full or selective",
       .json_key = "recompute_granularity",
       .json_get = [](const S& s) { return name(kRecomputeGranularityNames, s.recompute.granularity); },
       .get =
           [](const S& s) {
             return s.recompute.granularity == RecomputeGranularity::kNone
                        ? J()
                        : name(kRecomputeGranularityNames, s.recompute.granularity);
           },
       .set =
           [](S& s, const J& v) {
             s.recompute.granularity = value_of<RecomputeGranularity>(kRecomputeGranularityNames, v, "none")
                                           .value_or(RecomputeGranularity::kNone);
           }});
  add({.id = "recompute-method", .kind = K::kEnum, .flag = "recompute-method",
       .help = "full recompute method: uniform (default) | block", .doc_value = "M",
       .doc = "full recompute method: `uniform`, `block` (needs `--recompute-granularity full`)",
       .doc_default = "uniform", .table = kRecomputeMethodNames, .values = {"uniform", "block"},
       .megatron = {"recompute-method"}, .spec_section = "training", .spec_name = "recompute_method",
       .spec_default = "null (uniform)", .spec_summary = "full recompute: uniform groups, or the first N layers per chunk",
       .spec_get = [](const S& s) { return full_recompute(s) ? name(kRecomputeMethodNames, s.recompute.method) : J(); },
       .json_key = "recompute_method", .args_when = full_recompute,
       .get = [](const S& s) { return name(kRecomputeMethodNames, s.recompute.method); },
       .set = [](S& s, const J& v) { s.recompute.method = must<RecomputeMethod>(kRecomputeMethodNames, v); },
       .mme_set = mme_recompute_method});
  add({.id = "recompute-num-layers", .kind = K::kInt, .flag = "recompute-num-layers",
       .help = "layers per recompute group (uniform) or recomputed layers per chunk (block); default 1",
       .doc_value = "N", .doc = "layers per recompute group (uniform) or recomputed layers per chunk (block)",
       .doc_default = "1", .max = kMaxParallelSize, .megatron = {"recompute-num-layers"}, .spec_section = "training",
       .spec_name = "recompute_num_layers",
       // The guide writes 0 for "no recompute"; with full recompute the reader refuses it.
       .spec_min = 0, .spec_default = "null (1)",
       .spec_summary = "full recompute: layers per group (uniform) or per chunk (block)",
       .spec_get = [](const S& s) { return full_recompute(s) ? J(s.recompute.num_layers) : J(); },
       .json_key = "recompute_num_layers", .args_when = full_recompute,
       .get = [](const S& s) { return J(s.recompute.num_layers); },
       .set = [](S& s, const J& v) { s.recompute.num_layers = as_int(v); }});
  add({.id = "recompute-modules", .kind = K::kModules, .flag = "recompute-modules",
       .help = "selective recompute modules, comma separated: core_attn (default), mlp, moe, moe_act, layernorm, "
               "mla_up_proj, shared_experts",
       .doc_value = "LIST",
       .doc = "selective recompute modules, comma separated: `core_attn`, `mlp`, `moe`, `moe_act`, `layernorm`, "
              "`mla_up_proj`, `shared_experts` (implies selective; refused with full)",
       .doc_default = "core_attn", .megatron = {"recompute-modules"}, .megatron_read = megatron_recompute_modules,
       .megatron_extra = {"moe-layer-recompute"}, .spec_section = "training", .spec_name = "recompute_modules",
       .spec_default = "[core_attn]",
       .spec_summary = "selective recompute: core_attn, mlp, moe, moe_act, layernorm, mla_up_proj, shared_experts",
       .spec_get = [](const S& s) { return selective_recompute(s) ? modules_list(s.recompute.modules) : J(); },
       .json_key = "recompute_modules", .args_when = selective_recompute,
       .get = [](const S& s) { return J(recompute_modules_to_string(s.recompute.modules)); },
       .set = [](S& s, const J& v) { s.recompute.modules = modules_of(v); }, .mme_set = mme_recompute_modules});
  add({.id = "make-vocab-size-divisible-by", .kind = K::kInt, .flag = "make-vocab-size-divisible-by",
       .help = "vocabulary padding multiple before x TP (default 128)", .doc_value = "N",
       .doc = "vocabulary padding multiple before x TP", .doc_default = "128", .max = kMaxSequenceSize,
       .megatron = {"make-vocab-size-divisible-by"}, .spec_section = "training",
       .spec_name = "make_vocab_size_divisible_by", .spec_default = "128",
       .spec_summary = "vocabulary padding multiple (times TP)", .json_key = "make_vocab_size_divisible_by",
       .get = [](const S& s) { return J(s.make_vocab_size_divisible_by); },
       .set = [](S& s, const J& v) { s.make_vocab_size_divisible_by = as_int(v); }});
  add({.id = "moe-token-dispatcher", .kind = K::kEnum, .flag = "moe-token-dispatcher",
       .aliases = {"moe-token-dispatcher-type"}, .help = "alltoall (default) | allgather | flex", .doc_value = "D",
       .doc = "`alltoall`, `allgather`, `flex`", .doc_default = "alltoall", .table = kTokenDispatcherNames,
       .values = {"alltoall", "allgather", "flex"}, .megatron = {"moe-token-dispatcher-type"},
       .megatron_default = J("allgather"), .spec_section = "training", .spec_name = "moe_token_dispatcher_type",
       .spec_default = "alltoall", .spec_summary = "MoE token dispatcher", .json_key = "moe_token_dispatcher",
       .get = [](const S& s) { return name(kTokenDispatcherNames, s.dispatcher); },
       .set = [](S& s, const J& v) { s.dispatcher = must<TokenDispatcher>(kTokenDispatcherNames, v); }});
  add({.id = "moe-capacity-factor", .kind = K::kNumber, .flag = "moe-capacity-factor",
       .aliases = {"moe-expert-capacity-factor"}, .help = "MoE expert capacity factor (default: dropless)",
       .doc_value = "F", .doc = "MoE expert capacity factor", .doc_default = "dropless", .lo = 0, .hi = 1e6,
       .lo_open = true, .megatron = {"moe-expert-capacity-factor"}, .spec_section = "training",
       .spec_name = "moe_expert_capacity_factor", .spec_default = "null",
       .spec_summary = "MoE capacity factor; null = dropless", .json_key = "moe_capacity_factor",
       .get = [](const S& s) { return opt(s.moe_capacity_factor); },
       .set = [](S& s, const J& v) { s.moe_capacity_factor = as_opt_double(v); }});
  add({.id = "moe-pad-expert-input-to-capacity", .kind = K::kBool, .flag = "moe-pad-expert-input-to-capacity",
       .help = "pad every expert's input to its capacity", .doc = "pad every expert's input to its capacity",
       .megatron = {"moe-pad-expert-input-to-capacity"}, .megatron_default = J(false), .spec_section = "training",
       .spec_name = "moe_pad_expert_input_to_capacity", .spec_default = "false",
       .spec_summary = "pad every expert's input to its capacity", .json_key = "moe_pad_expert_input_to_capacity",
       .get = [](const S& s) { return J(s.moe_pad_to_capacity); },
       .set = [](S& s, const J& v) { s.moe_pad_to_capacity = v.get<bool>(); }});
  add({.id = "moe-routing-imbalance", .kind = K::kNumber, .flag = "moe-routing-imbalance",
       .help = "tokens on the busiest expert rank / its even share, for the upper bound (default 1.25)",
       .doc_value = "F", .doc = "busiest expert rank's tokens / its even share, for the upper bound (1 to 1024)",
       .doc_default = "1.25", .lo = 1, .hi = 1024, .spec_section = "training", .spec_name = "moe_routing_imbalance",
       .spec_default = "null (1.25)",
       .spec_summary = "for the upper bound: tokens on the busiest expert rank / its even share",
       .json_key = "moe_routing_imbalance", .get = [](const S& s) { return opt(s.moe_routing_imbalance); },
       .set = [](S& s, const J& v) { s.moe_routing_imbalance = as_opt_double(v); },
       .why_not = "Megatron-LM: mme's own assumption for the upper bound; Megatron-LM routes tokens, it has no "
                  "such setting"});
  add({.id = "moe-grouped-gemm", .kind = K::kBool, .flag = "moe-grouped-gemm",
       .help = "grouped GEMM experts, TEGroupedMLP (the default)", .off_flag = "no-moe-grouped-gemm",
       .off_help = "one GEMM per local expert (SequentialMLP)", .doc = "grouped GEMM experts, TEGroupedMLP (the default)",
       .off_doc = "one GEMM per local expert (SequentialMLP)", .megatron = {"moe-grouped-gemm"},
       .megatron_default = J(false), .spec_section = "training", .spec_name = "moe_grouped_gemm",
       .spec_default = "true", .spec_summary = "grouped GEMM experts (TEGroupedMLP); false = SequentialMLP",
       .json_key = "moe_grouped_gemm", .get = [](const S& s) { return J(s.moe_grouped_gemm); },
       .set = [](S& s, const J& v) { s.moe_grouped_gemm = v.get<bool>(); }});
  add({.id = "cross-entropy-loss-fusion", .kind = K::kBool, .flag = "cross-entropy-loss-fusion",
       .help = "fused cross entropy (it still keeps the fp32 softmax for backward)",
       .doc = "fused cross entropy (it still keeps the fp32 softmax for backward)",
       .megatron = {"cross-entropy-loss-fusion"}, .megatron_default = J(false), .spec_section = "training",
       .spec_name = "cross_entropy_loss_fusion", .spec_default = "false",
       .spec_summary = "fused cross entropy (it still keeps the fp32 softmax)", .json_key = "cross_entropy_loss_fusion",
       .get = [](const S& s) { return J(s.cross_entropy_fusion); },
       .set = [](S& s, const J& v) { s.cross_entropy_fusion = v.get<bool>(); }});
  add({.id = "cross-entropy-fusion-impl", .kind = K::kEnum, .flag = "cross-entropy-fusion-impl",
       .help = "with --cross-entropy-loss-fusion: native (default) | te", .doc_value = "I",
       .doc = "with `--cross-entropy-loss-fusion`: `native` or `te`", .doc_default = "native",
       .table = kCrossEntropyImplNames, .values = {"native", "te"}, .megatron = {"cross-entropy-fusion-impl"},
       .spec_section = "training", .spec_name = "cross_entropy_fusion_impl", .spec_default = "native",
       .spec_summary = "with cross_entropy_loss_fusion: Megatron's own kernel (native) or Transformer Engine's (te)",
       .json_key = "cross_entropy_fusion_impl",
       .get = [](const S& s) { return J(enum_name(kCrossEntropyImplNames, s.cross_entropy_te ? 1 : 0)); },
       .set = [](S& s, const J& v) { s.cross_entropy_te = must<int>(kCrossEntropyImplNames, v) == 1; }});
  add({.id = "attention-backend", .kind = K::kEnum, .flag = "attention-backend",
       .help = "auto (default: Transformer Engine's choice) | flash (also fused) | unfused (also local)",
       .doc_value = "B",
       .doc = "`auto` (Transformer Engine's choice, docs/memory-model.md), `flash` (also `fused`) or `unfused` (also "
              "`local`)",
       .doc_default = "auto", .table = kAttentionBackendNames, .values = {"auto", "flash", "fused", "unfused", "local"},
       .megatron = {"attention-backend"}, .spec_section = "training", .spec_name = "attention_backend",
       .spec_default = "auto",
       .spec_summary = "auto (Transformer Engine's choice), flash (also fused) or unfused (also local)",
       .json_key = "attention_backend", .get = [](const S& s) { return name(kAttentionBackendNames, s.attention_backend); },
       .set = [](S& s, const J& v) { s.attention_backend = must<AttentionBackend>(kAttentionBackendNames, v); }});
  add({.id = "masked-softmax-fusion", .kind = K::kBool, .off_flag = "no-masked-softmax-fusion",
       .off_help = "Megatron's local attention softmax without its fused kernel",
       .off_doc = "Megatron's local attention softmax without its fused kernel",
       .megatron_off = {"no-masked-softmax-fusion"}, .spec_section = "training", .spec_name = "masked_softmax_fusion",
       .spec_default = "true", .spec_summary = "Megatron's local attention softmax with its fused kernel",
       .json_key = "masked_softmax_fusion", .get = [](const S& s) { return J(s.masked_softmax_fusion); },
       .set = [](S& s, const J& v) { s.masked_softmax_fusion = v.get<bool>(); }});
  add({.id = "attention-softmax-in-fp32", .kind = K::kBool, .flag = "attention-softmax-in-fp32",
       .help = "Megatron's local attention softmax in fp32 (also --apply-query-key-layer-scaling)",
       .doc = "Megatron's local attention softmax in fp32 (also `--apply-query-key-layer-scaling`)",
       // arguments.py: --apply-query-key-layer-scaling also sets attention_softmax_in_fp32.
       .megatron = {"attention-softmax-in-fp32", "apply-query-key-layer-scaling"}, .megatron_default = J(false),
       .spec_section = "training", .spec_name = "attention_softmax_in_fp32", .spec_default = "false",
       .spec_summary = "Megatron's local attention softmax in fp32", .json_key = "attention_softmax_in_fp32",
       .get = [](const S& s) { return J(s.attention_softmax_in_fp32); },
       .set = [](S& s, const J& v) { s.attention_softmax_in_fp32 = v.get<bool>(); }});
  add({.id = "transformer-impl", .kind = K::kEnum, .flag = "transformer-impl",
       .help = "transformer_engine (default) | local (Megatron's own layers, unfused attention)", .doc_value = "I",
       .doc = "`transformer_engine` or `local` (Megatron's own layers, unfused attention)",
       .doc_default = "transformer_engine", .table = kTransformerImplNames, .values = {"transformer_engine", "local"},
       .megatron = {"transformer-impl"}, .spec_section = "training", .spec_name = "transformer_impl",
       .spec_default = "transformer_engine", .spec_summary = "Transformer Engine layers, or Megatron's own (local)",
       .json_key = "transformer_impl",
       .get = [](const S& s) { return J(enum_name(kTransformerImplNames, s.transformer_engine ? 1 : 0)); },
       .set = [](S& s, const J& v) { s.transformer_engine = must<int>(kTransformerImplNames, v) == 1; }});
  add({.id = "gradient-accumulation-fusion", .kind = K::kBool, .off_flag = "no-gradient-accumulation-fusion",
       .off_help = "weight gradients as separate tensors, added to main_grad after each GEMM",
       .off_doc = "weight gradients as separate tensors, added to main_grad after each GEMM",
       .megatron_off = {"no-gradient-accumulation-fusion"}, .spec_section = "training",
       .spec_name = "gradient_accumulation_fusion", .spec_default = "true",
       .spec_summary = "weight gradients accumulated into main_grad by the GEMM (false with use_torch_fsdp2)",
       .json_key = "gradient_accumulation_fusion",
       // FSDP2 implies it (its flag says so).
       .args_when = [](const S& s) { return !torch_fsdp2(s); },
       .get = [](const S& s) { return J(s.gradient_accumulation_fusion); },
       .set = [](S& s, const J& v) { s.gradient_accumulation_fusion = v.get<bool>(); }});
  add({.id = "defer-embedding-wgrad-compute", .kind = K::kBool, .flag = "defer-embedding-wgrad-compute",
       .help = "the output layer's weight gradients wait for the pipeline flush",
       .doc = "the output layer's weight gradients wait for the pipeline flush (needs `--pp` > 1)",
       .megatron = {"defer-embedding-wgrad-compute"}, .megatron_default = J(false), .spec_section = "training",
       .spec_name = "defer_embedding_wgrad_compute", .spec_default = "false",
       .spec_summary = "the output layer's weight gradients wait for the pipeline flush (needs PP > 1)",
       .json_key = "defer_embedding_wgrad_compute", .get = [](const S& s) { return J(s.defer_embedding_wgrad); },
       .set = [](S& s, const J& v) { s.defer_embedding_wgrad = v.get<bool>(); }});
  add({.id = "wgrad-deferral-limit", .kind = K::kInt, .flag = "wgrad-deferral-limit",
       .help = "with --defer-embedding-wgrad-compute: micro-batches deferred (default 0: all)", .doc_value = "N",
       .doc = "with `--defer-embedding-wgrad-compute`: micro-batches deferred (0: all)", .doc_default = "0",
       .min = 0, .max = kMaxWorldSize, .megatron = {"wgrad-deferral-limit"}, .spec_section = "training",
       .spec_name = "wgrad_deferral_limit", .spec_default = "0",
       .spec_summary = "with defer_embedding_wgrad_compute: micro-batches deferred (0: all)",
       .json_key = "wgrad_deferral_limit", .get = [](const S& s) { return J(s.wgrad_deferral_limit); },
       .set = [](S& s, const J& v) { s.wgrad_deferral_limit = as_int(v); }});

  // infrastructure ------------------------------------------------------------------------------
  add({.id = "num-gpus", .kind = K::kInt, .flag = "num-gpus", .aliases = {"world-size"},
       .help = "total GPUs (default 8, or the smallest count the layout allows)", .doc_value = "N",
       .doc = "total GPUs",
       .doc_default = "8 when TP x PP x CP and ETP x EP x PP divide it, else the smallest count they both divide (the "
                      "report says which)",
       .max = kMaxWorldSize, .megatron = {"world-size"}, .megatron_read = megatron_world_size,
       .megatron_extra = {"nnodes", "nproc-per-node"}, .spec_section = "infrastructure", .spec_name = "world_size",
       .spec_required = true, .spec_default = "required",
       .spec_summary = "total GPUs; must satisfy the parallelism constraints", .json_key = "num_gpus",
       .args_always = true, .get = [](const S& s) { return J(s.parallel.world_size); },
       .set = [](S& s, const J& v) { s.parallel.world_size = as_int(v); }});
  add({.id = "cublas-workspace-config", .kind = K::kString, .flag = "cublas-workspace-config",
       .help = "CUBLAS_WORKSPACE_CONFIG of the run, e.g. :4096:8 (default: PyTorch's default)", .doc_value = "C",
       .doc = "`CUBLAS_WORKSPACE_CONFIG` of the run, e.g. `:4096:8`", .doc_default = "PyTorch's default",
       .check = check_cublas, .spec_section = "infrastructure", .spec_name = "cublas_workspace_config",
       .spec_default = "null", .spec_summary = "CUBLAS_WORKSPACE_CONFIG of the run, e.g. \":4096:8\"",
       .json_key = "cublas_workspace_config", .get = [](const S& s) { return text_or_null(s.cublas_workspace_config); },
       .set = [](S& s, const J& v) { s.cublas_workspace_config = v.is_null() ? "" : v.get<std::string>(); },
       .why_not = "Megatron-LM: an environment variable of the run (export CUBLAS_WORKSPACE_CONFIG=...), not a flag"});
  add({.id = "deterministic-mode", .kind = K::kBool, .flag = "deterministic-mode",
       .help = "Megatron-LM's --deterministic-mode: NVTE_ALLOW_NONDETERMINISTIC_ALGO=0, CUBLAS_WORKSPACE_CONFIG=:4096:8",
       .doc = "Megatron-LM's `--deterministic-mode`: NVTE_ALLOW_NONDETERMINISTIC_ALGO=0, and "
              "CUBLAS_WORKSPACE_CONFIG=:4096:8 unless `--env` or `--cublas-workspace-config` sets it",
       .megatron = {"deterministic-mode"}, .spec_section = "infrastructure", .spec_name = "deterministic_mode",
       .spec_default = "false",
       .spec_summary = "Megatron-LM's --deterministic-mode: deterministic kernels, CUBLAS_WORKSPACE_CONFIG :4096:8 "
                       "unless set",
       // NVTE_ALLOW_NONDETERMINISTIC_ALGO=0 in the environment says it, without the cuBLAS default.
       .spec_get = [](const S& s) { return J(s.attention_env.deterministic && !env_decides_determinism(s)); },
       .json_key = "deterministic_mode", .args_when = [](const S& s) { return !env_decides_determinism(s); },
       .get = [](const S& s) { return J(s.attention_env.deterministic); },
       .set =
           [](S& s, const J& v) {
             if (v.get<bool>()) apply_deterministic_mode(s);
             else s.attention_env.deterministic = false;
           }});
  add({.id = "env", .kind = K::kEnv, .flag = "env",
       .help = "an environment variable of the run (repeatable): CUBLAS_WORKSPACE_CONFIG, NVTE_FLASH_ATTN, "
               "NVTE_FUSED_ATTN, NVTE_ALLOW_NONDETERMINISTIC_ALGO change the estimate; the report lists them",
       .doc_value = "NAME=VALUE",
       .doc = "an environment variable of the run, repeatable: `CUBLAS_WORKSPACE_CONFIG`, `NVTE_FLASH_ATTN`, "
              "`NVTE_FUSED_ATTN`, `NVTE_ALLOW_NONDETERMINISTIC_ALGO` change the estimate; others are listed as "
              "without effect",
       .megatron_read = megatron_env, .spec_section = "infrastructure", .spec_name = "environment",
       .spec_default = "null", .spec_summary = "environment variables of the run, e.g. [NVTE_FUSED_ATTN=0]",
       .json_key = "environment",
       .get =
           [](const S& s) {
             if (s.environment_used.empty() && s.environment_ignored.empty()) return J();
             J list = J::array();
             for (const auto& e : s.environment_used) list.push_back(e);
             for (const auto& e : s.environment_ignored) list.push_back(e);
             return list;
           },
       .set =
           [](S& s, const J& v) {
             if (v.is_null()) return;
             for (const auto& e : v) {
               const auto [n, value] = split_env_assignment(e.get<std::string>(), "--env");
               add_environment(s, n, value);
             }
           }});

  // precision -----------------------------------------------------------------------------------
  add({.id = "precision", .kind = K::kEnum, .flag = "precision", .help = "bf16 (default) | fp16 | fp8 | fp32",
       .switches = {{"bf16", "bf16", "Megatron-LM spelling of --precision bf16"},
                    {"fp16", "fp16", "Megatron-LM spelling of --precision fp16"}},
       .doc_value = "P", .doc = "`bf16`, `fp16`, `fp8`, `fp32`", .doc_default = "bf16",
       .off_doc = "Megatron-LM spellings of `--precision bf16` / `fp16`", .table = kPrecisionNames,
       .values = {"bf16", "fp16", "fp8", "fp32"}, .megatron = {"bf16", "fp16"}, .megatron_read = megatron_precision,
       .megatron_extra = {"fp8-format", "fp8"}, .spec_section = "precision", .spec_name = "params_dtype",
       .spec_values = {"bf16", "fp16", "fp32"}, .spec_default = "bf16", .spec_summary = "parameter and activation dtype",
       // The spec file says FP8 in its own field (precision.fp8, spec_file.cpp) over bf16 parameters.
       .spec_get = [](const S& s) { return J(params_dtype_name(s.precision)); }, .json_key = "precision",
       .get = [](const S& s) { return name(kPrecisionNames, s.precision); },
       .set = [](S& s, const J& v) { s.precision = must<Precision>(kPrecisionNames, v); }});
  add({.id = "fp8-param-gather", .kind = K::kBool, .flag = "fp8-param-gather",
       .help = "keep FP8 GEMM weights as 1-byte parameters (needs --precision fp8)",
       .doc = "keep FP8 GEMM weights as 1-byte parameters (needs `--precision fp8`)", .megatron = {"fp8-param-gather"},
       .megatron_default = J(false), .spec_section = "precision", .spec_name = "fp8_param_gather",
       .spec_default = "false", .spec_summary = "keep FP8 GEMM weights as 1-byte parameters",
       .json_key = "fp8_param_gather", .get = [](const S& s) { return J(s.fp8_param_gather); },
       .set = [](S& s, const J& v) { s.fp8_param_gather = v.get<bool>(); }});
  add({.id = "main-grads-dtype", .kind = K::kEnum, .flag = "main-grads-dtype",
       .help = "gradient buffer dtype: fp32 (default for bf16) | bf16 | fp16", .doc_value = "T",
       .doc = "gradient buffer dtype: `fp32`, `bf16`, `fp16`", .doc_default = "fp32 (fp16 under `--precision fp16`)",
       .table = kDTypeNames, .values = {"fp32", "bf16", "fp16"}, .megatron = {"main-grads-dtype"},
       .megatron_read = megatron_main_grads, .megatron_extra = {"accumulate-allreduce-grads-in-fp32", "grad-reduce-in-bf16"},
       .spec_section = "precision", .spec_name = "main_grads_dtype",
       .spec_default = "null (fp32; fp16 with params_dtype fp16)", .spec_summary = "gradient buffer dtype",
       .json_key = "main_grads_dtype",
       .json_get =
           [](const S& s) {
             return name(kDTypeNames,
                         s.optimizer.main_grads.value_or(s.precision == Precision::kFP16 ? DType::kFP16 : DType::kFP32));
           },
       .get = [](const S& s) { return opt_dtype(s.optimizer.main_grads); },
       .set = [](S& s, const J& v) { s.optimizer.main_grads = value_of<DType>(kDTypeNames, v); }});
  add({.id = "main-params-dtype", .kind = K::kEnum, .flag = "main-params-dtype",
       .help = "precision-aware optimizer master weights: fp32 (default) | fp16", .doc_value = "T",
       .doc = "precision-aware optimizer master weights: `fp32`, `fp16`", .doc_default = "fp32", .table = kDTypeNames,
       .values = {"fp32", "fp16"}, .megatron = {"main-params-dtype"}, .spec_section = "precision",
       .spec_name = "main_params_dtype", .spec_default = "fp32",
       .spec_summary = "precision-aware optimizer: master weights", .json_key = "main_params_dtype",
       .get = [](const S& s) { return name(kDTypeNames, s.optimizer.main_params); },
       .set = [](S& s, const J& v) { s.optimizer.main_params = must<DType>(kDTypeNames, v); }});
  add({.id = "exp-avg-dtype", .kind = K::kEnum, .flag = "exp-avg-dtype",
       .help = "precision-aware optimizer exp_avg dtype: fp32 | fp16 | bf16 | fp8", .doc_value = "T",
       .doc = "precision-aware optimizer exp_avg dtype: `fp32`, `fp16`, `bf16`, `fp8`", .doc_default = "fp32",
       .table = kDTypeNames, .values = {"fp32", "fp16", "bf16", "fp8"}, .megatron = {"exp-avg-dtype"},
       .spec_section = "precision", .spec_name = "exp_avg_dtype", .spec_default = "fp32",
       .spec_summary = "precision-aware optimizer: first moment", .json_key = "exp_avg_dtype",
       .get = [](const S& s) { return name(kDTypeNames, s.optimizer.exp_avg); },
       .set = [](S& s, const J& v) { s.optimizer.exp_avg = must<DType>(kDTypeNames, v); }});
  add({.id = "exp-avg-sq-dtype", .kind = K::kEnum, .flag = "exp-avg-sq-dtype",
       .help = "precision-aware optimizer exp_avg_sq dtype: fp32 | fp16 | bf16 | fp8", .doc_value = "T",
       .doc = "precision-aware optimizer exp_avg_sq dtype: `fp32`, `fp16`, `bf16`, `fp8`", .doc_default = "fp32",
       .table = kDTypeNames, .values = {"fp32", "fp16", "bf16", "fp8"}, .megatron = {"exp-avg-sq-dtype"},
       .spec_section = "precision", .spec_name = "exp_avg_sq_dtype", .spec_default = "fp32",
       .spec_summary = "precision-aware optimizer: second moment", .json_key = "exp_avg_sq_dtype",
       .get = [](const S& s) { return name(kDTypeNames, s.optimizer.exp_avg_sq); },
       .set = [](S& s, const J& v) { s.optimizer.exp_avg_sq = must<DType>(kDTypeNames, v); }});

  // Overrides of the model ----------------------------------------------------------------------
  add({.id = "hidden-dropout", .kind = K::kNumber, .flag = "hidden-dropout",
       .help = "override the model's hidden dropout rate", .doc_value = "F",
       .doc = "override the model's hidden dropout rate (at least 0, below 1)", .doc_default = "the model's", .lo = 0,
       .hi = 1, .hi_open = true, .get = [](const S& s) { return opt(s.hidden_dropout); },
       .set = [](S& s, const J& v) { s.hidden_dropout = as_opt_double(v); },
       .why_not = "Megatron-LM, spec files and the JSON: a model setting there (--hidden-dropout is read by the "
                  "megatron_args adapter; spec files write the override into model.hidden_dropout, so the JSON's "
                  "setup, which is the same for both, leaves it out)"});
  add({.id = "attention-dropout", .kind = K::kNumber, .flag = "attention-dropout",
       .help = "override the model's attention dropout rate", .doc_value = "F",
       .doc = "override the model's attention dropout rate (at least 0, below 1)", .doc_default = "the model's",
       .lo = 0, .hi = 1, .hi_open = true,
       .get = [](const S& s) { return opt(s.attention_dropout); },
       .set = [](S& s, const J& v) { s.attention_dropout = as_opt_double(v); },
       .why_not = "Megatron-LM, spec files and the JSON: a model setting there (--attention-dropout is read by the "
                  "megatron_args adapter; spec files write the override into model.attention_dropout, so the "
                  "JSON's setup, which is the same for both, leaves it out)"});
  return k;
}

// The order of flags on a command line: --help, docs/cli.md and the planner's printed
// commands (the layout first, then batch, pipeline split, recompute, optimizer, precision,
// kernels, MoE, environment, FSDP).
constexpr const char* kFlagOrder[] = {
    "tp", "pp", "vpp", "ep", "etp", "cp", "cp-comm-type", "num-gpus", "sequence-parallel", "micro-batch-size",
    "seq-length", "global-batch-size", "num-layers-in-first-pipeline-stage", "num-layers-in-last-pipeline-stage",
    "account-for-embedding-in-pipeline-split", "account-for-loss-in-pipeline-split", "pipeline-layout",
    "num-layers-per-virtual-pipeline-stage", "microbatch-group-size-per-virtual-pipeline-stage",
    "recompute-granularity", "recompute-method", "recompute-num-layers", "recompute-modules",
    "use-distributed-optimizer", "num-distributed-optimizer-instances", "main-grads-dtype",
    "use-precision-aware-optimizer", "main-params-dtype", "exp-avg-dtype", "exp-avg-sq-dtype",
    "optimizer-cpu-offload-fraction", "optimizer", "precision", "fp8-param-gather", "attention-backend",
    "transformer-impl", "moe-token-dispatcher", "moe-capacity-factor", "moe-pad-expert-input-to-capacity",
    "moe-routing-imbalance", "moe-grouped-gemm", "cross-entropy-loss-fusion", "cross-entropy-fusion-impl",
    "cublas-workspace-config", "deterministic-mode", "env", "make-vocab-size-divisible-by", "hidden-dropout",
    "attention-dropout", "gradient-accumulation-fusion", "masked-softmax-fusion", "attention-softmax-in-fp32",
    "defer-embedding-wgrad-compute", "wgrad-deferral-limit", "use-torch-fsdp2", "torch-fsdp2-reshard-after-forward",
    "use-megatron-fsdp", "data-parallel-sharding-strategy", "outer-dp-sharding-strategy",
    "megatron-fsdp-main-params-dtype", "megatron-fsdp-main-grads-dtype", "megatron-fsdp-grad-comm-dtype",
    "fsdp-double-buffer", "suggested-communication-unit-size",
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
      const auto it = std::find_if(all.begin(), all.end(), [&](const SetupKnob& k) { return id == std::string_view(k.id); });
      if (it == all.end()) throw std::logic_error(std::string("kFlagOrder names no knob ") + id);
      out.push_back(&*it);
    }
    if (out.size() != setup_knobs().size()) throw std::logic_error("kFlagOrder misses a knob");
    return out;
  }();
  return order;
}

const SetupKnob* find_knob(std::string_view name) {
  for (const auto& k : setup_knobs()) {
    if (name == k.id || (k.flag && name == k.flag) || (k.off_flag && name == k.off_flag)) return &k;
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

J parse_knob_text(const SetupKnob& k, std::string_view flag, const std::string& text, bool megatron) {
  switch (k.kind) {
    case KnobKind::kInt: {
      const char* begin = text.c_str();
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(begin, &end, 10);
      if (text.empty() || end == begin || *end != '\0' || std::isspace(static_cast<unsigned char>(text.front())))
        throw UsageError(fmt::format("{}: expected an integer, got '{}'", flag, text));
      if (errno == ERANGE || v > k.max) {
        if (megatron)
          throw LayoutError(fmt::format("{} {} is larger than {}, which no real run uses", flag, text, k.max));
        throw UsageError(fmt::format("{}: {} is too large (at most {})", flag, text, k.max));
      }
      if (v < k.min) {
        if (k.min == 1) throw UsageError(fmt::format("{}: expected a positive integer, got {}", flag, text));
        throw UsageError(fmt::format("{}: expected an integer of at least {}, got {}", flag, k.min, text));
      }
      return J(static_cast<std::int64_t>(v));
    }
    case KnobKind::kNumber: {
      const char* begin = text.c_str();
      char* end = nullptr;
      errno = 0;
      const double v = std::strtod(begin, &end);
      if (text.empty() || end == begin || *end != '\0' || !std::isfinite(v))
        throw UsageError(fmt::format("{}: expected a number, got '{}'", flag, text));
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
    case KnobKind::kModules:
      try {
        return J(recompute_modules_to_string(parse_recompute_modules(text)));
      } catch (const UsageError& e) {
        throw UsageError(fmt::format("{}: {}", flag, e.what()));
      }
    case KnobKind::kEnv:
      (void)split_env_assignment(text, flag);
      return J::array({text});
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

TrainingSetup setup_from_mme_flags(const MmeFlags& flags, TrainingSetup s) {
  for (const auto& k : setup_knobs()) {
    auto apply = [&](const J& v) {
      if (k.mme_set) k.mme_set(s, v, flags);
      else k.set(s, v);
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
    std::optional<std::string> value;
    const char* first = nullptr;
    std::vector<const char*> names{k.flag};
    names.insert(names.end(), k.aliases.begin(), k.aliases.end());
    for (const char* n : names) {
      const auto v = flags.value(n);
      if (!v) continue;
      if (value && *value != *v) throw UsageError(fmt::format("--{} {} and --{} {} disagree", first, *value, n, *v));
      value = v;
      first = n;
    }
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
      default:
        a.push_back(fmt::format("--{}", k->flag));
        a.push_back(knob_text(*k, v));
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
  return s;
}

std::vector<std::string> setup_to_megatron_args(const TrainingSetup& s) {
  std::vector<std::string> a;
  auto flag = [&](std::string f) { a.push_back("--" + f); };
  for (const auto& k : setup_knobs()) {
    const std::string_view id = k.id;
    if (id == "precision") {
      if (s.precision == Precision::kFP16) flag("fp16");
      if (s.precision == Precision::kBF16 || s.precision == Precision::kFP8) flag("bf16");
      if (s.precision == Precision::kFP8) {
        flag("fp8-format");
        a.push_back("e4m3");
      }
      continue;
    }
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
    const J v = k.get(s);
    if (v.is_null()) continue;
    if (k.kind == KnobKind::kBool) {
      if (v.get<bool>() && !k.megatron.empty()) flag(k.megatron.front());
      if (!v.get<bool>() && !k.megatron_off.empty()) flag(k.megatron_off.front());
      continue;
    }
    if (k.megatron.empty()) continue;
    flag(k.megatron.front());
    a.push_back(knob_text(k, v));
  }
  return a;
}

// -------------------------------------------------------------------------------------------------
// The other flags of a Megatron-LM launch line.

namespace {

// What the megatron_args adapter reads (plugins/adapters/megatron_args).
constexpr std::string_view kModelFlags[] = {
    "num-layers", "hidden-size", "num-attention-heads", "group-query-attention", "num-query-groups", "kv-channels",
    "swiglu", "ffn-hidden-size", "normalization", "squared-relu", "disable-bias-linear", "position-embedding-type",
    "use-rotary-position-embeddings", "max-position-embeddings", "untie-embeddings-and-output-weights",
    "hidden-dropout", "attention-dropout", "tokenizer-type", "vocab-size", "tokenizer-model", "add-qkv-bias",
    "qk-layernorm", "multi-latent-attention", "q-lora-rank", "kv-lora-rank", "qk-head-dim", "qk-pos-emb-head-dim",
    "v-head-dim", "num-experts", "moe-router-topk", "moe-ffn-hidden-size", "moe-shared-expert-intermediate-size",
    "moe-shared-expert-gate", "moe-router-enable-expert-bias", "moe-router-dtype", "moe-layer-freq", "mtp-num-layers"};

// Flags without an effect on the memory of a training step (optimizer hyper-parameters,
// schedules, data, checkpoints, logging, numerics), and the launcher's own.
constexpr std::string_view kNoEffectFlags[] = {
    "adam-beta1", "adam-beta2", "adam-eps", "apply-layernorm-1p", "auto-detect-ckpt-format", "bias-dropout-fusion",
    "calculate-per-token-loss", "check-weight-hash-across-dp-replicas-interval", "clip-grad", "dataloader-type",
    "ddp-average-in-collective", "decoupled-lr", "decoupled-min-lr", "disable-gloo-process-groups",
    "distributed-backend", "distributed-timeout-minutes", "finetune", "init-method-std", "init-method-xavier-uniform",
    "load", "logging-level", "lr", "min-lr", "manual-gc", "manual-gc-interval", "merge-file", "mock-data",
    "moe-aux-loss-coeff", "moe-router-bias-update-rate", "moe-router-load-balancing-type", "moe-router-pre-softmax",
    "moe-router-score-function", "moe-router-topk-scaling-factor", "moe-z-loss-coeff", "moe-router-num-groups",
    "moe-router-group-topk", "moe-input-jitter-eps", "moe-token-drop-policy", "mtp-loss-scaling-factor",
    "no-check-for-nan-in-loss-and-grad", "no-load-optim", "no-load-rng", "no-save-optim", "no-save-rng",
    "no-mmap-bin-files", "no-create-attention-mask-in-dataloader", "no-use-tokenizer-model-from-checkpoint-args",
    "no-persist-layer-norm", "norm-epsilon", "num-workers", "override-opt_param-scheduler", "rerun-mode",
    "rotary-base", "rotary-interleaved", "rotary-percent", "rotary-scaling-factor", "rotary-seq-len-interpolation-factor",
    "mscale", "mscale-all-dim", "save", "save-interval", "save-retain-interval", "seed", "split", "tiktoken-pattern",
    "train-iters", "train-samples", "use-checkpoint-args", "use-checkpoint-opt_param-scheduler", "use-mcore-models",
    "use-persistent-ckpt-worker", "verify-integrity", "vocab-extra-ids", "vocab-file", "weight-decay",
    "weight-decay-incr-style", "start-weight-decay", "end-weight-decay", "straggler-minmax-count", "test-mode",
    "muon-momentum", "muon-scale-mode", "muon-extra-scale-factor", "te-rng-tracker", "use-tp-pp-dp-mapping",
    "sgd-momentum", "loss-scale", "initial-loss-scale", "min-loss-scale", "loss-scale-window", "hysteresis",
    "no-async-tensor-model-parallel-allreduce", "use-legacy-models", "deprecated-use-mcore-models",
    "exit-on-missing-checkpoint", "ckpt-step", "pretrained-checkpoint", "eod-mask-loss", "reset-position-ids",
    "reset-attention-mask", "micro-batch-size-schedule", "rampup-batch-size", "dataloader-seq-length",
    "node-rank", "master-addr", "master-port", "rdzv-backend", "rdzv-endpoint", "rdzv-id", "standalone",
    "num-dataset-builder-threads", "data-args-path", "per-split-data-args-path", "train-data-path",
    "valid-data-path", "test-data-path", "object-storage-cache-path", "s3-cache-path"};
// Prefixes of such flags (checkpoints, logging, schedules, evaluation, data).
constexpr std::string_view kNoEffectPrefixes[] = {"log-", "wandb-", "tensorboard-", "ckpt-", "dist-ckpt-", "async-",
                                                  "lr-", "eval-", "exit-", "timing-", "data-", "one-logger-",
                                                  "non-persistent-", "profile", "record-memory-history",
                                                  "memory-snapshot-path", "num-tokens-to-generate"};

struct NotModelled {
  std::string_view flag;
  std::string_view what;
};
// Flags with a memory effect mme does not model: the report's assumptions name them.
constexpr NotModelled kNotModelled[] = {
    {"tp-comm-overlap", "the userbuffers of tensor-parallel communication overlap"},
    {"tp-comm-overlap-cfg", "the userbuffers of tensor-parallel communication overlap"},
    {"overlap-grad-reduce", "the gradient buckets of overlapped reduce-scatter (the buffers are modelled, not the "
                            "bucketing)"},
    {"overlap-param-gather", "the parameter buckets of overlapped all-gather (the buffers are modelled, not the "
                             "bucketing)"},
    {"overlap-param-gather-with-optimizer-step", "overlapped parameter all-gather"},
    {"overlap-p2p-communication-warmup-flush", "overlapped pipeline send/receive buffers"},
    {"cuda-graph-impl", "the memory pools of CUDA graphs"},
    {"cuda-graph-modules", "the memory pools of CUDA graphs"},
    {"cuda-graph-scope", "the memory pools of CUDA graphs"},
    {"cuda-graph-warmup-steps", "the memory pools of CUDA graphs"},
    {"enable-cuda-graph", "the memory pools of CUDA graphs"},
    {"external-cuda-graph", "the memory pools of CUDA graphs"},
    {"delay-wgrad-compute", "weight gradients delayed for overlap"},
    {"overlap-moe-expert-parallel-comm", "the buffers of overlapped expert-parallel communication"},
    {"moe-shared-expert-overlap", "the shared experts' overlapped communication"},
    {"moe-permute-fusion", "the fused token permutation's buffers"},
    {"moe-router-fusion", "the fused router's buffers"},
    {"no-rope-fusion", "the unfused rotary embedding's activations"},
    {"no-bias-gelu-fusion", "the unfused bias-GeLU's activations"},
    {"no-bias-swiglu-fusion", "the unfused bias-SwiGLU's activations"},
    {"no-bias-dropout-fusion", "the unfused bias-dropout-add's activations"},
    {"use-transformer-engine-op-fuser", "Transformer Engine's operation fuser"},
    {"cpu-offloading", "activation offloading to the host"},
    {"cpu-offloading-num-layers", "activation offloading to the host"},
    {"fine-grained-activation-offloading", "activation offloading to the host"},
    {"offload-modules", "activation offloading to the host"},
    {"empty-unused-memory-level", "the caching allocator's behaviour"},
    {"fp8-recipe", "the FP8 recipe's scaling buffers (FP8 GEMMs are modelled)"},
    {"fp8-amax-history-len", "the FP8 amax history"},
    {"first-last-layers-bf16", "bf16 first and last layers under FP8"},
    {"num-layers-at-start-in-bf16", "bf16 first layers under FP8"},
    {"num-layers-at-end-in-bf16", "bf16 last layers under FP8"},
    {"use-flash-attn", "the deprecated flash-attention switch (give --attention-backend flash)"},
    {"hierarchical-context-parallel-sizes", "hierarchical context parallelism"},
    {"use-packed-sequence", "packed sequences"},
    {"distribute-saved-activations", "saved activations distributed over TP"},
    {"spec", "a custom layer spec"},
    {"hybrid-override-pattern", "hybrid Mamba models"},
    {"hybrid-layer-pattern", "hybrid Mamba models"},
    {"is-hybrid-model", "hybrid Mamba models"},
    {"mamba-head-dim", "hybrid Mamba models"},
    {"mamba-num-heads", "hybrid Mamba models"},
    {"mamba-state-dim", "hybrid Mamba models"},
    {"encoder-num-layers", "encoder-decoder models"},
    {"decoder-num-layers", "encoder-decoder models"},
    {"encoder-seq-length", "encoder-decoder models"},
    {"decoder-seq-length", "encoder-decoder models"},
    {"bert-no-binary-head", "BERT models"},
    {"img-h", "vision models"},
    {"img-w", "vision models"},
    {"patch-dim", "vision models"},
    {"disable-vision-class-token", "vision models"},
    {"export-kd-teacher-load", "knowledge distillation (a teacher model)"},
    {"export-kd-cfg", "knowledge distillation (a teacher model)"},
    {"perform-rl-step", "RL loops (a generation engine next to training)"},
    {"inference-max-seq-length", "inference"},
    {"moe-pad-experts-for-cuda-graph-inference", "inference"},
};
constexpr NotModelled kNotModelledPrefixes[] = {
    {"rl-", "RL loops (a generation engine next to training)"},
    {"grpo-", "RL loops (a generation engine next to training)"},
    {"inference-", "inference"},
    {"export-", "model export and distillation"},
};

}  // namespace

const std::vector<std::string_view>& megatron_model_flags() {
  static const std::vector<std::string_view> v(std::begin(kModelFlags), std::end(kModelFlags));
  return v;
}

MegatronFlagReview review_megatron_flags(const MegatronArgs& args) {
  static const std::set<std::string_view> known = [] {
    std::set<std::string_view> k(std::begin(kModelFlags), std::end(kModelFlags));
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
    std::string_view what;
    for (const auto& n : kNotModelled)
      if (n.flag == name) what = n.what;
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
