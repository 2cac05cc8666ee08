#include "mme/report/render_plan.hpp"

#include <fmt/core.h>

#include <mme/report/render_estimate.hpp>
#include <mme/sdk/units.hpp>

namespace mme::cli {

namespace {

// Whether a search compares any memory-for-time knob (then its cost terms are reported).
bool knobs_searched(const PlanOptions& o) {
  return !o.dp_sharding.empty() || !o.optimizer_offload_fractions.empty() || !o.cuda_graphs.empty();
}

nlohmann::json score_json(const PlanScore& s) {
  return {{"score", s.score},
          {"step_seconds", s.step_seconds},
          {"ideal_seconds", s.ideal_seconds},
          {"tokens_per_second_per_gpu", s.tokens_per_second_per_gpu},
          {"model_tflops_per_gpu", s.model_tflops_per_gpu},
          {"micro_batches", s.micro_batches},
          {"bubble", s.bubble},
          {"stage_seconds", s.stage_seconds},
          {"compute_seconds", s.compute_seconds},
          {"gemm_seconds", s.gemm_seconds},
          {"attention_seconds", s.attention_seconds},
          {"elementwise_seconds", s.elementwise_seconds},
          {"recompute_seconds", s.recompute_seconds},
          {"tp_seconds", s.tp_seconds},
          {"ep_seconds", s.ep_seconds},
          {"cp_seconds", s.cp_seconds},
          {"pp_seconds", s.pp_seconds},
          {"dp_seconds", s.dp_seconds},
          {"optimizer_seconds", s.optimizer_seconds},
          {"launch_seconds", s.launch_seconds},
          {"activation_offload_seconds", s.activation_offload_seconds},
          {"fsdp_seconds", s.fsdp_seconds},
          {"offload_seconds", s.offload_seconds},
          {"communication_seconds", s.communication_seconds}};
}

// The searched knobs of a plan (only those searched).
nlohmann::json knobs_json(const PlanKnobs& k) {
  nlohmann::json j = nlohmann::json::object();
  if (k.dp_sharding) j["dp_sharding"] = to_string(*k.dp_sharding);
  if (k.optimizer_offload_fraction) j["optimizer_offload_fraction"] = *k.optimizer_offload_fraction;
  if (k.cuda_graphs) j["cuda_graphs"] = to_string(*k.cuda_graphs);
  return j;
}

}  // namespace

std::string plan_split_text(const PlanLayout& l) {
  if (l.chunk_split)
    return fmt::format("c{}/{}/{}{}", l.first_chunk_layers, l.chunk_layers, l.last_chunk_layers,
                       l.chunk_extra_layers > 0 ? fmt::format("+{}", l.chunk_extra_layers) : std::string());
  if (l.pp == 1 || l.even_split) return "even";
  if (l.pp == 2) return fmt::format("{}/{}", l.first_stage_layers, l.last_stage_layers);
  return fmt::format("{}/{}/{}", l.first_stage_layers, l.middle_stage_layers, l.last_stage_layers);
}

std::string why_line(const Plan& p) {
  const PlanScore& s = p.score;
  const auto [bound, share] = step_bound(s);
  std::string what;
  if (bound == StepBound::kCompute) {
    const double slots = s.bubble < 1 ? s.micro_batches / (1 - s.bubble) : s.micro_batches;
    auto part = [&](double seconds) { return s.step_seconds > 0 ? 100 * slots * seconds / s.step_seconds : 0.0; };
    what = fmt::format("compute-bound: GEMMs {:.0f} %, attention {:.0f} %, memory-bound kernels {:.0f} % of the step",
                       part(s.gemm_seconds), part(s.attention_seconds), part(s.elementwise_seconds));
  } else {
    what = fmt::format("bounded by {} ({:.0f} % of the step)", to_string(bound), 100 * share);
  }
  return fmt::format("{}; {} GiB {}", what,
                     fmt::format("{:.1f}", to_gib(p.headroom_bytes < 0 ? -p.headroom_bytes : p.headroom_bytes)),
                     p.headroom_bytes < 0 ? "short" : "free");
}

nlohmann::json plan_to_json(const Planner& planner, const Plan& p, const PlanOptions& o) {
  const auto [bound, share] = step_bound(p.score);
  nlohmann::json j = {{"args", planner.args_for(p.layout, o)},
                      {"setup", setup_to_json(resolve_setup(planner.setup_for(p.layout, o)))},
                      {"peak_bytes", p.peak_bytes},
                      {"upper_bytes", p.upper_bytes},
                      {"headroom_bytes", p.headroom_bytes},
                      {"fits", p.fits},
                      {"tight", is_tight(p)},
                      {"score", p.score.score},
                      {"step_seconds", p.score.step_seconds},
                      {"tokens_per_second_per_gpu", p.score.tokens_per_second_per_gpu},
                      {"model_tflops_per_gpu", p.score.model_tflops_per_gpu},
                      {"gpu_hours_per_step", p.score.step_seconds * static_cast<double>(o.num_gpus) / 3600},
                      {"bound", to_string(bound)},
                      {"bound_share", share},
                      {"why", why_line(p)},
                      {"speed", score_json(p.score)}};
  if (knobs_searched(o)) j["knobs"] = knobs_json(p.layout.knobs);
  return j;
}

nlohmann::json plan_result_to_json(const ModelSpec& model, const Planner& planner, const PlanOptions& o,
                                   const PlanResult& r, const std::vector<PlanSuggestion>& suggestions) {
  nlohmann::json j;
  j["schema_version"] = 1;
  j["model"] = model.name;
  j["gpu"] = o.gpu->name;
  j["num_gpus"] = o.num_gpus;
  j["usable_bytes"] = r.usable_bytes;
  j["sort"] = to_string(o.sort);
  j["evaluated"] = r.evaluated;
  j["estimated"] = r.estimated;
  j["valid"] = r.valid;
  j["fitting"] = r.fitting;
  j["elapsed_s"] = r.elapsed_s;
  j["threads"] = r.threads;
  nlohmann::json plans = nlohmann::json::array();
  for (const auto& p : r.plans) plans.push_back(plan_to_json(planner, p, o));
  j["global_batch_size"] = plan_global_batch(o);
  j["global_batch_assumed"] = o.base.global_batch_size <= 0;
  j["plans"] = plans;
  j["recipe_overlaps"] = o.recipe_overlaps;
  j["step_time_constants"] = {{"gemm_bf16", o.step_time.gemm_bf16},
                              {"gemm_fp8", o.step_time.gemm_fp8},
                              {"attention", o.step_time.attention},
                              {"elementwise_passes", o.step_time.elementwise_passes}};
  j["network"] = {{"gpus_per_node", plan_gpus_per_node(o)},
                  {"inter_node_bandwidth_gbps", plan_inter_node_bandwidth(o)},
                  {"assumed", plan_assumed_figures(o)}};
  if (!r.refused_recompute.empty()) {
    nlohmann::json refused = nlohmann::json::array();
    for (const auto& [variant, reason] : r.refused_recompute)
      refused.push_back({{"recompute", to_string(variant)}, {"reason", reason}});
    j["refused_recompute"] = refused;
  }
  if (r.skipped_slices > 0)
    j["skipped"] = {{"candidates", r.skipped_candidates},
                    {"slices", r.skipped_slices},
                    {"first", r.first_skipped},
                    {"max_candidates", o.max_candidates}};
  if (knobs_searched(o))
    j["cost_figures"] = {{"host_link_bandwidth_gbps", plan_host_link_bandwidth(o)},
                         {"cpu_optimizer_params_per_second", o.cpu_optimizer_params_per_second},
                         {"kernel_launch_us", o.kernel_launch_us},
                         {"graph_launch_us", o.graph_launch_us}};
  if (r.fitting == 0) {
    if (r.smallest) j["smallest"] = plan_to_json(planner, *r.smallest, o);
    nlohmann::json sj = nlohmann::json::array();
    for (const auto& s : suggestions)
      sj.push_back({{"change", s.change},
                    {"args", s.args},
                    {"peak_bytes", s.plan.peak_bytes},
                    {"headroom_bytes", s.plan.headroom_bytes}});
    j["suggestions"] = sj;
  }
  return j;
}

nlohmann::json gpu_counts_to_json(const Planner& planner, const PlanOptions& o, const GpuCountResult& g) {
  nlohmann::json counts = nlohmann::json::array();
  for (const GpuCountPlan& c : g.counts) {
    PlanOptions at = o;
    at.num_gpus = c.num_gpus;
    at.base.global_batch_size = static_cast<std::int64_t>(g.global_batch);
    nlohmann::json plans = nlohmann::json::array();
    for (const Plan& p : c.result.plans) plans.push_back(plan_to_json(planner, p, at));
    counts.push_back({{"num_gpus", c.num_gpus}, {"fitting", c.result.fitting}, {"plans", plans}});
  }
  return {{"smallest", g.smallest},
          {"tried", g.tried},
          {"global_batch_size", g.global_batch},
          {"global_batch_assumed", g.global_batch_assumed},
          {"counts", counts}};
}

}  // namespace mme::cli
