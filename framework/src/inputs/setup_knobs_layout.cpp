// The knobs of the parallel layout, the batch and the data-parallel sharding: the first part of
// the setup schema's table (setup_schema.hpp), in spec-file order.
#include "mme/inputs/megatron_flags.hpp"

#include "setup_knobs.hpp"

namespace mme::setup_knobs_detail {

namespace {

// --pipeline-model-parallel-layout, or a hybrid model's: the '|' separators of its
// --hybrid-layer-pattern are the pipeline's stages (hybrid_layer_allocation.py
// select_pipeline_segment: segment vp x PP + pp_rank, the embedding on the first, the loss on the
// last; arguments.py derives VPP from their count), which is the layout "E" + one 't' per layer of
// each segment + "L". arguments.py refuses the other ways of splitting the pipeline beside a
// hybrid pattern, and the first/last-stage counts beside its separators.
void megatron_pipeline_layout(const MegatronArgs& a, TrainingSetup& s) {
  if (auto v = given(a, "pipeline-model-parallel-layout")) s.pipeline.layout = *v;
  auto pattern = a.value(ModelFlag::kHybridLayerPattern);
  const char* flag = flag_name(ModelFlag::kHybridLayerPattern);
  if (!pattern) {
    pattern = a.value(ModelFlag::kHybridOverridePattern);
    flag = flag_name(ModelFlag::kHybridOverridePattern);
  }
  if (!pattern) return;
  for (const char* refused : {"pipeline-model-parallel-layout", "num-layers-per-virtual-pipeline-stage",
                              "num-virtual-stages-per-pipeline-rank", "account-for-embedding-in-pipeline-split",
                              "account-for-loss-in-pipeline-split"})
    if (a.has(refused))
      throw UsageError(
          fmt::format("--{} with --{}: Megatron-LM refuses it (arguments.py: the pattern's '|' "
                      "separators define the pipeline stages)",
                      refused, flag));
  const std::string main = pattern->substr(0, pattern->find('/'));
  if (main.find('|') == std::string::npos) return;
  for (const char* refused : {"decoder-first-pipeline-num-layers", "decoder-last-pipeline-num-layers"})
    if (a.has(refused))
      throw UsageError(
          fmt::format("--{} with the '|' separators of --{}: Megatron-LM refuses it (arguments.py)", refused, flag));
  std::string layout = "E";
  for (const char c : main) layout += c == '|' ? '|' : 't';
  s.pipeline.layout = layout + "L";
}

}  // namespace

// TP, PP, VPP and the pipeline split.
void add_tensor_and_pipeline_knobs(std::vector<SetupKnob>& k) {
  using K = KnobKind;
  using S = TrainingSetup;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };

  // parallelism ---------------------------------------------------------------------------------
  add({.id = "tp",
       .kind = K::kInt,
       .flag = "tp",
       .aliases = {"tensor-model-parallel-size"},
       .help = "tensor parallel size (default 1)",
       .doc_value = "N",
       .doc = "tensor parallel size",
       .doc_default = "1",
       .max = kMaxParallelSize,
       .megatron = {"tensor-model-parallel-size"},
       .spec_section = "parallelism",
       .spec_name = "tensor_model_parallel_size",
       .spec_required = true,
       .spec_default = "required",
       .spec_summary = "TP: splits weights across GPUs",
       .json_key = "tp",
       .args_always = true,
       .get = [](const S& s) { return J(s.parallel.tp); },
       .set = [](S& s, const J& v) { s.parallel.tp = as_int(v); }});
  add({.id = "pp",
       .kind = K::kInt,
       .flag = "pp",
       .aliases = {"pipeline-model-parallel-size"},
       .help = "pipeline parallel size (default 1)",
       .doc_value = "N",
       .doc = "pipeline parallel size",
       .doc_default = "1",
       .max = kMaxParallelSize,
       .megatron = {"pipeline-model-parallel-size"},
       .spec_section = "parallelism",
       .spec_name = "pipeline_model_parallel_size",
       .spec_required = true,
       .spec_default = "required",
       .spec_summary = "PP: splits layers across stages",
       .json_key = "pp",
       .args_always = true,
       .get = [](const S& s) { return J(s.parallel.pp); },
       .set = [](S& s, const J& v) { s.parallel.pp = as_int(v); }});
  add({.id = "vpp",
       .kind = K::kInt,
       .flag = "vpp",
       .aliases = {"virtual-pipeline-model-parallel-size", "num-virtual-stages-per-pipeline-rank"},
       .help = "virtual pipeline chunks per pipeline rank (interleaved schedule)",
       .doc_value = "N",
       .doc = "virtual pipeline chunks per pipeline rank (interleaved schedule)",
       .doc_default = "1",
       .max = kMaxParallelSize,
       .megatron = {"num-virtual-stages-per-pipeline-rank"},
       .spec_section = "parallelism",
       .spec_name = "virtual_pipeline_model_parallel_size",
       .spec_default = "null",
       .spec_summary = "interleaved schedule: model chunks per pipeline rank",
       .spec_get = [](const S& s) { return s.parallel.vpp > 1 ? J(s.parallel.vpp) : J(); },
       .json_key = "vpp",
       .get = [](const S& s) { return J(s.parallel.vpp); },
       .set = [](S& s, const J& v) { s.parallel.vpp = as_int(v); }});
  add({.id = "num-layers-per-virtual-pipeline-stage",
       .kind = K::kInt,
       .flag = "num-layers-per-virtual-pipeline-stage",
       .help = "Megatron-LM's way to set VPP: layers per virtual chunk",
       .doc_value = "N",
       .doc = "Megatron-LM's way to set VPP: layers per virtual chunk",
       .max = kMaxParallelSize,
       .megatron = {"num-layers-per-virtual-pipeline-stage"},
       .spec_section = "parallelism",
       .spec_name = "num_layers_per_virtual_pipeline_stage",
       .spec_default = "null",
       .spec_summary = "the other way to set the interleaved schedule: layers per model chunk",
       .json_key = "num_layers_per_virtual_pipeline_stage",
       .get = [](const S& s) { return opt(s.pipeline.layers_per_virtual_stage); },
       .set = [](S& s, const J& v) { s.pipeline.layers_per_virtual_stage = as_opt_int(v); }});
  add({.id = "microbatch-group-size-per-virtual-pipeline-stage",
       .kind = K::kInt,
       .flag = "microbatch-group-size-per-virtual-pipeline-stage",
       .help = "interleaved schedule: micro-batches per group (default PP)",
       .doc_value = "N",
       .doc = "interleaved schedule: micro-batches per group (at least PP)",
       .doc_default = "PP",
       .max = kMaxParallelSize,
       .megatron = {"microbatch-group-size-per-virtual-pipeline-stage"},
       .spec_section = "parallelism",
       .spec_name = "microbatch_group_size_per_virtual_pipeline_stage",
       .spec_default = "null (PP)",
       .spec_summary = "interleaved schedule: micro-batches per group, at least PP",
       .json_key = "microbatch_group_size_per_virtual_pipeline_stage",
       .get = [](const S& s) { return opt(s.pipeline.microbatch_group_size); },
       .set = [](S& s, const J& v) { s.pipeline.microbatch_group_size = as_opt_int(v); }});
  add({.id = "num-layers-in-first-pipeline-stage",
       .kind = K::kInt,
       .flag = "num-layers-in-first-pipeline-stage",
       .aliases = {"decoder-first-pipeline-num-layers"},
       .help = "layers of the first pipeline stage",
       .doc_value = "N",
       .doc = "layers of the first pipeline stage",
       .doc_default = "even split",
       .min = 0,
       .max = kMaxParallelSize,
       .megatron = {"decoder-first-pipeline-num-layers"},
       .spec_section = "parallelism",
       .spec_name = "num_layers_in_first_pipeline_stage",
       .spec_default = "null",
       .spec_summary = "layers of the first stage (uneven split)",
       .json_key = "num_layers_in_first_pipeline_stage",
       .get = [](const S& s) { return opt(s.pipeline.first_stage_layers); },
       .set = [](S& s, const J& v) { s.pipeline.first_stage_layers = as_opt_int(v); }});
  add({.id = "num-layers-in-last-pipeline-stage",
       .kind = K::kInt,
       .flag = "num-layers-in-last-pipeline-stage",
       .aliases = {"decoder-last-pipeline-num-layers"},
       .help = "layers of the last pipeline stage",
       .doc_value = "N",
       .doc = "layers of the last pipeline stage",
       .doc_default = "even split",
       .min = 0,
       .max = kMaxParallelSize,
       .megatron = {"decoder-last-pipeline-num-layers"},
       .spec_section = "parallelism",
       .spec_name = "num_layers_in_last_pipeline_stage",
       .spec_default = "null",
       .spec_summary = "layers of the last stage (uneven split)",
       .json_key = "num_layers_in_last_pipeline_stage",
       .get = [](const S& s) { return opt(s.pipeline.last_stage_layers); },
       .set = [](S& s, const J& v) { s.pipeline.last_stage_layers = as_opt_int(v); }});
  add({.id = "pipeline-layout",
       .kind = K::kString,
       .flag = "pipeline-layout",
       .aliases = {"pipeline-model-parallel-layout"},
       .help = "Megatron pipeline layout string, e.g. 'Et*3|(tt|)*6mL'",
       .doc_value = "S",
       .doc = "Megatron pipeline layout string, e.g. `Et*3\\|(tt\\|)*6mL`",
       .megatron = {"pipeline-model-parallel-layout"},
       .megatron_read = megatron_pipeline_layout,
       .spec_section = "parallelism",
       .spec_name = "pipeline_model_parallel_layout",
       .spec_default = "null",
       .spec_summary = "Megatron pipeline layout, e.g. \"Et*3|(tt|)*6mL\"",
       .json_key = "pipeline_layout",
       .get = [](const S& s) { return text_or_null(s.pipeline.layout); },
       .set = [](S& s, const J& v) { s.pipeline.layout = v.is_null() ? "" : v.get<std::string>(); }});
  add({.id = "account-for-embedding-in-pipeline-split",
       .kind = K::kBool,
       .flag = "account-for-embedding-in-pipeline-split",
       .help = "count the embedding as a layer when splitting the pipeline",
       .doc = "count the embedding as a layer when splitting the pipeline",
       .megatron = {"account-for-embedding-in-pipeline-split"},
       .megatron_default = J(false),
       .spec_section = "parallelism",
       .spec_name = "account_for_embedding_in_pipeline_split",
       .spec_default = "false",
       .spec_summary = "count the embedding as a layer when splitting the pipeline",
       .json_key = "account_for_embedding_in_pipeline_split",
       .get = [](const S& s) { return J(s.pipeline.account_for_embedding); },
       .set = [](S& s, const J& v) { s.pipeline.account_for_embedding = v.get<bool>(); }});
  add({.id = "account-for-loss-in-pipeline-split",
       .kind = K::kBool,
       .flag = "account-for-loss-in-pipeline-split",
       .help = "count the loss as a layer when splitting the pipeline",
       .doc = "count the loss as a layer when splitting the pipeline",
       .megatron = {"account-for-loss-in-pipeline-split"},
       .megatron_default = J(false),
       .spec_section = "parallelism",
       .spec_name = "account_for_loss_in_pipeline_split",
       .spec_default = "false",
       .spec_summary = "count the loss as a layer when splitting the pipeline",
       .json_key = "account_for_loss_in_pipeline_split",
       .get = [](const S& s) { return J(s.pipeline.account_for_loss); },
       .set = [](S& s, const J& v) { s.pipeline.account_for_loss = v.get<bool>(); }});
}

// EP, ETP, CP and its communication.
void add_expert_and_context_knobs(std::vector<SetupKnob>& k) {
  using K = KnobKind;
  using S = TrainingSetup;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };

  add({.id = "ep",
       .kind = K::kInt,
       .flag = "ep",
       .aliases = {"expert-model-parallel-size"},
       .help = "expert parallel size (default 1)",
       .doc_value = "N",
       .doc = "expert parallel size",
       .doc_default = "1",
       .max = kMaxParallelSize,
       .megatron = {"expert-model-parallel-size"},
       .spec_section = "parallelism",
       .spec_name = "expert_model_parallel_size",
       .spec_default = "1",
       .spec_summary = "EP: splits the experts; num_experts must be divisible by it",
       .json_key = "ep",
       .get = [](const S& s) { return J(s.parallel.ep); },
       .set = [](S& s, const J& v) { s.parallel.ep = as_int(v); }});
  add({.id = "etp",
       .kind = K::kInt,
       .flag = "etp",
       .aliases = {"expert-tensor-parallel-size"},
       .help = "expert tensor parallel size (default 1, as the seed tool and spec files; --megatron-args: TP, as "
               "Megatron-LM)",
       .doc_value = "N",
       .doc = "expert tensor parallel size",
       .doc_default = "1 (the seed's and spec files' default); TP with `--megatron-args` (Megatron-LM's)",
       .max = kMaxParallelSize,
       .megatron = {"expert-tensor-parallel-size"},
       .spec_section = "parallelism",
       .spec_name = "expert_tensor_parallel_size",
       .spec_default = "1",
       .spec_summary = "ETP: tensor parallelism within each expert",
       .spec_get = [](const S& s) { return J(effective_etp(s.parallel)); },
       .json_key = "etp",
       .json_get = [](const S& s) { return J(effective_etp(s.parallel)); },
       // Always spelled out: `mme estimate`'s flags default ETP to the seed's 1, Megatron-LM's to TP.
       .args_always = true,
       .args_get = [](const S& s) { return J(effective_etp(s.parallel)); },
       .get = [](const S& s) { return positive_or_null(s.parallel.etp); },
       .set = [](S& s, const J& v) { s.parallel.etp = v.is_null() ? 0 : as_int(v); }});
  add({.id = "cp",
       .kind = K::kInt,
       .flag = "cp",
       .aliases = {"context-parallel-size"},
       .help = "context parallel size (default 1)",
       .doc_value = "N",
       .doc = "context parallel size",
       .doc_default = "1",
       .max = kMaxParallelSize,
       .megatron = {"context-parallel-size"},
       .spec_section = "parallelism",
       .spec_name = "context_parallel_size",
       .spec_default = "1",
       .spec_summary = "CP: splits the sequence",
       .json_key = "cp",
       .get = [](const S& s) { return J(s.parallel.cp); },
       .set = [](S& s, const J& v) { s.parallel.cp = as_int(v); }});
  add({.id = "cp-comm-type",
       .kind = K::kEnum,
       .flag = "cp-comm-type",
       .help = "with --cp > 1, how TE exchanges the sequence: p2p (default) | all_gather | a2a | a2a+p2p",
       .doc_value = "T",
       .doc = "with `--cp` > 1: how Transformer Engine exchanges the sequence, `p2p`, `all_gather`, `a2a` or "
              "`a2a+p2p` (TE's spellings; Megatron-LM's help text says `allgather`, which TE rejects)",
       .doc_default = "p2p",
       .table = kCpCommTypeNames,
       .values = {"p2p", "all_gather", "a2a", "a2a+p2p"},
       .refused = {{"allgather",
                    "{}: 'allgather' (the spelling of Megatron-LM's help text) is rejected by "
                    "Transformer Engine; use all_gather"}},
       .megatron = {"cp-comm-type"},
       .megatron_read = megatron_cp_comm_type,
       .spec_section = "parallelism",
       .spec_name = "cp_comm_type",
       .spec_default = "p2p",
       .spec_summary = "with CP: how Transformer Engine exchanges the sequence shards",
       .json_key = "cp_comm_type",
       .get = [](const S& s) { return name(kCpCommTypeNames, s.cp_comm_type); },
       .set = [](S& s, const J& v) { s.cp_comm_type = must<CpCommType>(kCpCommTypeNames, v); }});
}

// Batch and sequence, sequence parallelism, the distributed optimizer.
void add_batch_knobs(std::vector<SetupKnob>& k) {
  using K = KnobKind;
  using S = TrainingSetup;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };

  // training ------------------------------------------------------------------------------------
  add({.id = "micro-batch-size",
       .kind = K::kInt,
       .flag = "micro-batch-size",
       .help = "micro-batch size (default 1)",
       .doc_value = "N",
       .doc = "micro-batch size",
       .doc_default = "1",
       .max = kMaxSequenceSize,
       .megatron = {"micro-batch-size"},
       .spec_section = "training",
       .spec_name = "micro_batch_size",
       .spec_required = true,
       .spec_default = "required",
       .spec_summary = "sequences per GPU per forward pass",
       .json_key = "micro_batch_size",
       .args_always = true,
       .get = [](const S& s) { return J(s.micro_batch_size); },
       .set = [](S& s, const J& v) { s.micro_batch_size = as_int(v); }});
  add({.id = "seq-length",
       .kind = K::kInt,
       .flag = "seq-length",
       .help = "sequence length (default 4096)",
       .doc_value = "N",
       .doc = "sequence length",
       .doc_default = "4096",
       .max = kMaxSequenceSize,
       .megatron = {"seq-length"},
       .spec_section = "training",
       .spec_name = "seq_length",
       .spec_required = true,
       .spec_default = "required",
       .spec_summary = "training sequence length; must be <= max_position_embeddings",
       .json_key = "seq_length",
       .get = [](const S& s) { return J(s.seq_length); },
       .set = [](S& s, const J& v) { s.seq_length = as_int(v); }});
  add({.id = "global-batch-size",
       .kind = K::kInt,
       .flag = "global-batch-size",
       .help = "global batch size: sets the number of micro-batches per step",
       .doc_value = "N",
       .doc = "global batch size: sets the number of micro-batches per step",
       .doc_default = "unknown: pipeline assumed full",
       .max = kMaxWorldSize,
       .megatron = {"global-batch-size"},
       .spec_section = "training",
       .spec_name = "global_batch_size",
       .spec_default = "null",
       .spec_summary = "sets the micro-batches per step; null = enough to fill the pipeline",
       .json_key = "global_batch_size",
       .get = [](const S& s) { return positive_or_null(s.global_batch_size); },
       .set = [](S& s, const J& v) { s.global_batch_size = v.is_null() ? 0 : as_int(v); }});
  add({.id = "sequence-parallel",
       .kind = K::kBool,
       .flag = "sequence-parallel",
       .help = "sequence parallelism (default: on when TP > 1)",
       .off_flag = "no-sequence-parallel",
       .off_help = "turn sequence parallelism off",
       .doc = "sequence parallelism (default: on when TP > 1)",
       .off_doc = "off",
       .megatron = {"sequence-parallel"},
       .megatron_default = J(false),
       .spec_section = "training",
       .spec_name = "sequence_parallel",
       .spec_default = "false",
       .spec_summary = "shard activations along the sequence; requires tensor_model_parallel_size > 1",
       .spec_get = [](const S& s) { return J(sequence_parallel_on(s.parallel)); },
       .json_key = "sequence_parallel",
       .json_get = [](const S& s) { return J(sequence_parallel_on(s.parallel)); },
       .get = [](const S& s) { return s.parallel.sequence_parallel ? J(*s.parallel.sequence_parallel) : J(); },
       .set =
           [](S& s, const J& v) {
             s.parallel.sequence_parallel = v.is_null() ? std::nullopt : std::optional<bool>(v.get<bool>());
           }});
  add({.id = "use-distributed-optimizer",
       .kind = K::kBool,
       .flag = "use-distributed-optimizer",
       .help = "the distributed optimizer (the default)",
       .off_flag = "no-distributed-optimizer",
       .off_help = "plain Adam on every rank (18 bytes/param) instead of the distributed optimizer",
       .doc = "the distributed optimizer (the default)",
       .off_doc = "plain Adam on every rank",
       .megatron = {"use-distributed-optimizer"},
       .megatron_default = J(false),
       .spec_section = "training",
       .spec_name = "use_distributed_optimizer",
       .spec_default = "true",
       .spec_summary = "shard optimizer state across data-parallel ranks",
       .json_key = "distributed_optimizer",
       .get = [](const S& s) { return J(s.optimizer.distributed); },
       .set = [](S& s, const J& v) { s.optimizer.distributed = v.get<bool>(); }});
}

// Megatron-FSDP and FSDP2: the kind of sharding, its strategy and dtypes.
void add_sharding_knobs(std::vector<SetupKnob>& k) {
  using K = KnobKind;
  using S = TrainingSetup;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };

  add({.id = "use-megatron-fsdp",
       .kind = K::kBool,
       .flag = "use-megatron-fsdp",
       .help = "Megatron-FSDP: weights, gradients and optimizer states sharded over data parallel",
       .doc = "Megatron-FSDP: weights, gradients and optimizer states sharded over data parallel "
              "(docs/memory-model.md)",
       .megatron = {"use-megatron-fsdp"},
       .megatron_read = megatron_use_megatron_fsdp,
       .spec_section = "training",
       .spec_name = "use_megatron_fsdp",
       .spec_default = "false",
       .spec_summary = "Megatron-FSDP: shard over data parallel per data_parallel_sharding_strategy",
       // The JSON names the kind of sharded data parallelism in one key, for both knobs.
       .json_key = "sharded_data_parallel",
       .json_get = [](const S& s) { return name(kFsdpKindNames, s.fsdp.kind); },
       .get = [](const S& s) { return J(megatron_fsdp(s)); },
       .set =
           [](S& s, const J& v) {
             if (v.get<bool>())
               s.fsdp.kind = FsdpKind::kMegatron;
             else if (megatron_fsdp(s))
               s.fsdp.kind = FsdpKind::kNone;
           }});
  add({.id = "use-torch-fsdp2",
       .kind = K::kBool,
       .flag = "use-torch-fsdp2",
       .help = "PyTorch FSDP2 (implies no distributed optimizer and no gradient accumulation fusion)",
       .doc = "PyTorch FSDP2; implies no distributed optimizer and no gradient accumulation fusion, as Megatron-LM "
              "requires",
       .megatron = {"use-torch-fsdp2"},
       .megatron_read = megatron_use_torch_fsdp2,
       .spec_section = "training",
       .spec_name = "use_torch_fsdp2",
       .spec_default = "false",
       .spec_summary =
           "PyTorch FSDP2 (needs use_distributed_optimizer: false; implies no gradient accumulation fusion)",
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
             if (v.get<bool>())
               s.fsdp.kind = FsdpKind::kTorchFsdp2;
             else if (torch_fsdp2(s))
               s.fsdp.kind = FsdpKind::kNone;
           },
       .mme_set = mme_use_torch_fsdp2,
       .why_not = "JSON: the key sharded_data_parallel (of use-megatron-fsdp) names the kind for both"});
  add({.id = "data-parallel-sharding-strategy",
       .kind = K::kEnum,
       .flag = "data-parallel-sharding-strategy",
       .help = "with --use-megatron-fsdp: no_shard | optim | optim_grads | optim_grads_params (default: all sharded, "
               "ZeRO-3)",
       .doc_value = "S",
       .doc = "with `--use-megatron-fsdp`: `no_shard`, `optim`, `optim_grads`, `optim_grads_params`",
       .doc_default = "optim_grads_params",
       .table = kFsdpShardingNames,
       .values = {"no_shard", "optim", "optim_grads", "optim_grads_params"},
       .megatron = {"data-parallel-sharding-strategy"},
       .spec_section = "training",
       .spec_name = "data_parallel_sharding_strategy",
       .spec_default = "optim_grads_params",
       .spec_summary = "Megatron-FSDP: what is sharded",
       .json_key = "data_parallel_sharding_strategy",
       .json_when = megatron_fsdp,
       .args_when = megatron_fsdp,
       .get = [](const S& s) { return name(kFsdpShardingNames, s.fsdp.strategy); },
       .set = [](S& s, const J& v) { s.fsdp.strategy = must<FsdpSharding>(kFsdpShardingNames, v); }});
  add({.id = "outer-dp-sharding-strategy",
       .kind = K::kEnum,
       .flag = "outer-dp-sharding-strategy",
       .help = "Megatron-FSDP with optimizer instances (HSDP): no_shard (default) | optim",
       .doc_value = "S",
       .doc = "Megatron-FSDP with optimizer instances (HSDP): `no_shard` or `optim`",
       .doc_default = "no_shard",
       .table = kFsdpShardingNames,
       .values = {"no_shard", "optim"},
       .megatron = {"outer-dp-sharding-strategy"},
       .spec_section = "training",
       .spec_name = "outer_dp_sharding_strategy",
       .spec_default = "no_shard",
       .spec_summary = "Megatron-FSDP with optimizer instances (HSDP): the outer sharding",
       .json_key = "outer_dp_sharding_strategy",
       .json_when = megatron_fsdp,
       .args_when = megatron_fsdp,
       .get = [](const S& s) { return name(kFsdpShardingNames, s.fsdp.outer); },
       .set = [](S& s, const J& v) { s.fsdp.outer = must<FsdpSharding>(kFsdpShardingNames, v); }});
  add({.id = "megatron-fsdp-main-params-dtype",
       .kind = K::kEnum,
       .flag = "megatron-fsdp-main-params-dtype",
       .help = "Megatron-FSDP main weights: fp32 (default) | bf16 | fp16",
       .doc_value = "D",
       .doc = "Megatron-FSDP main weights: `fp32`, `bf16`, `fp16` (`auto` is refused: not modelled)",
       .doc_default = "fp32",
       .table = kDTypeNames,
       .values = {"fp32", "bf16", "fp16"},
       .refused = {{"auto",
                    "{} auto (no fp32 main weights; the optimizer steps the model weights) is not modelled; "
                    "give fp32, bf16 or fp16"}},
       .megatron = {"megatron-fsdp-main-params-dtype"},
       .megatron_read = megatron_fsdp_main_params,
       .spec_section = "training",
       .spec_name = "megatron_fsdp_main_params_dtype",
       .spec_default = "fp32",
       .spec_summary = "Megatron-FSDP main weights",
       .json_key = "megatron_fsdp_main_params_dtype",
       .json_when = megatron_fsdp,
       .args_when = megatron_fsdp,
       .get = [](const S& s) { return name(kDTypeNames, s.fsdp.main_params); },
       .set = [](S& s, const J& v) { s.fsdp.main_params = must<DType>(kDTypeNames, v); }});
  add({.id = "megatron-fsdp-main-grads-dtype",
       .kind = K::kEnum,
       .flag = "megatron-fsdp-main-grads-dtype",
       .help = "Megatron-FSDP gradient buffer: auto (default: the param dtype) | fp32 | bf16 | fp16",
       .doc_value = "D",
       .doc = "Megatron-FSDP gradient buffer: `auto` (the param dtype), `fp32`, `bf16`, `fp16`",
       .doc_default = "auto",
       .table = kDTypeNames,
       .values = {"auto", "fp32", "bf16", "fp16"},
       .null_name = "auto",
       .megatron = {"megatron-fsdp-main-grads-dtype"},
       .spec_section = "training",
       .spec_name = "megatron_fsdp_main_grads_dtype",
       .spec_default = "auto",
       .spec_summary = "Megatron-FSDP gradient buffer; auto = the param dtype",
       .spec_get = [](const S& s) { return s.fsdp.main_grads ? name(kDTypeNames, *s.fsdp.main_grads) : J("auto"); },
       .json_key = "megatron_fsdp_main_grads_dtype",
       .json_get = [](const S& s) { return s.fsdp.main_grads ? name(kDTypeNames, *s.fsdp.main_grads) : J("auto"); },
       .json_when = megatron_fsdp,
       .args_when = megatron_fsdp,
       .get = [](const S& s) { return opt_dtype(s.fsdp.main_grads); },
       .set = [](S& s, const J& v) { s.fsdp.main_grads = value_of<DType>(kDTypeNames, v, "auto"); }});
}

// The sharded data-parallel buffers and the distributed optimizer instances.
void add_sharding_detail_knobs(std::vector<SetupKnob>& k) {
  using K = KnobKind;
  using S = TrainingSetup;
  auto add = [&](SetupKnob knob) { k.push_back(std::move(knob)); };

  add({.id = "megatron-fsdp-grad-comm-dtype",
       .kind = K::kEnum,
       .flag = "megatron-fsdp-grad-comm-dtype",
       .help = "Megatron-FSDP reduce-scatter dtype: auto (default: the gradients') | fp32 | bf16 | fp16",
       .doc_value = "D",
       .doc = "Megatron-FSDP reduce-scatter dtype: `auto` (the gradients'), `fp32`, `bf16`, `fp16`",
       .doc_default = "auto",
       .table = kDTypeNames,
       .values = {"auto", "fp32", "bf16", "fp16"},
       .null_name = "auto",
       .megatron = {"megatron-fsdp-grad-comm-dtype"},
       .spec_section = "training",
       .spec_name = "megatron_fsdp_grad_comm_dtype",
       .spec_default = "auto",
       .spec_summary = "Megatron-FSDP reduce-scatter dtype; auto = the gradients'",
       .spec_get = [](const S& s) { return s.fsdp.grad_comm ? name(kDTypeNames, *s.fsdp.grad_comm) : J("auto"); },
       .json_key = "megatron_fsdp_grad_comm_dtype",
       .json_get = [](const S& s) { return s.fsdp.grad_comm ? name(kDTypeNames, *s.fsdp.grad_comm) : J("auto"); },
       .json_when = megatron_fsdp,
       .args_when = megatron_fsdp,
       .get = [](const S& s) { return opt_dtype(s.fsdp.grad_comm); },
       .set = [](S& s, const J& v) { s.fsdp.grad_comm = value_of<DType>(kDTypeNames, v, "auto"); }});
  add({.id = "fsdp-double-buffer",
       .kind = K::kBool,
       .flag = "fsdp-double-buffer",
       .help = "Megatron-FSDP: two persistent gather/gradient slots of the largest layer",
       .doc = "Megatron-FSDP: two persistent gather/gradient slots of the largest layer",
       // --use-nccl-ub and --megatron-fsdp-max-pool-double-buffer switch the double buffer on too.
       .megatron = {"fsdp-double-buffer", "use-nccl-ub", "megatron-fsdp-max-pool-double-buffer"},
       .spec_section = "training",
       .spec_name = "fsdp_double_buffer",
       .spec_default = "false",
       .spec_summary = "Megatron-FSDP: two persistent slots of the largest layer",
       .json_key = "fsdp_double_buffer",
       .json_when = megatron_fsdp,
       .args_when = megatron_fsdp,
       .get = [](const S& s) { return J(s.fsdp.double_buffer); },
       .set = [](S& s, const J& v) { s.fsdp.double_buffer = v.get<bool>(); }});
  add({.id = "suggested-communication-unit-size",
       .kind = K::kInt,
       .flag = "suggested-communication-unit-size",
       .help = "Megatron-FSDP: parameters per communication unit (default: max(1e9, 2 x the average layer))",
       .doc_value = "N",
       .doc = "Megatron-FSDP: parameters per communication unit (the prefetch reaches N/2 ahead)",
       .doc_default = "max(1e9, 2 x the average layer)",
       .max = kMaxWorldSize,
       .megatron = {"suggested-communication-unit-size"},
       .spec_section = "training",
       .spec_name = "suggested_communication_unit_size",
       .spec_default = "null",
       .spec_summary = "Megatron-FSDP: parameters per communication unit",
       .json_key = "suggested_communication_unit_size",
       .json_when = megatron_fsdp,
       .args_when = megatron_fsdp,
       .get = [](const S& s) { return positive_or_null(s.fsdp.communication_unit_size); },
       .set = [](S& s, const J& v) { s.fsdp.communication_unit_size = v.is_null() ? 0 : as_int(v); }});
  add({.id = "torch-fsdp2-reshard-after-forward",
       .kind = K::kBool,
       .off_flag = "torch-fsdp2-no-reshard-after-forward",
       .off_help = "FSDP2: keep every layer gathered from its forward to its backward",
       .off_doc = "FSDP2: every layer stays gathered from its forward to its backward",
       .megatron_off = {"torch-fsdp2-no-reshard-after-forward"},
       .spec_section = "training",
       .spec_name = "torch_fsdp2_reshard_after_forward",
       .spec_default = "true",
       .spec_summary = "FSDP2: free each layer's gathered weights after its forward",
       .json_key = "torch_fsdp2_reshard_after_forward",
       .json_when = torch_fsdp2,
       .args_when = torch_fsdp2,
       .get = [](const S& s) { return J(s.fsdp.reshard_after_forward); },
       .set = [](S& s, const J& v) { s.fsdp.reshard_after_forward = v.get<bool>(); }});
  add({.id = "num-distributed-optimizer-instances",
       .kind = K::kInt,
       .flag = "num-distributed-optimizer-instances",
       .help = "distributed optimizer instances (default 1)",
       .doc_value = "N",
       .doc = "distributed optimizer instances",
       .doc_default = "1",
       .max = kMaxParallelSize,
       .megatron = {"num-distributed-optimizer-instances"},
       .spec_section = "training",
       .spec_name = "num_distributed_optimizer_instances",
       .spec_default = "1",
       .spec_summary = "distributed optimizer instances",
       .json_key = "num_distributed_optimizer_instances",
       .get = [](const S& s) { return J(s.optimizer.instances); },
       .set = [](S& s, const J& v) { s.optimizer.instances = as_int(v); }});
}

}  // namespace mme::setup_knobs_detail
