// The helpers of the setup schema's knob table (setup_schema.cpp, setup_knobs_*.cpp): values in
// and out of a TrainingSetup, the Megatron-LM readers of knobs it spells in several flags, and
// the rules of the mme command line. Private to mme::inputs.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "mme/inputs/megatron_args.hpp"
#include "mme/inputs/setup_schema.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/number_text.hpp"
#include "mme/sdk/text.hpp"

namespace mme::setup_knobs_detail {

using J = nlohmann::json;

inline J opt(const std::optional<std::int64_t>& v) { return v ? J(*v) : J(); }
inline J opt(const std::optional<double>& v) { return v ? J(*v) : J(); }
inline J positive_or_null(std::int64_t v) { return v > 0 ? J(v) : J(); }
inline J text_or_null(const std::string& v) { return v.empty() ? J() : J(v); }

template <class E>
inline J name(EnumTable t, E v) {
  return J(enum_name(t, static_cast<int>(v)));
}
// The enum value of a (checked) name; nullopt for null and the knob's "auto"/"none".
template <class E>
inline std::optional<E> value_of(EnumTable t, const J& v, const char* null_name = nullptr) {
  if (v.is_null()) return std::nullopt;
  const std::string text = v.get<std::string>();
  if (null_name && lower(text) == null_name) return std::nullopt;
  const auto n = enum_value(t, text);
  if (!n) throw std::logic_error("unchecked enum value " + text);
  return static_cast<E>(*n);
}
template <class E>
inline E must(EnumTable t, const J& v) {
  return *value_of<E>(t, v);
}
inline J opt_dtype(const std::optional<DType>& d) { return d ? name(kDTypeNames, *d) : J(); }

inline std::int64_t as_int(const J& v) { return v.get<std::int64_t>(); }
inline std::optional<std::int64_t> as_opt_int(const J& v) {
  return v.is_null() ? std::nullopt : std::optional<std::int64_t>(v.get<std::int64_t>());
}
inline std::optional<double> as_opt_double(const J& v) {
  return v.is_null() ? std::nullopt : std::optional<double>(v.get<double>());
}

// Recompute modules as a list (spec files) and as text ("core_attn,mlp").
inline J modules_list(std::uint32_t modules) { return J(split(recompute_modules_to_string(modules), ',')); }
inline std::uint32_t modules_of(const J& v) {
  if (v.is_string()) return parse_recompute_modules(v.get<std::string>());
  std::string text;
  for (const auto& m : v) text += m.get<std::string>() + ",";
  return parse_recompute_modules(text);
}

inline bool megatron_fsdp(const TrainingSetup& s) { return s.fsdp.kind == FsdpKind::kMegatron; }
inline bool torch_fsdp2(const TrainingSetup& s) { return s.fsdp.kind == FsdpKind::kTorchFsdp2; }
inline bool full_recompute(const TrainingSetup& s) { return s.recompute.granularity == RecomputeGranularity::kFull; }
inline bool selective_recompute(const TrainingSetup& s) {
  return s.recompute.granularity == RecomputeGranularity::kSelective;
}
// NVTE_ALLOW_NONDETERMINISTIC_ALGO among the run's variables: it decides determinism itself.
inline bool env_decides_determinism(const TrainingSetup& s) {
  return std::any_of(s.environment_used.begin(), s.environment_used.end(),
                     [](const std::string& e) { return e.rfind("NVTE_ALLOW_NONDETERMINISTIC_ALGO=", 0) == 0; });
}

inline std::string params_dtype_name(Precision p) {
  switch (p) {
    case Precision::kFP16: return "fp16";
    case Precision::kFP32: return "fp32";
    default: return "bf16";
  }
}

// --env / `export NAME=VALUE`: a modelled variable changes the setup, any other is listed.
inline void add_environment(TrainingSetup& s, const std::string& name, const std::string& value) {
  if (!apply_environment(s, name, value)) s.environment_ignored.push_back(name + "=" + value);
}

// ---- Megatron-LM readers of the knobs it spells in several flags ----------------------------------

inline std::optional<std::string> given(const MegatronArgs& a, const char* flag) { return a.value(flag); }

inline void megatron_world_size(const MegatronArgs& a, TrainingSetup& s) {
  if (!a.world_size) return;
  if (*a.world_size > kMaxWorldSize)
    throw UsageError(
        fmt::format("the launcher's {} GPUs are more than {}, which no real run uses", *a.world_size, kMaxWorldSize));
  s.parallel.world_size = *a.world_size;
}

// Precision: fp32 unless --bf16/--fp16; --fp8-format on top of bf16 = FP8 GEMMs.
inline void megatron_precision(const MegatronArgs& a, TrainingSetup& s) {
  s.precision = Precision::kFP32;
  // arguments.py validate_args: `assert not args.bf16` under --fp16, and the other way round.
  if (a.enabled("bf16") && a.enabled("fp16"))
    throw UsageError("--bf16 and --fp16 together: Megatron-LM refuses it (arguments.py); give one of them");
  if (a.enabled("bf16")) s.precision = Precision::kBF16;
  if (a.enabled("fp16")) s.precision = Precision::kFP16;
  if (auto v = given(a, "fp8-format")) {
    // arguments.py: --fp8-format choices e4m3, hybrid.
    if (lower(*v) != "e4m3" && lower(*v) != "hybrid")
      throw UsageError(fmt::format("--fp8-format: unknown value '{}' (e4m3, hybrid)", *v));
    // arguments.py: params_dtype is float32 unless --bf16 or --fp16, and Transformer Engine runs
    // FP8 GEMMs over whatever the parameters and activations are. mme models them over bf16 only:
    // taking fp32 for bf16 would halve every activation (the dangerous error), so it refuses.
    if (s.precision != Precision::kBF16) {
      const bool fp16 = s.precision == Precision::kFP16;
      throw UsageError(fmt::format(
          "--fp8-format {0} without --bf16: FP8 GEMMs over {1} parameters and activations (Megatron-LM's "
          "params_dtype) are not modelled; mme models FP8 over bf16. Add --bf16 if the run used it, or leave "
          "--fp8-format out for an {1} estimate (its GEMM inputs at {2} bytes instead of 1: an overestimate)",
          *v, fp16 ? "fp16" : "fp32", fp16 ? 2 : 4));
    }
    s.precision = Precision::kFP8;
  }
}

// `value` of a Megatron-LM flag read as the setup knob `id` reads its own (parse_knob_text).
inline void set_knob_from(TrainingSetup& s, const char* id, const std::string& flag, const std::string& value) {
  const SetupKnob& k = *find_knob(id);
  k.set(s, parse_knob_text(k, flag, value, true));
}

inline void megatron_main_grads(const MegatronArgs& a, TrainingSetup& s) {
  if (s.precision == Precision::kFP16 && a.enabled("accumulate-allreduce-grads-in-fp32"))
    s.optimizer.main_grads = DType::kFP32;
  if (a.enabled("grad-reduce-in-bf16")) s.optimizer.main_grads = DType::kBF16;
  if (auto v = given(a, "main-grads-dtype"))
    s.optimizer.main_grads =
        value_of<DType>(kDTypeNames, parse_knob_text(*find_knob("main-grads-dtype"), "--main-grads-dtype", *v, true));
  // arguments.py validate_args (bf16): fp32 accumulation asked for with other main gradients.
  if (s.precision != Precision::kFP16 && a.enabled("accumulate-allreduce-grads-in-fp32") && s.optimizer.main_grads &&
      *s.optimizer.main_grads != DType::kFP32)
    throw UsageError(
        "--accumulate-allreduce-grads-in-fp32 with --main-grads-dtype other than fp32: Megatron-LM refuses it "
        "(arguments.py: --main-grads-dtype can only be fp32 when --accumulate-allreduce-grads-in-fp32 is set)");
}

inline void megatron_use_megatron_fsdp(const MegatronArgs& a, TrainingSetup& s) {
  if (!a.enabled("use-megatron-fsdp")) return;
  s.fsdp.kind = FsdpKind::kMegatron;
  s.optimizer.distributed = true;  // arguments.py: Megatron-FSDP forces the distributed optimizer
}

inline void megatron_use_torch_fsdp2(const MegatronArgs& a, TrainingSetup& s) {
  if (!a.enabled("use-torch-fsdp2")) return;
  if (s.fsdp.kind == FsdpKind::kMegatron)
    throw UsageError("--use-torch-fsdp2 and --use-megatron-fsdp exclude each other");
  // arguments.py: "--use-torch-fsdp2 is not supported with MCore's distributed optimizer".
  if (s.optimizer.distributed)
    throw UsageError("--use-torch-fsdp2 is not supported with --use-distributed-optimizer (Megatron-LM refuses it)");
  s.fsdp.kind = FsdpKind::kTorchFsdp2;
}

// Without Megatron-FSDP, Megatron-LM checks the value (argparse choices) and ignores it: so
// is `auto`, which mme does not model.
inline void megatron_fsdp_main_params(const MegatronArgs& a, TrainingSetup& s) {
  const auto v = given(a, "megatron-fsdp-main-params-dtype");
  if (!v) return;
  if (lower(*v) == "auto" && s.fsdp.kind != FsdpKind::kMegatron) return;
  s.fsdp.main_params = must<DType>(kDTypeNames, parse_knob_text(*find_knob("megatron-fsdp-main-params-dtype"),
                                                                "--megatron-fsdp-main-params-dtype", *v, true));
}

// arguments.py validate_args ("emerging optimizer check"): the deprecated `dist_muon` is Muon
// with the layer-wise distributed optimizer, as `--optimizer muon --use-distributed-optimizer`
// (which Megatron-LM turns into the same layer-wise sharding). Its other emerging optimizers
// (lion, soap, adaptive_muon) keep states mme does not model: an error naming them, not "unknown".
inline void megatron_optimizer(const MegatronArgs& a, TrainingSetup& s) {
  const auto v = given(a, "optimizer");
  if (!v) return;
  if (*v == "dist_muon") {
    s.optimizer.name = "muon";
    s.optimizer.distributed = true;
    return;
  }
  if (*v == "lion" || *v == "soap" || *v == "adaptive_muon")
    throw UsageError(fmt::format(
        "--optimizer {}: Megatron-LM's emerging optimizer {} is not modelled (its states differ from Adam's); mme "
        "models adam, sgd and muon (dist_muon: muon with the distributed optimizer)",
        *v, *v));
  set_knob_from(s, "optimizer", "--optimizer", *v);
}

// TokenizerConfig.padded_vocab_size (--padded-vocab-size): the model keeps exactly that many
// rows (build_tokenizer.py leaves a given one; training/models/gpt.py pads nothing), which the
// megatron_args adapter takes as the vocabulary; a multiple of 1 x TP pads it no further.
inline void megatron_vocab_padding(const MegatronArgs& a, TrainingSetup& s) {
  if (a.has("padded-vocab-size")) {
    s.make_vocab_size_divisible_by = 1;
    return;
  }
  if (auto v = given(a, "make-vocab-size-divisible-by"))
    set_knob_from(s, "make-vocab-size-divisible-by", "--make-vocab-size-divisible-by", *v);
}

inline void megatron_cpu_offload(const MegatronArgs& a, TrainingSetup& s) {
  if (!a.enabled("optimizer-cpu-offload")) return;
  // arguments.py validate_args (megatron.core itself, e.g. through Megatron-Bridge, takes it
  // without: the fp32 main params then stay on the GPU).
  if (!a.enabled("use-precision-aware-optimizer"))
    throw UsageError(
        "The optimizer cpu offload must be used in conjunction with `--use-precision-aware-optimizer`, as the hybrid "
        "device optimizer reuses the code path of this flag.");
  if (a.enabled("fp8-param-gather") && lower(a.value("fp8-recipe").value_or("delayed")) != "delayed")
    throw UsageError(
        "When `--fp8-param-gather` is enabled, the optimizer cpu offload must be used in conjunction with "
        "`--fp8-recipe delayed`.");
  const SetupKnob& k = *find_knob("optimizer-cpu-offload-fraction");
  const auto v = given(a, "optimizer-offload-fraction");
  s.optimizer.cpu_offload_fraction =
      v ? parse_knob_text(k, "--optimizer-offload-fraction", *v, true).get<double>() : 1.0;
}

inline void megatron_recompute_granularity(const MegatronArgs& a, TrainingSetup& s) {
  auto& r = s.recompute;
  if (auto v = given(a, "recompute-granularity"))
    r.granularity =
        value_of<RecomputeGranularity>(
            kRecomputeGranularityNames,
            parse_knob_text(*find_knob("recompute-granularity"), "--recompute-granularity", *v, true), "none")
            .value_or(RecomputeGranularity::kNone);
  // arguments.py: --recompute-activations sets selective, whatever --recompute-granularity says.
  if (a.enabled("recompute-activations")) r.granularity = RecomputeGranularity::kSelective;
  // transformer_config.py __post_init__ and arguments.py: full recompute names its method and its
  // layer count; selective takes neither (mme's own flags default them: docs/cli.md).
  const bool method = given(a, "recompute-method").has_value(), layers = given(a, "recompute-num-layers").has_value();
  if (r.granularity == RecomputeGranularity::kFull && (!method || !layers))
    throw UsageError(fmt::format(
        "--recompute-granularity full without --recompute-{}: Megatron-LM refuses it (transformer_config.py: "
        "recompute_method must be \"block\" or \"uniform\", recompute_num_layers between 1 and the layers per "
        "pipeline rank)",
        method ? "num-layers" : "method"));
  if (r.granularity == RecomputeGranularity::kSelective && (method || layers))
    throw UsageError(fmt::format("--recompute-{} with selective recompute: Megatron-LM refuses it ({})",
                                 method ? "method" : "num-layers",
                                 method ? "arguments.py: recompute method is not yet supported for selective "
                                          "recomputing granularity"
                                        : "transformer_config.py: recompute_num_layers must be None"));
}

inline void megatron_recompute_modules(const MegatronArgs& a, TrainingSetup& s) {
  auto& r = s.recompute;
  if (auto v = given(a, "recompute-modules"))
    r.modules = modules_of(parse_knob_text(*find_knob("recompute-modules"), "--recompute-modules", *v, true));
  if (a.enabled("moe-layer-recompute")) {
    r.granularity = RecomputeGranularity::kSelective;
    r.modules |= kRecomputeMoe;
  }
}

// transformer_config.py __post_init__: a negative --moe-expert-capacity-factor is None, the
// dropless MoE; any other value is read as mme's own flag reads it.
inline void megatron_capacity_factor(const MegatronArgs& a, TrainingSetup& s) {
  const auto v = given(a, "moe-expert-capacity-factor");
  if (!v) return;
  const auto d = parse_decimal(*v);
  if (d && std::isfinite(*d) && *d < 0) {
    s.moe_capacity_factor.reset();
    return;
  }
  set_knob_from(s, "moe-capacity-factor", "--moe-expert-capacity-factor", *v);
}

inline void megatron_cp_comm_type(const MegatronArgs& a, TrainingSetup& s) {
  const auto v = given(a, "cp-comm-type");
  if (!v) return;
  // nargs='+' (arguments.py): one type for every layer, or one per layer.
  const std::vector<std::string> types = split(*v, ' ', EmptyItems::kSkip);
  const SetupKnob& k = *find_knob("cp-comm-type");
  if (types.empty()) throw UsageError(fmt::format("--cp-comm-type: expected a type ({})", knob_values_text(k)));
  s.cp_comm_type = must<CpCommType>(kCpCommTypeNames, parse_knob_text(k, "--cp-comm-type", types.front(), true));
  for (const auto& t : types)
    if (must<CpCommType>(kCpCommTypeNames, parse_knob_text(k, "--cp-comm-type", t, true)) != s.cp_comm_type)
      throw UsageError(
          fmt::format("--cp-comm-type: per-layer lists of different types ('{}' and '{}') are not "
                      "modelled; give one type for every layer",
                      types.front(), t));
  // arguments.py validate_args: a2a+p2p needs the two levels' sizes (whose product is CP, checked
  // in setup_from_megatron_args once CP is read).
  if (s.cp_comm_type == CpCommType::kA2AP2P && !given(a, "hierarchical-context-parallel-sizes"))
    throw UsageError(
        "--cp-comm-type a2a+p2p without --hierarchical-context-parallel-sizes: Megatron-LM refuses it "
        "(arguments.py: --hierarchical-context-parallel-sizes must be set when a2a+p2p is used in cp comm)");
}

// Megatron-LM's checks of a launch line that need several of its flags read first (arguments.py,
// transformer_config.py); setup_from_megatron_args calls it last.
inline void check_megatron_prerequisites(const MegatronArgs& a, const TrainingSetup& s) {
  // arguments.py validate_args: removed flags it refuses (assert ... is None; exit() for
  // --checkpoint-activations), with what replaces each.
  constexpr std::pair<const char*, const char*> kRemoved[] = {
      {"batch-size", "--micro-batch-size"},
      {"warmup", "--lr-warmup-fraction"},
      {"model-parallel-size", "--tensor-model-parallel-size"},
      {"checkpoint-activations", "--recompute-activations, or --recompute-granularity and --recompute-method"}};
  for (const auto& [removed, instead] : kRemoved)
    if (a.has(removed) && (std::string_view(removed) != "checkpoint-activations" || a.enabled(removed)))
      throw UsageError(fmt::format("--{}: Megatron-LM refuses it (arguments.py: --{} is no longer valid, use {})",
                                   removed, removed, instead));
  if (const auto sizes = a.value("hierarchical-context-parallel-sizes")) {
    // arguments.py: context_parallel_size == prod(hierarchical_context_parallel_sizes).
    std::int64_t product = 1;
    for (const std::string& word : split(*sizes, ' ', EmptyItems::kSkip)) {
      const auto n = parse_integer(word);
      if (!n || *n <= 0 || *n > kMaxParallelSize || product > kMaxParallelSize)
        throw UsageError(fmt::format(
            "--hierarchical-context-parallel-sizes: expected positive integers up to 2^20, got '{}'", *sizes));
      product *= *n;
    }
    if (product != s.parallel.cp)
      throw UsageError(
          fmt::format("--hierarchical-context-parallel-sizes {} multiply to {}, not the context parallel "
                      "size {}: Megatron-LM refuses it (arguments.py)",
                      *sizes, product, s.parallel.cp));
  }
  // Flags mme does not model (their assumption lines say so) whose prerequisites Megatron-LM
  // checks: arguments.py and transformer_config.py for the delayed weight gradients and the saved
  // activations distributed over TP, arguments.py for the interleaved schedule without p2p overlap
  // and the parameter all-gather overlapped with the optimizer step.
  if (a.enabled("delay-wgrad-compute") && !s.transformer_engine)
    throw UsageError(
        "--delay-wgrad-compute with --transformer-impl local: Megatron-LM refuses it (arguments.py: Delaying wgrad "
        "compute is only supported with transformer_engine implementation)");
  if (a.enabled("delay-wgrad-compute") && !s.comm.ep_overlap)
    throw UsageError(
        "--delay-wgrad-compute without --overlap-moe-expert-parallel-comm: Megatron-LM refuses it "
        "(transformer_config.py: overlap_moe_expert_parallel_comm must be enabled when enabling "
        "delay_wgrad_compute)");
  // arguments.py and transformer_config.py: --distribute-saved-activations (not modelled) spreads
  // full recompute's checkpointed inputs over TP, without sequence parallelism.
  if (a.enabled("distribute-saved-activations")) {
    if (s.parallel.tp <= 1 || s.recompute.granularity != RecomputeGranularity::kFull)
      throw UsageError(
          "--distribute-saved-activations needs --tensor-model-parallel-size > 1 and --recompute-granularity full: "
          "Megatron-LM refuses it otherwise (arguments.py)");
    if (sequence_parallel_on(s.parallel))
      throw UsageError(
          "--distribute-saved-activations with --sequence-parallel: Megatron-LM refuses it (transformer_config.py: "
          "distribute_saved_activations must be false when sequence parallel is enabled)");
  }
  // arguments.py: the interleaved schedule without --overlap-p2p-communication (on by default)
  // needs more than two pipeline stages.
  if (a.enabled("no-overlap-p2p-communication") && s.parallel.pp == 2 &&
      (s.parallel.vpp > 1 || s.pipeline.layers_per_virtual_stage))
    throw UsageError(
        "--no-overlap-p2p-communication with virtual pipeline stages over --pipeline-model-parallel-size 2: "
        "Megatron-LM refuses it (arguments.py: pipeline-model-parallel size should be greater than 2 to avoid "
        "having multiple p2p sends and recvs between same 2 ranks per communication batch)");
  if (a.enabled("overlap-param-gather-with-optimizer-step") &&
      (!s.optimizer.distributed || !s.comm.overlap_param_gather ||
       (s.parallel.vpp <= 1 && !s.pipeline.layers_per_virtual_stage && s.pipeline.layout.empty())))
    throw UsageError(
        "--overlap-param-gather-with-optimizer-step needs the distributed optimizer, --overlap-param-gather and "
        "the interleaved schedule (virtual pipeline stages): Megatron-LM refuses it otherwise (arguments.py)");
}

inline void megatron_env(const MegatronArgs& a, TrainingSetup& s) {
  for (const auto& [n, v] : a.env()) add_environment(s, n, v);
}

// ---- mme command-line rules -------------------------------------------------------------------------

inline void mme_recompute_method(TrainingSetup& s, const J& v, const MmeFlags&) {
  s.recompute.method = must<RecomputeMethod>(kRecomputeMethodNames, v);
  if (!full_recompute(s)) throw UsageError("--recompute-method needs --recompute-granularity full");
}

inline void mme_recompute_modules(TrainingSetup& s, const J& v, const MmeFlags&) {
  auto& r = s.recompute;
  r.modules = modules_of(v);
  if (r.granularity == RecomputeGranularity::kNone) r.granularity = RecomputeGranularity::kSelective;
  if (r.granularity == RecomputeGranularity::kFull)
    throw UsageError("--recompute-modules applies to --recompute-granularity selective, not full");
}

inline void mme_use_torch_fsdp2(TrainingSetup& s, const J& v, const MmeFlags& flags) {
  if (!v.get<bool>()) return;
  if (flags.on("use-megatron-fsdp")) throw UsageError("--use-megatron-fsdp and --use-torch-fsdp2 exclude each other");
  if (flags.on("use-distributed-optimizer"))
    throw UsageError("--use-torch-fsdp2 is not supported with --use-distributed-optimizer (Megatron-LM refuses it)");
  // FSDP2 replaces the distributed optimizer and needs separate weight gradients (arguments.py).
  s.fsdp.kind = FsdpKind::kTorchFsdp2;
  s.optimizer.distributed = false;
  s.gradient_accumulation_fusion = false;
}

inline void check_cublas(const std::string& text, std::string_view) { (void)parse_cublas_workspace_config(text); }

// The sections of the table, in spec-file order (setup_knobs_layout.cpp, setup_knobs_training.cpp,
// setup_knobs_offload.cpp).
void add_tensor_and_pipeline_knobs(std::vector<SetupKnob>& k);
void add_expert_and_context_knobs(std::vector<SetupKnob>& k);
void add_batch_knobs(std::vector<SetupKnob>& k);
void add_sharding_knobs(std::vector<SetupKnob>& k);
void add_sharding_detail_knobs(std::vector<SetupKnob>& k);
void add_optimizer_and_recompute_knobs(std::vector<SetupKnob>& k);
void add_offload_knobs(std::vector<SetupKnob>& k);  // setup_knobs_offload.cpp
void add_lora_knobs(std::vector<SetupKnob>& k);     // setup_knobs_lora.cpp
void add_moe_knobs(std::vector<SetupKnob>& k);
void add_communication_knobs(std::vector<SetupKnob>& k);  // setup_knobs_comm.cpp
void add_graph_knobs(std::vector<SetupKnob>& k);          // setup_knobs_graphs.cpp
void add_kernel_knobs(std::vector<SetupKnob>& k);
void add_implementation_knobs(std::vector<SetupKnob>& k);
void add_infrastructure_knobs(std::vector<SetupKnob>& k);
void add_precision_knobs(std::vector<SetupKnob>& k);
void add_low_precision_knobs(std::vector<SetupKnob>& k);  // called by add_precision_knobs
void add_model_override_knobs(std::vector<SetupKnob>& k);

}  // namespace mme::setup_knobs_detail
