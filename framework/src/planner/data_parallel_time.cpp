// The data-parallel traffic of the distributed optimizer that a step leaves exposed, as the
// pipeline schedules launch it (docs/planner.md, "data parallel"): the rules of the step-time
// model (cost_model.cpp) for --overlap-grad-reduce and --overlap-param-gather, and
// Megatron-FSDP's traffic beyond it.
#include <algorithm>
#include <cstddef>

#include "planner/planner_internal.hpp"

namespace mme::planning {

// What of the gradients' reduce-scatter outlasts the backward under --overlap-grad-reduce, on
// pipeline rank r of p, as the schedules launch it (pipeline_parallel/schedules.py, with
// Megatron-LM's default --align-grad-reduce: training.py sets grad_sync_func per model chunk).
// Without VPP the first stage enables the buckets' hooks for its last micro-batch's backward
// (forward_backward_pipelining_without_interleaving, grad_sync_first_stage), so each bucket is
// reduced as its gradients are ready; the embedding's, computed last, shows in full. The other
// stages launch theirs after their cool-down ("during pipeline bubble"), which ends r backward
// passes before the first stage's. The interleaved schedule launches chunk j's reduce-scatter
// (every bucket at once) r virtual micro-batches after the chunk's last backward
// (backward_step_helper_postprocess), so on every rank at j p chunk passes before the first
// stage ends (its backward runs the last p micro-batches chunk by chunk, v - 1 down to 0), or at
// the rank's own end, r passes before it; the reduce-scatters run one after another.
double exposed_grad_reduce(const ChunkTraffic& c, double backward, std::size_t r, std::size_t p, std::size_t v) {
  if (v <= 1) {
    if (r == 0) return std::max(c.first, c.total() - backward);
    return std::max(0.0, c.total() - static_cast<double>(r) * backward);
  }
  const double pass = backward / static_cast<double>(v);
  double sent = 0, end = 0;
  for (std::size_t j = 0; j < v; ++j) {
    sent += c.chunk(j, v);
    end = std::max(end, sent - static_cast<double>(std::max(r, j * p)) * pass);
  }
  return end;
}

// What of the parameters' all-gather outlasts the forward under --overlap-param-gather, as the
// next step's forward waits for it. Without VPP each bucket's all-gather is launched by the
// forward pre-hook of the bucket before it (distributed_data_parallel.py): the first bucket (the
// embedding's, on the first stage) shows in full, the rest what outlasts the forward. The
// interleaved schedule with Megatron-LM's default --align-param-gather
// (forward_backward_pipelining_with_interleaving) launches chunks 0 and 1 at the start and chunk
// j + 1 when the rank runs the virtual micro-batch r before chunk j's first, j p chunk passes in:
// chunk 0 is needed bucket by bucket during its first forward pass, chunk j at j p passes.
double exposed_param_gather(const ChunkTraffic& g, double forward, std::size_t r, std::size_t p, std::size_t v) {
  if (v <= 1) return std::max(g.first, g.total() - forward);
  const double pass = forward / static_cast<double>(v);
  double done = 0, late = g.first;
  for (std::size_t j = 0; j < v; ++j) {
    const double launch = j <= 1 ? 0 : std::max(0.0, static_cast<double>((j - 1) * p) - static_cast<double>(r)) * pass;
    done = std::max(done, launch) + g.chunk(j, v);
    late = std::max(late, done - (j == 0 ? pass : static_cast<double>(j * p) * pass));
  }
  return late;
}

// Megatron-FSDP's data-parallel traffic beyond the distributed optimizer's one gradient
// reduce-scatter and one parameter all-gather a step, for `shared` parameters of a rank sent
// over its data-parallel group (megatron_fsdp.py). _process_post_backward_gradients reduces the
// gradients on every backward under optim_grads and optim_grads_params
// (grad_reduce_every_bprop), once a step otherwise; under optim_grads_params
// _pre_forward_param_unshard and _pre_backward_param_unshard all-gather the weights before each
// forward and each backward of every micro-batch (released after each: release_module_parameters),
// where the other strategies keep them whole and gather them once a step (the optimizer's update).
// Megatron-FSDP prefetches the next unit's weights and reduces the last one's gradients while a
// unit computes: per micro-batch only what outlasts the rank's compute of it shows.
double fsdp_extra_seconds(const SliceCost& c, double shared, double micro_batches, double bandwidth,
                          double compute_per_micro_batch) {
  const double m = std::max(micro_batches, 1.0);
  double bytes = 0;
  if (c.sharding == DpSharding::kOptimGrads) bytes = (m - 1) * c.grad_bytes;
  if (c.sharding == DpSharding::kOptimGradsParams) bytes = (m - 1) * c.grad_bytes + (2 * m - 1) * c.weight_bytes;
  const double seconds = shared * bytes / bandwidth;
  return std::max(0.0, seconds - (m - 1) * compute_per_micro_batch);
}

}  // namespace mme::planning
