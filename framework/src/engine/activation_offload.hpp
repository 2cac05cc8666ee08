// Activation offloading to the host: what leaves the GPU and what stays or comes back.
//  - Fine-grained offloading (--fine-grained-activation-offloading --offload-modules ...,
//    megatron/core/pipeline_parallel/fine_grained_activation_offload.py): the tensors the listed
//    module groups save go to the host when the group commits, per layer, micro-batch and model
//    chunk; in backward each group boundary reloads the next group.
//  - TE's layer offload (--cpu-offloading-num-layers N, transformer_block.py
//    get_cpu_offload_context, transformer_engine/pytorch/cpu_offload.py and cpu_offload_v1.py):
//    the saved tensors of the first N decoder layers of the model.
// stage_layers (estimator_stages.cpp) asks one StageOffload per pipeline stage what each chunk's
// layers send to the host and what stays on the GPU at the stage's peak.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "estimator_internal.hpp"

namespace mme {

// What Megatron-LM refuses (transformer_config.py __post_init__, arguments.py validate_args,
// TE cpu_offload.py get_cpu_offload_context): LayoutError, with their messages.
void validate_activation_offload(const ModelSpec& model, const TrainingSetup& setup);

class StageOffload {
 public:
  explicit StageOffload(const StagePlan& plan, std::int64_t pp_rank);
  bool on() const { return on_; }

  // The layers of one chunk with `mb` micro-batches in flight: the bytes one micro-batch of them
  // sends to the host, and how many of those tensors exceed kLargeAlloc. The named activation
  // terms in `comps` lose their offloaded share.
  struct Sent {
    CheckedInt bytes = 0;
    CheckedInt large_tensors = 0;
  };
  Sent chunk(const ChunkLayout& ch, std::int64_t mb, ComponentSink& comps);

  // After every chunk: the offloaded bytes that are on the GPU at the stage's peak (added to
  // the saved activations and to `comps`).
  CheckedInt on_gpu_at_peak(ComponentSink& comps) const;

  // What the upper bound adds (StageEstimate::offload_slack_bytes).
  CheckedInt bound_slack() const { return slack_; }

 private:
  // The decoder (then MTP) layers of a chunk that keep their tensors (not fully recomputed), in
  // the order of the forward.
  std::vector<const TypeEval*> kept_layers(const ChunkLayout& ch) const;
  Sent fine_grained_chunk(const std::vector<const TypeEval*>& layers, std::int64_t mb, ComponentSink& comps);
  Sent layer_offload_chunk(const ChunkLayout& ch, const std::vector<const TypeEval*>& layers, std::int64_t mb,
                           ComponentSink& comps);

  const StagePlan& plan_;
  std::int64_t pp_rank_ = 0;
  bool on_ = false;
  CheckedInt largest_layer_ = 0;   // fine-grained: the most one layer of one micro-batch sends
  CheckedInt sent_in_flight_ = 0;  // every micro-batch in flight
  CheckedInt reload_window_ = 0;   // TE layer offload: what its reload schedule adds at the peak
  CheckedInt slack_ = 0;
};

// The assumption lines of an offloading setup (none without offloading).
void add_offload_assumptions(const StagePlan& plan, std::vector<std::string>& out);

}  // namespace mme
