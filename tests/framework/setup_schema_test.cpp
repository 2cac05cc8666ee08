// The training-setup schema (setup_schema.hpp): every knob survives each of its paths (mme
// flags, Megatron-LM flags, spec files, the JSON `setup` block) at a value other than its
// default; an unknown value of an enum knob is refused on each path, naming the flag (or
// field) and the accepted values; docs/cli.md's flag tables are the schema's.
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mme/inputs/megatron_args.hpp>
#include <mme/inputs/megatron_flags.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/inputs/spec_file.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/model_spec.hpp>
#include <mme/sdk/training_setup.hpp>

#include "test_support.hpp"

namespace mme {
namespace {

using ::testing::HasSubstr;
using J = nlohmann::json;

std::string joined(const std::vector<std::string>& words) { return fmt::format("{}", fmt::join(words, " ")); }

// Each knob at a value other than its default, with what the readers ask for around it
// (Megatron-FSDP for its settings, full recompute for the method, ...).
struct Case {
  const char* knob;
  std::function<void(TrainingSetup&)> set;
};

std::vector<Case> cases() {
  using S = TrainingSetup;
  auto megatron_fsdp = [](std::function<void(S&)> f) {
    return [f](S& s) {
      s.fsdp.kind = FsdpKind::kMegatron;
      f(s);
    };
  };
  auto fsdp2 = [](S& s) {
    s.fsdp.kind = FsdpKind::kTorchFsdp2;
    s.optimizer.distributed = false;
    s.gradient_accumulation_fusion = false;
  };
  auto fine_grained = [](std::function<void(S&)> f) {
    return [f](S& s) {
      s.activation_offload.fine_grained = true, s.activation_offload.modules = kOffloadCoreAttn;
      f(s);
    };
  };
  auto precision_aware = [](std::function<void(S&)> f) {
    return [f](S& s) {
      s.optimizer.precision_aware = true;
      f(s);
    };
  };
  // LoRA's details need its rank.
  auto lora = [](std::function<void(S&)> f) {
    return [f](S& s) {
      s.lora.rank = 16;
      f(s);
    };
  };
  return {
      {"lora-rank", [](S& s) { s.lora.rank = 16; }},
      {"lora-alpha", lora([](S& s) { s.lora.alpha = 64; })},
      {"lora-target-modules", lora([](S& s) { s.lora.targets = kLoraLinearQkv | kLoraLinearFc2; })},
      {"lora-dropout", lora([](S& s) { s.lora.dropout = 0.1; })},
      {"lora-dropout-position", lora([](S& s) { s.lora.dropout_position = LoraDropoutPosition::kPost; })},
      {"lora-dtype", lora([](S& s) { s.lora.dtype = DType::kFP32; })},
      {"lora-a-init-method", lora([](S& s) { s.lora.a_init = "kaiming"; })},
      {"lora-b-init-method", lora([](S& s) { s.lora.b_init = "normal"; })},
      {"lora-a2a-experimental", lora([](S& s) { s.lora.a2a_experimental = true; })},
      {"tp", [](S& s) { s.parallel.tp = 4; }},
      {"pp", [](S& s) { s.parallel.pp = 4; }},
      {"vpp", [](S& s) { s.parallel.pp = 2, s.parallel.vpp = 3; }},
      {"num-layers-per-virtual-pipeline-stage",
       [](S& s) { s.parallel.pp = 2, s.pipeline.layers_per_virtual_stage = 2; }},
      {"microbatch-group-size-per-virtual-pipeline-stage",
       [](S& s) { s.parallel.pp = 2, s.parallel.vpp = 2, s.pipeline.microbatch_group_size = 4; }},
      {"num-layers-in-first-pipeline-stage", [](S& s) { s.parallel.pp = 2, s.pipeline.first_stage_layers = 3; }},
      {"num-layers-in-last-pipeline-stage", [](S& s) { s.parallel.pp = 2, s.pipeline.last_stage_layers = 0; }},
      {"pipeline-layout", [](S& s) { s.parallel.pp = 2, s.pipeline.layout = "Ett|ttL"; }},
      {"account-for-embedding-in-pipeline-split", [](S& s) { s.pipeline.account_for_embedding = true; }},
      {"account-for-loss-in-pipeline-split", [](S& s) { s.pipeline.account_for_loss = true; }},
      {"ep", [](S& s) { s.parallel.ep = 8; }},
      {"etp", [](S& s) { s.parallel.tp = 4, s.parallel.etp = 2; }},
      {"cp", [](S& s) { s.parallel.cp = 2; }},
      // (a2a+p2p needs --hierarchical-context-parallel-sizes on a launch line, which the setup
      // does not keep: its printed flags are refused, MegatronExport.WhatNoFlagExpressesIsRefused.)
      {"cp-comm-type", [](S& s) { s.parallel.cp = 2, s.cp_comm_type = CpCommType::kA2A; }},
      {"micro-batch-size", [](S& s) { s.micro_batch_size = 3; }},
      {"seq-length", [](S& s) { s.seq_length = 8192; }},
      {"global-batch-size", [](S& s) { s.global_batch_size = 512; }},
      {"sequence-parallel", [](S& s) { s.parallel.tp = 2, s.parallel.sequence_parallel = true; }},
      {"sequence-parallel", [](S& s) { s.parallel.tp = 2, s.parallel.sequence_parallel = false; }},
      {"use-distributed-optimizer", [](S& s) { s.optimizer.distributed = false; }},
      {"use-megatron-fsdp", [](S& s) { s.fsdp.kind = FsdpKind::kMegatron; }},
      {"use-torch-fsdp2", fsdp2},
      {"data-parallel-sharding-strategy", megatron_fsdp([](S& s) { s.fsdp.strategy = FsdpSharding::kOptimGrads; })},
      {"outer-dp-sharding-strategy", megatron_fsdp([](S& s) { s.fsdp.outer = FsdpSharding::kOptim; })},
      {"megatron-fsdp-main-params-dtype", megatron_fsdp([](S& s) { s.fsdp.main_params = DType::kBF16; })},
      {"megatron-fsdp-main-grads-dtype", megatron_fsdp([](S& s) { s.fsdp.main_grads = DType::kBF16; })},
      {"megatron-fsdp-grad-comm-dtype", megatron_fsdp([](S& s) { s.fsdp.grad_comm = DType::kFP32; })},
      {"fsdp-double-buffer", megatron_fsdp([](S& s) { s.fsdp.double_buffer = true; })},
      {"suggested-communication-unit-size", megatron_fsdp([](S& s) { s.fsdp.communication_unit_size = 100000000; })},
      {"torch-fsdp2-reshard-after-forward",
       [fsdp2](S& s) {
         fsdp2(s);
         s.fsdp.reshard_after_forward = false;
       }},
      {"num-distributed-optimizer-instances", [](S& s) { s.optimizer.instances = 2; }},
      {"optimizer", [](S& s) { s.optimizer.name = "muon"; }},
      {"use-precision-aware-optimizer", [](S& s) { s.optimizer.precision_aware = true; }},
      {"optimizer-cpu-offload-fraction", precision_aware([](S& s) { s.optimizer.cpu_offload_fraction = 0.25; })},
      {"overlap-cpu-optimizer-d2h-h2d",
       precision_aware([](S& s) { s.optimizer.cpu_offload_fraction = 0.5, s.optimizer.overlap_cpu_d2h_h2d = true; })},
      {"cpu-offloading", [](S& s) { s.activation_offload.cpu_offloading = true; }},
      {"cpu-offloading-num-layers", [](S& s) { s.activation_offload.cpu_offloading_num_layers = 3; }},
      {"cpu-offloading-activations",
       [](S& s) {
         s.activation_offload.cpu_offloading_num_layers = 2;
         s.activation_offload.cpu_offloading_activations = false, s.activation_offload.cpu_offloading_weights = true;
       }},
      {"cpu-offloading-weights",
       [](S& s) { s.activation_offload.cpu_offloading = true, s.activation_offload.cpu_offloading_weights = true; }},
      {"fine-grained-activation-offloading",
       [](S& s) { s.activation_offload.fine_grained = true, s.activation_offload.modules = kOffloadCoreAttn; }},
      {"offload-modules",
       [](S& s) {
         s.activation_offload.fine_grained = true;
         s.activation_offload.modules = kOffloadAttnNorm | kOffloadCoreAttn | kOffloadAttnProj | kOffloadMoeAct;
       }},
      {"min-offloaded-tensor-size", fine_grained([](S& s) { s.activation_offload.min_tensor_size = 4096; })},
      {"activation-offload-fraction", fine_grained([](S& s) { s.activation_offload.fraction = 0.5; })},
      {"delta-offload-bytes-across-pp-ranks",
       fine_grained([](S& s) { s.activation_offload.delta_bytes_across_pp_ranks = 1 << 30; })},
      {"recompute-granularity", [](S& s) { s.recompute.granularity = RecomputeGranularity::kFull; }},
      {"recompute-method",
       [](S& s) {
         s.recompute.granularity = RecomputeGranularity::kFull, s.recompute.method = RecomputeMethod::kBlock;
       }},
      {"recompute-num-layers",
       [](S& s) { s.recompute.granularity = RecomputeGranularity::kFull, s.recompute.num_layers = 3; }},
      {"recompute-modules",
       [](S& s) {
         s.recompute.granularity = RecomputeGranularity::kSelective;
         s.recompute.modules = kRecomputeMlp | kRecomputeMoeAct;
       }},
      {"make-vocab-size-divisible-by", [](S& s) { s.make_vocab_size_divisible_by = 64; }},
      {"moe-token-dispatcher", [](S& s) { s.dispatcher = TokenDispatcher::kFlex; }},
      {"moe-token-dispatcher", [](S& s) { s.dispatcher = TokenDispatcher::kAllGather; }},
      {"moe-capacity-factor", [](S& s) { s.moe_capacity_factor = 1.5; }},
      {"moe-pad-expert-input-to-capacity", [](S& s) { s.moe_capacity_factor = 1.0, s.moe_pad_to_capacity = true; }},
      {"moe-router-force-load-balancing", [](S& s) { s.moe_force_load_balancing = true; }},
      {"moe-routing-imbalance", [](S& s) { s.moe_routing_imbalance = 2.0; }},
      {"moe-grouped-gemm", [](S& s) { s.moe_grouped_gemm = false; }},
      {"moe-flex-dispatcher-backend",
       [](S& s) { s.dispatcher = TokenDispatcher::kFlex, s.comm.flex_backend = FlexBackend::kHybridEP; }},
      {"moe-shared-expert-overlap", [](S& s) { s.comm.shared_expert_overlap = true; }},
      {"overlap-moe-expert-parallel-comm", [](S& s) { s.comm.ep_overlap = true; }},
      {"tp-comm-overlap", [](S& s) { s.parallel.tp = 2, s.comm.tp_comm_overlap = true; }},
      {"overlap-grad-reduce", [](S& s) { s.comm.overlap_grad_reduce = true; }},
      {"overlap-param-gather", [](S& s) { s.comm.overlap_grad_reduce = true, s.comm.overlap_param_gather = true; }},
      {"ddp-bucket-size", [](S& s) { s.comm.overlap_grad_reduce = true, s.comm.ddp_bucket_size = 1000000; }},
      {"ddp-pad-buckets-for-high-nccl-busbw", [](S& s) { s.comm.pad_buckets_for_nccl = true; }},
      {"cuda-graph-impl", [](S& s) { s.cuda_graph.impl = CudaGraphImpl::kLocal; }},
      {"cuda-graph-modules",
       [](S& s) {
         s.cuda_graph.impl = CudaGraphImpl::kTransformerEngine, s.cuda_graph.modules = kGraphAttn | kGraphMlp;
       }},
      {"cuda-graph-warmup-steps",
       [](S& s) { s.cuda_graph.impl = CudaGraphImpl::kTransformerEngine, s.cuda_graph.warmup_steps = 0; }},
      {"cross-entropy-loss-fusion", [](S& s) { s.cross_entropy_fusion = true; }},
      {"cross-entropy-fusion-impl", [](S& s) { s.cross_entropy_fusion = true, s.cross_entropy_te = true; }},
      {"attention-backend", [](S& s) { s.attention_backend = AttentionBackend::kUnfused; }},
      {"attention-backend", [](S& s) { s.attention_backend = AttentionBackend::kFlash; }},
      {"masked-softmax-fusion", [](S& s) { s.masked_softmax_fusion = false; }},
      {"bias-swiglu-fusion", [](S& s) { s.bias_swiglu_fusion = false; }},
      {"bias-gelu-fusion", [](S& s) { s.bias_gelu_fusion = false; }},
      {"use-fused-weighted-squared-relu", [](S& s) { s.fused_weighted_squared_relu = true; }},
      {"rope-fusion", [](S& s) { s.apply_rope_fusion = false; }},
      {"bias-dropout-fusion", [](S& s) { s.bias_dropout_fusion = false; }},
      {"create-attention-mask-in-dataloader", [](S& s) { s.create_attention_mask = true; }},
      {"attention-softmax-in-fp32", [](S& s) { s.attention_softmax_in_fp32 = true; }},
      {"transformer-impl", [](S& s) { s.transformer_engine = false; }},
      {"gradient-accumulation-fusion", [](S& s) { s.gradient_accumulation_fusion = false; }},
      {"defer-embedding-wgrad-compute", [](S& s) { s.parallel.pp = 2, s.defer_embedding_wgrad = true; }},
      {"wgrad-deferral-limit", [](S& s) { s.wgrad_deferral_limit = 3; }},
      {"num-gpus", [](S& s) { s.parallel.world_size = 64; }},
      {"cublas-workspace-config", [](S& s) { s.cublas_workspace_config = ":16:8"; }},
      {"empty-unused-memory-level", [](S& s) { s.empty_unused_memory_level = 2; }},
      {"deterministic-mode", [](S& s) { apply_deterministic_mode(s); }},
      {"env",
       [](S& s) {
         (void)apply_environment(s, "NVTE_FUSED_ATTN", "0");
         s.environment_ignored.push_back("NCCL_DEBUG=INFO");
       }},
      {"env", [](S& s) { (void)apply_environment(s, "NVTE_ALLOW_NONDETERMINISTIC_ALGO", "0"); }},
      {"precision", [](S& s) { s.precision = Precision::kFP8; }},
      {"precision", [](S& s) { s.precision = Precision::kFP16; }},
      {"precision", [](S& s) { s.precision = Precision::kFP32; }},
      {"fp8-param-gather", [](S& s) { s.precision = Precision::kFP8, s.fp8_param_gather = true; }},
      {"fp8-format", [](S& s) { s.precision = Precision::kFP8, s.low_precision.fp8_format = Fp8Format::kHybrid; }},
      {"fp8-recipe", [](S& s) { s.precision = Precision::kFP8, s.low_precision.fp8_recipe = Fp8Recipe::kBlockwise; }},
      {"fp8-recipe", [](S& s) { s.precision = Precision::kFP8, s.low_precision.fp8_recipe = Fp8Recipe::kMxfp8; }},
      {"fp8-amax-history-len", [](S& s) { s.precision = Precision::kFP8, s.low_precision.amax_history_len = 16; }},
      {"first-last-layers-bf16",
       [](S& s) {
         s.precision = Precision::kFP8, s.low_precision.fp8_recipe = Fp8Recipe::kTensorwise;
         s.low_precision.first_last_layers_bf16 = true;
       }},
      {"num-layers-at-start-in-bf16",
       [](S& s) {
         s.precision = Precision::kFP8, s.low_precision.fp8_recipe = Fp8Recipe::kTensorwise;
         s.low_precision.first_last_layers_bf16 = true, s.low_precision.layers_at_start_in_bf16 = 2;
       }},
      {"num-layers-at-end-in-bf16",
       [](S& s) {
         s.precision = Precision::kFP8, s.low_precision.fp8_recipe = Fp8Recipe::kMxfp8;
         s.low_precision.first_last_layers_bf16 = true, s.low_precision.layers_at_end_in_bf16 = 0;
       }},
      {"fp4-format", [](S& s) { s.low_precision.fp4 = true; }},
      {"fp4-param-gather", [](S& s) { s.low_precision.fp4 = true, s.low_precision.fp4_param_gather = true; }},
      {"main-grads-dtype", [](S& s) { s.optimizer.main_grads = DType::kBF16; }},
      {"main-params-dtype", precision_aware([](S& s) { s.optimizer.main_params = DType::kFP16; })},
      {"exp-avg-dtype", precision_aware([](S& s) { s.optimizer.exp_avg = DType::kBF16; })},
      {"exp-avg-sq-dtype", precision_aware([](S& s) { s.optimizer.exp_avg_sq = DType::kFP8; })},
      {"hidden-dropout", [](S& s) { s.hidden_dropout = 0.2; }},
      {"attention-dropout", [](S& s) { s.attention_dropout = 0.05; }},
  };
}

bool has_megatron(const SetupKnob& k) {
  return !k.megatron.empty() || !k.megatron_off.empty() || k.kind == KnobKind::kEnv;
}

// A model that spec files write as `hf:` (no layers): the spec's setup sections are the test.
ModelSpec some_model() {
  ModelSpec m;
  m.name = "org/model";
  return m;
}

// No spec_file adapter either: the model is written as `hf:` all the same.
const Registry& no_plugins() {
  static const Registry r;
  return r;
}

TEST(setup_schema, EveryKnobHasACase) {
  std::set<std::string> covered;
  for (const auto& c : cases()) {
    ASSERT_NE(find_knob(c.knob), nullptr) << c.knob;
    covered.insert(c.knob);
  }
  for (const auto& k : setup_knobs()) EXPECT_TRUE(covered.count(k.id)) << "no round-trip case for " << k.id;
  EXPECT_EQ(setup_knobs_in_flag_order().size(), setup_knobs().size());
}

// A path a knob lacks says why (spec files and Megatron-LM spell some knobs elsewhere).
TEST(setup_schema, EveryMissingPathIsExplained) {
  for (const auto& k : setup_knobs()) {
    SCOPED_TRACE(k.id);
    EXPECT_TRUE(k.flag || k.off_flag) << "no mme flag";
    const std::string why = k.why_not;
    if (!has_megatron(k)) {
      EXPECT_THAT(why, HasSubstr("Megatron-LM"));
    }
    if (!k.spec_section) {
      EXPECT_THAT(why, HasSubstr("spec files"));
    }
    if (!k.json_key) {
      EXPECT_THAT(why, HasSubstr("JSON"));
    }
    EXPECT_TRUE(k.get && k.set);
  }
}

TEST(setup_schema, EveryKnobRoundTripsThroughEachPath) {
  for (const auto& c : cases()) {
    const SetupKnob& k = *find_knob(c.knob);
    TrainingSetup s;
    c.set(s);
    const J want = k.get(s);
    SCOPED_TRACE(std::string(c.knob) + " = " + want.dump());
    ASSERT_NE(want, k.get(TrainingSetup{})) << "the case leaves the knob at its default";

    // mme flags, as the planner prints them.
    const auto args = setup_to_mme_args(s);
    SCOPED_TRACE("mme " + joined(args));
    EXPECT_EQ(k.get(setup_from_mme_flags(*mme_flags_from_args(args), TrainingSetup{})), want);

    // Megatron-LM flags.
    if (has_megatron(k)) {
      // As an argument file, its values quoted (a pipeline layout holds '|').
      const std::string text = megatron_args_file_text(setup_to_megatron_args(s));
      SCOPED_TRACE("megatron " + text);
      const TrainingSetup back = setup_from_megatron_args(parse_megatron_args(text, "test"), TrainingSetup{});
      EXPECT_EQ(k.get(back), want);
    }

    // Spec files, YAML and JSON.
    if (k.spec_section) {
      const std::string yaml = write_spec_yaml(some_model(), s, no_plugins());
      SCOPED_TRACE(yaml);
      EXPECT_EQ(k.get(parse_spec_text(yaml, "spec.yaml", SpecFormat::kYaml).setup), want);
      const std::string json = write_spec_json(some_model(), s, no_plugins());
      EXPECT_EQ(k.get(parse_spec_text(json, "spec.json", SpecFormat::kJson).setup), want);
    }

    // The JSON `setup` block.
    if (k.json_key) {
      const J block = setup_to_json_block(s);
      SCOPED_TRACE(block.dump());
      EXPECT_EQ(k.get(setup_from_json_block(block, TrainingSetup{})), want);
    }
  }
}

TEST(setup_schema, TheDefaultSetupPrintsOnlyTheLayout) {
  EXPECT_EQ(joined(setup_to_mme_args(TrainingSetup{})), "--tp 1 --pp 1 --etp 1 --num-gpus 8 --micro-batch-size 1");
}

// An unknown value of a known flag: refused on every path, naming the flag and the values.
TEST(setup_schema, UnknownEnumValuesAreRefusedOnEveryPath) {
  for (const auto& k : setup_knobs()) {
    if (k.kind != KnobKind::kEnum) continue;
    SCOPED_TRACE(k.id);
    const std::string values = knob_values_text(k);
    try {
      (void)setup_from_mme_flags(*mme_flags_from_args({std::string("--") + k.flag, "bogus"}), TrainingSetup{});
      ADD_FAILURE() << "mme flag accepted";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()), fmt::format("--{}: unknown value 'bogus' ({})", k.flag, values));
    }
    for (const char* m : k.megatron) {
      if (std::string_view(m) == "bf16" || std::string_view(m) == "fp16") continue;  // switches of precision
      try {
        (void)setup_from_megatron_args(parse_megatron_args(fmt::format("--{} bogus", m), "test"), TrainingSetup{});
        ADD_FAILURE() << "Megatron-LM flag accepted";
      } catch (const UsageError& e) {
        EXPECT_EQ(std::string(e.what()), fmt::format("--{}: unknown value 'bogus' ({})", m, values));
      }
    }
    if (k.spec_section) {
      try {
        (void)parse_spec_text(fmt::format("{}:\n  {}: bogus\n", k.spec_section, k.spec_name), "spec.yaml",
                              SpecFormat::kYaml);
        ADD_FAILURE() << "spec field accepted";
      } catch (const ConfigError& e) {
        EXPECT_THAT(std::string(e.what()),
                    HasSubstr(fmt::format("spec.yaml:2: {}.{}: expected ", k.spec_section, k.spec_name)));
        for (const char* v : k.spec_values.empty() ? k.values : k.spec_values)
          EXPECT_THAT(std::string(e.what()), HasSubstr(v));
      }
    }
  }
  // --fp8-format is how Megatron-LM asks for FP8.
  EXPECT_THROW((void)setup_from_megatron_args(parse_megatron_args("--bf16 --fp8-format e5m2", "t"), TrainingSetup{}),
               UsageError);
  EXPECT_EQ(setup_from_megatron_args(parse_megatron_args("--bf16 --fp8-format hybrid", "t"), TrainingSetup{}).precision,
            Precision::kFP8);
  // Without --bf16 the parameters and activations are fp32 (arguments.py params_dtype) or fp16:
  // FP8 over them is not modelled, and taking it for FP8 over bf16 would halve the fp32
  // activations, so it is refused with what to do instead.
  for (const auto& [flags, dtype, bytes] :
       {std::tuple{"--fp8-format e4m3", "fp32", "4"}, std::tuple{"--fp16 --fp8-format hybrid", "fp16", "2"}}) {
    try {
      (void)setup_from_megatron_args(parse_megatron_args(flags, "t"), TrainingSetup{});
      ADD_FAILURE() << flags << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_THAT(std::string(e.what()), HasSubstr(fmt::format("without --bf16: FP8 GEMMs over {} parameters", dtype)));
      EXPECT_THAT(std::string(e.what()), HasSubstr(fmt::format("its GEMM inputs at {} bytes instead of 1", bytes)));
    }
  }
  // mme's own --fp8-format means --precision fp8 (over bf16): an fp32 or fp16 precision given with
  // it contradicts it, in either order, and is not replaced.
  auto mme = [](const std::vector<std::string>& args) {
    return setup_from_mme_flags(*mme_flags_from_args(args), TrainingSetup{});
  };
  for (const auto& [args, other] :
       {std::pair{std::vector<std::string>{"--precision", "fp32", "--fp8-format", "e4m3"}, "fp32"},
        std::pair{std::vector<std::string>{"--fp8-format", "e4m3", "--precision", "fp16"}, "fp16"},
        std::pair{std::vector<std::string>{"--fp16", "--fp8-format", "hybrid"}, "fp16"}}) {
    try {
      (void)mme(args);
      ADD_FAILURE() << args[1] << " " << args[3] << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_THAT(std::string(e.what()), HasSubstr(fmt::format("contradicts --precision {}", other)));
    }
  }
  EXPECT_EQ(mme({"--precision", "bf16", "--fp8-format", "e4m3"}).precision, Precision::kFP8);
  EXPECT_EQ(mme({"--fp8-format", "e4m3"}).precision, Precision::kFP8);
}

// What used to differ between the inputs, now one definition each.
TEST(setup_schema, OneDefinitionPerKnob) {
  auto megatron = [](const std::string& text) {
    return setup_from_megatron_args(parse_megatron_args(text, "test"), TrainingSetup{});
  };
  auto mme = [](const std::vector<std::string>& args) {
    return setup_from_mme_flags(*mme_flags_from_args(args), TrainingSetup{});
  };
  // Megatron-LM's flags of the uneven split (num_layers_in_first_pipeline_stage is the name of
  // TransformerConfig's field, which arguments.py sets from --decoder-first-pipeline-num-layers).
  EXPECT_EQ(megatron("--decoder-first-pipeline-num-layers 3").pipeline.first_stage_layers, 3);
  EXPECT_EQ(megatron("--decoder-last-pipeline-num-layers 5").pipeline.last_stage_layers, 5);
  // alltoall_seq is alltoall everywhere, not only in Megatron-LM flags.
  EXPECT_EQ(mme({"--moe-token-dispatcher", "alltoall_seq"}).dispatcher, TokenDispatcher::kAllToAll);
  // The dtypes each knob takes: Megatron-LM's choices.
  EXPECT_THROW((void)mme({"--main-params-dtype", "bf16"}), UsageError);
  EXPECT_THROW((void)megatron("--main-grads-dtype fp8"), UsageError);
  EXPECT_THROW((void)mme({"--outer-dp-sharding-strategy", "optim_grads"}), UsageError);
  // Ranges: the capacity factor and the dropout rates are the spec file's; on a launch line a
  // negative capacity factor is none (transformer_config.py), 0 is still refused.
  EXPECT_THROW((void)mme({"--moe-capacity-factor", "-1"}), UsageError);
  EXPECT_FALSE(megatron("--moe-expert-capacity-factor 1.5 --moe-expert-capacity-factor -1").moe_capacity_factor);
  EXPECT_THROW((void)megatron("--moe-expert-capacity-factor 0"), UsageError);
  EXPECT_EQ(megatron("--moe-expert-capacity-factor 1.5").moe_capacity_factor, 1.5);
  EXPECT_THROW((void)megatron("--use-distributed-optimizer --optimizer-cpu-offload --optimizer-offload-fraction 2"),
               UsageError);
  // arguments.py validate_args: a batch-size schedule with an explicit global batch is refused;
  // either alone is read.
  EXPECT_THROW((void)megatron("--global-batch-size 64 --step-batch-size-schedule 0:16"), UsageError);
  EXPECT_EQ(megatron("--global-batch-size 64").global_batch_size, 64);
  EXPECT_NO_THROW((void)megatron("--step-batch-size-schedule 0:16"));
  EXPECT_DOUBLE_EQ(*mme({"--hidden-dropout", "0.9995"}).hidden_dropout, 0.9995);
  EXPECT_THROW((void)mme({"--hidden-dropout", "1"}), UsageError);
  // Bounds: one per knob, the same on every path (Megatron-LM text beyond it is a layout error, as before).
  EXPECT_THROW((void)mme({"--tp", "1048577"}), UsageError);
  EXPECT_THROW((void)megatron("--tensor-model-parallel-size 1048577"), LayoutError);
  EXPECT_NO_THROW((void)mme({"--tp", "1048576"}));
  // Choices ignore case on every path, as spec files always did.
  EXPECT_EQ(mme({"--precision", "BF16"}).precision, Precision::kBF16);
  EXPECT_EQ(megatron("--attention-backend FLASH").attention_backend, AttentionBackend::kFlash);
}

TEST(setup_schema, MegatronFlagsMmeDoesNotModelOrKnow) {
  const MegatronArgs a = parse_megatron_args(
      "--num-layers 2 --lr 3e-4 --save /ckpt --log-interval 10 --tp-comm-overlap-cfg ub.yaml --made-up-flag 3 "
      "--tensor-model-parallel-size 2 --another-made-up --delay-wgrad-compute --rl-offload-x",
      "test");
  const MegatronFlagReview r = review_megatron_flags(a);
  EXPECT_EQ(r.unknown, (std::vector<std::string>{"--made-up-flag", "--another-made-up"}));
  ASSERT_EQ(r.not_modelled.size(), 3u);
  EXPECT_THAT(r.not_modelled[0], HasSubstr("--tp-comm-overlap-cfg is not modelled"));
  EXPECT_THAT(r.not_modelled[1], HasSubstr("--delay-wgrad-compute is not modelled"));
  EXPECT_THAT(r.not_modelled[2], HasSubstr("--rl-offload-x is not modelled"));
  // Every setting and model flag is known (a switch written without a value, as Megatron-LM's
  // parser takes it).
  std::string all;
  auto add = [&](std::string_view f) {
    const MegatronLmFlag* lm = find_megatron_lm_flag(f);
    all += fmt::format(" --{}{}", f, lm && lm->max_values == 0 ? "" : " 1");
  };
  for (const auto& k : setup_knobs())
    for (const auto* list : {&k.megatron, &k.megatron_off, &k.megatron_extra})
      for (const char* f : *list) add(f);
  for (const auto f : megatron_model_flags()) add(f);
  const MegatronFlagReview none = review_megatron_flags(parse_megatron_args(all, "test"));
  EXPECT_TRUE(none.unknown.empty()) << none.unknown.front();
  EXPECT_TRUE(none.not_modelled.empty());
}

// docs/cli.md's flag tables are the schema's (a new flag needs its row).
TEST(setup_schema, DocsFlagTablesAreTheSchemas) {
  const std::string doc = test::read_file(test::source_dir() / "docs" / "cli.md");
  EXPECT_NE(doc.find(setup_flags_markdown()), std::string::npos) << "docs/cli.md should have:\n"
                                                                 << setup_flags_markdown();
  EXPECT_NE(doc.find(setup_switches_markdown()), std::string::npos) << "docs/cli.md should have:\n"
                                                                    << setup_switches_markdown();
}

}  // namespace
}  // namespace mme
