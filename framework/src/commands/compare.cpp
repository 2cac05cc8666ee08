#include "mme/commands/compare.hpp"

#include <algorithm>
#include <sstream>

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>

namespace mme::commands {

const std::vector<std::string>& compare_list_flags() {
  static const std::vector<std::string> flags = {"tp",
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
  return flags;
}

namespace {

bool is_list_flag(const std::string& name) {
  const auto& f = compare_list_flags();
  return std::find(f.begin(), f.end(), name) != f.end();
}

struct Layout {
  std::vector<std::string> args, varied;
  std::vector<std::pair<std::string, std::string>> values;  // the list flags' values
};

std::vector<Layout> layouts_of(const std::vector<CompareSlot>& slots) {
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
        n.values.emplace_back(s.flag, v);
        next.push_back(std::move(n));
      }
    out = std::move(next);
    if (out.size() > kMaxCompareLayouts)
      throw UsageError(fmt::format("more than {} layouts to compare; shorten the lists (or use `mme plan` to search)",
                                   kMaxCompareLayouts));
  }
  return out;
}

}  // namespace

std::vector<CompareSlot> compare_slots(const std::vector<std::string>& args) {
  std::vector<CompareSlot> slots;
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
    CompareSlot s{name, {}};
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

const EstimateResult& CompareResult::any() const {
  return *std::find_if(rows.begin(), rows.end(), [](const CompareRow& r) { return r.result.has_value(); })->result;
}

CompareResult compare(const CompareRequest& request, const Context& context) {
  const RequestLog log(context);
  const std::vector<Layout> layouts = layouts_of(request.slots);
  const ModelInput& in = request.base.input;
  if (!in.model && !in.megatron_args && !in.megatron_args_file && !in.spec_file)
    throw UsageError("compare needs a MODEL (a hub id, a config.json or a folder), --megatron-args or --config");
  // The model's own warnings once, not once per layout: after the first layout, only errors.
  bool quiet = false;
  const LogSink outer = current_log_sink();
  const ScopedLogSink once(
      [&quiet, &outer](std::string_view level, std::string_view message) {
        if (!quiet || level == "error" || level == "critical") outer(level, message);
      },
      "trace");
  Context row_context = context;
  row_context.log = nullptr;  // the lines go through `once`, bound on this thread
  CompareResult out;
  std::size_t estimated = 0;
  for (const auto& l : layouts) {
    CompareRow row{l.args, l.varied, std::nullopt, ""};
    EstimateRequest r = request.base;
    for (const auto& [flag, value] : l.values) r.setup.set(flag, value);
    r.components = false;
    r.layer_breakdown = false;
    r.next_steps = false;
    r.advice = false;
    r.html.reset();
    r.svg.reset();
    try {
      row.result = estimate(r, row_context);
      ++estimated;
    } catch (const LayoutError& e) {
      row.error = printable(e.what());
    }
    out.rows.push_back(std::move(row));
    quiet = true;
  }
  if (estimated == 0)
    throw LayoutError(
        fmt::format("none of the {} layouts is valid; the first: {}", out.rows.size(), out.rows.front().error));
  out.one_gpu = request.base.gpu.has_value() || out.any().judged.size() == 1;
  return out;
}

}  // namespace mme::commands
