#include <algorithm>
#include <iostream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <mme/inputs/json_schema.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/json_text.hpp>
#include <mme/sdk/units.hpp>

#include "command.hpp"
#include "context.hpp"

namespace mme::cli {

namespace {
po::options_description visible_options() {
  po::options_description d("Options");
  d.add_options()("json", po::bool_switch(), "one JSON document on stdout");
  add_hardware_file_option(d);
  d.add(common_options());
  return d;
}
}  // namespace

void help_hardware(std::ostream& out) {
  out << "Usage: mme hardware [--json] [--hardware-file FILE]...\n\n"
         "Lists the GPU profiles the plugins provide: capacity as the driver reports it, memory\n"
         "the CUDA context and NCCL keep (reserved), bandwidths and dense TFLOP/s. JSON profile\n"
         "files come from --hardware-file and the folders of MME_HARDWARE_PATH.\n\n"
      << visible_options();
}

int run_hardware(const std::vector<std::string>& args) {
  const auto vm = parse("hardware", args, visible_options(), {}, {});
  Registry registry;
  use_hardware_files(vm);
  load_registry(registry, read_common(vm));
  std::vector<const Registered<HardwareProfile>*> list;
  for (const auto& h : registry.hardware()) list.push_back(&h);
  std::stable_sort(list.begin(), list.end(),
                   [](const auto* a, const auto* b) { return a->object->memory_bytes < b->object->memory_bytes; });
  if (vm["json"].as<bool>()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto* r : list) {
      const auto& h = *r->object;
      j.push_back({{"name", h.name},
                   {"vendor", h.vendor},
                   {"architecture", h.architecture},
                   {"compute_capability", h.compute_capability / 10.0},
                   {"aliases", h.aliases},
                   {"memory_bytes", h.memory_bytes},
                   {"memory_gib", to_gib(h.memory_bytes)},
                   {"reserved_bytes", h.reserved_bytes},
                   {"allocatable_bytes", allocatable_bytes(h)},
                   {"hbm_bandwidth_gbps", h.hbm_bandwidth_gbps},
                   {"bf16_tflops", h.bf16_tflops},
                   {"fp8_tflops", h.fp8_tflops},
                   {"link_bandwidth_gbps", h.link_bandwidth_gbps},
                   {"fp4_tflops", h.fp4_tflops},
                   {"inter_node_bandwidth_gbps", h.inter_node_bandwidth_gbps},
                   {"gpus_per_node", h.gpus_per_node},
                   {"host_link_bandwidth_gbps", h.host_link_bandwidth_gbps},
                   {"source", h.source},
                   {"plugin", r->plugin}});
    }
    std::cout << json_text(nlohmann::json{{"schema_version", kSchemaVersion}, {"hardware", j}}, 2) << "\n";
    return 0;
  }
  if (list.empty()) {
    std::cout << "No hardware profiles are loaded (see `mme plugins`).\n";
    return 0;
  }
  std::cout << fmt::format("{:<16} {:>10} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>5}  {}\n", "NAME", "MEMORY",
                           "RESERVED", "HBM GB/s", "BF16 TF", "FP8 TF", "LINK GB/s", "NET GB/s", "NODE", "ALIASES");
  for (const auto* r : list) {
    const auto& h = *r->object;
    std::string aliases;
    for (const auto& a : h.aliases) aliases += (aliases.empty() ? "" : ", ") + a;
    // 0: the profile does not say (the planner then assumes its defaults).
    auto known = [](double v) { return v > 0 ? fmt::format("{:.0f}", v) : std::string("-"); };
    std::cout << fmt::format("{:<16} {:>10} {:>9} {:>9.0f} {:>9.0f} {:>8.0f} {:>9.0f} {:>9} {:>5}  {}\n", h.name,
                             format_bytes(h.memory_bytes), format_bytes(h.reserved_bytes), h.hbm_bandwidth_gbps,
                             h.bf16_tflops, h.fp8_tflops, h.link_bandwidth_gbps, known(h.inter_node_bandwidth_gbps),
                             known(static_cast<double>(h.gpus_per_node)), aliases);
  }
  return 0;
}

po::options_description options_hardware() { return visible_options(); }

}  // namespace mme::cli
