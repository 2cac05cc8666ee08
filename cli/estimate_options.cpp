#include "estimate_options.hpp"

#include <vector>

#include <fmt/core.h>

#include <mme/sdk/error.hpp>

namespace mme::cli {

namespace {

constexpr std::int64_t kMaxParallel = std::int64_t{1} << 20;
constexpr std::int64_t kMaxTokens = std::int64_t{1} << 24;

// Flags that take a value: primary name, Megatron-LM aliases, help.
struct ValueFlag {
  const char* name;
  std::initializer_list<const char*> aliases;
  const char* help;
};

const ValueFlag kValueFlags[] = {
    {"tp", {"tensor-model-parallel-size"}, "tensor parallel size (default 1)"},
    {"pp", {"pipeline-model-parallel-size"}, "pipeline parallel size (default 1)"},
    {"ep", {"expert-model-parallel-size"}, "expert parallel size (default 1)"},
    {"etp", {"expert-tensor-parallel-size"}, "expert tensor parallel size (default 1, as the seed tool and spec files; --megatron-args: TP, as Megatron-LM)"},
    {"cp", {"context-parallel-size"}, "context parallel size (default 1)"},
    {"vpp", {"virtual-pipeline-model-parallel-size", "num-virtual-stages-per-pipeline-rank"},
     "virtual pipeline chunks per pipeline rank (interleaved schedule)"},
    {"num-layers-per-virtual-pipeline-stage", {}, "Megatron-LM's way to set VPP: layers per virtual chunk"},
    {"microbatch-group-size-per-virtual-pipeline-stage", {}, "interleaved schedule: micro-batches per group (default PP)"},
    {"micro-batch-size", {}, "micro-batch size (default 1)"},
    {"seq-length", {}, "sequence length (default 4096)"},
    {"num-gpus", {"world-size"}, "total GPUs (default 8, or the smallest count the layout allows)"},
    {"global-batch-size", {}, "global batch size: sets the number of micro-batches per step"},
    {"recompute-granularity", {}, "activation recompute: full | selective"},
    {"recompute-method", {}, "full recompute method: uniform (default) | block"},
    {"recompute-num-layers", {}, "layers per recompute group (uniform) or recomputed layers per chunk (block); default 1"},
    {"recompute-modules", {}, "selective recompute modules, comma separated: core_attn (default), mlp, moe, moe_act, "
                              "layernorm, mla_up_proj, shared_experts"},
    {"num-layers-in-first-pipeline-stage", {"decoder-first-pipeline-num-layers"}, "layers of the first pipeline stage"},
    {"num-layers-in-last-pipeline-stage", {"decoder-last-pipeline-num-layers"}, "layers of the last pipeline stage"},
    {"pipeline-layout", {"pipeline-model-parallel-layout"}, "Megatron pipeline layout string, e.g. 'Et*3|(tt|)*6mL'"},
    {"attention-backend", {}, "auto (default: Transformer Engine's choice) | flash (also fused) | unfused (also local)"},
    {"wgrad-deferral-limit", {}, "with --defer-embedding-wgrad-compute: micro-batches deferred (default 0: all)"},
    {"cross-entropy-fusion-impl", {}, "with --cross-entropy-loss-fusion: native (default) | te"},
    {"cp-comm-type", {}, "with --cp > 1, how TE exchanges the sequence: p2p (default) | all_gather | a2a | a2a+p2p"},
    {"moe-routing-imbalance", {}, "tokens on the busiest expert rank / its even share, for the upper bound (default 1.25)"},
    {"precision", {}, "bf16 (default) | fp16 | fp8 | fp32"},
    {"transformer-impl", {}, "transformer_engine (default) | local (Megatron's own layers, unfused attention)"},
    {"moe-token-dispatcher", {"moe-token-dispatcher-type"}, "alltoall (default) | allgather | flex"},
    {"moe-capacity-factor", {"moe-expert-capacity-factor"}, "MoE expert capacity factor (default: dropless)"},
    {"main-grads-dtype", {}, "gradient buffer dtype: fp32 (default for bf16) | bf16"},
    {"main-params-dtype", {}, "precision-aware optimizer master weights: fp32 (default) | fp16"},
    {"exp-avg-dtype", {}, "precision-aware optimizer exp_avg dtype: fp32 | fp16 | bf16 | fp8"},
    {"exp-avg-sq-dtype", {}, "precision-aware optimizer exp_avg_sq dtype: fp32 | fp16 | bf16 | fp8"},
    {"optimizer-cpu-offload-fraction", {"optimizer-offload-fraction"}, "fraction of optimizer state kept on the host"},
    {"num-distributed-optimizer-instances", {}, "distributed optimizer instances (default 1)"},
    {"make-vocab-size-divisible-by", {}, "vocabulary padding multiple before x TP (default 128)"},
    {"optimizer", {}, "adam (default) | sgd | muon"},
    {"hidden-dropout", {}, "override the model's hidden dropout rate"},
    {"cublas-workspace-config", {}, "CUBLAS_WORKSPACE_CONFIG of the run, e.g. :4096:8 (default: PyTorch's default)"},
    {"attention-dropout", {}, "override the model's attention dropout rate"},
    {"data-parallel-sharding-strategy", {}, "with --use-megatron-fsdp: no_shard | optim | optim_grads | "
                                            "optim_grads_params (default: all sharded, ZeRO-3)"},
    {"outer-dp-sharding-strategy", {}, "Megatron-FSDP with optimizer instances (HSDP): no_shard (default) | optim"},
    {"megatron-fsdp-main-params-dtype", {}, "Megatron-FSDP main weights: fp32 (default) | bf16 | fp16"},
    {"megatron-fsdp-main-grads-dtype", {}, "Megatron-FSDP gradient buffer: auto (default: the param dtype) | fp32 | bf16 | fp16"},
    {"megatron-fsdp-grad-comm-dtype", {}, "Megatron-FSDP reduce-scatter dtype: auto (default: the gradients') | fp32 | bf16 | fp16"},
    {"suggested-communication-unit-size", {}, "Megatron-FSDP: parameters per communication unit (default: "
                                              "max(1e9, 2 x the average layer))"},
};

struct SwitchFlag {
  const char* name;
  const char* help;
};

const SwitchFlag kSwitches[] = {
    {"no-distributed-optimizer", "plain Adam on every rank (18 bytes/param) instead of the distributed optimizer"},
    {"use-distributed-optimizer", "the distributed optimizer (the default)"},
    {"sequence-parallel", "sequence parallelism (default: on when TP > 1)"},
    {"no-sequence-parallel", "turn sequence parallelism off"},
    {"account-for-embedding-in-pipeline-split", "count the embedding as a layer when splitting the pipeline"},
    {"account-for-loss-in-pipeline-split", "count the loss as a layer when splitting the pipeline"},
    {"moe-pad-expert-input-to-capacity", "pad every expert's input to its capacity"},
    {"use-precision-aware-optimizer", "TE FusedAdam with the dtypes of --main-params/--exp-avg(-sq)-dtype"},
    {"fp8-param-gather", "keep FP8 GEMM weights as 1-byte parameters (needs --precision fp8)"},
    {"cross-entropy-loss-fusion", "fused cross entropy (it still keeps the fp32 softmax for backward)"},
    {"no-masked-softmax-fusion", "Megatron's local attention softmax without its fused kernel"},
    {"attention-softmax-in-fp32", "Megatron's local attention softmax in fp32 (also --apply-query-key-layer-scaling)"},
    {"defer-embedding-wgrad-compute", "the output layer's weight gradients wait for the pipeline flush"},
    {"no-gradient-accumulation-fusion", "weight gradients as separate tensors, added to main_grad after each GEMM"},
    {"deterministic-mode", "Megatron-LM's --deterministic-mode: NVTE_ALLOW_NONDETERMINISTIC_ALGO=0, "
                           "CUBLAS_WORKSPACE_CONFIG=:4096:8"},
    {"moe-grouped-gemm", "grouped GEMM experts, TEGroupedMLP (the default)"},
    {"no-moe-grouped-gemm", "one GEMM per local expert (SequentialMLP)"},
    {"bf16", "Megatron-LM spelling of --precision bf16"},
    {"fp16", "Megatron-LM spelling of --precision fp16"},
    {"use-megatron-fsdp", "Megatron-FSDP: weights, gradients and optimizer states sharded over data parallel"},
    {"use-torch-fsdp2", "PyTorch FSDP2 (implies no distributed optimizer and no gradient accumulation fusion)"},
    {"fsdp-double-buffer", "Megatron-FSDP: two persistent gather/gradient slots of the largest layer"},
    {"torch-fsdp2-no-reshard-after-forward", "FSDP2: keep every layer gathered from its forward to its backward"},
};

// The value of a flag given under its name or one of its Megatron-LM aliases; UsageError if
// two spellings disagree.
std::optional<std::string> value_of(const po::variables_map& vm, const ValueFlag& f) {
  std::vector<const char*> names{f.name};
  names.insert(names.end(), f.aliases.begin(), f.aliases.end());
  return get_aliased(vm, names);
}

std::int64_t int_flag(const po::variables_map& vm, const ValueFlag& f, std::int64_t min, std::int64_t max,
                      std::int64_t fallback) {
  const auto v = value_of(vm, f);
  if (!v) return fallback;
  return parse_int(fmt::format("--{}", f.name), *v, min, max);
}

const ValueFlag& flag(const char* name) {
  for (const auto& f : kValueFlags)
    if (std::string_view(f.name) == name) return f;
  throw std::logic_error(std::string("unknown flag ") + name);
}

std::optional<std::string> str_flag(const po::variables_map& vm, const char* name) { return value_of(vm, flag(name)); }

bool on(const po::variables_map& vm, const char* name) { return vm.count(name) && vm[name].as<bool>(); }

}  // namespace

void add_setup_options(po::options_description& visible, po::options_description& hidden) {
  for (const auto& f : kValueFlags) {
    visible.add_options()(f.name, po::value<std::string>(), f.help);
    for (const char* a : f.aliases) hidden.add_options()(a, po::value<std::string>(), "");
  }
  for (const auto& s : kSwitches) visible.add_options()(s.name, po::bool_switch(), s.help);
  visible.add_options()("env", po::value<std::vector<std::string>>()->composing()->value_name("NAME=VALUE"),
                        "an environment variable of the run (repeatable): CUBLAS_WORKSPACE_CONFIG, NVTE_FLASH_ATTN, "
                        "NVTE_FUSED_ATTN, NVTE_ALLOW_NONDETERMINISTIC_ALGO change the estimate; the report lists them");
}

bool setup_flag_given(const po::variables_map& vm, const std::string& name) {
  for (const auto& f : kValueFlags) {
    if (name != f.name) continue;
    if (vm.count(f.name)) return true;
    for (const char* a : f.aliases)
      if (vm.count(a)) return true;
    return false;
  }
  return vm.count(name) > 0;
}

TrainingSetup read_setup(const po::variables_map& vm, TrainingSetup s) {
  auto& p = s.parallel;
  p.tp = int_flag(vm, flag("tp"), 1, kMaxParallel, p.tp);
  p.pp = int_flag(vm, flag("pp"), 1, kMaxParallel, p.pp);
  p.ep = int_flag(vm, flag("ep"), 1, kMaxParallel, p.ep);
  p.etp = int_flag(vm, flag("etp"), 1, kMaxParallel, p.etp);
  p.cp = int_flag(vm, flag("cp"), 1, kMaxParallel, p.cp);
  p.vpp = int_flag(vm, flag("vpp"), 1, kMaxParallel, p.vpp);
  p.world_size = int_flag(vm, flag("num-gpus"), 1, std::int64_t{1} << 40, p.world_size);
  s.micro_batch_size = int_flag(vm, flag("micro-batch-size"), 1, kMaxTokens, s.micro_batch_size);
  s.seq_length = int_flag(vm, flag("seq-length"), 1, kMaxTokens, s.seq_length);
  s.global_batch_size = int_flag(vm, flag("global-batch-size"), 1, std::int64_t{1} << 40, s.global_batch_size);
  s.make_vocab_size_divisible_by =
      int_flag(vm, flag("make-vocab-size-divisible-by"), 1, kMaxTokens, s.make_vocab_size_divisible_by);
  s.optimizer.instances =
      int_flag(vm, flag("num-distributed-optimizer-instances"), 1, kMaxParallel, s.optimizer.instances);

  if (on(vm, "sequence-parallel") && on(vm, "no-sequence-parallel"))
    throw UsageError("--sequence-parallel and --no-sequence-parallel contradict each other");
  if (on(vm, "sequence-parallel")) p.sequence_parallel = true;
  if (on(vm, "no-sequence-parallel")) p.sequence_parallel = false;
  if (on(vm, "no-distributed-optimizer") && on(vm, "use-distributed-optimizer"))
    throw UsageError("--no-distributed-optimizer and --use-distributed-optimizer contradict each other");
  if (on(vm, "no-distributed-optimizer")) s.optimizer.distributed = false;
  if (on(vm, "use-distributed-optimizer")) s.optimizer.distributed = true;

  if (auto v = str_flag(vm, "precision")) {
    if (*v == "bf16") s.precision = Precision::kBF16;
    else if (*v == "fp16") s.precision = Precision::kFP16;
    else if (*v == "fp8") s.precision = Precision::kFP8;
    else if (*v == "fp32") s.precision = Precision::kFP32;
    else throw UsageError(fmt::format("--precision: unknown value '{}' (bf16, fp16, fp8, fp32)", *v));
  }
  if (on(vm, "bf16") && on(vm, "fp16")) throw UsageError("--bf16 and --fp16 contradict each other");
  if (on(vm, "bf16")) s.precision = Precision::kBF16;
  if (on(vm, "fp16")) s.precision = Precision::kFP16;

  if (auto v = str_flag(vm, "attention-backend")) s.attention_backend = parse_attention_backend(*v, "--attention-backend");
  if (auto v = str_flag(vm, "transformer-impl")) {
    if (*v == "transformer_engine") s.transformer_engine = true;
    else if (*v == "local") s.transformer_engine = false;
    else throw UsageError(fmt::format("--transformer-impl: unknown value '{}' (transformer_engine, local)", *v));
  }
  if (auto v = str_flag(vm, "moe-token-dispatcher")) {
    if (*v == "alltoall") s.dispatcher = TokenDispatcher::kAllToAll;
    else if (*v == "allgather") s.dispatcher = TokenDispatcher::kAllGather;
    else if (*v == "flex") s.dispatcher = TokenDispatcher::kFlex;
    else throw UsageError(fmt::format("--moe-token-dispatcher: unknown value '{}' (alltoall, allgather, flex)", *v));
  }
  if (auto v = str_flag(vm, "moe-capacity-factor"))
    s.moe_capacity_factor = parse_double("--moe-capacity-factor", *v, 1e-6, 1e6);
  if (on(vm, "moe-pad-expert-input-to-capacity")) s.moe_pad_to_capacity = true;

  auto& r = s.recompute;
  if (auto v = str_flag(vm, "recompute-granularity")) {
    if (*v == "full") r.granularity = RecomputeGranularity::kFull;
    else if (*v == "selective") r.granularity = RecomputeGranularity::kSelective;
    else if (*v == "none") r.granularity = RecomputeGranularity::kNone;
    else throw UsageError(fmt::format("--recompute-granularity: unknown value '{}' (full, selective)", *v));
  }
  if (auto v = str_flag(vm, "recompute-method")) {
    if (*v == "uniform") r.method = RecomputeMethod::kUniform;
    else if (*v == "block") r.method = RecomputeMethod::kBlock;
    else throw UsageError(fmt::format("--recompute-method: unknown value '{}' (uniform, block)", *v));
    if (r.granularity != RecomputeGranularity::kFull)
      throw UsageError("--recompute-method needs --recompute-granularity full");
  }
  r.num_layers = int_flag(vm, flag("recompute-num-layers"), 1, kMaxParallel, r.num_layers);
  if (auto v = str_flag(vm, "recompute-modules")) {
    r.modules = parse_recompute_modules(*v);
    if (r.granularity == RecomputeGranularity::kNone) r.granularity = RecomputeGranularity::kSelective;
    if (r.granularity == RecomputeGranularity::kFull)
      throw UsageError("--recompute-modules applies to --recompute-granularity selective, not full");
  }

  auto& pl = s.pipeline;
  if (vm.count("num-layers-in-first-pipeline-stage") || vm.count("decoder-first-pipeline-num-layers"))
    pl.first_stage_layers = int_flag(vm, flag("num-layers-in-first-pipeline-stage"), 0, kMaxParallel, 0);
  if (vm.count("num-layers-in-last-pipeline-stage") || vm.count("decoder-last-pipeline-num-layers"))
    pl.last_stage_layers = int_flag(vm, flag("num-layers-in-last-pipeline-stage"), 0, kMaxParallel, 0);
  if (auto v = str_flag(vm, "pipeline-layout")) pl.layout = *v;
  if (on(vm, "account-for-embedding-in-pipeline-split")) pl.account_for_embedding = true;
  if (on(vm, "account-for-loss-in-pipeline-split")) pl.account_for_loss = true;

  auto& o = s.optimizer;
  if (on(vm, "use-precision-aware-optimizer")) o.precision_aware = true;
  if (auto v = str_flag(vm, "main-grads-dtype")) o.main_grads = parse_dtype(*v);
  if (auto v = str_flag(vm, "main-params-dtype")) o.main_params = parse_dtype(*v);
  if (auto v = str_flag(vm, "exp-avg-dtype")) o.exp_avg = parse_dtype(*v);
  if (auto v = str_flag(vm, "exp-avg-sq-dtype")) o.exp_avg_sq = parse_dtype(*v);
  if (auto v = str_flag(vm, "optimizer-cpu-offload-fraction"))
    o.cpu_offload_fraction = parse_double("--optimizer-cpu-offload-fraction", *v, 0.0, 1.0);
  if (auto v = str_flag(vm, "optimizer")) {
    if (*v != "adam" && *v != "sgd" && *v != "muon")
      throw UsageError(fmt::format("--optimizer: unknown value '{}' (adam, sgd, muon)", *v));
    o.name = *v;
  }
  if (on(vm, "fp8-param-gather")) s.fp8_param_gather = true;
  if (on(vm, "cross-entropy-loss-fusion")) s.cross_entropy_fusion = true;
  if (auto v = str_flag(vm, "cross-entropy-fusion-impl"))
    s.cross_entropy_te = parse_cross_entropy_fusion_impl(*v, "--cross-entropy-fusion-impl");
  if (auto v = str_flag(vm, "cp-comm-type")) s.cp_comm_type = parse_cp_comm_type(*v, "--cp-comm-type");
  if (on(vm, "no-gradient-accumulation-fusion")) s.gradient_accumulation_fusion = false;
  auto& f = s.fsdp;
  if (on(vm, "use-megatron-fsdp") && on(vm, "use-torch-fsdp2"))
    throw UsageError("--use-megatron-fsdp and --use-torch-fsdp2 exclude each other");
  if (on(vm, "use-megatron-fsdp")) f.kind = FsdpKind::kMegatron;
  if (on(vm, "use-torch-fsdp2")) {
    if (on(vm, "use-distributed-optimizer"))
      throw UsageError("--use-torch-fsdp2 is not supported with --use-distributed-optimizer (Megatron-LM refuses it)");
    // FSDP2 replaces the distributed optimizer and needs separate weight gradients (arguments.py).
    f.kind = FsdpKind::kTorchFsdp2;
    o.distributed = false;
    s.gradient_accumulation_fusion = false;
  }
  if (auto v = str_flag(vm, "data-parallel-sharding-strategy"))
    f.strategy = parse_fsdp_sharding(*v, "--data-parallel-sharding-strategy");
  if (auto v = str_flag(vm, "outer-dp-sharding-strategy"))
    f.outer = parse_fsdp_sharding(*v, "--outer-dp-sharding-strategy");
  if (auto v = str_flag(vm, "megatron-fsdp-main-params-dtype"))
    f.main_params = *parse_fsdp_dtype(*v, "--megatron-fsdp-main-params-dtype", false);
  if (auto v = str_flag(vm, "megatron-fsdp-main-grads-dtype"))
    f.main_grads = parse_fsdp_dtype(*v, "--megatron-fsdp-main-grads-dtype", true);
  if (auto v = str_flag(vm, "megatron-fsdp-grad-comm-dtype"))
    f.grad_comm = parse_fsdp_dtype(*v, "--megatron-fsdp-grad-comm-dtype", true);
  if (on(vm, "fsdp-double-buffer")) f.double_buffer = true;
  f.communication_unit_size =
      int_flag(vm, flag("suggested-communication-unit-size"), 1, kMaxWorldSize, f.communication_unit_size);
  if (on(vm, "torch-fsdp2-no-reshard-after-forward")) f.reshard_after_forward = false;
  if (on(vm, "defer-embedding-wgrad-compute")) s.defer_embedding_wgrad = true;
  if (on(vm, "no-masked-softmax-fusion")) s.masked_softmax_fusion = false;
  if (on(vm, "attention-softmax-in-fp32")) s.attention_softmax_in_fp32 = true;
  s.wgrad_deferral_limit = int_flag(vm, flag("wgrad-deferral-limit"), 0, std::int64_t{1} << 40, s.wgrad_deferral_limit);
  if (auto v = str_flag(vm, "moe-routing-imbalance"))
    s.moe_routing_imbalance = parse_double("--moe-routing-imbalance", *v, 1.0, 1024.0);
  if (on(vm, "deterministic-mode")) apply_deterministic_mode(s);
  if (on(vm, "moe-grouped-gemm") && on(vm, "no-moe-grouped-gemm"))
    throw UsageError("--moe-grouped-gemm and --no-moe-grouped-gemm contradict each other");
  if (on(vm, "moe-grouped-gemm")) s.moe_grouped_gemm = true;
  if (on(vm, "no-moe-grouped-gemm")) s.moe_grouped_gemm = false;
  if (auto v = str_flag(vm, "cublas-workspace-config")) {
    (void)parse_cublas_workspace_config(*v);
    s.cublas_workspace_config = *v;
  }
  if (auto v = str_flag(vm, "hidden-dropout")) s.hidden_dropout = parse_double("--hidden-dropout", *v, 0.0, 0.999);
  if (auto v = str_flag(vm, "attention-dropout"))
    s.attention_dropout = parse_double("--attention-dropout", *v, 0.0, 0.999);

  if (vm.count("env"))
    for (const auto& text : vm["env"].as<std::vector<std::string>>()) {
      const auto [name, value] = split_env_assignment(text, "--env");
      if (!apply_environment(s, name, value))
        s.environment_ignored.push_back(name + "=" + value);
    }
  if (vm.count("microbatch-group-size-per-virtual-pipeline-stage"))
    pl.microbatch_group_size = int_flag(vm, flag("microbatch-group-size-per-virtual-pipeline-stage"), 1, kMaxParallel, 1);
  if (vm.count("num-layers-per-virtual-pipeline-stage"))
    pl.layers_per_virtual_stage = int_flag(vm, flag("num-layers-per-virtual-pipeline-stage"), 1, kMaxParallel, 1);
  return s;
}

po::options_description model_and_setup_hidden_options() {
  po::options_description visible, hidden;
  add_setup_options(visible, hidden);
  hidden.add_options()("model", po::value<std::string>(), "");
  return hidden;
}

double parse_headroom(const std::string& text) {
  std::string t = text;
  double scale = 1.0;
  if (!t.empty() && t.back() == '%') {
    t.pop_back();
    scale = 0.01;
  }
  return parse_double("--headroom", t, 0.0, scale == 1.0 ? 0.9 : 90.0) * scale;
}

}  // namespace mme::cli
