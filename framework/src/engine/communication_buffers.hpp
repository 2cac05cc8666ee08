// Communication overlap and its buffers, per pipeline stage (docs/memory-model.md,
// "Communication buffers"): Transformer Engine's userbuffers of --tp-comm-overlap (outside
// PyTorch's allocator: in the upper bound, which the fit judges), the padding of the
// data-parallel buckets (--overlap-grad-reduce: in the upper bound), the combined 1F1B schedule
// of --overlap-moe-expert-parallel-comm (in the estimate), and Megatron-LM's refusals of these
// settings. The dispatcher's per-layer terms are the moe plugin's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mme/sdk/checked.hpp"
#include "mme/sdk/model_spec.hpp"
#include "mme/sdk/training_setup.hpp"

namespace mme {

struct StagePlan;
struct ParameterBytes;
struct Estimate;

// What Megatron-LM refuses of the layout (arguments.py, transformer_config.py __post_init__),
// with its message: LayoutError. resolve_setup runs it.
void check_communication_setup(const TrainingSetup& s);
// The refusals that depend on the model (shared experts, MTP depth): validate_setup runs it.
void check_communication_model(const ModelSpec& m, const TrainingSetup& s);

// --overlap-moe-expert-parallel-comm with interleaved pipelining: one more warmup forward pass
// (schedules.py get_pp_rank_microbatches), the extra_warmup of inflight_microbatches.
std::int64_t ep_overlap_extra_warmup(const TrainingSetup& s, std::int64_t vpp);

struct StageCommunication {
  // TE userbuffers (module/base.py initialize_ub): allocated by the library, outside PyTorch's
  // caching allocator; upper bound only.
  CheckedInt userbuffers = 0;
  // The data-parallel buckets' end padding (param_and_grad_buffer.py): at most this; upper
  // bound only.
  CheckedInt bucket_padding = 0;
  // Combined 1F1B: the forward micro-batch's attention block beside the backward one's layer.
  CheckedInt ep_overlap_saved = 0;
};
// `dense_params` / `expert_params`: what the stage's gradient buffers hold, per rank.
StageCommunication stage_communication(const StagePlan& plan, const ParameterBytes& bytes, std::int64_t pp_rank,
                                       CheckedInt dense_params, CheckedInt expert_params);

// The upper bound's lines for the buffers above (empty when there are none).
void add_communication_bound_terms(const Estimate& est, std::vector<std::string>& terms);
// The report's assumptions about what the code sizes at run time (DeepEP/HybridEP buffers,
// NCCL's own buffers, the userbuffers' configuration).
void add_communication_assumptions(const StagePlan& plan, std::vector<std::string>& assumptions);

}  // namespace mme
