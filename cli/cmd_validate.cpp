#include <algorithm>
#include <cmath>
#include <iostream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <mme/error.hpp>
#include <mme/validation.hpp>

#include "command.hpp"
#include "context.hpp"
#include <mme/json_text.hpp>

namespace mme::cli {

namespace {
po::options_description visible_options() {
  po::options_description d("Options");
  d.add_options()
      ("json", po::bool_switch(), "one JSON document on stdout")
      ("golden", po::value<std::string>(), "only rows whose golden (platform) matches this regular expression")
      ("case", po::value<std::string>(), "only rows whose test_case matches this regular expression")
      ("show-skipped", po::bool_switch(), "list the skipped rows and why in the text report");
  d.add(common_options());
  return d;
}

nlohmann::json stats_json(const ErrorStats& s) {
  return {{"count", s.count}, {"median_abs_pct", 100 * s.median}, {"p90_abs_pct", 100 * s.p90},
          {"max_abs_pct", 100 * s.max}};
}
}  // namespace

void help_validate(std::ostream& out) {
  out << "Usage: mme validate CASES.csv [--json] [--golden REGEX] [--case REGEX]\n\n"
         "Compares mme's estimates with measured Megatron-LM runs. CASES.csv has the columns of\n"
         "bench/accuracy/megatron_functional_test_memory.csv: the measured peak (max_alloc_GiB_max,\n"
         "torch.cuda.max_memory_allocated) and static memory after a step (alloc_GiB_median) next\n"
         "to the run's Megatron-LM flags, one column per flag. The estimate is for the rank that\n"
         "logged the measurement, the last rank (last pipeline stage). Rows outside what mme models\n"
         "(T5, BERT, hybrid, multimodal, FSDP, RL loops, offloading) are skipped with the reason.\n\n"
      << visible_options();
}

int run_validate(const std::vector<std::string>& args) {
  po::options_description hidden;
  hidden.add_options()("cases", po::value<std::string>(), "");
  po::positional_options_description pos;
  pos.add("cases", 1);
  const auto vm = parse(args, visible_options(), hidden, pos);
  if (!vm.count("cases")) throw UsageError("validate needs a CSV file of measured cases");
  ValidationOptions options;
  if (vm.count("golden")) options.golden_regex = vm["golden"].as<std::string>();
  if (vm.count("case")) options.case_regex = vm["case"].as<std::string>();
  Registry registry;
  load_registry(registry, read_common(vm));
  auto cases = run_validation(vm["cases"].as<std::string>(), registry, options);
  const ValidationSummary sum = summarize(cases);

  if (vm["json"].as<bool>()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& c : cases) {
      nlohmann::json j{{"model", c.model}, {"test_case", c.test_case}, {"golden", c.golden}, {"status", c.status},
                       {"reason", c.reason}, {"world_size", c.world_size},
                       {"measured_peak_gib", c.measured_peak_gib}, {"measured_static_gib", c.measured_static_gib}};
      if (c.status == "ok") {
        j["estimated_peak_gib"] = c.estimated_peak_gib;
        j["estimated_static_gib"] = c.estimated_static_gib;
        j["estimated_upper_gib"] = c.estimated_upper_gib;
        j["peak_error_pct"] = 100 * c.peak_error();
        j["static_error_pct"] = 100 * c.static_error();
        j["megatron_theoretical_gib"] = c.megatron_theoretical_gib;
        j["seed_tool_gib"] = c.seed_tool_gib;
      } else {
        j["estimated_peak_gib"] = nullptr;
        j["estimated_static_gib"] = nullptr;
      }
      list.push_back(j);
    }
    nlohmann::json summary{{"total", sum.total},          {"evaluated", sum.evaluated},
                           {"skipped", sum.skipped},      {"errors", sum.errors},
                           {"peak", stats_json(sum.peak)}, {"static", stats_json(sum.static_mem)},
                           {"peak_ge_5gib", stats_json(sum.peak_large)},
                           {"megatron_theoretical_peak", stats_json(sum.megatron_theoretical)},
                           {"seed_tool_peak", stats_json(sum.seed_tool)}};
    std::cout << json_text(nlohmann::json{{"cases", list}, {"summary", summary}}, 2) << "\n";
    return 0;
  }

  std::vector<const ValidationCase*> ok;
  for (const auto& c : cases)
    if (c.status == "ok") ok.push_back(&c);
  std::stable_sort(ok.begin(), ok.end(), [](const auto* a, const auto* b) {
    return std::fabs(a->peak_error()) < std::fabs(b->peak_error());
  });
  std::cout << fmt::format("{:<72} {:<24} {:>9} {:>9} {:>8} {:>9} {:>9} {:>8}\n", "TEST CASE", "GOLDEN", "PEAK", "EST",
                           "ERR", "STATIC", "EST", "ERR");
  for (const auto* c : ok)
    std::cout << fmt::format("{:<72} {:<24} {:>9.3f} {:>9.3f} {:>7.1f}% {:>9.3f} {:>9.3f} {:>7.1f}%\n",
                             c->test_case.substr(0, 72), c->golden.substr(0, 24), c->measured_peak_gib,
                             c->estimated_peak_gib, 100 * c->peak_error(), c->measured_static_gib,
                             c->estimated_static_gib, 100 * c->static_error());
  for (const auto& c : cases)
    if (c.status == "error")
      std::cout << fmt::format("{:<72} {:<24} error: {}\n", c.test_case.substr(0, 72), c.golden.substr(0, 24), c.reason);
  if (vm["show-skipped"].as<bool>())
    for (const auto& c : cases)
      if (c.status == "skipped")
        std::cout << fmt::format("{:<72} {:<24} skipped: {}\n", c.test_case.substr(0, 72), c.golden.substr(0, 24),
                                 c.reason);
  std::cout << fmt::format("\n{} rows: {} evaluated, {} skipped, {} failed to estimate\n", sum.total, sum.evaluated,
                           sum.skipped, sum.errors);
  auto line = [](const char* what, const ErrorStats& s) {
    return fmt::format("{:<26} n={:<4} median {:5.1f}%   p90 {:5.1f}%   max {:6.1f}%\n", what, s.count, 100 * s.median,
                       100 * s.p90, 100 * s.max);
  };
  std::cout << line("peak |error|", sum.peak) << line("static |error|", sum.static_mem)
            << line("peak |error|, peak>=5GiB", sum.peak_large)
            << line("Megatron formula, peak", sum.megatron_theoretical)
            << line("seed tool, peak", sum.seed_tool);
  return 0;
}

}  // namespace mme::cli
