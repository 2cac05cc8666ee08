// The device total of a pipeline stage (docs/memory-model.md, "Reserved memory and the device
// total"): PyTorch's reserved memory, from a replay of one rank's allocations and frees through
// the caching-allocator model (allocator_model.hpp) in the order Megatron-LM makes them (model
// build, the distributed optimizer's shards, the schedule's forward and backward passes, the
// optimizer steps), and what the process holds outside PyTorch's allocator (CUDA context, NCCL
// communicators, TE userbuffers).
#pragma once

#include <string>
#include <vector>

#include "mme/engine/estimator.hpp"

#include "allocator_model.hpp"

namespace mme {

struct Pass;

// The allocator configuration of a run: PYTORCH_ALLOC_CONF, else PYTORCH_CUDA_ALLOC_CONF, and
// PYTORCH_NO_CUDA_MEMORY_CACHING, as the setup's environment gives them (UsageError on a value
// PyTorch refuses).
AllocatorConfig allocator_config(const TrainingSetup& s);
// Its text as the run gave it (empty: PyTorch's defaults).
std::string allocator_config_text(const TrainingSetup& s);

// Fills the stage's reserved_bytes, outside_pytorch_bytes, device_bytes and device_components.
void add_device_memory(const Pass& ps, StageEstimate& st);
// After the upper bound: each stage's device_upper_bytes and Estimate::device_stage.
void finish_device_memory(Estimate& est);
// The report's lines on what the device total assumes.
void add_device_assumptions(const Pass& ps, std::vector<std::string>& assumptions);

}  // namespace mme
