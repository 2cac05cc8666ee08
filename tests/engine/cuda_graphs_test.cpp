// Per-layer CUDA graphs (--cuda-graph-impl, --cuda-graph-modules, --cuda-graph-warmup-steps),
// each expectation worked out by hand from the code it models: Megatron-LM's
// core/transformer/cuda_graphs.py (TECudaGraphHelper._get_sample_arguments,
// _get_cuda_graph_input_data), transformer_layer.py (get_layer_static_inputs,
// _get_submodules_under_cudagraphs), module.py (GraphableMegatronModule.get_layer_static_inputs)
// and Transformer Engine's graph.py (make_graphed_callables with
// _reuse_graph_input_output_buffers).
//
// The test model (as tests/engine/offload_test.cpp): 4 layers of GQA (16 heads of 64) + a GELU
// MLP of 4096, hidden 1024, no dropout, sequence 2048, micro-batch 1, TP 1, bf16, unfused
// attention. Per layer and micro-batch (MiB): attention keeps 152 (norm input 4, QKV input 4,
// Q 4, K+V 8, scores [16, 2048, 2048] 128, output 4), the MLP 40 (norm input 4, fc1 input 4,
// fc1 output 16, activation output 16). Busiest moments: attention 272 (gqa.cpp: the Q/K/V
// gradients 12 + the input gradient 4 + two [16, 2048, 2048] score tensors 256), the MLP 36
// (dense_mlp.cpp: fc1 output and activation gradients 32 + the input gradient 4).
// A layer's static input: hidden_states [2048, 1, 1024] bf16 = 4 MiB, and with the attention in
// the graph the causal mask [1, 1, 2048, 2048] bool = 4 MiB.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mme/inputs/megatron_args.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/sdk/error.hpp>

#include "engine_fixture.hpp"

namespace mme {
namespace {

using ::testing::HasSubstr;

constexpr std::int64_t kMiB = 1024 * 1024;
constexpr std::int64_t kAttn = 152 * kMiB, kMlp = 40 * kMiB;
constexpr std::int64_t kAttnTransient = 272 * kMiB, kMlpTransient = 36 * kMiB;
constexpr std::int64_t kHidden = 4 * kMiB, kMask = 4 * kMiB;

ModelSpec test_model() { return test::small_model_without_dropout(); }
TrainingSetup test_setup() { return test::unfused_setup(); }

TrainingSetup graphs(std::uint32_t modules, std::int64_t warmup = 0) {
  TrainingSetup s = test_setup();
  s.cuda_graph.impl = CudaGraphImpl::kTransformerEngine;
  s.cuda_graph.modules = modules;
  s.cuda_graph.warmup_steps = warmup;
  return s;
}

class CudaGraphs : public ::testing::Test {
 protected:
  void SetUp() override { test::register_layer_models(registry_); }
  Estimate run(const TrainingSetup& s, const ModelSpec& m = test_model()) { return Estimator(m, registry_).run(s); }
  Registry registry_;
};

// The graphed attention of 4 layers, captured before any eager step (warm-up 0). The buffers:
// 4 static inputs of hidden + mask (32 MiB), one output gradient (4 MiB) and the last two input
// gradients (8 MiB): 44 MiB, allocated from the capture on. The capture holds the 4 layers'
// attention (608 MiB) and its backward working set (272 MiB); a replayed step holds what runs
// eagerly: the MLPs, the embedding and the loss, with the MLP's working set (36 MiB; the loss's
// on a 128-word vocabulary is smaller).
TEST_F(CudaGraphs, AttentionScopeCapturedFirst) {
  const StageEstimate eager = run(test_setup()).stages.at(0);
  const Estimate e = run(graphs(kGraphAttn));
  const StageEstimate& st = e.stages.at(0);
  const std::int64_t buffers = 4 * (kHidden + kMask) + kHidden + 2 * kHidden;
  EXPECT_EQ(test::component_sum(st, "other/cuda_graph_static_inputs"), 4 * (kHidden + kMask));
  EXPECT_EQ(test::component_sum(st, "other/cuda_graph_gradient_buffers"), 3 * kHidden);
  EXPECT_EQ(st.static_bytes, eager.static_bytes + buffers);
  EXPECT_EQ(st.cuda_graph_capture_bytes, eager.static_bytes + buffers + 4 * kAttn + kAttnTransient);
  EXPECT_EQ(st.cuda_graph_replay_bytes,
            eager.forward_backward_bytes + buffers - 4 * kAttn - kAttnTransient + kMlpTransient);
  EXPECT_EQ(st.cuda_graph_pool_bytes, 4 * kAttn + kAttnTransient);
  // No eager step: the peak is the capture's (it exceeds a replayed step's).
  EXPECT_EQ(st.total_bytes, st.cuda_graph_capture_bytes);
  EXPECT_STREQ(st.peak_phase, "cuda-graph-capture");
  EXPECT_LT(st.total_bytes, eager.total_bytes);
  // The bound: a replayed step with the pool held next to it, or the capture.
  EXPECT_GE(st.upper_bytes, st.cuda_graph_replay_bytes + st.cuda_graph_pool_bytes);
  EXPECT_THAT(e.bound_terms, testing::Contains(HasSubstr("CUDA graphs: the graphs' private memory pool")));
}

// With warm-up steps (Megatron's default 3) the eager steps' peak is in the run: the estimate is
// the one without graphs; the buffers only raise the memory after a step.
TEST_F(CudaGraphs, WarmupStepsKeepTheEagerPeak) {
  const StageEstimate eager = run(test_setup()).stages.at(0);
  const StageEstimate st = run(graphs(kGraphAttn, 3)).stages.at(0);
  EXPECT_EQ(st.total_bytes, eager.total_bytes);
  EXPECT_STREQ(st.peak_phase, "forward-backward");
  EXPECT_EQ(st.static_bytes, eager.static_bytes + 44 * kMiB);
}

// The whole layer in the graph (empty --cuda-graph-modules): the capture holds all 4 layers
// (768 MiB) and the attention's working set; a replay only the embedding and loss.
TEST_F(CudaGraphs, WholeLayer) {
  const StageEstimate eager = run(test_setup()).stages.at(0);
  const StageEstimate st = run(graphs(0)).stages.at(0);
  const std::int64_t buffers = 4 * (kHidden + kMask) + 3 * kHidden;
  EXPECT_EQ(st.cuda_graph_capture_bytes, eager.static_bytes + buffers + 4 * (kAttn + kMlp) + kAttnTransient);
  EXPECT_EQ(st.cuda_graph_pool_bytes, 4 * (kAttn + kMlp) + kAttnTransient);
  EXPECT_LT(st.cuda_graph_replay_bytes, eager.static_bytes + buffers + 32 * kMiB);
}

// Only the dense MLPs in the graph: no attention mask among the static inputs, and the eager
// attention's working set in a replayed step.
TEST_F(CudaGraphs, MlpScope) {
  const StageEstimate eager = run(test_setup()).stages.at(0);
  const StageEstimate st = run(graphs(kGraphMlp)).stages.at(0);
  const std::int64_t buffers = 4 * kHidden + 3 * kHidden;
  EXPECT_EQ(test::component_sum(st, "other/cuda_graph_static_inputs"), 4 * kHidden);
  EXPECT_EQ(st.cuda_graph_capture_bytes, eager.static_bytes + buffers + 4 * kMlp + kMlpTransient);
  EXPECT_EQ(st.cuda_graph_replay_bytes, eager.forward_backward_bytes + buffers - 4 * kMlp);
  EXPECT_EQ(st.total_bytes, st.cuda_graph_replay_bytes);
  EXPECT_STREQ(st.peak_phase, "forward-backward");
}

// PP 2 with 4 micro-batches: the first stage holds 2 micro-batches of its 2 layers in flight
// (1F1B: PP - rank), so _get_sample_arguments keeps 4 static input sets there and 2 on the last
// stage (one in flight).
TEST_F(CudaGraphs, StaticInputsFollowTheSchedule) {
  TrainingSetup s = graphs(kGraphAttn);
  s.parallel.world_size = 2;
  s.parallel.pp = 2;
  s.global_batch_size = 4;
  const Estimate e = run(s);
  ASSERT_EQ(e.stages.size(), 2u);
  EXPECT_EQ(test::component_sum(e.stages[0], "other/cuda_graph_static_inputs"), 2 * 2 * (kHidden + kMask));
  EXPECT_EQ(test::component_sum(e.stages[1], "other/cuda_graph_static_inputs"), 2 * 1 * (kHidden + kMask));
}

// The local implementation records the graphs during an eager step: its peak is always in the run.
TEST_F(CudaGraphs, LocalImplementationRecordsEagerly) {
  TrainingSetup s = graphs(kGraphAttn);
  s.cuda_graph.impl = CudaGraphImpl::kLocal;
  const StageEstimate eager = run(test_setup()).stages.at(0);
  EXPECT_EQ(run(s).stages.at(0).total_bytes, eager.total_bytes);
}

// What Megatron-LM refuses (transformer_config.py __post_init__, arguments.py) and what mme does
// not model.
TEST_F(CudaGraphs, WhatMegatronRefuses) {
  auto refused = [&](TrainingSetup s, const char* message) {
    EXPECT_THAT([&] { (void)run(s); }, ::testing::ThrowsMessage<LayoutError>(HasSubstr(message))) << message;
  };
  refused(graphs(kGraphMoeRouter), "moe cuda graph is only supported for MoE.");
  refused(graphs(kGraphMoe | kGraphMoeRouter), "must not contain both moe and moe_router");
  TrainingSetup full = graphs(kGraphAttn);
  full.recompute.granularity = RecomputeGranularity::kFull;
  refused(full, "full recompute is only supported with full iteration CUDA graph.");
  TrainingSetup offload = graphs(kGraphAttn);
  offload.activation_offload.cpu_offloading = true;
  offload.activation_offload.cpu_offloading_num_layers = 1;
  refused(offload, "CUDA graphs not supported with CPU offloading.");
  TrainingSetup dropout = graphs(kGraphAttn);
  dropout.attention_dropout = 0.1;
  dropout.recompute.granularity = RecomputeGranularity::kSelective;
  dropout.recompute.modules = kRecomputeCoreAttn;
  refused(dropout, "attention dropout is not supported with graphed attention recomputation.");
  // Under the expert-parallel overlap TE graphs may take neither the moe nor the mlp scope
  // (transformer_config.py); attn is fine. (The first layer dense, the mlp scope's.)
  ModelSpec moe = test_model();
  ASSERT_GT(moe.layers.size(), 1u);
  for (std::size_t i = 1; i < moe.layers.size(); ++i) {
    auto& l = moe.layers[i];
    l.mlp.kind = "moe";
    l.mlp.num_experts = 4;
    l.mlp.top_k = 2;
    l.mlp.expert_ffn_hidden_size = l.mlp.ffn_hidden_size;
  }
  for (const std::uint32_t modules : {kGraphMlp, kGraphAttn}) {
    TrainingSetup overlap = graphs(modules);
    overlap.parallel.ep = 2;
    overlap.parallel.world_size = 2;
    overlap.comm.ep_overlap = true;
    if (modules == kGraphMlp)
      EXPECT_THAT([&] { (void)run(overlap, moe); },
                  ::testing::ThrowsMessage<LayoutError>(HasSubstr(
                      "CUDA graph scope on moe and mlp is not supported with overlap_moe_expert_parallel_comm.")));
    else
      EXPECT_NO_THROW((void)run(overlap, moe));
  }
}

// The Megatron-LM flags, their deprecated spellings, and the refused values.
TEST_F(CudaGraphs, MegatronFlags) {
  auto megatron = [](const std::string& text) {
    return setup_from_megatron_args(parse_megatron_args(text, "test"), TrainingSetup{});
  };
  TrainingSetup s = megatron(
      "--cuda-graph-impl transformer_engine --cuda-graph-modules attn moe_router moe_preprocess "
      "--cuda-graph-warmup-steps 0");
  EXPECT_EQ(s.cuda_graph.impl, CudaGraphImpl::kTransformerEngine);
  EXPECT_EQ(s.cuda_graph.modules, kGraphAttn | kGraphMoeRouter | kGraphMoePreprocess);
  EXPECT_EQ(s.cuda_graph.warmup_steps, 0);
  EXPECT_EQ(megatron("--external-cuda-graph --cuda-graph-scope full").cuda_graph.impl,
            CudaGraphImpl::kTransformerEngine);
  EXPECT_EQ(megatron("--external-cuda-graph --cuda-graph-scope full").cuda_graph.modules, 0u);
  EXPECT_EQ(megatron("--enable-cuda-graph").cuda_graph.impl, CudaGraphImpl::kLocal);
  EXPECT_EQ(megatron("--enable-cuda-graph").cuda_graph.warmup_steps, 3);
  EXPECT_THROW((void)megatron("--cuda-graph-impl full_iteration"), UsageError);
  EXPECT_THROW((void)megatron("--enable-cuda-graph --cuda-graph-impl local"), UsageError);
  EXPECT_THROW((void)megatron("--cuda-graph-impl local --cuda-graph-modules full attn"), UsageError);
  EXPECT_THROW((void)megatron("--cuda-graph-impl local --cuda-graph-modules mamba"), UsageError);
}

}  // namespace
}  // namespace mme
