#include <algorithm>
#include <cmath>
#include <iostream>

#include <fmt/core.h>

#include <mme/commands/documents.hpp>
#include <mme/commands/validate.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/json_text.hpp>

#include "command.hpp"
#include "context.hpp"
#include "estimate_inputs.hpp"

namespace mme::cli {

namespace {

// validate's own options; the estimate options (for --from-log) follow in `estimate_part`.
void build_options(po::options_description& d, po::options_description& estimate_part,
                   po::options_description& hidden) {
  d.add_options()("json", po::bool_switch(), "one JSON document on stdout")(
      "golden", po::value<std::string>(), "only rows whose golden (platform) matches this regular expression")(
      "case", po::value<std::string>(),
      "only rows whose test_case (real-runs files: id) matches this regular expression")(
      "show-skipped", po::bool_switch(), "list the skipped rows and why in the text report")(
      "from-log", file_value()->value_name("LOG"),
      "compare with the memory lines of a Megatron-LM training log, per rank; the run's layout comes from the "
      "estimate options below (MODEL, --megatron-args-file, --num-gpus, ...)");
  d.add(common_options());
  add_estimate_input_options(estimate_part, hidden);
  add_hardware_file_option(estimate_part);
}

po::options_description visible_options() {
  po::options_description d("Options"), est("Estimate options (with --from-log; as for `mme estimate`)"), hidden;
  build_options(d, est, hidden);
  d.add(est);
  return d;
}

std::string stat_line(const char* what, const ErrorStats& s) {
  return fmt::format("{:<26} n={:<4} median {:5.1f}%   p90 {:5.1f}%   max {:6.1f}%\n", what, s.count, 100 * s.median,
                     100 * s.p90, 100 * s.max);
}

// The statistics every format shares: by measured size, signed error, the bound.
void print_shared_stats(std::ostream& out, const ValidationSummary& sum) {
  for (const auto& b : sum.by_size)
    out << fmt::format("{:<26} n={:<4} median {:5.1f}%   p90 {:5.1f}%\n", "peak |error|, " + b.label, b.peak.count,
                       100 * b.peak.median, 100 * b.peak.p90);
  const auto& sg = sum.signed_peak;
  out << fmt::format("{:<26} n={:<4} median {:+5.1f}%   under by >5%: {} ({:.0f}%)   over by >5%: {} ({:.0f}%)\n",
                     "peak signed error", sg.count, 100 * sg.median, sg.under, 100 * sg.under_share, sg.over,
                     100 * sg.over_share);
  out << fmt::format("{:<26} n={:<4} measured <= bound: {} ({:.0f}%)   measured > bound: {} (by {:.1f}% at most)\n",
                     "bound coverage", sum.bound.count, sum.bound.covered, 100 * sum.bound.share, sum.bound.exceeded,
                     100 * sum.bound.max_excess);
  const auto& r = sum.reserved;
  if (r.count == 0) return;
  out << fmt::format(
      "{:<26} n={:<4} median {:5.1f}%   p90 {:5.1f}%   max {:6.1f}%   signed median {:+.1f}%   "
      "under the measured: {}\n",
      "reserved |error|", r.count, 100 * r.error.median, 100 * r.error.p90, 100 * r.error.max, 100 * r.signed_median,
      r.under);
  out << fmt::format(
      "{:<26} n={:<4} measured median {:.2f} GiB, estimated median {:.2f} GiB; |estimated - measured| "
      "median {:.2f} GiB, max {:.2f} GiB\n",
      "reserved - peak", r.count, r.gap_measured_median_gib, r.gap_estimated_median_gib, r.gap_error_median_gib,
      r.gap_error_max_gib);
  out << fmt::format("{:<26} n={:<4} measured <= bound: {} ({:.0f}%)   measured > bound: {} (by {:.1f}% at most)\n",
                     "reserved bound coverage", r.count, r.bound_covered,
                     100.0 * static_cast<double>(r.bound_covered) / static_cast<double>(r.count),
                     r.count - r.bound_covered, 100 * r.bound_max_excess);
}

std::vector<ValidationCase> only(const std::vector<ValidationCase>& cases, bool counted) {
  std::vector<ValidationCase> out;
  for (const auto& c : cases)
    if (c.counted() == counted) out.push_back(c);
  return out;
}

void print_real_runs_rows(std::ostream& out, const std::vector<ValidationCase>& cases) {
  std::vector<const ValidationCase*> ok;
  for (const auto& c : cases)
    if (c.status == "ok") ok.push_back(&c);
  std::stable_sort(ok.begin(), ok.end(), [](const auto* a, const auto* b) {
    return std::fabs(a->peak_error()) < std::fabs(b->peak_error());
  });
  const bool reserved = std::any_of(ok.begin(), ok.end(), [](const auto* c) { return c->reserved_compared(); });
  out << fmt::format("{:<48} {:<28} {:>9} {:>9} {:>8} {:>9} {:>5}{}\n", "ID", "MODEL", "MEASURED", "EST", "ERR",
                     "BOUND", "STAGE", reserved ? fmt::format(" {:>9} {:>9} {:>8}", "RESERVED", "EST", "ERR") : "");
  for (const auto* c : ok)
    out << fmt::format("{:<48} {:<28} {:>9.3f} {:>9.3f} {:>7.1f}% {:>9.3f} {:>5}{}\n", c->id.substr(0, 48),
                       c->model.substr(0, 28), c->measured_peak_gib, c->estimated_peak_gib, 100 * c->peak_error(),
                       c->estimated_upper_gib, c->stage,
                       c->reserved_compared() ? fmt::format(" {:>9.3f} {:>9.3f} {:>7.1f}%", c->measured_reserved_gib,
                                                            c->estimated_reserved_gib, 100 * c->reserved_error())
                                              : "");
  for (const auto& c : cases)
    if (c.status == "error" || c.status == "refused")
      out << fmt::format("{:<48} {:<28} {}: {}\n", c.id.substr(0, 48), c.model.substr(0, 28), c.status, c.reason);
}

void report_real_runs(const std::vector<ValidationCase>& cases) {
  const auto counted = only(cases, true), other = only(cases, false);
  const ValidationSummary sum = summarize(counted), other_sum = summarize(other);
  std::cout << "metric max_allocated (torch.cuda.max_memory_allocated), compared with the peak stage:\n";
  print_real_runs_rows(std::cout, counted);
  std::cout << "\nmetric other (not clearly the peak; reported, not counted):\n";
  print_real_runs_rows(std::cout, other);
  std::cout << fmt::format(
      "\n{} rows: {} max_allocated ({} evaluated, {} refused, {} failed to estimate), {} other (reported, not "
      "counted)\n",
      cases.size(), counted.size(), sum.evaluated, sum.refused, sum.errors, other.size());
  std::cout << "max_allocated rows:\n"
            << stat_line("peak |error|", sum.peak) << stat_line("Megatron formula, peak", sum.megatron_theoretical)
            << stat_line("seed tool, peak", sum.seed_tool);
  print_shared_stats(std::cout, sum);
  std::cout << fmt::format("other rows (reported, not counted; {} evaluated, {} failed to estimate):\n",
                           other_sum.evaluated, other_sum.errors)
            << stat_line("peak |error|", other_sum.peak);
  print_shared_stats(std::cout, other_sum);
}

void report_functional(const std::vector<ValidationCase>& cases, bool show_skipped) {
  const ValidationSummary sum = summarize(cases);
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
    if (c.status == "error" || c.status == "refused")
      std::cout << fmt::format("{:<72} {:<24} {}: {}\n", c.test_case.substr(0, 72), c.golden.substr(0, 24), c.status,
                               c.reason);
  if (show_skipped)
    for (const auto& c : cases)
      if (c.status == "skipped")
        std::cout << fmt::format("{:<72} {:<24} skipped: {}\n", c.test_case.substr(0, 72), c.golden.substr(0, 24),
                                 c.reason);
  std::cout << fmt::format("\n{} rows: {} evaluated, {} skipped, {} refused, {} failed to estimate\n", sum.total,
                           sum.evaluated, sum.skipped, sum.refused, sum.errors);
  std::cout << stat_line("peak |error|", sum.peak) << stat_line("static |error|", sum.static_mem)
            << stat_line("peak |error|, peak>=5GiB", sum.peak_large)
            << stat_line("Megatron formula, peak", sum.megatron_theoretical)
            << stat_line("seed tool, peak", sum.seed_tool);
  print_shared_stats(std::cout, sum);
}

void report_log(const commands::ValidateResult& r) {
  render_log_comparison(std::cout, *r.log, r.memory, r.ranks, r.estimate);
}

}  // namespace

void help_validate(std::ostream& out) {
  out << "Usage: mme validate CASES.csv [--json] [--golden REGEX] [--case REGEX] [--show-skipped]\n"
         "       mme validate --from-log LOG [MODEL] [--megatron-args-file FILE | --megatron-args \"...\"]\n"
         "                    [estimate options] [--json]\n\n"
         "Compares mme's estimates with measured Megatron-LM runs. CASES.csv is one of two formats,\n"
         "told apart by its columns:\n"
         "  functional tests (bench/accuracy/megatron_functional_test_memory.csv): the measured peak\n"
         "    (max_alloc_GiB_max, torch.cuda.max_memory_allocated) and static memory after a step\n"
         "    (alloc_GiB_median) next to the run's Megatron-LM flags, one column per flag; compared\n"
         "    with the rank that logged it, the last rank (last pipeline stage). Rows outside what mme\n"
         "    models (T5, BERT, hybrid, multimodal, FSDP, RL loops, offloading) are skipped with the reason.\n"
         "  real runs (bench/accuracy/real_runs.csv): id, source, model, metric, measured_gib,\n"
         "    rank_note, mme_args, notes. mme_args are `mme estimate` arguments (shell-quoted); the\n"
         "    measured GiB is compared with the peak stage. Rows with metric max_allocated count in\n"
         "    the statistics; metric other rows are reported, not counted.\n"
         "Both report the |error| median/p90/max, the error by measured size (<5, 5-40, >40 GiB),\n"
         "the signed error (rows more than 5% under / over) and how often the measurement stays\n"
         "within the estimate's bound.\n\n"
         "--from-log reads a training log's memory lines: report_memory's '[Rank N] (after N\n"
         "iterations) memory (MB) | allocated: X | max allocated: Y | reserved: Z | max reserved: W',\n"
         "the scalars 'mem-max-allocated-bytes: V' (bytes) and Megatron-Bridge's\n"
         "'mem-max-allocated-gigabytes: V' (GB, 1e9 bytes); lines without a rank are the last rank's.\n"
         "Each rank's first iteration is left out where later ones are logged; a measurement that is\n"
         "0, negative or not a number is refused with its line, and counted. The run is described as\n"
         "for `mme estimate`; each rank is compared with its pipeline stage (Megatron's rank order:\n"
         "stage = rank / (GPUs / PP)): max allocated against the peak, allocated against the static\n"
         "memory.\n\n"
      << visible_options()
      << "\nExamples:\n  mme validate bench/accuracy/real_runs.csv\n"
         "  mme validate --from-log train.log --megatron-args-file launch.sh --num-gpus 16\n";
}

int run_validate(const std::vector<std::string>& args) {
  po::options_description hidden;
  hidden.add_options()("cases", po::value<std::string>(), "");
  po::options_description visible("Options"), est("Estimate options");
  build_options(visible, est, hidden);
  visible.add(est);
  po::positional_options_description pos;
  pos.add("cases", 1);
  const auto vm = parse("validate", args, visible, hidden, pos);
  const bool json = switch_on(vm, "json"), show_skipped = switch_on(vm, "show-skipped");
  commands::ValidateRequest request;
  request.cases = flag_text(vm, "cases");
  request.golden = flag_text(vm, "golden");
  request.case_filter = flag_text(vm, "case");
  request.from_log = flag_text(vm, "from-log");
  // (--golden and --case with --from-log are the layer's to refuse, first.)
  if (request.from_log && show_skipped && !request.golden && !request.case_filter)
    throw UsageError("--show-skipped applies to CSV files, not to --from-log");
  request.run = estimate_request(vm);
  const commands::ValidateResult r = commands::validate(request, make_context(vm, read_common(vm)));
  if (json) {
    std::cout << json_text(commands::validate_document(r), 2) << "\n";
    return 0;
  }
  if (r.log)
    report_log(r);
  else if (r.format == CsvFormat::kRealRuns)
    report_real_runs(r.cases);
  else
    report_functional(r.cases, show_skipped);
  return 0;
}

po::options_description options_validate() { return visible_options(); }

}  // namespace mme::cli
