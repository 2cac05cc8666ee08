// Context parallelism in Transformer Engine's attention (attention/dot_product_attention/
// context_parallel.py): what each --cp-comm-type holds at its busiest moment beyond the
// gradients of Q, K and V, worked out by hand from the buffers each autograd function
// allocates, and the flag's spellings on every input path.
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <mme/inputs/megatron_args.hpp>
#include <mme/sdk/error.hpp>

#include "engine_fixture.hpp"
#include "gqa.hpp"

namespace mme {
namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

// One MHA block: h 1024, 16 heads of 64, TP 1, bf16, 4096 tokens on the CP rank. Then
// Q = O = 2 B x 4096 x 1024 = 8 MiB and K+V = 16 MiB; the block's own backward holds
// dQ, dK, dV (24 MiB) and the gradient of its input (8 MiB).
BlockActivations attention_acts(std::int64_t cp, CpCommType type, AttentionBackend backend,
                                bool recompute_core = false) {
  const ModelSpec m = test::gpt_model(2, 1024, 16);
  TrainingSetup s;
  s.attention_backend = backend;
  s.cp_comm_type = type;
  s.seq_length = 4096 * cp;
  if (recompute_core) {
    s.recompute.granularity = RecomputeGranularity::kSelective;
    s.recompute.modules = kRecomputeCoreAttn;
  }
  BlockContext ctx{m, m.layers.front(), s};
  ctx.cp = cp;
  ctx.tokens = 4096;
  ctx.local_tokens = 4096;
  BlockActivations out;
  plugins::GqaAttentionModel().activations(ctx, out);
  return out;
}

std::int64_t attention_transient(std::int64_t cp, CpCommType type) {
  return attention_acts(cp, type, AttentionBackend::kFlash).transient;
}

TEST(ContextParallel, WithoutCpTheBackwardHoldsTheGradientsOfQkvAndOfTheInput) {
  EXPECT_EQ(attention_transient(1, CpCommType::kP2P), 32 * kMiB);
}

// AttnFuncWithCPAndKVP2P.backward: dq_buffer (Q, 8 MiB) and two [2, K+V] ring buffers
// (4 x 16 MiB). Its forward (2 KV ring buffers + cp per-step outputs = 48 MiB) stays below.
TEST(ContextParallel, RingAttentionAddsTheDqBufferAndTwoKvDkvRingBuffers) {
  EXPECT_EQ(attention_transient(2, CpCommType::kP2P), (32 + 8 + 64) * kMiB);
}

// With CP 8 the forward's per-step outputs (8 x 8 MiB) plus two KV buffers (32 MiB), 96 MiB,
// exceed the gradients of Q, K, V (24 MiB) by 72 MiB, which is exactly the backward's extra:
// still 72. CP 16: 2 x 16 + 16 x 8 = 160 - 24 = 136 MiB, above the backward's 72.
TEST(ContextParallel, RingAttentionForwardKeepsEveryStepOutputUntilTheCorrection) {
  EXPECT_EQ(attention_transient(8, CpCommType::kP2P), (32 + 72) * kMiB);
  EXPECT_EQ(attention_transient(16, CpCommType::kP2P), (32 + 136) * kMiB);
}

// AttnFuncWithCPAndKVAllGather.backward: dk/dv of the whole sequence and the re-gathered
// k_ag/v_ag, each CP x 16 MiB.
TEST(ContextParallel, AllGatherHoldsTheWholeSequencesKvAndItsGradient) {
  EXPECT_EQ(attention_transient(2, CpCommType::kAllGather), (32 + 2 * 2 * 16) * kMiB);
}

// AttnFuncWithCPAndQKVOA2A.backward: the exchanged dout (8 MiB) and dq/dk/dv exchanged back
// (24 MiB).
TEST(ContextParallel, AllToAllHoldsTheExchangedGradients) {
  EXPECT_EQ(attention_transient(2, CpCommType::kA2A), (32 + 8 + 24) * kMiB);
  EXPECT_EQ(attention_transient(2, CpCommType::kA2AP2P), (32 + 72 + 32) * kMiB);
}

// AttnFuncWithCPAndKVP2P.forward runs its odd steps on flash_attn_streams[1]: on the last CP rank
// each allocates there the next step's K+V receive buffer (16 MiB; none after step cp - 2), its
// partial output (O, 8 MiB) and its fp32 softmax statistics (4 B x 16 heads x 4096 = 256 KiB).
// CP 8: steps 1, 3, 5, 7, of which 1, 3 and 5 receive; CP 2: step 1 only, nothing to receive.
// The other exchanges use the main stream.
template <std::size_t N>
std::vector<std::pair<std::int64_t, std::int64_t>> sizes(const TermList<StreamTensors, N>& list) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (const StreamTensors& t : list) out.emplace_back(t.bytes, t.count);
  return out;
}

std::vector<std::pair<std::int64_t, std::int64_t>> side_stream(std::int64_t cp, CpCommType type) {
  return sizes(attention_acts(cp, type, AttentionBackend::kFused).side_stream);
}

TEST(ContextParallel, RingStepsOnTheSecondStreamAllocateTheirReceiveBuffersOutputsAndStatistics) {
  using V = std::vector<std::pair<std::int64_t, std::int64_t>>;
  EXPECT_EQ(side_stream(8, CpCommType::kP2P), (V{{16 * kMiB, 3}, {8 * kMiB, 4}, {256 * 1024, 4}}));
  EXPECT_EQ(side_stream(2, CpCommType::kP2P), (V{{8 * kMiB, 1}, {256 * 1024, 1}}));
  EXPECT_EQ(side_stream(4, CpCommType::kA2AP2P), (V{{16 * kMiB, 1}, {8 * kMiB, 2}, {256 * 1024, 2}}));
  EXPECT_TRUE(side_stream(8, CpCommType::kA2A).empty());
  EXPECT_TRUE(side_stream(8, CpCommType::kAllGather).empty());
  EXPECT_TRUE(side_stream(1, CpCommType::kP2P).empty());
}

// The second stream's pool in the reserved-memory replay: PyTorch's caching allocator serves a
// stream's requests from its own blocks only, so the ring's side tensors take segments of their
// own, sized by get_allocation_size: at CP 4 (4096 tokens a rank) the 16 MiB receive buffer one
// segment of 16 MiB, the two 8 MiB outputs one shared 20 MiB segment (the second takes the first
// one's 12 MiB remainder), the two 256 KiB statistics one 2 MiB small-pool segment: 38 MiB, part of
// reserved_bytes.
// The peak stage of two MHA layers at CP 4 with 4096 tokens a rank, cached or not
// (PYTORCH_NO_CUDA_MEMORY_CACHING=1: every free goes back, so no stream keeps anything).
StageEstimate cp4_stage(CpCommType type, bool cached = true) {
  Registry reg;
  test::register_layer_models(reg);
  const Estimator est(test::gpt_model(2, 1024, 16), reg);
  TrainingSetup s;
  s.parallel.world_size = 4;
  s.parallel.cp = 4;
  s.seq_length = 16384;
  s.attention_backend = AttentionBackend::kFused;
  s.cp_comm_type = type;
  if (!cached) apply_environment(s, "PYTORCH_NO_CUDA_MEMORY_CACHING", "1");
  return est.run(s).peak();
}

TEST(ContextParallel, TheRingsSecondStreamKeepsSegmentsOfItsOwnInReservedMemory) {
  const StageEstimate ring = cp4_stage(CpCommType::kP2P);
  EXPECT_EQ(ring.side_stream_reserved_bytes, 38 * kMiB);
  EXPECT_GE(ring.reserved_bytes, ring.total_bytes + ring.side_stream_reserved_bytes);
  EXPECT_EQ(cp4_stage(CpCommType::kP2P, false).side_stream_reserved_bytes, 0);
}

// Ulysses (AttnFuncWithCPAndQKVOA2A) finishes each exchange on cp_stream (flash_attn_a2a_communicate):
// Q, K and V are reordered there by index_select, and the kernel saves those copies; the output it
// returns is made contiguous there, and linear_proj saves it; the kernel's own head-sharded output
// stays on the main stream. Its backward reorders dout there and makes dq, dk, dv contiguous there.
// Under core_attn recompute the checkpoint keeps the exchange's inputs (main stream) and the
// recomputed forward reorders Q, K, V there again.
std::vector<std::string_view> terms_on_stream(CpCommType type, bool recompute_core = false) {
  std::vector<std::string_view> names;
  for (const auto& t : attention_acts(2, type, AttentionBackend::kFused, recompute_core).saved)
    if (t.side_stream) names.push_back(t.name);
  return names;
}

std::vector<std::pair<std::int64_t, std::int64_t>> backward_on_stream(CpCommType type, bool recompute_core = false) {
  return sizes(attention_acts(2, type, AttentionBackend::kFused, recompute_core).side_stream_backward);
}

TEST(ContextParallel, UlyssesReordersQkvAndTheReturnedOutputOnItsStream) {
  using N = std::vector<std::string_view>;
  EXPECT_EQ(terms_on_stream(CpCommType::kA2A), (N{"attention/q", "attention/kv", "attention/output"}));
  EXPECT_EQ(terms_on_stream(CpCommType::kA2A, true), (N{"attention/output"}));
  EXPECT_TRUE(terms_on_stream(CpCommType::kP2P).empty());
  EXPECT_TRUE(terms_on_stream(CpCommType::kAllGather).empty());
  EXPECT_TRUE(terms_on_stream(CpCommType::kA2AP2P).empty());  // not modelled: an assumption says so
  // MHA at 4096 tokens a rank: dout, dq, dk, dv of 8 MiB each; recompute adds Q, K, V again.
  using V = std::vector<std::pair<std::int64_t, std::int64_t>>;
  const V grads{{8 * kMiB, 1}, {8 * kMiB, 1}, {8 * kMiB, 1}, {8 * kMiB, 1}};
  EXPECT_EQ(backward_on_stream(CpCommType::kA2A), grads);
  V again{{8 * kMiB, 1}, {8 * kMiB, 1}, {8 * kMiB, 1}};
  again.insert(again.end(), grads.begin(), grads.end());
  EXPECT_EQ(backward_on_stream(CpCommType::kA2A, true), again);
  EXPECT_TRUE(backward_on_stream(CpCommType::kP2P).empty());
}

// The Ulysses stream's pool, by hand from get_allocation_size (requests under 10 MiB take 20 MiB
// segments, larger ones their own size rounded to 2 MiB). Two layers at CP 4, 4096 tokens a rank,
// one micro-batch at a time. Forward of layer 1: Q (8 MiB) opens segment A (20), K+V (one 16 MiB
// request in the replay) segment B (16), the output (8) takes A's remainder; layer 2 the same in
// C (20) and D (16): 72 MiB. Backward of layer 2, before its saved tensors go: dout and dq open E
// (20), dk and dv F (20): 112 MiB. Layer 1's then fit in what layer 2 freed, and every later pass
// in the cached segments: 112 MiB beside the main stream's.
TEST(ContextParallel, UlyssesStreamKeepsItsSavedTensorsAndGradientsInSegmentsOfItsOwn) {
  const StageEstimate a2a = cp4_stage(CpCommType::kA2A);
  EXPECT_EQ(a2a.side_stream_reserved_bytes, 112 * kMiB);
  EXPECT_GE(a2a.reserved_bytes, a2a.total_bytes);
  EXPECT_EQ(cp4_stage(CpCommType::kA2A, false).side_stream_reserved_bytes, 0);
}

// Ulysses (AttnFuncWithCPAndQKVOA2A) saves the kernel's head-sharded output (out_part) for its
// backward and returns a new sequence-sharded one for linear_proj, which saves it: two outputs of
// 8 MiB where the ring saves the one it returns. a2a+p2p exchanges the output back the same way;
// with core_attn recompute the kernel's output is not kept.
std::int64_t saved_term(std::int64_t cp, CpCommType type, std::string_view name, bool recompute_core = false) {
  const BlockActivations out = attention_acts(cp, type, AttentionBackend::kFused, recompute_core);
  std::int64_t bytes = 0;
  for (const auto& t : out.saved)
    if (t.name == name) bytes += t.bytes;
  return bytes;
}

TEST(ContextParallel, UlyssesKeepsTheKernelsOutputBesideTheOneItReturns) {
  constexpr std::string_view kCopy = "attention/cp_a2a_head_sharded_output";
  EXPECT_EQ(saved_term(2, CpCommType::kA2A, "attention/output"), 8 * kMiB);
  EXPECT_EQ(saved_term(2, CpCommType::kA2A, kCopy), 8 * kMiB);
  EXPECT_EQ(saved_term(4, CpCommType::kA2AP2P, kCopy), 8 * kMiB);
  EXPECT_EQ(saved_term(2, CpCommType::kP2P, kCopy), 0);
  EXPECT_EQ(saved_term(2, CpCommType::kAllGather, kCopy), 0);
  EXPECT_EQ(saved_term(1, CpCommType::kA2A, kCopy), 0);
  EXPECT_EQ(saved_term(2, CpCommType::kA2A, kCopy, true), 0);
}

TEST(ContextParallel, MegatronFlagTakesTransformerEnginesSpellings) {
  auto parse = [](const char* text) { return setup_from_megatron_args(parse_megatron_args(text, "x"), {}); };
  EXPECT_EQ(parse("--context-parallel-size 2").cp_comm_type, CpCommType::kP2P);
  EXPECT_EQ(parse("--cp-comm-type a2a").cp_comm_type, CpCommType::kA2A);
  EXPECT_EQ(parse("--cp-comm-type all_gather all_gather").cp_comm_type, CpCommType::kAllGather);
  // a2a+p2p with the two levels' sizes, which Megatron-LM asks for (arguments.py).
  EXPECT_EQ(
      parse("--context-parallel-size 4 --cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 2").cp_comm_type,
      CpCommType::kA2AP2P);
  EXPECT_THROW(parse("--cp-comm-type a2a+p2p"), UsageError);
  // TE raises "Unsupported communication type" for Megatron's help-text spelling.
  try {
    parse("--cp-comm-type allgather");
    ADD_FAILURE() << "allgather accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("use all_gather"), std::string::npos) << e.what();
  }
  // Per-layer lists of different types are not modelled: refused, never estimated as one.
  try {
    parse("--cp-comm-type p2p a2a");
    ADD_FAILURE() << "mixed list accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'p2p' and 'a2a'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse("--cp-comm-type ring"), UsageError);
}

}  // namespace
}  // namespace mme
