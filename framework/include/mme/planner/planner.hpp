// The layout planner: enumerates every parallel layout Megatron-LM accepts for a number of
// GPUs (TP, PP with its first/last-stage splits, VPP, EP, ETP, CP, DP, micro-batch size,
// recompute), estimates each with the engine, keeps those that fit a GPU and ranks them by a
// step-time model (docs/planner.md: each GEMM at the efficiency of its shape and dtype,
// attention, memory-bound work, the collectives and what overlaps them, the pipeline bubble,
// from the hardware profile's figures and a few constants calibrated on measured runs). The
// search runs on a pool of std::threads; its output does not depend on the number of threads.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mme/engine/estimator.hpp"
#include "mme/engine/fit.hpp"
#include "mme/engine/registry.hpp"
#include "mme/sdk/hardware_profile.hpp"
#include "mme/sdk/model_spec.hpp"
#include "mme/sdk/training_setup.hpp"

namespace mme {

// The recompute settings the planner tries: none, selective (the base setup's modules,
// Megatron's default core_attn) and full (uniform, one layer per group).
enum class RecomputeVariant : std::uint8_t { kNone, kSelective, kFull };
const char* to_string(RecomputeVariant v);
// "none" | "selective" | "full"; throws UsageError.
RecomputeVariant parse_recompute_variant(std::string_view text);
std::vector<RecomputeVariant> all_recompute_variants();  // none, selective, full

// What orders the plans: the speed proxy (best first), the peak memory (smallest first), the
// pipeline bubble (smallest first) or the modelled communication time (smallest first). Ties
// go to the higher score, then the larger headroom, then the enumeration order.
enum class PlanSortKey : std::uint8_t { kScore, kPeak, kBubble, kCommunication };
const char* to_string(PlanSortKey k);
PlanSortKey parse_plan_sort_key(std::string_view text);  // throws UsageError

// The data-parallel sharding a plan can search (--data-parallel-sharding-strategy): the
// distributed optimizer without Megatron-FSDP (Megatron-LM's default, "dist_opt"), or
// Megatron-FSDP with one of its strategies.
enum class DpSharding : std::uint8_t { kDistributedOptimizer, kOptim, kOptimGrads, kOptimGradsParams };
const char* to_string(DpSharding d);                  // "dist_opt" | "optim" | "optim_grads" | "optim_grads_params"
DpSharding parse_dp_sharding(std::string_view text);  // throws UsageError

// Per-layer CUDA graphs as a plan can search them (--cuda-graphs): off, or on with the
// --cuda-graph-modules scopes (0: the whole layer, Megatron's `full`).
struct CudaGraphChoice {
  bool on = false;
  std::uint32_t modules = 0;  // CudaGraphModule bits
  bool operator==(const CudaGraphChoice&) const = default;
};
// "off", "full" or scopes joined by '+' ("attn+moe_router"); throws UsageError.
CudaGraphChoice parse_cuda_graph_choice(std::string_view text);
std::string to_string(const CudaGraphChoice& g);

// The memory-for-time knobs of one candidate; unset: the base setup's (not searched).
struct PlanKnobs {
  std::optional<DpSharding> dp_sharding;
  std::optional<double> optimizer_offload_fraction;
  std::optional<CudaGraphChoice> cuda_graphs;
  bool operator==(const PlanKnobs&) const = default;
};

// One candidate: what the planner chooses. DP follows from the GPU count.
struct PlanLayout {
  std::int64_t tp = 1, pp = 1, vpp = 1, ep = 1, etp = 1, cp = 1, dp = 1;
  // Decoder layers of the first, each middle and the last pipeline stage (pp > 1); with
  // `even_split` no first/last-stage flag is needed.
  std::int64_t first_stage_layers = 0, middle_stage_layers = 0, last_stage_layers = 0;
  bool even_split = true;
  // VPP > 1: the first virtual chunk (pipeline rank 0) holds first_chunk_layers decoder layers
  // after the embedding, the last one (rank PP - 1) last_chunk_layers before the loss (and MTP),
  // every other chunk chunk_layers. Megatron-LM spells it --account-for-embedding-in-pipeline-split
  // and --account-for-loss-in-pipeline-split when that is what they say (a chunk one layer
  // lighter), else --pipeline-model-parallel-layout. Layers that do not divide so go one each to
  // the last chunks of the middle ranks 1..chunk_extra_layers (a layout string). first/middle/
  // last_stage_layers hold the stages' totals (middle: a middle rank without an extra layer).
  bool chunk_split = false;
  std::int64_t first_chunk_layers = 0, chunk_layers = 0, last_chunk_layers = 0, chunk_extra_layers = 0;
  std::int64_t micro_batch_size = 1;
  RecomputeVariant recompute = RecomputeVariant::kNone;
  PlanKnobs knobs;  // the searched memory-for-time knobs (unset: the base setup's)

  bool operator==(const PlanLayout&) const = default;
};

// The step-time model's efficiency constants (docs/planner.md, "Calibration"). The defaults are
// the values fitted on bench/accuracy/throughput_runs.csv by mme_calibrate_planner
// (tests/planner/calibration/calibrate_planner.cpp); every other figure of the model is a hardware fact or the code
// of Megatron-LM it models.
struct StepTimeConstants {
  double gemm_bf16 = 0.72;  // a large BF16 (FP16) GEMM's share of the dense BF16 peak
  double gemm_fp8 = 0.808;  // a large FP8 (FP4) GEMM's share of the dense FP8 (FP4) peak
  double attention = 0.5;   // flash attention's share of the dense BF16 peak, forward and backward
  // HBM passes of a layer's memory-bound kernels (norms, activations, RoPE, dropout, casts,
  // token permutation) over the activations it saves for backward, forward and backward together.
  double elementwise_passes = 34.50;
};

// The step-time model of one layout (docs/planner.md): a prediction of one training step on the
// GPU profile, with what it is made of.
struct PlanScore {
  double score = 0;          // ideal_seconds / step_seconds, in (0, 1]: higher is faster
  double step_seconds = 0;   // one global batch: pipeline + what the DP, optimizer and knobs add
  double ideal_seconds = 0;  // the same work at peak FLOP/s on every GPU, nothing else
  double micro_batches = 0;  // m per data-parallel rank and step (nominal without a global batch)
  double bubble = 0;         // (p - 1) / (m v + p - 1)
  // Throughput in Megatron-Bridge's convention: sequences x sequence length / (step x GPUs), and
  // megatron/training/training.py num_floating_point_operations of the step / (step x GPUs).
  double tokens_per_second_per_gpu = 0;
  double model_tflops_per_gpu = 0;
  // One micro-batch on the slowest pipeline rank, and what it is made of.
  double stage_seconds = 0;
  double compute_seconds = 0;      // GEMMs, attention and memory-bound kernels (forward + backward)
  double gemm_seconds = 0;         //   of which the GEMMs
  double attention_seconds = 0;    //   of which the attention core
  double elementwise_seconds = 0;  //   of which the memory-bound kernels
  double recompute_seconds = 0;    // the forward work recompute repeats
  double tp_seconds = 0;           // tensor-parallel all-gathers / reduce-scatters not hidden by --tp-comm-overlap
  double ep_seconds = 0;           // expert all-to-all (and expert-TP gathers) not hidden
  double cp_seconds = 0;           // context-parallel exchange not hidden by the attention core
  double pp_seconds = 0;           // pipeline sends between stages (2 per virtual chunk)
  double dp_seconds = 0;           // per step: gradient reduce-scatter + parameter all-gather not hidden
  double optimizer_seconds = 0;    // per step: the optimizer's memory-bound update of the rank's shard
  // Per micro-batch on the slowest rank: kernel-launch time the GPU work does not hide (counted
  // only when the search compares CUDA graphs; graphed scopes launch one graph per pass).
  double launch_seconds = 0;
  // Per micro-batch on the slowest rank: the activation offload's host transfers that its
  // layers' compute does not hide (TE cpu_offload: D2H forward, H2D before backward).
  double activation_offload_seconds = 0;
  // Per step, beyond the distributed optimizer's sync: Megatron-FSDP's per-micro-batch gradient
  // reduce-scatters (optim_grads) and parameter all-gathers (optim_grads_params).
  double fsdp_seconds = 0;
  // Per step: optimizer CPU offload (HybridDeviceOptimizer): gradients to the host, the CPU
  // optimizer step, parameters back to the GPU, for the offloaded share of the rank's shard.
  double offload_seconds = 0;
  // Per step: the slowest rank's TP/EP/CP/PP time over every micro-batch slot, plus dp_seconds.
  double communication_seconds = 0;
};

// What bounds a plan's step time the most beyond its compute (docs/planner.md, "Why this
// rank"): the largest of the bubble, TP, EP, CP, PP, DP, recompute, launches, Megatron-FSDP and
// offload, over the whole step; kCompute when none of them takes 5 % of the step.
enum class StepBound : std::uint8_t {
  kCompute,
  kBubble,
  kTensorParallel,
  kExpertParallel,
  kContextParallel,
  kPipelineSends,
  kDataParallel,
  kRecompute,
  kLaunches,
  kFsdp,
  kOffload
};
const char* to_string(StepBound b);
// The bound and its share of the step (0 for kCompute: the compute's share instead).
std::pair<StepBound, double> step_bound(const PlanScore& s);

// Megatron-LM's model FLOPs of one global batch of `sequences` (megatron/training/training.py
// num_floating_point_operations, transformer_flops: every GEMM three times, causal attention,
// the logits of the padded vocabulary and MTP), what Megatron-Bridge's TFLOP/s/GPU divides.
double megatron_model_flops(const ModelSpec& model, const TrainingSetup& setup, double sequences);

struct Plan {
  PlanLayout layout;
  std::int64_t peak_bytes = 0;      // the engine's peak-stage total (what `mme estimate` reports)
  std::int64_t upper_bytes = 0;     // the engine's upper bound of the peak (what fits are judged on)
  std::int64_t headroom_bytes = 0;  // usable - upper bound (negative: short by that much)
  bool fits = false;
  PlanScore score;
  std::uint64_t ordinal = 0;  // position in the enumeration order
};

struct PlanOptions {
  std::int64_t num_gpus = 8;
  // Every flag that is not part of the layout (sequence length, global batch, precision, ...).
  // Its parallel layout, pipeline split and recompute granularity are ignored.
  TrainingSetup base;
  const HardwareProfile* gpu = nullptr;  // required
  double headroom_fraction = kDefaultHeadroom;
  // GPUs of one NVLink domain: groups within it use the profile's link bandwidth, the others the
  // inter-node one (0: the profile's gpus_per_node, else 8).
  std::int64_t gpus_per_node = 0;
  std::int64_t max_tp = 0;  // largest TP and ETP (0: min(8, the NVLink domain))
  std::vector<std::int64_t> micro_batch_sizes{1, 2, 4};
  std::vector<RecomputeVariant> recompute = all_recompute_variants();
  // Fixed dimensions (unset: searched).
  std::optional<std::int64_t> tp, pp, vpp, ep, etp, cp;
  // The communication overlaps Megatron-Bridge's recipes turn on, in every candidate:
  // --overlap-grad-reduce and --overlap-param-gather (with the distributed optimizer), and
  // --tp-comm-overlap with TP > 1 (sequence parallelism is on). Off: the base setup's flags.
  bool recipe_overlaps = true;
  // The step-time model's calibrated constants.
  StepTimeConstants step_time;
  // At most this many candidates are judged (0: no bound). A larger space is cut at a slice
  // boundary in enumeration order; PlanResult says what was skipped.
  std::uint64_t max_candidates = std::uint64_t{200'000'000};
  // Set from another thread (a Ctrl-C handler, Python's KeyboardInterrupt) to stop the search:
  // Planner::run and suggest() then throw InterruptedError within a second.
  const std::atomic<bool>* cancel = nullptr;
  PlanSortKey sort = PlanSortKey::kScore;
  std::size_t top_k = 10;
  unsigned threads = 0;  // 0: every core (std::thread::hardware_concurrency)
  // Per-GPU bandwidth between nodes (GB/s), for groups that leave a node (0: the profile's
  // inter_node_bandwidth_gbps, else 50: one 400 Gb/s NIC per GPU, as in DGX H100/H200 systems).
  double inter_node_bandwidth_gbps = 0;
  // The memory-for-time knobs to search (docs/planner.md); empty: the base setup's, not searched.
  std::vector<DpSharding> dp_sharding;
  std::vector<double> optimizer_offload_fractions;
  std::vector<CudaGraphChoice> cuda_graphs;
  // Figures for the offloads' and the knobs' cost terms (docs/planner.md, "The knobs"):
  // host-device copies per GPU, GB/s a direction (0: plan_host_link_bandwidth, from the profile),
  // the CPU optimizer's parameter updates per second per GPU rank (torch Adam on
  // the host's cores shared by its GPUs), the host time of one eagerly launched kernel (PyTorch
  // dispatch + cudaLaunchKernel) and of one graph replay (cudaGraphLaunch).
  double host_link_bandwidth_gbps = 0;
  double cpu_optimizer_params_per_second = 5e8;
  double kernel_launch_us = 5.0;
  double graph_launch_us = 10.0;
  // Every valid layout, in enumeration order, called on the thread that called run().
  std::function<void(const Plan&)> on_valid;
  // Called on the thread that called run() about ten times a second while the search runs.
  std::function<void(std::uint64_t done, std::uint64_t total, double elapsed_s)> progress;
};

struct PlanResult {
  std::uint64_t evaluated = 0;  // candidates judged
  // Of which the engine estimated: when one variant's weights, gradients and optimizer state
  // alone exceed the GPU, the other micro-batch sizes and recompute variants of that layout
  // cannot fit either and are not estimated (unless every valid layout is streamed).
  std::uint64_t estimated = 0;
  std::uint64_t valid = 0;    // of which Megatron accepts (the engine's validation)
  std::uint64_t fitting = 0;  // of which fit the GPU with the headroom
  double elapsed_s = 0;
  unsigned threads = 0;
  std::int64_t usable_bytes = 0;  // per GPU: capacity - reserved - headroom
  // The best `top_k` fitting layouts, best first, near-duplicates dropped: of the layouts with
  // the same sizes, micro-batch, recompute and middle stages whose first/last stages differ but
  // give the same peak, bound and score, only the best (by the sort order) is listed.
  std::vector<Plan> plans;
  // The estimated layout with the smallest peak (each layout's most frugal variant, the
  // smallest micro-batch with the most frugal recompute, is always estimated).
  std::optional<Plan> smallest;
  std::string first_error;  // the engine's reason for the first rejected candidate
  // Recompute variants of --recompute that the flags rule out for every layout while others
  // work (full recompute with CUDA graphs of layers), with the engine's reason: not searched.
  // (With searched knobs a refused pair shows in valid < evaluated instead.)
  std::vector<std::pair<RecomputeVariant, std::string>> refused_recompute;
  // What PlanOptions::max_candidates left out: whole slices of (TP, CP, EP, ETP) at the end of
  // the enumeration order, their candidates, and the first of them ("TP 8, CP 4, EP 16, ETP 1").
  std::uint64_t skipped_candidates = 0;
  std::uint64_t skipped_slices = 0;
  std::string first_skipped;
};

// Free memory (usable - upper bound) below which a fitting plan is flagged as tight: the
// headroom share already covers the allocator's usual slack, so less than this left over means
// a slightly longer sequence, another NCCL buffer or a fragmentation spike may not fit.
inline constexpr std::int64_t kTightHeadroomBytes = std::int64_t{1} << 30;  // 1 GiB
inline bool is_tight(const Plan& p) { return p.fits && p.headroom_bytes < kTightHeadroomBytes; }

// Every combination of the searched knobs, in enumeration order (dp_sharding, then the offload
// fraction, then CUDA graphs); one unset combination when none is searched.
std::vector<PlanKnobs> plan_knob_combinations(const PlanOptions& o);
// The NVLink domain and the inter-node bandwidth (GB/s per GPU) the step-time model uses: the
// option when set, else the GPU profile's, else 8 GPUs and 50 GB/s. `assumed` says which came
// from neither.
std::int64_t plan_gpus_per_node(const PlanOptions& o);
double plan_inter_node_bandwidth(const PlanOptions& o);
std::vector<std::string> plan_assumed_figures(const PlanOptions& o);
// The host-device copies' bandwidth (GB/s a direction per GPU): the option when set, else what
// pinned-memory copies reach of the profile's host link (about 50 of PCIe 5.0 x16's 64), else 50.
double plan_host_link_bandwidth(const PlanOptions& o);

// The global batch (sequences per step) the speed proxy assumes: --global-batch-size, else the
// GPU count x the largest micro-batch size searched (a floating-point count: it can pass 2^63).
double plan_global_batch(const PlanOptions& o);

// A change that makes some layout fit when none does.
struct PlanSuggestion {
  std::string change;  // e.g. "--num-gpus 2048"
  // The best layout after the change with the smallest micro-batch size and the most frugal
  // recompute variant (whenever any variant fits, those do), and its `mme estimate` flags.
  std::vector<std::string> args;
  Plan plan;
};

// "How many GPUs do I need?" (mme plan MODEL --gpu NAME without --num-gpus): the smallest GPU
// count with a fitting layout, and the fastest plans at it and at a few counts above it.
struct GpuCountPlan {
  std::int64_t num_gpus = 0;
  PlanResult result;  // the search at that count: its top plans
};
struct GpuCountResult {
  std::int64_t smallest = 0;          // 0: nothing fits up to the largest count tried
  std::vector<std::int64_t> tried;    // the counts the feasibility search tried, in order
  double global_batch = 0;            // the global batch every count's plans assume
  bool global_batch_assumed = false;  // not --global-batch-size: the largest count x the largest micro-batch
  std::vector<GpuCountPlan> counts;   // smallest, 2 x smallest, 4 x smallest, ...
};

class Planner {
 public:
  // Builds the estimator and the per-layer figures of the speed proxy. Throws PluginError if a
  // block kind has no layer-memory model.
  Planner(const ModelSpec& model, const Registry& registry);
  ~Planner();
  Planner(Planner&&) noexcept;
  Planner& operator=(Planner&&) noexcept;

  // The search. Throws UsageError for bad options, LayoutError when the base setup makes every
  // layout invalid (the engine's reason) or when no layout exists for the GPU count.
  PlanResult run(const PlanOptions& options) const;

  // Every candidate the search gives the engine, in enumeration order (no estimate).
  void enumerate(const PlanOptions& options, const std::function<void(const PlanLayout&)>& visit) const;
  std::uint64_t count_candidates(const PlanOptions& options) const;

  // The setup the engine is given for a candidate, and the same as `mme estimate` flags
  // (with --gpu, and --headroom when it is not the default).
  TrainingSetup setup_for(const PlanLayout& layout, const PlanOptions& options) const;
  std::vector<std::string> args_for(const PlanLayout& layout, const PlanOptions& options) const;

  // The step-time model of one candidate.
  PlanScore score(const PlanLayout& layout, const PlanOptions& options) const;
  // The step-time model of any setup of the model (its own layout, pipeline split, recompute,
  // overlaps and knobs; `options` gives the GPU and the model's figures): what `mme estimate`'s
  // next steps price their changes with. Throws what resolve_setup throws.
  PlanScore score_setup(const TrainingSetup& setup, const PlanOptions& options) const;

  // When nothing fits: the smallest changes that would make a layout fit (full recompute,
  // micro-batch size 1, more GPUs, a shorter sequence), each with the best layout it gives.
  std::vector<PlanSuggestion> suggest(const PlanOptions& options) const;

  // The smallest GPU count (options.num_gpus is ignored) whose cheapest variants fit: 1, 2, 4, 8,
  // then doublings up to `max_gpus`, refined to a multiple of min(8, the NVLink domain) between the
  // last count that does not fit and the first that does; then a search at it and at 2x, 4x, ...
  // (`counts` of them) for the fastest plans, all under one global batch.
  GpuCountResult gpu_counts(const PlanOptions& options, std::size_t counts = 3,
                            std::int64_t max_gpus = std::int64_t{1} << 20) const;

  const Estimator& estimator() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The `mme estimate` flags that give `setup` (its layout and every field that differs from
// TrainingSetup's defaults): setup_to_mme_args, the setup schema's printer.
std::vector<std::string> setup_to_args(const TrainingSetup& setup);

}  // namespace mme
