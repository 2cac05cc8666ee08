// The JSON document of `mme plan --json` (docs/planner.md): the counts, the ranked plans with
// their setups, speed figures and `mme estimate` flags, and, when nothing fits, the smallest
// peak and the changes that would make one fit. The CLI prints it; the browser page's planner
// returns it (web/src/mme_web.cpp).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <mme/planner/planner.hpp>
#include <mme/sdk/model_spec.hpp>

namespace mme::cli {

// One plan: its flags, resolved setup, peak, bound, headroom, fit and step-time figures.
nlohmann::json plan_to_json(const Planner& planner, const Plan& p, const PlanOptions& o);

// The pipeline split of a plan as its tables show it: "even", "first/last" (PP 2),
// "first/middle/last" decoder layers per stage, or "cF/C/L" per virtual chunk (a chunk split:
// the first chunk F layers, every middle chunk C, the last L).
std::string plan_split_text(const PlanLayout& l);

// "Why this rank": what bounds the plan's step time (step_bound: the bubble, TP, EP, CP, DP,
// recompute, ...; or the compute's parts) and its memory headroom, in one line.
std::string why_line(const Plan& p);

// "How many GPUs do I need?": the smallest count, the counts tried, the global batch and each
// count's top plans (the plan document's `gpu_counts`).
nlohmann::json gpu_counts_to_json(const Planner& planner, const PlanOptions& o, const GpuCountResult& g);

// The whole document of one search.
nlohmann::json plan_result_to_json(const ModelSpec& model, const Planner& planner, const PlanOptions& o,
                                   const PlanResult& r, const std::vector<PlanSuggestion>& suggestions);

}  // namespace mme::cli
