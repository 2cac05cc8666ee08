// Static and in-flight memory of sharded data parallelism (Megatron-FSDP and PyTorch FSDP2) for
// one pipeline stage; the engine's counterpart of the distributed optimizer's arithmetic.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mme/sdk/checked.hpp"
#include "mme/sdk/training_setup.hpp"

namespace mme {

struct ShardedDpStage {
  // Parameters of the stage on this rank (after TP/EP), split as the buckets are: the
  // decoder layers (the FSDP units) and the rest (embedding, output layer, norms, MTP extras).
  CheckedInt unit_dense = 0, unit_expert = 0, other_dense = 0;
  CheckedInt units = 0;           // decoder (and MTP) layers of the stage
  CheckedInt largest_unit = 0;    // parameters of the largest layer
  CheckedInt fp8_params = 0;      // GEMM weights kept in FP8 under --fp8-param-gather
  std::int64_t dense_group = 1;   // DP x CP / optimizer instances: the dense shard group
  std::int64_t expert_group = 1;  // expert DP / optimizer instances
  std::int64_t instances = 1;     // --num-distributed-optimizer-instances (HSDP outer groups)
  std::int64_t param_bytes = 2;   // bytes of a 16-bit (or fp32) model weight
  bool fp8_param_gather = false;
};

struct ShardedDpMemory {
  CheckedInt weights = 0, gradients = 0, optimizer = 0;  // optimizer includes step_only
  CheckedInt step_only = 0;                              // the optimizer step's copies (not next to the activations)
  CheckedInt step_transient = 0;      // gathered by the next step's param sync while those copies live
  CheckedInt persistent_buffers = 0;  // double-buffer pools (other)
  CheckedInt transient = 0;           // gathered weights and unsharded gradients at the backward's start
  std::vector<std::pair<std::string, CheckedInt>> weight_terms, gradient_terms, optimizer_terms, other_terms,
      transient_terms;
};

// Throws LayoutError for combinations Megatron-LM refuses or mme does not model.
ShardedDpMemory sharded_data_parallel_memory(const ShardedDpStage& stage, const FsdpSettings& fsdp,
                                             const OptimizerSettings& optimizer, DType param_dtype);

}  // namespace mme
