// The estimation engine: composes the layer-memory models over the pipeline partition into
// per-rank memory: static bytes (weights, gradients, optimizer shards, framework buffers) and
// activations times the micro-batches in flight, plus stage extras (embedding, logits and
// loss, MTP) and transient peaks. The peak is the largest pipeline stage.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "mme/engine/registry.hpp"
#include "mme/engine/setup_checks.hpp"
#include "mme/sdk/hardware_profile.hpp"
#include "mme/sdk/model_spec.hpp"
#include "mme/sdk/training_setup.hpp"

namespace mme {

enum class MemoryCategory { kWeights, kGradients, kOptimizer, kActivations, kOther };
const char* to_string(MemoryCategory c);

struct Component {
  std::string name;  // e.g. "activations/attention/core_attention_qkv"
  MemoryCategory category = MemoryCategory::kOther;
  std::int64_t bytes = 0;
};

struct ChunkEstimate {
  std::int64_t vpp_rank = 0;
  std::int64_t first_layer = 0, num_layers = 0, mtp_layers = 0;
  bool embedding = false, loss = false;
  std::int64_t inflight_microbatches = 0;
  std::int64_t activation_bytes_per_microbatch = 0;  // saved for backward by one micro-batch
};

struct StageEstimate {
  std::int64_t pp_rank = 0;
  std::int64_t layers = 0;  // decoder layers over all virtual chunks
  std::int64_t mtp_layers = 0;
  std::vector<ChunkEstimate> chunks;
  std::int64_t parameters = 0;         // held by one rank of this stage
  std::int64_t expert_parameters = 0;  // of which routed-expert parameters
  // Of which trained (gradients and optimizer states): all of them, or under LoRA the adapters only.
  std::int64_t trainable_parameters = 0;
  std::int64_t weight_bytes = 0;
  std::int64_t gradient_bytes = 0;
  std::int64_t optimizer_bytes = 0;
  std::int64_t activation_bytes = 0;   // at the peak: saved activations + transient working memory
  std::int64_t other_bytes = 0;        // persistent framework buffers (workspaces, gather buffers)
  std::int64_t dummy_wgrad_bytes = 0;  // of which TE's weight-gradient placeholders (get_dummy_wgrad)
  std::int64_t static_bytes = 0;       // weights + gradients + optimizer + other: memory_allocated after a step
  std::int64_t total_bytes = 0;        // the peak: what torch.cuda.max_memory_allocated shows
  std::int64_t upper_bytes =
      0;  // the bound: the peak if what the model cannot pin down goes the worst way (>= total_bytes)
  // The two phases of a training step; total_bytes is the larger. Forward/backward: static
  // memory without the optimizer step's temporaries, plus activations. Optimizer step: static
  // memory with the fp32 copies of 16-bit gradients (step_only_bytes) and what the step
  // gathers next to them (step_transient_bytes), no activations.
  std::int64_t forward_backward_bytes = 0;
  std::int64_t optimizer_step_bytes = 0;
  std::int64_t step_only_bytes = 0;       // part of optimizer_bytes that exists from the step to the next zero_grad
  std::int64_t step_transient_bytes = 0;  // Megatron-FSDP: the next forward's first layers, gathered in the step
  const char* peak_phase = "forward-backward";  // or "optimizer-step", "cuda-graph-capture"
  // With CUDA graphs (--cuda-graph-impl; 0 without): the capture's peak, a replayed step's
  // forward/backward (forward_backward_bytes is the larger of it and an eager warm-up step's) and
  // the graphs' private pool, reserved but not allocated while they replay (in the upper bound).
  std::int64_t cuda_graph_capture_bytes = 0;
  std::int64_t cuda_graph_replay_bytes = 0;
  std::int64_t cuda_graph_pool_bytes = 0;
  // What the caching allocator's block rounding can add at the forward/backward peak (1 MiB per
  // live activation tensor above 1 MiB); part of the upper bound only.
  std::int64_t allocator_slack_bytes = 0;
  // Upper bound only (communication_buffers.cpp): communication buffers a library allocates
  // outside PyTorch's caching allocator, which max_memory_allocated does not show but the GPU must
  // hold (TE userbuffers of --tp-comm-overlap), and the most the data-parallel buckets' padding
  // can add (--overlap-grad-reduce).
  std::int64_t outside_allocator_bytes = 0;
  std::int64_t bucket_padding_bytes = 0;
  // What activation offloading can keep on the GPU beyond the estimate (a second layer's
  // offloaded tensors, activation_offload.cpp); part of the upper bound only.
  std::int64_t offload_slack_bytes = 0;
  // The output layer's weight-gradient placeholder [V/TP, h] if Megatron-LM keeps it: newer
  // releases take it from TE's cache (tensor_parallel/layers.py get_dummy_wgrad), core_r0.14 made
  // a new one in every backward (the estimate's transient). Upper bound only, on the loss stage.
  std::int64_t cached_output_wgrad_bytes = 0;
  // With --cross-entropy-fusion-impl te on the loss stage: newer Transformer Engine writes the
  // loss's gradient to an fp32 tensor beside the logits instead of over them (the estimate takes
  // TE 2.11's in-place kernel): 4 B per logit of each loss (the main one and each MTP depth). Upper bound only.
  std::int64_t te_loss_fp32_gradient_bytes = 0;
  std::int64_t inflight_microbatches = 0;  // micro-batches of the first chunk held at the peak
  std::vector<Component> components;
  // The device total (device_memory.cpp, docs/memory-model.md "Reserved memory and the device
  // total"; all 0 when EstimateOptions::device_memory is off). reserved_bytes: the peak of the
  // caching allocator's segments over the replayed training iterations
  // (torch.cuda.max_memory_reserved; >= total_bytes); outside_pytorch_bytes: what the process
  // holds outside PyTorch's allocator (CUDA context, NCCL communicators, TE userbuffers, named in
  // device_components); device_bytes = reserved + outside; device_upper_bytes: the same for the
  // upper bound (what the bound adds beyond the estimate, the allocator's rounding excepted, on
  // top of device_bytes). The fit is judged on these (fit.hpp).
  std::int64_t reserved_bytes = 0;
  // Of reserved_bytes: the segments of a second CUDA stream's pool (TE's context-parallel ring,
  // BlockActivations::side_stream), which the main stream's requests never reuse.
  std::int64_t side_stream_reserved_bytes = 0;
  std::int64_t outside_pytorch_bytes = 0;
  std::int64_t device_bytes = 0;
  std::int64_t device_upper_bytes = 0;
  std::vector<Component> device_components;
};

// One distinct decoder-layer kind under the layout (DeepSeek-V3: dense-MLA, MoE-MLA, and the
// MTP layer), for the per-layer breakdown of `--verbose`.
// One layer's costs per micro-batch on one rank, as its block models report them (BlockCosts).
struct LayerCosts {
  double forward_flops = 0;    // GEMMs, attention core and routed experts of the forward pass
  double recompute_flops = 0;  // forward FLOPs the selective recompute repeats in backward
  double weight_bytes = 0;     // weight bytes one forward pass reads
  // Collective bytes the rank sends, forward and backward together, by process group.
  double tp_bytes = 0, cp_bytes = 0, ep_bytes = 0, etp_bytes = 0;
};

struct LayerKindEstimate {
  std::string attention, mlp;                        // block kinds, e.g. "mla" and "moe"
  std::int64_t layers = 0;                           // decoder layers of this kind (0 for the MTP kind)
  bool mtp = false;                                  // the multi-token-prediction layer's kind
  std::int64_t parameters = 0;                       // per rank, one layer
  std::int64_t activation_bytes_per_microbatch = 0;  // one layer, one micro-batch
  std::int64_t transient_bytes = 0;                  // the layer's busiest moment
  std::vector<Component> components;                 // parameters (elements) and activations (bytes), one layer
  LayerCosts costs;
};

struct ModelSummary {
  std::string name, family, model_type, adapter;
  std::int64_t total_params = 0;  // unique weights (tied embedding once, MTP excluded)
  std::int64_t active_params = 0;
  std::int64_t mtp_params = 0;
  std::int64_t padded_vocab_size = 0;
  std::int64_t num_layers = 0, hidden_size = 0;
};

struct Estimate {
  ModelSummary model;
  TrainingSetup setup;                                    // after defaults
  AttentionBackend attention = AttentionBackend::kFlash;  // the point estimate's backend (auto resolved)
  std::vector<StageEstimate> stages;
  std::vector<LayerKindEstimate> layer_kinds;  // filled with EstimateOptions::layer_breakdown
  std::size_t peak_stage = 0;
  std::size_t upper_stage = 0;  // the stage with the largest upper_bytes
  std::vector<std::string> assumptions;
  // What the upper bound covers beyond the point estimate, one line each (empty: nothing
  // uncertain was found; the bound equals the estimate).
  std::vector<std::string> bound_terms;

  std::size_t device_stage = 0;  // the stage with the largest device_upper_bytes (device_memory on)
  // The caching allocator's configuration the reserved memory was replayed with, as given
  // (PYTORCH_CUDA_ALLOC_CONF; empty: PyTorch's defaults).
  std::string allocator_config;

  const StageEstimate& peak() const { return stages.at(peak_stage); }
  std::int64_t upper_bytes() const { return stages.at(upper_stage).upper_bytes; }
};

struct EstimateOptions {
  // The target GPU's CUDA compute capability (HardwareProfile::compute_capability: 80, 90,
  // 100, ...; 0 = not CUDA), which decides workspace sizes and TE's attention kernel.
  int compute_capability = kDefaultComputeCapability;
  bool components = true;        // build the named component lists (the planner turns this off)
  bool layer_breakdown = false;  // also fill Estimate::layer_kinds (needs components)
  bool upper_bound = true;       // also evaluate the upper bound (a second pass where something is uncertain)
  bool bound_terms = true;       // word Estimate::bound_terms (the planner, which shows none, turns this off)
  // Replay the caching allocator for the reserved memory and add what lies outside PyTorch (the
  // device total, StageEstimate::reserved_bytes ...); the planner turns this off.
  bool device_memory = true;
  // Skip the bound's second pass when the point estimate's peak already exceeds this (the bound
  // is then at least the estimate plus the allocator term, and above the caller's limit anyway).
  std::int64_t bound_pass_up_to_bytes = std::numeric_limits<std::int64_t>::max();
};

// Megatron-LM's padded vocabulary: ceil(V / (divisor * TP)) * divisor * TP.
std::int64_t padded_vocab_size(std::int64_t vocab, std::int64_t divisor, std::int64_t tp);

struct EngineTables;  // libmme's own (not part of the SDK)

class Estimator {
 public:
  // Resolves the layer-memory model of every block kind; throws PluginError if one is missing.
  Estimator(const ModelSpec& model, const Registry& registry);
  ~Estimator();
  Estimator(Estimator&&) noexcept;
  Estimator& operator=(Estimator&&) noexcept;

  // Validates the setup against the model (LayoutError) and estimates every pipeline stage.
  Estimate run(const TrainingSetup& setup, const EstimateOptions& options = {}) const;

  // Exact parameter counts of the model (no parallelism): the `params` figures.
  struct ParamCount {
    std::int64_t total = 0, active = 0, mtp = 0;
    std::vector<std::pair<std::string, std::int64_t>> breakdown;         // by group, in total
    std::vector<std::pair<std::string, std::int64_t>> active_breakdown;  // by group, active
  };
  ParamCount count_parameters() const;
  // LoRA's adapters on this model (Megatron-Bridge, TrainingSetup::lora): what `mme params`
  // reports as trainable, the base being frozen. MTP layers' adapters apart, as in ParamCount.
  struct LoraCount {
    std::int64_t total = 0, active = 0, mtp = 0;
  };
  LoraCount count_lora_parameters(const LoraSettings& lora) const;

  const ModelSpec& model() const;

 private:
  ParamCount count_parameters_uncached() const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  // The planner (libmme) evaluates layouts with the same tables.
  friend const EngineTables& engine_tables(const Estimator& estimator);
};

}  // namespace mme
