// mme compare: several layouts of one model side by side. A layout flag given a comma-separated
// list (--tp 1,2,4) is varied; every combination of the lists is estimated exactly as
// `mme estimate` with those flags would (the command layer's compare, mme/commands/compare.hpp)
// and shown as one row: GPUs, the peak stage's memory by category, the peak, the bound and the fit.
#include <algorithm>
#include <iostream>

#include <fmt/core.h>

#include <mme/commands/compare.hpp>
#include <mme/commands/documents.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/json_text.hpp>
#include <mme/sdk/units.hpp>

#include "command.hpp"
#include "context.hpp"
#include "estimate_inputs.hpp"

namespace mme::cli {

namespace {

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

}  // namespace

void help_compare(std::ostream& out) {
  out << "Usage: mme compare MODEL [estimate options] --tp 1,2,4 [--pp 1,2] ...\n\n"
         "Estimates several layouts of one model and shows them side by side, one row each: GPUs,\n"
         "the peak stage's weights + gradients, optimizer, activations and other memory, the peak,\n"
         "its upper bound and the fit (on --gpu, else the smallest GPU each fits). A comma-separated\n"
         "list for any of --tp, --pp, --vpp, --ep, --etp, --cp, --num-gpus, --micro-batch-size,\n"
         "--seq-length, --global-batch-size, --recompute-granularity, --recompute-method,\n"
         "--recompute-num-layers, --num-layers-in-first/last-pipeline-stage or --precision is varied;\n"
         "every combination (at most 64) is estimated exactly as `mme estimate` with those values.\n"
         "A layout Megatron-LM refuses is a row with the reason. Every other `mme estimate` option\n"
         "applies to all rows; --json writes one document (docs/cli.md).\n\n"
         "Example:\n  mme compare Qwen/Qwen3-30B-A3B --tp 1,2,4 --ep 4,8 --num-gpus 16 --gpu H100\n";
}

int run_compare(const std::vector<std::string>& args) {
  commands::CompareRequest request;
  request.slots = commands::compare_slots(args);
  // The options every row shares (estimate's table): the words that are no list, with each list
  // flag's first value (so a missing value is reported as estimate reports it).
  std::vector<std::string> shared;
  for (const auto& s : request.slots)
    if (s.flag.empty())
      shared.push_back(s.values.front());
    else
      shared.insert(shared.end(), {"--" + s.flag, s.values.front()});
  const auto vm = parse_estimate_args("compare", shared);
  for (const char* refused : {"html", "svg"})
    if (vm.count(refused))
      throw UsageError(
          fmt::format("--{} is not available in compare (give it to `mme estimate` with one layout)", refused));
  for (const char* refused : {"dump-config", "print-megatron-args", "breakdown"})
    if (switch_on(vm, refused))
      throw UsageError(
          fmt::format("--{} is not available in compare (give it to `mme estimate` with one layout)", refused));
  const bool json = switch_on(vm, "json");
  request.base = estimate_request(vm);
  const commands::CompareResult result = commands::compare(request, make_context(vm, read_common(vm)));
  const auto& rows = result.rows;
  const commands::EstimateResult& any = result.any();
  const bool one_gpu = result.one_gpu;

  if (json) {
    std::cout << json_text(commands::compare_document(result), 2) << "\n";
    return 0;
  }

  const commands::FitRule& rule = any.fit;
  const bool device_rule = rule.headroom < 0 && rule.reserved < 0;  // fit.hpp: the device total against the capacity
  std::string text = fmt::format(
      "mme compare: {}, {} layouts (fit judged on the {}{}, {}{})\n\n", any.model.name, rows.size(),
      device_rule ? "device total's " : "", rule.on_bound ? "upper bound" : "point estimate",
      device_rule ? std::string("against the capacity")
                  : fmt::format("{:g}% headroom", (rule.headroom < 0 ? kDefaultHeadroom : rule.headroom) * 100),
      one_gpu ? fmt::format(", on {}", any.judged.front()->name) : "");
  std::size_t width = 6;
  for (const auto& r : rows) width = std::max(width, join(r.varied).size());
  text += fmt::format("{:<{}} {:>6} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  {}\n", "layout", width, "GPUs", "stage",
                      "w+g GiB", "optim", "activ", "other", "peak GiB", "bound", one_gpu ? "fit" : "fits on");
  for (const auto& r : rows) {
    const std::string name = r.varied.empty() ? "(as given)" : join(r.varied);
    if (!r.result) {
      text += fmt::format("{:<{}} refused: {}\n", name, width, r.error);
      continue;
    }
    const Estimate& e = r.result->estimate;
    const StageEstimate& peak = e.peak();
    std::string fit;
    if (one_gpu && !r.result->fits.empty()) {
      const auto& f = r.result->fits.front();
      fit = fmt::format("{} {:.2f} GiB {}", f.fits ? "✓" : "✗",
                        to_gib(f.headroom_bytes < 0 ? -f.headroom_bytes : f.headroom_bytes), f.fits ? "free" : "short");
    } else {
      const auto f =
          std::find_if(r.result->fits.begin(), r.result->fits.end(), [](const FitVerdict& v) { return v.fits; });
      fit = f == r.result->fits.end() ? "none" : f->hardware->name;
    }
    text += fmt::format("{:<{}} {:>6} {:>5} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f}  {}\n", name, width,
                        e.setup.parallel.world_size, peak.pp_rank, to_gib(peak.weight_bytes + peak.gradient_bytes),
                        to_gib(peak.optimizer_bytes), to_gib(peak.activation_bytes), to_gib(peak.other_bytes),
                        to_gib(peak.total_bytes), to_gib(e.upper_bytes()), fit);
  }
  text += "\nEach row is `mme estimate` with the layout's flags; the columns are its peak stage.\n";
  std::cout << text;
  return 0;
}

}  // namespace mme::cli
