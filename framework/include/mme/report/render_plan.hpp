// The JSON document of `mme plan --json` (docs/planner.md): the counts, the ranked plans with
// their setups, speed figures and `mme estimate` flags, and, when nothing fits, the smallest
// peak and the changes that would make one fit. The CLI prints it; the browser page's planner
// returns it (web/src/mme_web.cpp).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include <mme/planner/planner.hpp>
#include <mme/sdk/model_spec.hpp>

namespace mme::cli {

// One plan: its flags, resolved setup, peak, bound, headroom, fit and speed figures.
nlohmann::json plan_to_json(const Planner& planner, const Plan& p, const PlanOptions& o);

// The whole document of one search.
nlohmann::json plan_result_to_json(const ModelSpec& model, const Planner& planner, const PlanOptions& o,
                                   const PlanResult& r, const std::vector<PlanSuggestion>& suggestions);

}  // namespace mme::cli
