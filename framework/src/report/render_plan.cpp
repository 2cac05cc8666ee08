#include "mme/report/render_plan.hpp"

#include <mme/report/render_estimate.hpp>

namespace mme::cli {

namespace {

// Whether a search compares any memory-for-time knob (then its cost terms are reported).
bool knobs_searched(const PlanOptions& o) {
  return !o.dp_sharding.empty() || !o.optimizer_offload_fractions.empty() || !o.cuda_graphs.empty();
}

nlohmann::json score_json(const PlanScore& s, bool knobs) {
  nlohmann::json j = {{"score", s.score},
                      {"step_seconds", s.step_seconds},
                      {"ideal_seconds", s.ideal_seconds},
                      {"micro_batches", s.micro_batches},
                      {"bubble", s.bubble},
                      {"stage_seconds", s.stage_seconds},
                      {"compute_seconds", s.compute_seconds},
                      {"recompute_seconds", s.recompute_seconds},
                      {"tp_seconds", s.tp_seconds},
                      {"ep_seconds", s.ep_seconds},
                      {"cp_seconds", s.cp_seconds},
                      {"pp_seconds", s.pp_seconds},
                      {"dp_seconds", s.dp_seconds},
                      {"communication_seconds", s.communication_seconds}};
  if (knobs) {
    j["fsdp_seconds"] = s.fsdp_seconds;
    j["offload_seconds"] = s.offload_seconds;
    j["launch_seconds"] = s.launch_seconds;
  }
  return j;
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

nlohmann::json plan_to_json(const Planner& planner, const Plan& p, const PlanOptions& o) {
  nlohmann::json j = {{"args", planner.args_for(p.layout, o)},
                      {"setup", setup_to_json(resolve_setup(planner.setup_for(p.layout, o)))},
                      {"peak_bytes", p.peak_bytes},
                      {"upper_bytes", p.upper_bytes},
                      {"headroom_bytes", p.headroom_bytes},
                      {"fits", p.fits},
                      {"tight", is_tight(p)},
                      {"score", p.score.score},
                      {"speed", score_json(p.score, knobs_searched(o))}};
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
  if (knobs_searched(o))
    j["cost_figures"] = {{"host_link_bandwidth_gbps", o.host_link_bandwidth_gbps},
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

}  // namespace mme::cli
