#include "json_profiles.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>
#include <mme/sdk/json_text.hpp>
#include <mme/sdk/load_settings.hpp>
#include <mme/sdk/text.hpp>
#include <mme/sdk/units.hpp>

namespace fs = std::filesystem;
using nlohmann::json;

namespace mme::plugins {

namespace {

// 1 PiB: beyond any device, and far inside what int64 bytes can hold.
constexpr double kMaxMemoryGib = 1024.0 * 1024.0;

const std::vector<std::string>& known_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k = {"name", "memory_gib", "aliases", "reserved_gib"};
    for (const auto& f : kThroughputFigures) k.emplace_back(f.key);  // hardware_profile.hpp
    k.insert(k.end(), {"vendor", "architecture", "compute_capability", "source", "gpus_per_node"});
    return k;
  }();
  return keys;
}

// The CUDA compute capability of an NVIDIA architecture name (x 10) for files that give no
// `compute_capability`: the lowest of the architecture's data-centre parts. An empty name is
// taken as Hopper (the default of an estimate without a GPU); any other name as not CUDA (0).
int compute_capability_of(const std::string& architecture) {
  static const std::pair<const char*, int> kKnown[] = {{"volta", 70}, {"turing", 75}, {"ampere", 80},
                                                       {"ada", 89},   {"hopper", 90}, {"blackwell", 100}};
  if (architecture.empty()) return kDefaultComputeCapability;
  for (const auto& [name, cc] : kKnown)
    if (architecture == name) return cc;
  return 0;
}

std::string type_name(const json& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

// Reads one profile object. `where` is "" for a file holding one object, else "profile N: ".
HardwareProfile parse_one(const json& p, const std::string& where, const std::string& source) {
  auto fail = [&](const std::string& what) { throw std::invalid_argument(where + what); };
  if (!p.is_object()) fail(fmt::format("expected a profile object, got {}", type_name(p)));

  for (const auto& item : p.items()) {
    const std::string& key = item.key();
    if (!key.empty() && (key.front() == '_' || key.front() == '$')) continue;  // comments, $schema
    if (std::find(known_keys().begin(), known_keys().end(), key) == known_keys().end())
      fail(fmt::format("unknown key '{}' (known: {}; keys starting with '_' are ignored)", key,
                       fmt::join(known_keys(), ", ")));
  }

  HardwareProfile h;
  if (!p.contains("name")) fail("required key 'name' is missing");
  if (!p["name"].is_string()) fail(fmt::format("'name' must be a string, got {}", type_name(p["name"])));
  h.name = p["name"].get<std::string>();
  // Names are printed in reports and fit lines: no escape sequences to the user's terminal.
  if (printable(h.name) != h.name) fail("'name' must not contain control characters (C0, C1 or bidi controls)");
  if (normalize_hardware_name(h.name).empty())
    fail(fmt::format("'name' must contain a letter or a digit, got '{}'", h.name));
  const std::string label = fmt::format("'{}': ", h.name);

  auto string_or = [&](const char* key, std::string fallback) {
    if (!p.contains(key)) return fallback;
    if (!p[key].is_string()) fail(fmt::format("{}'{}' must be a string, got {}", label, key, type_name(p[key])));
    return p[key].get<std::string>();
  };
  // A finite number >= 0; `required` keys have no default.
  auto number = [&](const char* key, double fallback, bool required,
                    double max = std::numeric_limits<double>::infinity()) {
    if (!p.contains(key)) {
      if (required) fail(fmt::format("{}required key '{}' is missing", label, key));
      return fallback;
    }
    const json& v = p[key];
    if (!v.is_number()) fail(fmt::format("{}'{}' must be a number, got {}", label, key, type_name(v)));
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < 0) fail(fmt::format("{}'{}' must not be negative, got {}", label, key, json_text(v)));
    if (d > max) fail(fmt::format("{}'{}' {} is more than {:g}, beyond any device", label, key, json_text(v), max));
    return d;
  };

  const double memory_gib = number("memory_gib", 0, true);
  if (memory_gib <= 0) fail(fmt::format("{}'memory_gib' must be positive, got {}", label, json_text(p["memory_gib"])));
  if (memory_gib > kMaxMemoryGib)
    fail(fmt::format("{}'memory_gib' {} is more than {} GiB (1 PiB); is it in bytes?", label,
                     json_text(p["memory_gib"]), kMaxMemoryGib));
  h.memory_bytes = gib_to_bytes(memory_gib);
  if (h.memory_bytes <= 0) fail(fmt::format("{}'memory_gib' {} is less than one byte", label, memory_gib));
  const bool reserved_given = p.contains("reserved_gib");
  const double reserved_gib = number("reserved_gib", kJsonDefaultReservedGib, false);
  h.reserved_bytes = gib_to_bytes(reserved_gib);
  if (h.reserved_bytes >= h.memory_bytes)
    fail(fmt::format("{}'reserved_gib' ({}{} GiB) must be less than 'memory_gib' ({} GiB)", label,
                     reserved_given ? "" : "default ", reserved_gib, memory_gib));

  // Throughput figures within the bounds every profile shares (hardware_profile.hpp: an absurd
  // 1e308 made every plan's score 0, a 0 or a denormal one every step time infinite). Left out: 0,
  // unknown.
  for (const auto& f : kThroughputFigures) {
    if (!p.contains(f.key)) continue;
    const double d = number(f.key, 0, false, kMaxThroughput);
    if (const std::string why = throughput_problem(f, d, true); !why.empty()) fail(label + why);
    h.*f.member = d;
  }
  // GPUs of one NVLink domain: a whole number, at most kMaxGpusPerNode (the largest parallel size).
  const double node = number("gpus_per_node", 0, false, static_cast<double>(kMaxGpusPerNode));
  if (node != std::floor(node))
    fail(fmt::format("{}'gpus_per_node' must be a whole number, got {}", label, json_text(p["gpus_per_node"])));
  h.gpus_per_node = static_cast<std::int64_t>(node);
  h.vendor = printable(string_or("vendor", ""));
  h.architecture = printable(string_or("architecture", ""));
  // compute_capability as nvidia-smi prints it (9.0, 8.9, 10.0); 0 for a device that is not CUDA.
  if (p.contains("compute_capability")) {
    const double cc = number("compute_capability", 0, false, 99.9);
    const double tenths = cc * 10;
    if (std::abs(tenths - std::round(tenths)) > 1e-6)
      fail(fmt::format("{}'compute_capability' is major.minor with one digit after the point (9.0, 8.9), got {}", label,
                       json_text(p["compute_capability"])));
    h.compute_capability = static_cast<int>(std::lround(tenths));
  } else {
    h.compute_capability = compute_capability_of(h.architecture);
  }
  h.source = printable(string_or("source", source));

  if (p.contains("aliases")) {
    const json& a = p["aliases"];
    if (!a.is_array()) fail(fmt::format("{}'aliases' must be an array of strings, got {}", label, type_name(a)));
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_string()) fail(fmt::format("{}'aliases'[{}] must be a string, got {}", label, i, type_name(a[i])));
      std::string alias = a[i].get<std::string>();
      if (printable(alias) != alias)
        fail(fmt::format("{}'aliases'[{}] must not contain control characters (C0, C1 or bidi controls)", label, i));
      if (normalize_hardware_name(alias).empty())
        fail(fmt::format("{}'aliases'[{}] must contain a letter or a digit, got '{}'", label, i, alias));
      h.aliases.push_back(std::move(alias));
    }
  }
  return h;
}

// The normalised names a profile answers to (its name and aliases), each once.
std::vector<std::pair<std::string, std::string>> names_of(const HardwareProfile& h) {
  std::vector<std::pair<std::string, std::string>> out;  // {spelling, normalised}
  std::set<std::string> seen;
  auto add = [&](const std::string& n) {
    std::string key = normalize_hardware_name(n);
    if (seen.insert(key).second) out.emplace_back(n, std::move(key));
  };
  add(h.name);
  for (const auto& a : h.aliases) add(a);
  return out;
}

std::vector<std::string> split_list(std::string_view list) { return split(list, ':', EmptyItems::kSkip); }

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

std::vector<HardwareProfile> parse_hardware_profiles(const json& document, const std::string& source) {
  std::vector<HardwareProfile> out;
  if (document.is_object()) {
    out.push_back(parse_one(document, "", source));
  } else if (document.is_array()) {
    if (document.empty()) throw std::invalid_argument("the array holds no profiles");
    for (std::size_t i = 0; i < document.size(); ++i)
      out.push_back(parse_one(document[i], fmt::format("profile {}: ", i + 1), source));
  } else {
    throw std::invalid_argument(
        fmt::format("expected a profile object or an array of them, got {}", type_name(document)));
  }
  // Names and aliases must not repeat across the profiles of one file.
  std::map<std::string, std::string> owner;  // normalised name -> profile
  for (const auto& h : out) {
    for (const auto& [spelling, key] : names_of(h)) {
      auto [it, fresh] = owner.emplace(key, h.name);
      if (!fresh)
        throw std::invalid_argument(fmt::format("name '{}' of profile '{}' repeats profile '{}' of the same file",
                                                spelling, h.name, it->second));
    }
  }
  return out;
}

std::vector<fs::path> hardware_profile_files(std::string_view hardware_path, std::string_view hardware_files,
                                             const std::function<void(const std::string&)>& warn) {
  return hardware_profile_files(split_list(hardware_path), split_list(hardware_files), warn);
}

std::vector<fs::path> hardware_profile_files(const std::vector<std::string>& hardware_path,
                                             const std::vector<std::string>& hardware_files,
                                             const std::function<void(const std::string&)>& warn) {
  std::vector<fs::path> files;
  for (const auto& dir : hardware_path) {
    if (dir.empty()) continue;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      warn(fmt::format("MME_HARDWARE_PATH: {} does not exist or is not a folder", dir));
      continue;
    }
    std::vector<fs::path> found;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      std::error_code ec2;
      if (entry.path().extension() == ".json" && entry.is_regular_file(ec2)) found.push_back(entry.path());
    }
    if (ec) {
      warn(fmt::format("MME_HARDWARE_PATH: cannot read {}: {}", dir, ec.message()));
      continue;
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  for (const auto& f : hardware_files)
    if (!f.empty()) files.emplace_back(f);
  // The same file reached twice (a folder and --hardware-file) is read once.
  std::set<fs::path> seen;
  std::vector<fs::path> unique;
  for (const auto& f : files) {
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(f, ec);
    if (seen.insert(ec ? f : canonical).second) unique.push_back(f);
  }
  return unique;
}

std::vector<HardwareProfile> load_hardware_profiles(const std::vector<fs::path>& files,
                                                    const std::function<std::string(const std::string&)>& taken_by,
                                                    const std::function<void(const std::string&)>& warn) {
  std::vector<HardwareProfile> accepted;
  std::map<std::string, std::string> owner;  // normalised name -> "profile 'X' of FILE"
  for (const auto& file : files) {
    const std::string path = file.string();
    auto skip = [&](const std::string& reason) {
      warn(fmt::format("hardware profile file {} skipped: {}", path, reason));
    };
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
      skip(fs::exists(file, ec) ? "not a regular file" : "no such file");
      continue;
    }
    std::string text;
    try {
      // A profile file is small; nesting is bounded like every JSON input (input_text.hpp).
      text = mme::read_text_file(file, 1u << 20, "a hardware profile file");
      mme::check_json_nesting(text, path, "a hardware profile file");
    } catch (const mme::Error& e) {
      std::string what = e.what();
      if (what.rfind(path + ": ", 0) == 0) what = what.substr(path.size() + 2);
      skip(what);
      continue;
    }
    json document;
    try {
      document = json::parse(text);
    } catch (const json::exception& e) {
      std::string what = e.what();
      // "[json.exception.parse_error.101] parse error at line 3, ..." -> "parse error at line 3, ..."
      if (auto close = what.find("] "); what.rfind("[json.exception", 0) == 0 && close != std::string::npos)
        what = what.substr(close + 2);
      skip("invalid JSON: " + what);
      continue;
    }
    std::vector<HardwareProfile> profiles;
    try {
      profiles = parse_hardware_profiles(document, path);
    } catch (const std::invalid_argument& e) {
      skip(e.what());
      continue;
    }
    std::string clash;
    for (const auto& h : profiles) {
      for (const auto& [spelling, key] : names_of(h)) {
        std::string holder;
        if (auto it = owner.find(key); it != owner.end())
          holder = it->second;
        else if (taken_by)
          holder = taken_by(spelling);
        if (!holder.empty()) {
          clash = fmt::format("name '{}' of profile '{}' is already taken by {}", spelling, h.name, holder);
          break;
        }
      }
      if (!clash.empty()) break;
    }
    if (!clash.empty()) {
      skip(clash);
      continue;
    }
    for (auto& h : profiles) {
      for (const auto& [spelling, key] : names_of(h))
        owner.emplace(key, fmt::format("profile '{}' of {}", h.name, path));
      accepted.push_back(std::move(h));
    }
  }
  return accepted;
}

void register_json_profiles(Registrar& registry) {
  auto warn = [](const std::string& message) { spdlog::warn("{}", message); };
  const HostView* host = registry.host();
  // The host's values when it gives them: no request reads the environment while another
  // thread may change it.
  const LoadSettings* settings = load_settings(host);
  const auto files =
      settings ? hardware_profile_files(settings->hardware_path, settings->hardware_files, warn)
               : hardware_profile_files(env_or_empty("MME_HARDWARE_PATH"), env_or_empty("MME_HARDWARE_FILES"), warn);
  if (files.empty()) return;
  auto taken_by = [host](const std::string& name) -> std::string {
    if (!host) return {};
    const HardwareProfile* h = host->find_hardware(name);
    if (!h) return {};
    if (std::string owner = host->hardware_owner(name); !owner.empty())
      return fmt::format("profile '{}' of plugin {}", h->name, owner);
    return fmt::format("profile '{}'", h->name);
  };
  for (auto& h : load_hardware_profiles(files, taken_by, warn)) registry.add_hardware(std::move(h));
}

}  // namespace mme::plugins
