// The layout planner (docs/planner.md): the public names, `mme estimate` flags for a setup,
// and the Planner facade. The search space (planner/search_space.cpp) is built per model: the
// TP/CP/EP/ETP combinations the layer models accept (the engine's block checks, Megatron's
// divisibility rules), the PP splits and VPP sizes that partition the layers, then micro-batch
// size and recompute. Work is cut into slices of fixed (TP, CP, EP, ETP) whose inner loops run
// over PP, split, VPP and the variants; a pool of std::threads takes slices in order
// (planner/search.cpp, planner/ordered_parallel_map.hpp), each keeps its own top K (one plan
// per group of near-duplicates), and the results are merged under a total order (the
// enumeration ordinal breaks every tie), so the output never depends on the number of threads.
// Every peak is Estimator::run's; the speed proxy is planner/cost_model.cpp.
#include "mme/planner/planner.hpp"

#include <algorithm>

#include <fmt/core.h>

#include "mme/inputs/setup_schema.hpp"
#include "mme/sdk/enum_names.hpp"
#include "mme/sdk/error.hpp"

#include "planner/planner_internal.hpp"

namespace mme {

// The variants are the recompute granularities, named as the setup schema names them (the
// --recompute-granularity knob's table: none, selective, full).
namespace {
RecomputeGranularity granularity_of(RecomputeVariant v) {
  switch (v) {
    case RecomputeVariant::kNone: return RecomputeGranularity::kNone;
    case RecomputeVariant::kSelective: return RecomputeGranularity::kSelective;
    case RecomputeVariant::kFull: return RecomputeGranularity::kFull;
  }
  return RecomputeGranularity::kNone;
}
}  // namespace

const char* to_string(RecomputeVariant v) {
  return enum_name(kRecomputeGranularityNames, static_cast<int>(granularity_of(v)));
}

RecomputeVariant parse_recompute_variant(std::string_view text) {
  for (const RecomputeVariant v : all_recompute_variants())
    if (text == to_string(v)) return v;
  std::string names;
  for (const RecomputeVariant v : all_recompute_variants())
    names += fmt::format("{}{}", names.empty() ? "" : ", ", to_string(v));
  throw UsageError(fmt::format("--recompute: unknown variant '{}' ({})", text, names));
}

std::vector<RecomputeVariant> all_recompute_variants() {
  return {RecomputeVariant::kNone, RecomputeVariant::kSelective, RecomputeVariant::kFull};
}

const char* to_string(PlanSortKey k) {
  switch (k) {
    case PlanSortKey::kScore: return "score";
    case PlanSortKey::kPeak: return "peak";
    case PlanSortKey::kBubble: return "bubble";
    case PlanSortKey::kCommunication: return "comm";
  }
  return "?";
}

PlanSortKey parse_plan_sort_key(std::string_view text) {
  if (text == "score") return PlanSortKey::kScore;
  if (text == "peak" || text == "memory" || text == "headroom") return PlanSortKey::kPeak;
  if (text == "bubble") return PlanSortKey::kBubble;
  if (text == "comm" || text == "communication") return PlanSortKey::kCommunication;
  throw UsageError(fmt::format("--sort: unknown key '{}' (score, peak, bubble, comm)", text));
}

// Megatron-FSDP's strategies are named as the setup schema names them (the
// --data-parallel-sharding-strategy knob's table); dist_opt, the distributed optimizer, is the
// planner's own.
const char* to_string(DpSharding d) {
  auto fsdp = [](FsdpSharding f) { return enum_name(kFsdpShardingNames, static_cast<int>(f)); };
  switch (d) {
    case DpSharding::kDistributedOptimizer: return "dist_opt";
    case DpSharding::kOptim: return fsdp(FsdpSharding::kOptim);
    case DpSharding::kOptimGrads: return fsdp(FsdpSharding::kOptimGrads);
    case DpSharding::kOptimGradsParams: return fsdp(FsdpSharding::kOptimGradsParams);
  }
  return "?";
}

DpSharding parse_dp_sharding(std::string_view text) {
  constexpr DpSharding kAll[] = {DpSharding::kDistributedOptimizer, DpSharding::kOptim, DpSharding::kOptimGrads,
                                 DpSharding::kOptimGradsParams};
  for (const DpSharding d : kAll)
    if (text == to_string(d)) return d;
  throw UsageError(fmt::format(
      "--data-parallel-sharding-strategy: unknown value '{}' ({}: the distributed optimizer; Megatron-FSDP: "
      "{}, {}, {})",
      text, to_string(DpSharding::kDistributedOptimizer), to_string(DpSharding::kOptim),
      to_string(DpSharding::kOptimGrads), to_string(DpSharding::kOptimGradsParams)));
}

CudaGraphChoice parse_cuda_graph_choice(std::string_view text) {
  if (text == "off") return {};
  if (text.empty() || text.find_first_of(" ,[]'\"") != std::string_view::npos)
    throw UsageError(fmt::format("--cuda-graphs: expected off, full or scopes joined by '+', got '{}'", text));
  std::string scopes(text);
  std::replace(scopes.begin(), scopes.end(), '+', ' ');
  try {
    return {true, parse_cuda_graph_modules(scopes)};
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("--cuda-graphs: {}", e.what()));
  }
}

std::string to_string(const CudaGraphChoice& g) {
  if (!g.on) return "off";
  if (g.modules == 0) return "full";
  std::string s = cuda_graph_modules_to_string(g.modules);
  std::replace(s.begin(), s.end(), ',', '+');
  return s;
}

std::vector<PlanKnobs> plan_knob_combinations(const PlanOptions& o) {
  std::vector<std::optional<DpSharding>> shardings(o.dp_sharding.begin(), o.dp_sharding.end());
  std::vector<std::optional<double>> fractions(o.optimizer_offload_fractions.begin(),
                                               o.optimizer_offload_fractions.end());
  std::vector<std::optional<CudaGraphChoice>> graphs(o.cuda_graphs.begin(), o.cuda_graphs.end());
  if (shardings.empty()) shardings.emplace_back();
  if (fractions.empty()) fractions.emplace_back();
  if (graphs.empty()) graphs.emplace_back();
  std::vector<PlanKnobs> out;
  for (const auto& d : shardings)
    for (const auto& f : fractions)
      for (const auto& g : graphs) out.push_back({d, f, g});
  return out;
}

// The figures the step-time model assumes when neither the options nor the GPU profile give them.
constexpr std::int64_t kAssumedGpusPerNode = 8;
constexpr double kAssumedInterNodeGbps = 50;  // one 400 Gb/s NIC per GPU

std::int64_t plan_gpus_per_node(const PlanOptions& o) {
  if (o.gpus_per_node > 0) return o.gpus_per_node;
  if (o.gpu && o.gpu->gpus_per_node > 0) return o.gpu->gpus_per_node;
  return kAssumedGpusPerNode;
}

double plan_inter_node_bandwidth(const PlanOptions& o) {
  if (o.inter_node_bandwidth_gbps > 0) return o.inter_node_bandwidth_gbps;
  if (o.gpu && o.gpu->inter_node_bandwidth_gbps > 0) return o.gpu->inter_node_bandwidth_gbps;
  return kAssumedInterNodeGbps;
}

// cudaMemcpyAsync between pinned host memory and the GPU reaches about 50 of PCIe 5.0 x16's 64 GB/s
// a direction (nvbandwidth host_to_device on H100).
constexpr double kHostLinkShare = 50.0 / 64.0;
constexpr double kAssumedHostLinkGbps = 50;

double plan_host_link_bandwidth(const PlanOptions& o) {
  if (o.host_link_bandwidth_gbps > 0) return o.host_link_bandwidth_gbps;
  if (o.gpu && o.gpu->host_link_bandwidth_gbps > 0) return o.gpu->host_link_bandwidth_gbps * kHostLinkShare;
  return kAssumedHostLinkGbps;
}

std::vector<std::string> plan_assumed_figures(const PlanOptions& o) {
  std::vector<std::string> out;
  if (o.gpus_per_node <= 0 && !(o.gpu && o.gpu->gpus_per_node > 0))
    out.push_back(fmt::format("{} GPUs per NVLink domain (--gpus-per-node)", kAssumedGpusPerNode));
  if (o.inter_node_bandwidth_gbps <= 0 && !(o.gpu && o.gpu->inter_node_bandwidth_gbps > 0))
    out.push_back(fmt::format("{:g} GB/s per GPU between nodes (--inter-node-bandwidth)", kAssumedInterNodeGbps));
  return out;
}

std::vector<std::string> setup_to_args(const TrainingSetup& s) { return setup_to_mme_args(s); }

double plan_global_batch(const PlanOptions& o) { return planning::nominal_sequences(o); }

Planner::Planner(const ModelSpec& model, const Registry& registry) : impl_(std::make_unique<Impl>(model, registry)) {}

Planner::~Planner() = default;
Planner::Planner(Planner&&) noexcept = default;
Planner& Planner::operator=(Planner&&) noexcept = default;

const Estimator& Planner::estimator() const { return impl_->estimator; }

TrainingSetup Planner::setup_for(const PlanLayout& layout, const PlanOptions& options) const {
  return impl_->setup_for(layout, options);
}

std::vector<std::string> Planner::args_for(const PlanLayout& layout, const PlanOptions& options) const {
  std::vector<std::string> a = setup_to_args(impl_->setup_for(layout, options));
  if (options.gpu) {
    a.emplace_back("--gpu");
    a.push_back(options.gpu->name);
  }
  if (options.headroom_fraction != kDefaultHeadroom) {
    a.emplace_back("--headroom");
    a.push_back(fmt::format("{}", options.headroom_fraction));
  }
  return a;
}

PlanResult Planner::run(const PlanOptions& options) const { return impl_->search(options, false); }

}  // namespace mme
