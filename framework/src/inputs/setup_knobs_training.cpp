// The knobs of the optimizer, recompute, MoE, kernels, the machine and the precision: the second
// part of the setup schema's table (setup_schema.hpp), in spec-file order.
#include "setup_knobs.hpp"

namespace mme::setup_knobs_detail {

// The optimizer and its offload, activation recompute, vocabulary padding.
void add_optimizer_and_recompute_knobs(std::vector<SetupKnob>& k) {
  using K = KnobKind;
  using S = TrainingSetup;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };

  add({.id = "optimizer",
       .kind = K::kEnum,
       .flag = "optimizer",
       .help = "adam (default) | sgd | muon",
       .doc_value = "O",
       .doc = "`adam`, `sgd`, `muon`",
       .doc_default = "adam",
       .table = kOptimizerNames,
       .values = {"adam", "sgd", "muon"},
       .megatron = {"optimizer"},
       .megatron_read = megatron_optimizer,
       .spec_section = "training",
       .spec_name = "optimizer",
       .spec_default = "adam",
       .spec_summary = "optimizer",
       .json_key = "optimizer",
       .get = [](const S& s) { return J(s.optimizer.name); },
       .set = [](S& s, const J& v) { s.optimizer.name = enum_name(kOptimizerNames, must<int>(kOptimizerNames, v)); }});
  add({.id = "use-precision-aware-optimizer",
       .kind = K::kBool,
       .flag = "use-precision-aware-optimizer",
       .help = "TE FusedAdam with the dtypes of --main-params/--exp-avg(-sq)-dtype",
       .doc = "TE FusedAdam with the dtypes of `--main-params-dtype`, `--exp-avg-dtype`, `--exp-avg-sq-dtype`",
       .megatron = {"use-precision-aware-optimizer"},
       .megatron_default = J(false),
       .spec_section = "training",
       .spec_name = "use_precision_aware_optimizer",
       .spec_default = "false",
       .spec_summary = "TE FusedAdam with the dtypes of the precision section",
       .json_key = "use_precision_aware_optimizer",
       .get = [](const S& s) { return J(s.optimizer.precision_aware); },
       .set = [](S& s, const J& v) { s.optimizer.precision_aware = v.get<bool>(); }});
  add({.id = "optimizer-cpu-offload-fraction",
       .kind = K::kNumber,
       .flag = "optimizer-cpu-offload-fraction",
       .aliases = {"optimizer-offload-fraction"},
       .help = "fraction of optimizer state kept on the host",
       .doc_value = "F",
       .doc = "fraction of optimizer state kept on the host, 0 to 1",
       .doc_default = "0",
       .lo = kOffloadFractionRange.lo,
       .hi = kOffloadFractionRange.hi,
       .megatron = {"optimizer-offload-fraction"},
       .megatron_read = megatron_cpu_offload,
       .megatron_extra = {"optimizer-cpu-offload"},
       .spec_section = "training",
       .spec_name = "optimizer_cpu_offload_fraction",
       .spec_default = "0.0",
       .spec_summary = "share of optimizer state kept on the host",
       .json_key = "optimizer_cpu_offload_fraction",
       .get = [](const S& s) { return J(s.optimizer.cpu_offload_fraction); },
       .set = [](S& s, const J& v) { s.optimizer.cpu_offload_fraction = v.get<double>(); }});
  add({.id = "recompute-granularity",
       .kind = K::kEnum,
       .flag = "recompute-granularity",
       .help = "activation recompute: full | selective",
       .doc_value = "G",
       .doc = "activation recompute: `full`, `selective` (also `none`)",
       .doc_default = "none",
       .table = kRecomputeGranularityNames,
       .values = {"full", "selective"},
       .null_name = "none",
       .megatron = {"recompute-granularity"},
       .megatron_read = megatron_recompute_granularity,
       .megatron_extra = {"recompute-activations"},
       .spec_section = "training",
       .spec_name = "recompute_granularity",
       .spec_default = "null",
       .spec_summary = "activation recomputation: null (none), full or selective",
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
  add({.id = "recompute-method",
       .kind = K::kEnum,
       .flag = "recompute-method",
       .help = "full recompute method: uniform (default) | block",
       .doc_value = "M",
       .doc = "full recompute method: `uniform`, `block` (needs `--recompute-granularity full`)",
       .doc_default = "uniform",
       .table = kRecomputeMethodNames,
       .values = {"uniform", "block"},
       .megatron = {"recompute-method"},
       .spec_section = "training",
       .spec_name = "recompute_method",
       .spec_default = "null (uniform)",
       .spec_summary = "full recompute: uniform groups, or the first N layers per chunk",
       .spec_get = [](const S& s) { return full_recompute(s) ? name(kRecomputeMethodNames, s.recompute.method) : J(); },
       .json_key = "recompute_method",
       .args_when = full_recompute,
       .get = [](const S& s) { return name(kRecomputeMethodNames, s.recompute.method); },
       .set = [](S& s, const J& v) { s.recompute.method = must<RecomputeMethod>(kRecomputeMethodNames, v); },
       .mme_set = mme_recompute_method});
  add({.id = "recompute-num-layers",
       .kind = K::kInt,
       .flag = "recompute-num-layers",
       .help = "layers per recompute group (uniform) or recomputed layers per chunk (block); default 1",
       .doc_value = "N",
       .doc = "layers per recompute group (uniform) or recomputed layers per chunk (block)",
       .doc_default = "1",
       // 0 is read: full block recompute of 0 layers recomputes none (resolve_setup refuses it
       // with uniform).
       .min = 0,
       .max = kMaxParallelSize,
       .megatron = {"recompute-num-layers"},
       .spec_section = "training",
       .spec_name = "recompute_num_layers",
       // The guide writes 0 for "no recompute"; with full recompute the reader refuses it.
       .spec_min = 0,
       .spec_default = "null (1)",
       .spec_summary = "full recompute: layers per group (uniform) or per chunk (block)",
       .spec_get = [](const S& s) { return full_recompute(s) ? J(s.recompute.num_layers) : J(); },
       .json_key = "recompute_num_layers",
       .args_when = full_recompute,
       .get = [](const S& s) { return J(s.recompute.num_layers); },
       .set = [](S& s, const J& v) { s.recompute.num_layers = as_int(v); }});
  add({.id = "recompute-modules",
       .kind = K::kModules,
       .flag = "recompute-modules",
       .help = "selective recompute modules, comma separated: core_attn (default), mlp, moe, moe_act, layernorm, "
               "mla_up_proj, shared_experts",
       .doc_value = "LIST",
       .doc = "selective recompute modules, comma separated: `core_attn`, `mlp`, `moe`, `moe_act`, `layernorm`, "
              "`mla_up_proj`, `shared_experts` (implies selective; refused with full)",
       .doc_default = "core_attn",
       .megatron = {"recompute-modules"},
       .megatron_read = megatron_recompute_modules,
       .megatron_extra = {"moe-layer-recompute"},
       .spec_section = "training",
       .spec_name = "recompute_modules",
       .spec_default = "[core_attn]",
       .spec_summary = "selective recompute: core_attn, mlp, moe, moe_act, layernorm, mla_up_proj, shared_experts",
       .spec_get = [](const S& s) { return selective_recompute(s) ? modules_list(s.recompute.modules) : J(); },
       .json_key = "recompute_modules",
       .args_when = selective_recompute,
       .get = [](const S& s) { return J(recompute_modules_to_string(s.recompute.modules)); },
       .set = [](S& s, const J& v) { s.recompute.modules = modules_of(v); },
       .mme_set = mme_recompute_modules});
  add({.id = "make-vocab-size-divisible-by",
       .kind = K::kInt,
       .flag = "make-vocab-size-divisible-by",
       .help = "vocabulary padding multiple before x TP (default 128)",
       .doc_value = "N",
       .doc = "vocabulary padding multiple before x TP",
       .doc_default = "128",
       .max = kMaxSequenceSize,
       .megatron = {"make-vocab-size-divisible-by"},
       .megatron_read = megatron_vocab_padding,
       .spec_section = "training",
       .spec_name = "make_vocab_size_divisible_by",
       .spec_default = "128",
       .spec_summary = "vocabulary padding multiple (times TP)",
       .json_key = "make_vocab_size_divisible_by",
       .get = [](const S& s) { return J(s.make_vocab_size_divisible_by); },
       .set = [](S& s, const J& v) { s.make_vocab_size_divisible_by = as_int(v); }});
}

// The MoE dispatcher, capacity and routing.
void add_moe_knobs(std::vector<SetupKnob>& k) {
  using K = KnobKind;
  using S = TrainingSetup;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };

  add({.id = "moe-token-dispatcher",
       .kind = K::kEnum,
       .flag = "moe-token-dispatcher",
       .aliases = {"moe-token-dispatcher-type"},
       .help = "alltoall (default) | allgather | flex",
       .doc_value = "D",
       .doc = "`alltoall`, `allgather`, `flex`",
       .doc_default = "alltoall",
       .table = kTokenDispatcherNames,
       .values = {"alltoall", "allgather", "flex"},
       .megatron = {"moe-token-dispatcher-type"},
       .megatron_default = J("allgather"),
       .spec_section = "training",
       .spec_name = "moe_token_dispatcher_type",
       .spec_default = "alltoall",
       .spec_summary = "MoE token dispatcher",
       .json_key = "moe_token_dispatcher",
       .get = [](const S& s) { return name(kTokenDispatcherNames, s.dispatcher); },
       .set = [](S& s, const J& v) { s.dispatcher = must<TokenDispatcher>(kTokenDispatcherNames, v); }});
  add({.id = "moe-capacity-factor",
       .kind = K::kNumber,
       .flag = "moe-capacity-factor",
       .aliases = {"moe-expert-capacity-factor"},
       .help = "MoE expert capacity factor (default: dropless)",
       .doc_value = "F",
       .doc = "MoE expert capacity factor",
       .doc_default = "dropless",
       .lo = kCapacityFactorRange.lo,
       .hi = kCapacityFactorRange.hi,
       .lo_open = kCapacityFactorRange.lo_open,
       .megatron = {"moe-expert-capacity-factor"},
       .megatron_read = megatron_capacity_factor,
       .spec_section = "training",
       .spec_name = "moe_expert_capacity_factor",
       .spec_default = "null",
       .spec_summary = "MoE capacity factor; null = dropless",
       .json_key = "moe_capacity_factor",
       .get = [](const S& s) { return opt(s.moe_capacity_factor); },
       .set = [](S& s, const J& v) { s.moe_capacity_factor = as_opt_double(v); }});
  add({.id = "moe-pad-expert-input-to-capacity",
       .kind = K::kBool,
       .flag = "moe-pad-expert-input-to-capacity",
       .help = "pad every expert's input to its capacity",
       .doc = "pad every expert's input to its capacity",
       .megatron = {"moe-pad-expert-input-to-capacity"},
       .megatron_default = J(false),
       .spec_section = "training",
       .spec_name = "moe_pad_expert_input_to_capacity",
       .spec_default = "false",
       .spec_summary = "pad every expert's input to its capacity",
       .json_key = "moe_pad_expert_input_to_capacity",
       .get = [](const S& s) { return J(s.moe_pad_to_capacity); },
       .set = [](S& s, const J& v) { s.moe_pad_to_capacity = v.get<bool>(); }});
  add({.id = "moe-router-force-load-balancing",
       .kind = K::kBool,
       .flag = "moe-router-force-load-balancing",
       .help = "random router logits: tokens routed independently and evenly (benchmarking)",
       .doc = "random router logits (router.py, moe_utils.py apply_random_logits): the upper bound's routing "
              "imbalance is then the chance excess of independent per-token routing, not --moe-routing-imbalance's "
              "default",
       .megatron = {"moe-router-force-load-balancing"},
       .megatron_default = J(false),
       .spec_section = "training",
       .spec_name = "moe_router_force_load_balancing",
       .spec_default = "false",
       .spec_summary = "random router logits: independent, even routing",
       .json_key = "moe_router_force_load_balancing",
       .get = [](const S& s) { return J(s.moe_force_load_balancing); },
       .set = [](S& s, const J& v) { s.moe_force_load_balancing = v.get<bool>(); }});
  add({.id = "moe-routing-imbalance",
       .kind = K::kNumber,
       .flag = "moe-routing-imbalance",
       .help = "tokens on the busiest expert rank / its even share, for the upper bound (default 1.25)",
       .doc_value = "F",
       .doc = "busiest expert rank's tokens / its even share, for the upper bound (1 to 1024)",
       .doc_default = "1.25",
       .lo = kRoutingImbalanceRange.lo,
       .hi = kRoutingImbalanceRange.hi,
       .spec_section = "training",
       .spec_name = "moe_routing_imbalance",
       .spec_default = "null (1.25)",
       .spec_summary = "for the upper bound: tokens on the busiest expert rank / its even share",
       .json_key = "moe_routing_imbalance",
       .get = [](const S& s) { return opt(s.moe_routing_imbalance); },
       .set = [](S& s, const J& v) { s.moe_routing_imbalance = as_opt_double(v); },
       .why_not = "Megatron-LM: mme's own assumption for the upper bound; Megatron-LM routes tokens, it has no "
                  "such setting"});
  add({.id = "moe-grouped-gemm",
       .kind = K::kBool,
       .flag = "moe-grouped-gemm",
       .help = "grouped GEMM experts, TEGroupedMLP (the default)",
       .off_flag = "no-moe-grouped-gemm",
       .off_help = "one GEMM per local expert (SequentialMLP)",
       .doc = "grouped GEMM experts, TEGroupedMLP (the default)",
       .off_doc = "one GEMM per local expert (SequentialMLP)",
       .megatron = {"moe-grouped-gemm"},
       .megatron_default = J(false),
       .spec_section = "training",
       .spec_name = "moe_grouped_gemm",
       .spec_default = "true",
       .spec_summary = "grouped GEMM experts (TEGroupedMLP); false = SequentialMLP",
       .json_key = "moe_grouped_gemm",
       .get = [](const S& s) { return J(s.moe_grouped_gemm); },
       .set = [](S& s, const J& v) { s.moe_grouped_gemm = v.get<bool>(); }});
}

// Fusions and kernels.
void add_kernel_knobs(std::vector<SetupKnob>& k) {
  using K = KnobKind;
  using S = TrainingSetup;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };

  add({.id = "cross-entropy-loss-fusion",
       .kind = K::kBool,
       .flag = "cross-entropy-loss-fusion",
       .help = "fused cross entropy (it still keeps the fp32 softmax for backward)",
       .doc = "fused cross entropy (it still keeps the fp32 softmax for backward)",
       .megatron = {"cross-entropy-loss-fusion"},
       .megatron_default = J(false),
       .spec_section = "training",
       .spec_name = "cross_entropy_loss_fusion",
       .spec_default = "false",
       .spec_summary = "fused cross entropy (it still keeps the fp32 softmax)",
       .json_key = "cross_entropy_loss_fusion",
       .get = [](const S& s) { return J(s.cross_entropy_fusion); },
       .set = [](S& s, const J& v) { s.cross_entropy_fusion = v.get<bool>(); }});
  add({.id = "cross-entropy-fusion-impl",
       .kind = K::kEnum,
       .flag = "cross-entropy-fusion-impl",
       .help = "with --cross-entropy-loss-fusion: native (default) | te",
       .doc_value = "I",
       .doc = "with `--cross-entropy-loss-fusion`: `native` or `te`",
       .doc_default = "native",
       .table = kCrossEntropyImplNames,
       .values = {"native", "te"},
       .megatron = {"cross-entropy-fusion-impl"},
       .spec_section = "training",
       .spec_name = "cross_entropy_fusion_impl",
       .spec_default = "native",
       .spec_summary = "with cross_entropy_loss_fusion: Megatron's own kernel (native) or Transformer Engine's (te)",
       .json_key = "cross_entropy_fusion_impl",
       .get = [](const S& s) { return J(enum_name(kCrossEntropyImplNames, s.cross_entropy_te ? 1 : 0)); },
       .set = [](S& s, const J& v) { s.cross_entropy_te = must<int>(kCrossEntropyImplNames, v) == 1; }});
  add({.id = "attention-backend",
       .kind = K::kEnum,
       .flag = "attention-backend",
       .help = "auto (default: Transformer Engine's choice) | flash (flash-attn) | fused (cuDNN) | unfused (or local)",
       .doc_value = "B",
       .doc = "`auto` (Transformer Engine's choice, docs/memory-model.md), `flash` (flash-attn), `fused` (cuDNN fused "
              "attention) or `unfused` (also `local`)",
       .doc_default = "auto",
       .table = kAttentionBackendNames,
       .values = {"auto", "flash", "fused", "unfused", "local"},
       .megatron = {"attention-backend"},
       .spec_section = "training",
       .spec_name = "attention_backend",
       .spec_default = "auto",
       .spec_summary = "auto (Transformer Engine's choice), flash (flash-attn), fused (cuDNN) or unfused (also local)",
       .json_key = "attention_backend",
       .get = [](const S& s) { return name(kAttentionBackendNames, s.attention_backend); },
       .set = [](S& s, const J& v) { s.attention_backend = must<AttentionBackend>(kAttentionBackendNames, v); }});
  add({.id = "masked-softmax-fusion",
       .kind = K::kBool,
       .off_flag = "no-masked-softmax-fusion",
       .off_help = "Megatron's local attention softmax without its fused kernel",
       .off_doc = "Megatron's local attention softmax without its fused kernel",
       .megatron_off = {"no-masked-softmax-fusion"},
       .spec_section = "training",
       .spec_name = "masked_softmax_fusion",
       .spec_default = "true",
       .spec_summary = "Megatron's local attention softmax with its fused kernel",
       .json_key = "masked_softmax_fusion",
       .get = [](const S& s) { return J(s.masked_softmax_fusion); },
       .set = [](S& s, const J& v) { s.masked_softmax_fusion = v.get<bool>(); }});
  // Megatron-LM's fused kernels that change what autograd saves (docs/memory-model.md, "Fusions").
  add({.id = "bias-swiglu-fusion",
       .kind = K::kBool,
       .off_flag = "no-bias-swiglu-fusion",
       .off_help = "SwiGLU in torch ops: the MLPs and experts also keep act(x_glu)",
       .off_doc = "SwiGLU in torch ops (`glu()` in mlp.py, experts.py): the MLPs and experts also keep act(x_glu)",
       .megatron_off = {"no-bias-swiglu-fusion"},
       .spec_section = "training",
       .spec_name = "bias_swiglu_fusion",
       .spec_default = "true",
       .spec_summary = "SwiGLU with Megatron's fused bias_swiglu kernel (false: torch ops keep act(x_glu) too)",
       .json_key = "bias_swiglu_fusion",
       .get = [](const S& s) { return J(s.bias_swiglu_fusion); },
       .set = [](S& s, const J& v) { s.bias_swiglu_fusion = v.get<bool>(); }});
  add({.id = "bias-gelu-fusion",
       .kind = K::kBool,
       .off_flag = "no-bias-gelu-fusion",
       .off_help = "GeLU in torch ops (a gated GeLU also keeps act(x_glu); plain GeLU keeps the same)",
       .off_doc = "GeLU in torch ops: a gated GeLU also keeps act(x_glu); a plain GeLU keeps the same tensor",
       .megatron_off = {"no-bias-gelu-fusion"},
       .spec_section = "training",
       .spec_name = "bias_gelu_fusion",
       .spec_default = "true",
       .spec_summary = "GeLU with Megatron's fused bias_gelu / bias_geglu kernel (needs add_bias_linear)",
       .json_key = "bias_gelu_fusion",
       .get = [](const S& s) { return J(s.bias_gelu_fusion); },
       .set = [](S& s, const J& v) { s.bias_gelu_fusion = v.get<bool>(); }});
  add({.id = "use-fused-weighted-squared-relu",
       .kind = K::kBool,
       .flag = "use-fused-weighted-squared-relu",
       .help = "squared-ReLU experts in Megatron's fused weighted kernel (keeps fc1's output and the probabilities)",
       .doc = "squared-ReLU experts in Megatron-LM's fused weighted kernel (fused_weighted_squared_relu.py): "
              "they keep fc1's output and the routing probabilities, not the unscaled activation too",
       .megatron = {"use-fused-weighted-squared-relu"},
       .megatron_default = J(false),
       .spec_section = "training",
       .spec_name = "use_fused_weighted_squared_relu",
       .spec_default = "false",
       .spec_summary = "squared-ReLU experts in Megatron's fused weighted kernel",
       .json_key = "use_fused_weighted_squared_relu",
       .get = [](const S& s) { return J(s.fused_weighted_squared_relu); },
       .set = [](S& s, const J& v) { s.fused_weighted_squared_relu = v.get<bool>(); }});
  add({.id = "rope-fusion",
       .kind = K::kBool,
       .off_flag = "no-rope-fusion",
       .off_help = "rotary embedding in torch ops: each layer keeps its cos/sin tables for Q and K",
       .off_doc = "rotary embedding in torch ops (`_apply_rotary_pos_emb_bshd`): each layer keeps its cos and "
                  "sin tables for Q and K",
       .megatron_off = {"no-rope-fusion"},
       .spec_section = "training",
       .spec_name = "apply_rope_fusion",
       .spec_default = "true",
       .spec_summary = "rotary embedding with Transformer Engine's fused kernel (false: per-layer cos/sin tables)",
       .json_key = "apply_rope_fusion",
       .get = [](const S& s) { return J(s.apply_rope_fusion); },
       .set = [](S& s, const J& v) { s.apply_rope_fusion = v.get<bool>(); }});
  add({.id = "bias-dropout-fusion",
       .kind = K::kBool,
       .off_flag = "no-bias-dropout-fusion",
       .off_help = "bias-dropout-add in eager torch ops (it keeps the same dropout mask: no memory effect)",
       .off_doc = "bias-dropout-add in eager torch ops: it keeps the same 1-byte dropout mask, so no memory effect",
       .megatron_off = {"no-bias-dropout-fusion"},
       // A launch line means Megatron-LM's default, on, whatever the model (which it may refuse).
       .megatron_default = J(true),
       .spec_section = "training",
       .spec_name = "bias_dropout_fusion",
       .spec_default = "true",
       .spec_summary = "bias-dropout-add compiled (false: eager; the same tensors are kept either way)",
       .spec_get = [](const S& s) { return J(s.bias_dropout_fusion.value_or(true)); },
       .json_key = "bias_dropout_fusion",
       .json_get = [](const S& s) { return J(s.bias_dropout_fusion.value_or(true)); },
       .get = [](const S& s) { return s.bias_dropout_fusion ? J(*s.bias_dropout_fusion) : J(); },
       .set =
           [](S& s, const J& v) {
             s.bias_dropout_fusion = v.is_null() ? std::nullopt : std::optional<bool>(v.get<bool>());
           }});
  add({.id = "attention-softmax-in-fp32",
       .kind = K::kBool,
       .flag = "attention-softmax-in-fp32",
       .help = "Megatron's local attention softmax in fp32 (also --apply-query-key-layer-scaling)",
       .doc = "Megatron's local attention softmax in fp32 (also `--apply-query-key-layer-scaling`)",
       // arguments.py: --apply-query-key-layer-scaling also sets attention_softmax_in_fp32.
       .megatron = {"attention-softmax-in-fp32", "apply-query-key-layer-scaling"},
       .megatron_default = J(false),
       .spec_section = "training",
       .spec_name = "attention_softmax_in_fp32",
       .spec_default = "false",
       .spec_summary = "Megatron's local attention softmax in fp32",
       .json_key = "attention_softmax_in_fp32",
       .get = [](const S& s) { return J(s.attention_softmax_in_fp32); },
       .set = [](S& s, const J& v) { s.attention_softmax_in_fp32 = v.get<bool>(); }});
}

// The implementation of the layers and the weight gradients' paths (TE or local, the
// gradient-accumulation fusion, the deferred embedding and weight gradients).
void add_implementation_knobs(std::vector<SetupKnob>& k) {
  using K = KnobKind;
  using S = TrainingSetup;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };

  add({.id = "transformer-impl",
       .kind = K::kEnum,
       .flag = "transformer-impl",
       .help = "transformer_engine (default) | local (Megatron's own layers, unfused attention)",
       .doc_value = "I",
       .doc = "`transformer_engine` or `local` (Megatron's own layers, unfused attention)",
       .doc_default = "transformer_engine",
       .table = kTransformerImplNames,
       .values = {"transformer_engine", "local"},
       .megatron = {"transformer-impl"},
       .spec_section = "training",
       .spec_name = "transformer_impl",
       .spec_default = "transformer_engine",
       .spec_summary = "Transformer Engine layers, or Megatron's own (local)",
       .json_key = "transformer_impl",
       .get = [](const S& s) { return J(enum_name(kTransformerImplNames, s.transformer_engine ? 1 : 0)); },
       .set = [](S& s, const J& v) { s.transformer_engine = must<int>(kTransformerImplNames, v) == 1; }});
  add({.id = "gradient-accumulation-fusion",
       .kind = K::kBool,
       .off_flag = "no-gradient-accumulation-fusion",
       .off_help = "weight gradients as separate tensors, added to main_grad after each GEMM",
       .off_doc = "weight gradients as separate tensors, added to main_grad after each GEMM",
       .megatron_off = {"no-gradient-accumulation-fusion"},
       .spec_section = "training",
       .spec_name = "gradient_accumulation_fusion",
       .spec_default = "true",
       .spec_summary = "weight gradients accumulated into main_grad by the GEMM (false with use_torch_fsdp2)",
       .json_key = "gradient_accumulation_fusion",
       // FSDP2 implies it (its flag says so).
       .args_when = [](const S& s) { return !torch_fsdp2(s); },
       .get = [](const S& s) { return J(s.gradient_accumulation_fusion); },
       .set = [](S& s, const J& v) { s.gradient_accumulation_fusion = v.get<bool>(); }});
  add({.id = "defer-embedding-wgrad-compute",
       .kind = K::kBool,
       .flag = "defer-embedding-wgrad-compute",
       .help = "the output layer's weight gradients wait for the pipeline flush",
       .doc = "the output layer's weight gradients wait for the pipeline flush (needs `--pp` > 1)",
       .megatron = {"defer-embedding-wgrad-compute"},
       .megatron_default = J(false),
       .spec_section = "training",
       .spec_name = "defer_embedding_wgrad_compute",
       .spec_default = "false",
       .spec_summary = "the output layer's weight gradients wait for the pipeline flush (needs PP > 1)",
       .json_key = "defer_embedding_wgrad_compute",
       .get = [](const S& s) { return J(s.defer_embedding_wgrad); },
       .set = [](S& s, const J& v) { s.defer_embedding_wgrad = v.get<bool>(); }});
  add({.id = "wgrad-deferral-limit",
       .kind = K::kInt,
       .flag = "wgrad-deferral-limit",
       .help = "with --defer-embedding-wgrad-compute: micro-batches deferred (default 0: all)",
       .doc_value = "N",
       .doc = "with `--defer-embedding-wgrad-compute`: micro-batches deferred (0: all)",
       .doc_default = "0",
       .min = 0,
       .max = kMaxWorldSize,
       .megatron = {"wgrad-deferral-limit"},
       .spec_section = "training",
       .spec_name = "wgrad_deferral_limit",
       .spec_default = "0",
       .spec_summary = "with defer_embedding_wgrad_compute: micro-batches deferred (0: all)",
       .json_key = "wgrad_deferral_limit",
       .get = [](const S& s) { return J(s.wgrad_deferral_limit); },
       .set = [](S& s, const J& v) { s.wgrad_deferral_limit = as_int(v); }});
}

// The GPU count, cuBLAS workspaces, deterministic mode, the environment.
void add_infrastructure_knobs(std::vector<SetupKnob>& k) {
  using K = KnobKind;
  using S = TrainingSetup;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };
  add({.id = "create-attention-mask-in-dataloader",
       .kind = K::kBool,
       .flag = "create-attention-mask-in-dataloader",
       .help = "the dataloader's dense bool [b, 1, s, s] attention mask on the GPU (Megatron-LM's default)",
       .off_flag = "no-create-attention-mask-in-dataloader",
       .off_help = "no dataloader attention mask (mme's default)",
       .doc = "the dataloader's dense bool `[b, 1, s/CP, s]` attention mask on the first and last stages, kept per "
              "micro-batch by the recompute checkpoints (Megatron-LM's default; mme's is off)",
       .off_doc = "no dataloader attention mask (mme's default)",
       .megatron_off = {"no-create-attention-mask-in-dataloader"},
       .megatron_default = J(true),
       .spec_section = "training",
       .spec_name = "create_attention_mask_in_dataloader",
       .spec_default = "false",
       .spec_summary = "the dataloader's dense causal attention mask on the GPU (Megatron-LM's default is true)",
       .json_key = "create_attention_mask_in_dataloader",
       .get = [](const S& s) { return J(s.create_attention_mask); },
       .set = [](S& s, const J& v) { s.create_attention_mask = v.get<bool>(); }});

  // infrastructure ------------------------------------------------------------------------------
  add({.id = "num-gpus",
       .kind = K::kInt,
       .flag = "num-gpus",
       .aliases = {"world-size"},
       .help = "total GPUs (default 8, or the smallest count the layout allows)",
       .doc_value = "N",
       .doc = "total GPUs",
       .doc_default = "8 when TP x PP x CP and ETP x EP x PP divide it, else the smallest count they both divide (the "
                      "report says which)",
       .max = kMaxWorldSize,
       // Megatron-LM has no flag for it: the launcher's count (launch_script.hpp).
       .megatron_read = megatron_world_size,
       .spec_section = "infrastructure",
       .spec_name = "world_size",
       .spec_required = true,
       .spec_default = "required",
       .spec_summary = "total GPUs; must satisfy the parallelism constraints",
       .json_key = "num_gpus",
       .args_always = true,
       .get = [](const S& s) { return J(s.parallel.world_size); },
       .set = [](S& s, const J& v) { s.parallel.world_size = as_int(v); },
       .why_not = "Megatron-LM has no flag for it: the launcher's GPU count (torchrun --nproc_per_node x --nnodes, "
                  "srun's tasks, an exported WORLD_SIZE)"});
  add({.id = "cublas-workspace-config",
       .kind = K::kString,
       .flag = "cublas-workspace-config",
       .help = "CUBLAS_WORKSPACE_CONFIG of the run, e.g. :4096:8 (default: PyTorch's default)",
       .doc_value = "C",
       .doc = "`CUBLAS_WORKSPACE_CONFIG` of the run, e.g. `:4096:8`",
       .doc_default = "PyTorch's default",
       .check = check_cublas,
       .spec_section = "infrastructure",
       .spec_name = "cublas_workspace_config",
       .spec_default = "null",
       .spec_summary = "CUBLAS_WORKSPACE_CONFIG of the run, e.g. \":4096:8\"",
       .json_key = "cublas_workspace_config",
       .get = [](const S& s) { return text_or_null(s.cublas_workspace_config); },
       .set = [](S& s, const J& v) { s.cublas_workspace_config = v.is_null() ? "" : v.get<std::string>(); },
       .why_not = "Megatron-LM: an environment variable of the run (export CUBLAS_WORKSPACE_CONFIG=...), not a flag"});
  add({.id = "empty-unused-memory-level",
       .kind = K::kInt,
       .flag = "empty-unused-memory-level",
       .help = "Megatron-LM's --empty-unused-memory-level: 1 empties the allocator's cache after each forward "
               "and backward, 2 after the optimizer step too (default 0)",
       .doc_value = "N",
       .doc = "Megatron-LM's `--empty-unused-memory-level`: `torch.cuda.empty_cache()` after each step's forward "
              "and backward passes (1), and after the optimizer step too (2); moves reserved memory only",
       .doc_default = "0",
       .min = 0,
       .max = 2,
       .megatron = {"empty-unused-memory-level"},
       .spec_section = "infrastructure",
       .spec_name = "empty_unused_memory_level",
       .spec_default = "0",
       .spec_summary = "torch.cuda.empty_cache() after forward/backward (1) and after the optimizer step (2)",
       .json_key = "empty_unused_memory_level",
       .get = [](const S& s) { return J(s.empty_unused_memory_level); },
       .set = [](S& s, const J& v) { s.empty_unused_memory_level = as_int(v); }});
  add({.id = "deterministic-mode",
       .kind = K::kBool,
       .flag = "deterministic-mode",
       .help =
           "Megatron-LM's --deterministic-mode: NVTE_ALLOW_NONDETERMINISTIC_ALGO=0, CUBLAS_WORKSPACE_CONFIG=:4096:8",
       .doc = "Megatron-LM's `--deterministic-mode`: NVTE_ALLOW_NONDETERMINISTIC_ALGO=0, and "
              "CUBLAS_WORKSPACE_CONFIG=:4096:8 unless `--env` or `--cublas-workspace-config` sets it",
       .megatron = {"deterministic-mode"},
       .spec_section = "infrastructure",
       .spec_name = "deterministic_mode",
       .spec_default = "false",
       .spec_summary = "Megatron-LM's --deterministic-mode: deterministic kernels, CUBLAS_WORKSPACE_CONFIG :4096:8 "
                       "unless set",
       // NVTE_ALLOW_NONDETERMINISTIC_ALGO=0 in the environment says it, without the cuBLAS default.
       .spec_get = [](const S& s) { return J(s.attention_env.deterministic && !env_decides_determinism(s)); },
       .json_key = "deterministic_mode",
       .args_when = [](const S& s) { return !env_decides_determinism(s); },
       .get = [](const S& s) { return J(s.attention_env.deterministic); },
       .set =
           [](S& s, const J& v) {
             if (v.get<bool>())
               apply_deterministic_mode(s);
             else
               s.attention_env.deterministic = false;
           }});
  add({.id = "env",
       .kind = K::kEnv,
       .flag = "env",
       .help = "an environment variable of the run (repeatable): CUBLAS_WORKSPACE_CONFIG, NVTE_FLASH_ATTN, "
               "NVTE_FUSED_ATTN, NVTE_ALLOW_NONDETERMINISTIC_ALGO, NVTE_CPU_OFFLOAD_V1 change the estimate; the "
               "report lists them",
       .doc_value = "NAME=VALUE",
       .doc = "an environment variable of the run, repeatable: `CUBLAS_WORKSPACE_CONFIG`, `NVTE_FLASH_ATTN`, "
              "`NVTE_FUSED_ATTN`, `NVTE_ALLOW_NONDETERMINISTIC_ALGO`, `NVTE_CPU_OFFLOAD_V1` change the estimate; "
              "others are listed as "
              "without effect",
       .megatron_read = megatron_env,
       .spec_section = "infrastructure",
       .spec_name = "environment",
       .spec_default = "null",
       .spec_summary = "environment variables of the run, e.g. [NVTE_FUSED_ATTN=0]",
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
}

// The training precision and the optimizer dtypes.
void add_precision_knobs(std::vector<SetupKnob>& k) {
  using K = KnobKind;
  using S = TrainingSetup;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };

  // precision -----------------------------------------------------------------------------------
  add({.id = "precision",
       .kind = K::kEnum,
       .flag = "precision",
       .help = "bf16 (default) | fp16 | fp8 | fp32",
       .switches = {{"bf16", "bf16", "Megatron-LM spelling of --precision bf16"},
                    {"fp16", "fp16", "Megatron-LM spelling of --precision fp16"}},
       .doc_value = "P",
       .doc = "`bf16`, `fp16`, `fp8`, `fp32`",
       .doc_default = "bf16",
       .off_doc = "Megatron-LM spellings of `--precision bf16` / `fp16`",
       .table = kPrecisionNames,
       .values = {"bf16", "fp16", "fp8", "fp32"},
       .megatron = {"bf16", "fp16"},
       .megatron_read = megatron_precision,
       .megatron_extra = {"fp8-format"},  // the fp8-format knob's flag turns FP8 on
       .spec_section = "precision",
       .spec_name = "params_dtype",
       .spec_values = {"bf16", "fp16", "fp32"},
       .spec_default = "bf16",
       .spec_summary = "parameter and activation dtype",
       // The spec file says FP8 in its own field (precision.fp8, spec_file.cpp) over bf16 parameters.
       .spec_get = [](const S& s) { return J(params_dtype_name(s.precision)); },
       .json_key = "precision",
       .get = [](const S& s) { return name(kPrecisionNames, s.precision); },
       .set = [](S& s, const J& v) { s.precision = must<Precision>(kPrecisionNames, v); }});
  add({.id = "fp8-param-gather",
       .kind = K::kBool,
       .flag = "fp8-param-gather",
       .help = "keep FP8 GEMM weights as 1-byte parameters (needs --precision fp8)",
       .doc = "keep FP8 GEMM weights as 1-byte parameters (needs `--precision fp8`)",
       .megatron = {"fp8-param-gather"},
       .megatron_default = J(false),
       .spec_section = "precision",
       .spec_name = "fp8_param_gather",
       .spec_default = "false",
       .spec_summary = "keep FP8 GEMM weights as 1-byte parameters",
       .json_key = "fp8_param_gather",
       .get = [](const S& s) { return J(s.fp8_param_gather); },
       .set = [](S& s, const J& v) { s.fp8_param_gather = v.get<bool>(); }});
  add_low_precision_knobs(k);  // format, recipe, amax history, bf16 layers, FP4 (setup_knobs_low_precision.cpp)
  add({.id = "main-grads-dtype",
       .kind = K::kEnum,
       .flag = "main-grads-dtype",
       .help = "gradient buffer dtype: fp32 (default for bf16) | bf16 | fp16",
       .doc_value = "T",
       .doc = "gradient buffer dtype: `fp32`, `bf16`, `fp16`",
       .doc_default = "fp32 (fp16 under `--precision fp16`)",
       .table = kDTypeNames,
       .values = {"fp32", "bf16", "fp16"},
       .megatron = {"main-grads-dtype"},
       .megatron_read = megatron_main_grads,
       .megatron_extra = {"accumulate-allreduce-grads-in-fp32", "grad-reduce-in-bf16"},
       .spec_section = "precision",
       .spec_name = "main_grads_dtype",
       .spec_default = "null (fp32; fp16 with params_dtype fp16)",
       .spec_summary = "gradient buffer dtype",
       .json_key = "main_grads_dtype",
       .json_get =
           [](const S& s) {
             return name(kDTypeNames, s.optimizer.main_grads.value_or(s.precision == Precision::kFP16 ? DType::kFP16
                                                                                                      : DType::kFP32));
           },
       .get = [](const S& s) { return opt_dtype(s.optimizer.main_grads); },
       .set = [](S& s, const J& v) { s.optimizer.main_grads = value_of<DType>(kDTypeNames, v); }});
  add({.id = "main-params-dtype",
       .kind = K::kEnum,
       .flag = "main-params-dtype",
       .help = "precision-aware optimizer master weights: fp32 (default) | fp16",
       .doc_value = "T",
       .doc = "precision-aware optimizer master weights: `fp32`, `fp16`",
       .doc_default = "fp32",
       .table = kDTypeNames,
       .values = {"fp32", "fp16"},
       .megatron = {"main-params-dtype"},
       .spec_section = "precision",
       .spec_name = "main_params_dtype",
       .spec_default = "fp32",
       .spec_summary = "precision-aware optimizer: master weights",
       .json_key = "main_params_dtype",
       .get = [](const S& s) { return name(kDTypeNames, s.optimizer.main_params); },
       .set = [](S& s, const J& v) { s.optimizer.main_params = must<DType>(kDTypeNames, v); }});
  add({.id = "exp-avg-dtype",
       .kind = K::kEnum,
       .flag = "exp-avg-dtype",
       .help = "precision-aware optimizer exp_avg dtype: fp32 | fp16 | bf16 | fp8",
       .doc_value = "T",
       .doc = "precision-aware optimizer exp_avg dtype: `fp32`, `fp16`, `bf16`, `fp8`",
       .doc_default = "fp32",
       .table = kDTypeNames,
       .values = {"fp32", "fp16", "bf16", "fp8"},
       .megatron = {"exp-avg-dtype"},
       .spec_section = "precision",
       .spec_name = "exp_avg_dtype",
       .spec_default = "fp32",
       .spec_summary = "precision-aware optimizer: first moment",
       .json_key = "exp_avg_dtype",
       .get = [](const S& s) { return name(kDTypeNames, s.optimizer.exp_avg); },
       .set = [](S& s, const J& v) { s.optimizer.exp_avg = must<DType>(kDTypeNames, v); }});
  add({.id = "exp-avg-sq-dtype",
       .kind = K::kEnum,
       .flag = "exp-avg-sq-dtype",
       .help = "precision-aware optimizer exp_avg_sq dtype: fp32 | fp16 | bf16 | fp8",
       .doc_value = "T",
       .doc = "precision-aware optimizer exp_avg_sq dtype: `fp32`, `fp16`, `bf16`, `fp8`",
       .doc_default = "fp32",
       .table = kDTypeNames,
       .values = {"fp32", "fp16", "bf16", "fp8"},
       .megatron = {"exp-avg-sq-dtype"},
       .spec_section = "precision",
       .spec_name = "exp_avg_sq_dtype",
       .spec_default = "fp32",
       .spec_summary = "precision-aware optimizer: second moment",
       .json_key = "exp_avg_sq_dtype",
       .get = [](const S& s) { return name(kDTypeNames, s.optimizer.exp_avg_sq); },
       .set = [](S& s, const J& v) { s.optimizer.exp_avg_sq = must<DType>(kDTypeNames, v); }});
}

// Overrides of the model's dropout rates.
void add_model_override_knobs(std::vector<SetupKnob>& k) {
  using K = KnobKind;
  using S = TrainingSetup;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };

  // Overrides of the model ----------------------------------------------------------------------
  add({.id = "hidden-dropout",
       .kind = K::kNumber,
       .flag = "hidden-dropout",
       .help = "override the model's hidden dropout rate",
       .doc_value = "F",
       .doc = "override the model's hidden dropout rate (at least 0, below 1)",
       .doc_default = "the model's",
       .lo = kDropoutRange.lo,
       .hi = kDropoutRange.hi,
       .hi_open = kDropoutRange.hi_open,
       .get = [](const S& s) { return opt(s.hidden_dropout); },
       .set = [](S& s, const J& v) { s.hidden_dropout = as_opt_double(v); },
       .why_not = "Megatron-LM, spec files and the JSON: a model setting there (--hidden-dropout is read by the "
                  "megatron_args adapter; spec files write the override into model.hidden_dropout, so the JSON's "
                  "setup, which is the same for both, leaves it out)"});
  add({.id = "attention-dropout",
       .kind = K::kNumber,
       .flag = "attention-dropout",
       .help = "override the model's attention dropout rate",
       .doc_value = "F",
       .doc = "override the model's attention dropout rate (at least 0, below 1)",
       .doc_default = "the model's",
       .lo = kDropoutRange.lo,
       .hi = kDropoutRange.hi,
       .hi_open = kDropoutRange.hi_open,
       .get = [](const S& s) { return opt(s.attention_dropout); },
       .set = [](S& s, const J& v) { s.attention_dropout = as_opt_double(v); },
       .why_not = "Megatron-LM, spec files and the JSON: a model setting there (--attention-dropout is read by the "
                  "megatron_args adapter; spec files write the override into model.attention_dropout, so the "
                  "JSON's setup, which is the same for both, leaves it out)"});
}

}  // namespace mme::setup_knobs_detail
