// mme compare: several layouts of one model side by side. A layout flag given a comma-separated
// list (--tp 1,2,4) is varied; every combination of the lists is estimated exactly as
// `mme estimate` with those flags would (the same option table, cli/estimate_inputs.hpp) and
// shown as one row: GPUs, the peak stage's memory by category, the peak, the bound and the fit.
#include <algorithm>
#include <iostream>
#include <optional>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <mme/engine/fit.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>
#include <mme/sdk/json_text.hpp>
#include <mme/sdk/units.hpp>

#include "command.hpp"
#include "context.hpp"
#include "estimate_inputs.hpp"

namespace mme::cli {

namespace {

// The flags whose value may be a list; each takes one value in `mme estimate`.
constexpr const char* kListFlags[] = {"tp",
                                      "pp",
                                      "vpp",
                                      "ep",
                                      "etp",
                                      "cp",
                                      "num-gpus",
                                      "micro-batch-size",
                                      "seq-length",
                                      "global-batch-size",
                                      "recompute-granularity",
                                      "recompute-method",
                                      "recompute-num-layers",
                                      "num-layers-in-first-pipeline-stage",
                                      "num-layers-in-last-pipeline-stage",
                                      "precision"};
constexpr std::size_t kMaxLayouts = 64;

bool is_list_flag(const std::string& name) {
  return std::any_of(std::begin(kListFlags), std::end(kListFlags), [&](const char* f) { return name == f; });
}

// One argument position: a fixed word, or a list flag and its values.
struct Slot {
  std::string flag;                 // empty: a fixed word
  std::vector<std::string> values;  // the word itself when fixed
};

std::vector<Slot> read_slots(const std::vector<std::string>& args) {
  std::vector<Slot> slots;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string name, value;
    bool has_value = false;
    if (a.rfind("--", 0) == 0) {
      const auto eq = a.find('=');
      name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
        has_value = true;
      }
    }
    if (!is_list_flag(name)) {
      slots.push_back({"", {a}});
      continue;
    }
    if (!has_value) {
      if (i + 1 >= args.size()) {
        slots.push_back({"", {a}});  // estimate's parser reports the missing value
        continue;
      }
      value = args[++i];
    }
    Slot s{name, {}};
    std::stringstream in(value);
    for (std::string item; std::getline(in, item, ',');) {
      if (item.empty()) throw UsageError(fmt::format("--{}: an empty value in the list '{}'", name, value));
      if (std::find(s.values.begin(), s.values.end(), item) == s.values.end()) s.values.push_back(item);
    }
    if (s.values.empty()) throw UsageError(fmt::format("--{}: an empty list", name));
    slots.push_back(std::move(s));
  }
  return slots;
}

struct Layout {
  std::vector<std::string> args;    // what `mme estimate` gets
  std::vector<std::string> varied;  // the list flags' values of this layout ("--tp", "2", ...)
};

std::vector<Layout> layouts_of(const std::vector<Slot>& slots) {
  std::vector<Layout> out{Layout{}};
  for (const auto& s : slots) {
    if (s.flag.empty()) {
      for (auto& l : out) l.args.push_back(s.values.front());
      continue;
    }
    std::vector<Layout> next;
    for (const auto& l : out)
      for (const auto& v : s.values) {
        Layout n = l;
        n.args.insert(n.args.end(), {"--" + s.flag, v});
        if (s.values.size() > 1) n.varied.insert(n.varied.end(), {"--" + s.flag, v});
        next.push_back(std::move(n));
      }
    out = std::move(next);
    if (out.size() > kMaxLayouts)
      throw UsageError(
          fmt::format("more than {} layouts to compare; shorten the lists (or use `mme plan` to search)", kMaxLayouts));
  }
  return out;
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

struct Row {
  Layout layout;
  std::optional<CompareEstimate> result;
  std::string error;  // the layout error when the layout is refused
  std::vector<FitVerdict> fits;
};

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
  const std::vector<Layout> layouts = layouts_of(read_slots(args));
  // The options every row shares (estimate's table): logging, plugins, GPU files, --json.
  const auto vm = parse_estimate_args("compare", layouts.front().args);
  if (!vm.count("model") && !vm.count("megatron-args") && !vm.count("megatron-args-file") && !vm.count("config"))
    throw UsageError("compare needs a MODEL (a hub id, a config.json or a folder), --megatron-args or --config");
  const bool json = vm["json"].as<bool>();
  Registry registry;
  use_hardware_files(vm);
  load_registry(registry, read_common(vm));

  std::vector<Row> rows;
  std::size_t estimated = 0;
  const auto level = spdlog::default_logger()->level();
  for (const auto& l : layouts) {
    Row row{l, std::nullopt, "", {}};
    try {
      row.result = estimate_for_compare(l.args, registry);
      ++estimated;
      for (const auto* h : row.result->judged)
        row.fits.push_back(
            judge_fit(row.result->estimate, *h, row.result->headroom, row.result->on_bound, row.result->reserved));
    } catch (const LayoutError& e) {
      row.error = printable(e.what());
    }
    rows.push_back(std::move(row));
    // The model's own warnings once, not once per layout.
    spdlog::default_logger()->set_level(std::max(level, spdlog::level::err));
  }
  spdlog::default_logger()->set_level(level);
  if (estimated == 0)
    throw LayoutError(fmt::format("none of the {} layouts is valid; the first: {}", rows.size(), rows.front().error));
  const CompareEstimate& any = *std::find_if(rows.begin(), rows.end(), [](const Row& r) { return r.result; })->result;
  const bool one_gpu = vm.count("gpu") > 0 || any.judged.size() == 1;

  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& r : rows) {
      nlohmann::json j{{"args", r.layout.args}, {"varied", r.layout.varied}};
      if (!r.result) {
        j["error"] = r.error;
        list.push_back(j);
        continue;
      }
      const Estimate& e = r.result->estimate;
      const StageEstimate& peak = e.peak();
      j["error"] = nullptr;
      j["num_gpus"] = e.setup.parallel.world_size;
      j["peak_pp_rank"] = peak.pp_rank;
      j["peak_bytes"] = peak.total_bytes;
      j["upper_bytes"] = e.upper_bytes();
      j["weight_bytes"] = peak.weight_bytes;
      j["gradient_bytes"] = peak.gradient_bytes;
      j["optimizer_bytes"] = peak.optimizer_bytes;
      j["activation_bytes"] = peak.activation_bytes;
      j["other_bytes"] = peak.other_bytes;
      nlohmann::json fits = nlohmann::json::array();
      for (const auto& f : r.fits)
        fits.push_back({{"hardware", f.hardware->name},
                        {"fits", f.fits},
                        {"headroom_bytes", f.headroom_bytes},
                        {"usable_bytes", f.usable_bytes}});
      j["fits"] = fits;
      list.push_back(j);
    }
    std::cout << json_text(nlohmann::json{{"schema_version", 1}, {"model", any.model.name}, {"layouts", list}}, 2)
              << "\n";
    return 0;
  }

  const bool device_rule = any.headroom < 0 && any.reserved < 0;  // fit.hpp: the device total against the capacity
  std::string text = fmt::format(
      "mme compare: {}, {} layouts (fit judged on the {}{}, {}{})\n\n", any.model.name, rows.size(),
      device_rule ? "device total's " : "", any.on_bound ? "upper bound" : "point estimate",
      device_rule ? std::string("against the capacity")
                  : fmt::format("{:g}% headroom", (any.headroom < 0 ? kDefaultHeadroom : any.headroom) * 100),
      one_gpu ? fmt::format(", on {}", any.judged.front()->name) : "");
  std::size_t width = 6;
  for (const auto& r : rows) width = std::max(width, join(r.layout.varied).size());
  text += fmt::format("{:<{}} {:>6} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  {}\n", "layout", width, "GPUs", "stage",
                      "w+g GiB", "optim", "activ", "other", "peak GiB", "bound", one_gpu ? "fit" : "fits on");
  for (const auto& r : rows) {
    const std::string name = r.layout.varied.empty() ? "(as given)" : join(r.layout.varied);
    if (!r.result) {
      text += fmt::format("{:<{}} refused: {}\n", name, width, r.error);
      continue;
    }
    const Estimate& e = r.result->estimate;
    const StageEstimate& peak = e.peak();
    std::string fit;
    if (one_gpu && !r.fits.empty()) {
      const auto& f = r.fits.front();
      fit = fmt::format("{} {:.2f} GiB {}", f.fits ? "✓" : "✗",
                        to_gib(f.headroom_bytes < 0 ? -f.headroom_bytes : f.headroom_bytes), f.fits ? "free" : "short");
    } else {
      const auto f = std::find_if(r.fits.begin(), r.fits.end(), [](const FitVerdict& v) { return v.fits; });
      fit = f == r.fits.end() ? "none" : f->hardware->name;
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
