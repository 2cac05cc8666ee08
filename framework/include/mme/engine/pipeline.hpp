// Pipeline partition and schedule: which decoder layers, MTP layers, embedding and loss each
// (pipeline rank, virtual chunk) builds, and how many micro-batches' activations a pipeline
// rank holds at its peak. Mirrors megatron/core/transformer/transformer_block.py
// (get_num_layers_to_build), pipeline_parallel_layer_layout.py and
// pipeline_parallel/schedules.py (get_pp_rank_microbatches).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mme/sdk/training_setup.hpp"

namespace mme {

struct ChunkLayout {
  std::int64_t first_layer = 0;  // index of the first decoder layer of the chunk
  std::int64_t num_layers = 0;   // decoder layers in the chunk
  std::int64_t mtp_layers = 0;   // multi-token-prediction layers in the chunk
  bool embedding = false;        // builds the word embedding (first stage, MTP stage)
  bool loss = false;             // builds final norm, output layer and loss (last stage)
};

struct PipelinePartition {
  std::int64_t pp = 1;
  std::int64_t vpp = 1;
  std::vector<ChunkLayout> chunks;  // index pp_rank * vpp + vpp_rank

  const ChunkLayout& at(std::int64_t pp_rank, std::int64_t vpp_rank) const {
    return chunks[static_cast<std::size_t>(pp_rank * vpp + vpp_rank)];
  }
};

// Builds the partition. Throws LayoutError with the flags to use when the layers do not split.
PipelinePartition partition_pipeline(std::int64_t num_layers, std::int64_t mtp_layers, const ParallelLayout& parallel,
                                     const PipelineSplit& split);
// The same, shared: the last partition built on this thread is handed out again for the same
// arguments (the engine's hot path: the planner partitions one layout for every micro-batch size,
// recompute variant and pass).
std::shared_ptr<const PipelinePartition> partition_pipeline_cached(std::int64_t num_layers, std::int64_t mtp_layers,
                                                                   const ParallelLayout& parallel,
                                                                   const PipelineSplit& split);

// A parsed --pipeline-model-parallel-layout: one entry per virtual stage (stage index
// vpp_rank * pp + pp_rank), counting E, t, m and L.
struct LayoutStage {
  std::int64_t decoder = 0, mtp = 0;
  bool embedding = false, loss = false;
};
std::vector<LayoutStage> parse_pipeline_layout(const std::string& layout);  // throws LayoutError
// The same, without a copy: valid until the next call on this thread (the engine's hot path).
const std::vector<LayoutStage>& parse_pipeline_layout_cached(const std::string& layout);

// Micro-batches in flight per virtual chunk of pipeline rank `pp_rank` at its memory peak.
// 1F1B: min(pp - rank, m). Interleaved: the first warmup + 1 forward steps
// (warmup = 2 (pp - rank - 1) + (vpp - 1) G), spread over chunks in Megatron's order, where G
// is --microbatch-group-size-per-virtual-pipeline-stage (0: Megatron's default, pp).
// num_microbatches == 0 means unknown: the pipeline is assumed full. `extra_warmup` adds forward
// passes to the interleaved warmup (--overlap-moe-expert-parallel-comm adds one).
std::vector<std::int64_t> inflight_microbatches(std::int64_t pp, std::int64_t vpp, std::int64_t pp_rank,
                                                std::int64_t num_microbatches, std::int64_t group_size = 0,
                                                std::int64_t extra_warmup = 0);
// The same into `out` (resized to vpp), for a caller that reuses one buffer across stages.
void inflight_microbatches(std::vector<std::int64_t>& out, std::int64_t pp, std::int64_t vpp, std::int64_t pp_rank,
                           std::int64_t num_microbatches, std::int64_t group_size = 0, std::int64_t extra_warmup = 0);

}  // namespace mme
