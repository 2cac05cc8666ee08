// The layout planner: enumerates every parallel layout Megatron-LM accepts for a number of
// GPUs (TP, PP with its first/last-stage splits, VPP, EP, ETP, CP, DP, micro-batch size,
// recompute), estimates each with the engine, keeps those that fit a GPU and ranks them by a
// speed proxy (docs/planner.md: pipeline bubble, recompute, TP/EP/CP/DP communication, a
// roofline per layer, from the hardware profile's figures). The search runs on a pool of
// std::threads; its output does not depend on the number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
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
  std::int64_t micro_batch_size = 1;
  RecomputeVariant recompute = RecomputeVariant::kNone;
  PlanKnobs knobs;  // the searched memory-for-time knobs (unset: the base setup's)

  bool operator==(const PlanLayout&) const = default;
};

// The speed proxy of one layout (docs/planner.md). Seconds are modelled, not predicted: they
// rank layouts, they do not forecast a run.
struct PlanScore {
  double score = 0;          // ideal_seconds / step_seconds, in (0, 1]: higher is faster
  double step_seconds = 0;   // one global batch: pipeline + data-parallel synchronisation
  double ideal_seconds = 0;  // the same work at peak FLOP/s on every GPU, nothing else
  double micro_batches = 0;  // m per data-parallel rank and step (nominal without a global batch)
  double bubble = 0;         // (p - 1) / (m v + p - 1)
  // One micro-batch on the slowest pipeline rank, and what it is made of.
  double stage_seconds = 0;
  double compute_seconds = 0;    // roofline of the GEMMs and attention (forward + backward)
  double recompute_seconds = 0;  // the forward work recompute repeats
  double tp_seconds = 0;         // tensor-parallel all-gathers / reduce-scatters
  double ep_seconds = 0;         // expert all-to-all (and expert-TP gathers)
  double cp_seconds = 0;         // context-parallel KV exchange
  double pp_seconds = 0;         // pipeline sends between stages (2 per virtual chunk)
  double dp_seconds = 0;         // per step: gradient reduce-scatter + parameter all-gather
  // Per micro-batch on the slowest rank: kernel-launch time the GPU work does not hide (counted
  // only when the search compares CUDA graphs; graphed scopes launch one graph per pass).
  double launch_seconds = 0;
  // Per step, beyond the distributed optimizer's sync: Megatron-FSDP's per-micro-batch gradient
  // reduce-scatters (optim_grads) and parameter all-gathers (optim_grads_params).
  double fsdp_seconds = 0;
  // Per step: optimizer CPU offload (HybridDeviceOptimizer): gradients to the host, the CPU
  // optimizer step, parameters back to the GPU, for the offloaded share of the rank's shard.
  double offload_seconds = 0;
  // Per step: the slowest rank's TP/EP/CP/PP time over every micro-batch slot, plus dp_seconds.
  double communication_seconds = 0;
};

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
  std::int64_t gpus_per_node = 8;  // TP groups stay within a node; sets intra/inter-node links
  std::int64_t max_tp = 0;         // largest TP and ETP (0: gpus_per_node)
  std::vector<std::int64_t> micro_batch_sizes{1, 2, 4};
  std::vector<RecomputeVariant> recompute = all_recompute_variants();
  // Fixed dimensions (unset: searched).
  std::optional<std::int64_t> tp, pp, vpp, ep, etp, cp;
  PlanSortKey sort = PlanSortKey::kScore;
  std::size_t top_k = 10;
  unsigned threads = 0;  // 0: every core (std::thread::hardware_concurrency)
  // Per-GPU bandwidth between nodes (GB/s), for groups that leave a node: 400 Gb/s InfiniBand
  // NDR per GPU, as in DGX H100/H200 systems. The profile has no figure for it.
  double inter_node_bandwidth_gbps = 50.0;
  // The memory-for-time knobs to search (docs/planner.md); empty: the base setup's, not searched.
  std::vector<DpSharding> dp_sharding;
  std::vector<double> optimizer_offload_fractions;
  std::vector<CudaGraphChoice> cuda_graphs;
  // Figures the GPU profile lacks, for the knobs' cost terms (docs/planner.md, "The knobs"):
  // host-device copies per GPU (PCIe 5.0 x16: 64 GB/s a direction, about 50 achieved with
  // pinned memory), the CPU optimizer's parameter updates per second per GPU rank (torch Adam on
  // the host's cores shared by its GPUs), the host time of one eagerly launched kernel (PyTorch
  // dispatch + cudaLaunchKernel) and of one graph replay (cudaGraphLaunch).
  double host_link_bandwidth_gbps = 50.0;
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
};

// Free memory (usable - upper bound) below which a fitting plan is flagged as tight: the
// headroom share already covers the allocator's usual slack, so less than this left over means
// a slightly longer sequence, another NCCL buffer or a fragmentation spike may not fit.
inline constexpr std::int64_t kTightHeadroomBytes = std::int64_t{1} << 30;  // 1 GiB
inline bool is_tight(const Plan& p) { return p.fits && p.headroom_bytes < kTightHeadroomBytes; }

// Every combination of the searched knobs, in enumeration order (dp_sharding, then the offload
// fraction, then CUDA graphs); one unset combination when none is searched.
std::vector<PlanKnobs> plan_knob_combinations(const PlanOptions& o);
// Whether the speed proxy counts kernel-launch time: when the search compares CUDA graphs.
bool plan_counts_launches(const PlanOptions& o);

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

  // The speed proxy of one candidate.
  PlanScore score(const PlanLayout& layout, const PlanOptions& options) const;

  // When nothing fits: the smallest changes that would make a layout fit (full recompute,
  // micro-batch size 1, more GPUs, a shorter sequence), each with the best layout it gives.
  std::vector<PlanSuggestion> suggest(const PlanOptions& options) const;

  const Estimator& estimator() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The `mme estimate` flags that give `setup` (its layout and every field that differs from
// TrainingSetup's defaults): setup_to_mme_args, the setup schema's printer.
std::vector<std::string> setup_to_args(const TrainingSetup& setup);

}  // namespace mme
