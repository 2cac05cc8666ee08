#include "mme/report/render_plan.hpp"

#include <mme/report/render_estimate.hpp>

namespace mme::cli {

namespace {

nlohmann::json score_json(const PlanScore& s) {
  return {{"score", s.score},
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
}

}  // namespace

nlohmann::json plan_to_json(const Planner& planner, const Plan& p, const PlanOptions& o) {
  return {{"args", planner.args_for(p.layout, o)},
          {"setup", setup_to_json(resolve_setup(planner.setup_for(p.layout, o)))},
          {"peak_bytes", p.peak_bytes},
          {"upper_bytes", p.upper_bytes},
          {"headroom_bytes", p.headroom_bytes},
          {"fits", p.fits},
          {"tight", is_tight(p)},
          {"score", p.score.score},
          {"speed", score_json(p.score)}};
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
