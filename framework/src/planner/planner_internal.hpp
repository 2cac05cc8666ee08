// The planner's internals, shared by its files (not part of the SDK):
//   planner.cpp (framework/src)  the public names, setup_to_args and the Planner facade;
//   search_space.cpp             the layouts: setups, PP splits, the TP/CP/EP/ETP slices;
//   cost_model.cpp               the speed proxy (docs/planner.md);
//   search.cpp                   the engine call, the top plans, the threaded search;
//   suggestions.cpp              the changes that make a layout fit when none does;
//   ordered_parallel_map.hpp     the thread pool the search runs on.
// The memory side is the engine's own (estimator_internal.hpp): the planner reads its layer
// table, block checks and element sizes, and every peak is Estimator::run's; the speed proxy
// asks the same block models for their costs (LayerMemoryModel::costs).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mme/engine/pipeline.hpp"
#include "mme/planner/planner.hpp"

#include "engine/estimator_internal.hpp"

namespace mme {

namespace planning {

using Clock = std::chrono::steady_clock;

// What the planner needs from the engine for one setup.
struct EngineResult {
  std::int64_t peak_bytes = 0;   // the peak stage's total
  std::int64_t upper_bytes = 0;  // the upper bound (what fits are judged on)
  // The largest weight + gradient + optimizer bytes of a stage: a floor of the peak that does
  // not depend on the micro-batch size or recompute (tests/planner checks that it does not).
  std::int64_t static_floor_bytes = 0;
};

// The one place the planner asks the engine (search.cpp). Throws what Estimator::run throws
// (LayoutError for a layout Megatron rejects).
EngineResult engine_estimate(const Estimator& estimator, const TrainingSetup& setup, const EstimateOptions& options);

// A (split, VPP) of one PP size, with the decoder layers of each type per pipeline rank.
// first/middle/last: the decoder layers of the first, each middle and the last pipeline stage;
// with `chunks` (VPP > 1) the first and last virtual chunks hold first_chunk and last_chunk
// layers and every other chunk chunk_layers, but the last chunks of the middle ranks 1..extra,
// which hold one more (PlanLayout::chunk_split); `middle` counts a middle rank without it.
struct Split {
  std::int64_t first = 0, middle = 0, last = 0;
  bool even = true;
  std::int64_t vpp = 1;
  bool chunks = false;
  std::int64_t first_chunk = 0, chunk_layers = 0, last_chunk = 0, extra = 0;
};

struct PpSplits {
  std::int64_t pp = 1;
  std::vector<Split> splits;
  std::vector<std::int32_t> counts;  // [split][rank][type]
  std::vector<std::uint8_t> loss;    // [split][rank]: holds the output layer and loss
  std::vector<std::uint8_t> embed;   // [split][rank]: holds the word embedding (first, MTP)
  std::vector<std::int32_t> mtp;     // [split][rank]: MTP depths
};

// A PP size of a slice and the micro-batch sizes whose DP divides the global batch.
struct SlicePp {
  std::uint32_t splits = 0;        // index into Space::pp_splits
  std::vector<std::uint32_t> mbs;  // indices into PlanOptions::micro_batch_sizes
};

// The unit of work: a fixed (TP, CP, EP, ETP). Its candidates run over PP sizes, their splits
// and VPP sizes, then micro-batch sizes and recompute variants: the variants of one layout
// come together because they share its weight, gradient and optimizer bytes.
struct Slice {
  std::int64_t tp = 1, cp = 1, ep = 1, etp = 1;
  bool sequence_parallel = false;  // as the engine resolves the slice's setups
  std::vector<SlicePp> pps;
  std::uint64_t count = 0;
  std::uint64_t first_ordinal = 0;
};

struct Space {
  std::vector<PpSplits> pp_splits;
  std::vector<Slice> slices;
  std::uint64_t total = 0;
  // What PlanOptions::max_candidates left out (PlanResult's fields of the same names).
  std::uint64_t skipped_candidates = 0, skipped_slices = 0;
  std::string first_skipped;
};

// Per-slice figures of the step-time model: seconds per layer of each type and micro-batch.
struct LayerTime {
  double compute = 0;                               // gemm + attention + elementwise, forward and backward
  double gemm = 0, attention = 0, elementwise = 0;  // its parts
  double forward = 0;                               // of compute, the forward pass
  double recompute = 0, tp = 0, ep = 0, cp = 0;     // the exposed communication
  double launch = 0;                                // kernel launches the GPU work does not hide
  double dense_params = 0, expert_params = 0;       // per rank, the layer's trained parameters
  // What offloading the layer's activations adds (exposed transfers; not in total(): only the
  // offloaded layers of a rank pay it, SliceCost::offload_layers).
  double offload = 0;
  double total() const { return compute + recompute + tp + ep + cp + launch; }
};

struct Figures {
  double gemm_flops = 0;       // FLOP/s of a large GEMM of a TE linear under the precision
  double bf16_flops = 0;       // ... in BF16 (the output layer, the router)
  double attention_flops = 0;  // FLOP/s of flash attention
  double gemm_in_bytes = 2;    // a TE GEMM's input element (FP8: 1)
  double hbm = 0;              // bytes/s
  double link = 0, inter = 0;  // bytes/s a collective reaches within the NVLink domain and beyond
  std::int64_t node = 8;       // GPUs of one NVLink domain
  double elementwise_passes = 0;
  double act_bytes = 2, weight_bytes = 2;
};

struct SliceCost {
  Figures figures;
  double ideal_flops_per_token = 0;        // the whole model, forward and backward
  double peak_flops = 0;                   // the dense peak of the precision (the ideal's rate)
  double megatron_flops_per_sequence = 0;  // megatron_model_flops of one sequence at the slice's TP
  std::vector<LayerTime> types;
  // Full recompute of the block method (recompute.py / transformer_block.py: the first
  // full_recompute_layers layers of each virtual chunk, 0 recomputes none): types_plain are the
  // layer kinds without it, and a rank with n layers recomputes min(n, VPP x full_recompute_layers)
  // of them. -1: every layer (the uniform method) or no full recompute.
  std::int64_t full_recompute_layers = -1;
  std::vector<LayerTime> types_plain;
  // Activation offloading (TE cpu_offload): a rank offloads min(n, offload_layers) of its n
  // layers, each paying LayerTime::offload; offload_share instead for the fine-grained offload
  // (a share of every layer). 0: none.
  double offload_layers = 0, offload_share = 0;
  LayerTime embedding;  // the embedding (first rank)
  LayerTime output;     // final norm, output layer and loss (last rank)
  LayerTime mtp;        // one MTP depth: its transformer layer, projection and output head
  // Parameters per rank of the blocks around the layers, as their block models count them: the
  // embedding's, the output head's with PP 1 and with PP > 1 (a tied output layer is a copy of
  // its own only on a later stage), and one MTP depth's projection.
  double embedding_params = 0, output_params_pp1 = 0, output_params_pp = 0, mtp_projection_params = 0;
  double p2p_bytes = 0;  // one activation (or its gradient) sent to the next pipeline stage
  bool overlap_grad_reduce = false, overlap_param_gather = false;
  double optimizer_bytes_per_param = 0;  // HBM bytes of the optimizer's update per shard parameter
  // The knobs as the candidate's setup has them (cost_model.cpp, "the knobs").
  DpSharding sharding = DpSharding::kDistributedOptimizer;
  double grad_bytes = 4, weight_bytes = 2;  // a gradient and a weight as the DP collectives send them
  double offload_fraction = 0;              // share of the optimizer shard stepped on the host
  double offload_bytes_per_param = 8;       // gradient to the host + main parameter back
  bool offload_overlap = false;             // --overlap-cpu-optimizer-d2h-h2d
  double host_link = 0, cpu_params_per_s = 0;
};

// The PP size, VPP size and first/last-stage flags (or the chunk split: account-for flags or a
// layout string) of a layout, for a model of `mtp_layers` MTP depths (search_space.cpp).
// `layout_text`, if given, is pipeline_layout_text of the layout, written once per split.
void apply_pipeline(TrainingSetup& s, const PlanLayout& l, std::int64_t mtp_layers,
                    const std::string* layout_text = nullptr);
// The --pipeline-model-parallel-layout a chunk split needs (empty: none, or the account-for
// flags say it).
std::string pipeline_layout_text(const PlanLayout& l, std::int64_t mtp_layers);
// A split's fields in a layout.
void apply_split(PlanLayout& l, const Split& s);
// The searched memory-for-time knobs of a candidate (search_space.cpp).
void apply_knobs(TrainingSetup& s, const PlanKnobs& k);
// The sequences per step the speed proxy assumes (cost_model.cpp; plan_global_batch).
double nominal_sequences(const PlanOptions& o);

// A rank's distributed-optimizer traffic of one kind (gradient reduce-scatter or parameter
// all-gather), in seconds: its layers' share, spread over its v model chunks, and what only its
// first chunk (the embedding, on the first stage) or its last chunk (the output layer, a tied
// embedding's copy, MTP) adds.
struct ChunkTraffic {
  double layers = 0, first = 0, last = 0;
  double total() const { return layers + first + last; }
  ChunkTraffic scaled(double k) const { return {.layers = layers * k, .first = first * k, .last = last * k}; }
  double chunk(std::size_t j, std::size_t v) const {
    return layers / static_cast<double>(v) + (j == 0 ? first : 0) + (j + 1 == v ? last : 0);
  }
};

// What of the gradients' reduce-scatter (`c`, seconds) outlasts the backward under
// --overlap-grad-reduce on pipeline rank r of p with v model chunks, whose backward of one
// micro-batch takes `backward` seconds (cost_model.cpp, from pipeline_parallel/schedules.py).
double exposed_grad_reduce(const ChunkTraffic& c, double backward, std::size_t r, std::size_t p, std::size_t v);
// What of the parameters' all-gather (`g`, seconds) the next step's forward waits for under
// --overlap-param-gather, with a forward of one micro-batch of `forward` seconds.
double exposed_param_gather(const ChunkTraffic& g, double forward, std::size_t r, std::size_t p, std::size_t v);
// Megatron-FSDP's per-micro-batch traffic beyond the distributed optimizer's, for `shared`
// parameters of a rank, that the rank's compute of a micro-batch does not hide.
double fsdp_extra_seconds(const SliceCost& c, double shared, double micro_batches, double bandwidth,
                          double compute_per_micro_batch);

}  // namespace planning

struct Planner::Impl {
  Estimator estimator;
  const EngineTables& tables;  // the estimator's: its layer kinds and their block models

  Impl(const ModelSpec& model, const Registry& registry);

  const ModelSpec& model() const { return estimator.model(); }

  // search_space.cpp
  TrainingSetup setup_for(const PlanLayout& l, const PlanOptions& o) const;
  void check_options(const PlanOptions& o) const;
  planning::PpSplits build_splits(std::int64_t pp, const PlanOptions& o) const;
  // The decoder layers of each type, the loss, embedding and MTP per pipeline rank of each split
  // (parts[i]: the engine's partition of split i).
  void count_layers(planning::PpSplits& out, const std::vector<PipelinePartition>& parts) const;
  bool blocks_accept(const TrainingSetup& setup, AttentionBackend attention, std::string& refusal) const;
  planning::Space build_space(const PlanOptions& o, bool allow_empty) const;
  // cost_model.cpp
  planning::SliceCost slice_cost(const planning::Slice& q, std::int64_t mbs, RecomputeVariant rc,
                                 const PlanKnobs& knobs, const PlanOptions& o) const;
  // The same for a whole setup (its recompute, overlaps and knobs as they are).
  planning::SliceCost setup_cost(const TrainingSetup& setup, const planning::Slice& q, const PlanOptions& o) const;
  PlanScore score_of(const planning::SliceCost& c, const planning::PpSplits& ps, std::size_t split, const PlanLayout& l,
                     const PlanOptions& o) const;
  // search.cpp
  // `slices`: the space's, whose sizes the probe's layouts take (PP 1).
  // `refused_recompute`: without searched knobs, the recompute variants refused while others work.
  std::vector<std::uint8_t> probe_base(const PlanOptions& o, std::string& refusal,
                                       const std::vector<planning::Slice>& slices,
                                       std::vector<std::pair<RecomputeVariant, std::string>>& refused_recompute) const;
  PlanResult search(const PlanOptions& o, bool stop_at_first_fit) const;
  class SliceJudge;  // one worker's judge of slices
};

}  // namespace mme
