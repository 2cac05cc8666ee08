#include "mme/inputs/megatron_args.hpp"

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include <fmt/core.h>

#include "mme/inputs/launch_script.hpp"
#include "mme/inputs/megatron_flags.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/json_text.hpp"

namespace mme {

namespace {

std::string normalise(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

bool truthy(const std::string& v) {
  std::string l;
  for (char c : v) l.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return l.empty() || l == "true" || l == "1" || l == "yes" || l == "on";
}

// Flags (or environment variables) in first-seen order, a later value replacing an earlier
// one, with a hash index: linear in the number of words, where MegatronArgs::set is linear per
// call (100 000 flags took 25 s through set()).
template <class Item, class NameOf>
class OrderedTable {
 public:
  explicit OrderedTable(NameOf name_of) : name_of_(name_of) {}
  void put(Item item) {
    const auto [it, fresh] = index_.try_emplace(name_of_(item), items_.size());
    if (fresh)
      items_.push_back(std::move(item));
    else
      items_[it->second] = std::move(item);
  }
  std::vector<Item> take() && { return std::move(items_); }

 private:
  NameOf name_of_;
  std::vector<Item> items_;
  std::unordered_map<std::string, std::size_t> index_;
};

auto flag_table() {
  auto name = [](const MegatronArgs::Flag& f) { return f.name; };
  return OrderedTable<MegatronArgs::Flag, decltype(name)>(name);
}
auto env_table() {
  auto name = [](const std::pair<std::string, std::string>& e) { return e.first; };
  return OrderedTable<std::pair<std::string, std::string>, decltype(name)>(name);
}

}  // namespace

void MegatronArgs::set(std::string name, std::vector<std::string> values) {
  name = normalise(name);
  for (auto& f : flags_) {
    if (f.name == name) {
      f.values = std::move(values);
      f.unknown.clear();
      return;
    }
  }
  flags_.push_back({std::move(name), std::move(values)});
}

void MegatronArgs::set_env(const std::string& name, const std::string& value) {
  for (auto& e : env_) {
    if (e.first == name) {
      e.second = value;
      return;
    }
  }
  env_.emplace_back(name, value);
}

bool MegatronArgs::has(std::string_view name) const {
  const std::string n = normalise(name);
  return std::any_of(flags_.begin(), flags_.end(), [&](const Flag& f) { return f.name == n; });
}

std::optional<std::string> MegatronArgs::value(std::string_view name) const {
  const std::string n = normalise(name);
  for (const auto& f : flags_) {
    if (f.name != n) continue;
    std::string out;
    for (const auto& v : f.values) out += (out.empty() ? "" : " ") + v;
    return out;
  }
  return std::nullopt;
}

bool MegatronArgs::enabled(std::string_view name) const {
  auto v = value(name);
  return v && truthy(*v);
}

nlohmann::json MegatronArgs::to_config() const {
  nlohmann::json args = nlohmann::json::object();
  for (const auto& f : flags_) {
    if (f.values.empty()) {
      args[f.name] = true;
    } else {
      std::string joined;
      for (const auto& v : f.values) joined += (joined.empty() ? "" : " ") + v;
      args[f.name] = joined;
    }
  }
  return {{"mme_source", "megatron-args"}, {"args", args}};
}

MegatronArgs MegatronArgs::from_config(const nlohmann::json& config) {
  MegatronArgs out;
  const auto it = config.find("args");
  if (it == config.end() || !it->is_object()) return out;
  auto flags = flag_table();  // "num_layers" and "num-layers" are one flag
  for (const auto& [k, v] : it->items()) {
    if (v.is_boolean()) {
      if (v.get<bool>())
        flags.put({normalise(k), {}});
      else
        flags.put({normalise(k), {"false"}});
    } else if (v.is_string()) {
      flags.put({normalise(k), {v.get<std::string>()}});
    } else if (v.is_number()) {
      flags.put({normalise(k), {json_text(v)}});
    }
  }
  out.flags_ = std::move(flags).take();
  return out;
}

bool is_megatron_args_config(const nlohmann::json& config) {
  if (!config.is_object()) return false;
  const auto it = config.find("mme_source");
  return it != config.end() && it->is_string() && it->get<std::string>() == "megatron-args";
}

MegatronArgs MegatronArgs::from_flags(std::vector<Flag> flags, std::vector<std::pair<std::string, std::string>> env) {
  auto table = flag_table();
  for (auto& f : flags) table.put(std::move(f));
  auto envs = env_table();
  for (auto& e : env) envs.put(std::move(e));
  MegatronArgs out;
  out.flags_ = std::move(table).take();
  out.env_ = std::move(envs).take();
  return out;
}

bool MegatronArgs::has(ModelFlag f) const { return has(flag_name(f)); }
std::optional<std::string> MegatronArgs::value(ModelFlag f) const { return value(flag_name(f)); }
bool MegatronArgs::enabled(ModelFlag f) const { return enabled(flag_name(f)); }

MegatronArgs parse_megatron_args(std::string_view text, const std::string& source) {
  return read_launch_script(text, source).args;
}

// setup_from_megatron_args is derived from the setup schema (setup_schema.cpp).

std::vector<int> parse_moe_layer_freq(const std::string& text, std::int64_t num_layers) {
  std::string t;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) t.push_back(c);
  while (t.size() >= 2 && t.front() == '(' && t.back() == ')') t = t.substr(1, t.size() - 2);
  auto fail = [&](const std::string& why) -> std::vector<int> {
    throw ConfigError(fmt::format("--moe-layer-freq '{}': {}", text, why));
  };
  if (t.empty()) return fail("empty");
  if (std::all_of(t.begin(), t.end(), [](unsigned char c) { return std::isdigit(c); })) {
    // Every N-th layer: an N beyond the layer count means only layer 0 (and 18 digits fit a long).
    const std::size_t digits = t.size() - std::min(t.find_first_not_of('0'), t.size());
    if (digits > 18) return fail("the interval is larger than any model's layer count");
    const long n = std::stol(t);
    if (n <= 0) return fail("must be positive");
    std::vector<int> out(static_cast<std::size_t>(num_layers));
    for (std::int64_t i = 0; i < num_layers; ++i) out[static_cast<std::size_t>(i)] = (i % n == 0) ? 1 : 0;
    return out;
  }
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos < t.size()) {
    if (t[pos] != '[') return fail("expected '[' at position " + std::to_string(pos));
    const auto close = t.find(']', pos);
    if (close == std::string::npos) return fail("missing ']'");
    std::vector<int> items;
    std::string body = t.substr(pos + 1, close - pos - 1);
    std::size_t start = 0;
    while (start <= body.size()) {
      const auto comma = body.find(',', start);
      const std::string item = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (item != "0" && item != "1") return fail("list items must be 0 or 1");
      items.push_back(item == "1" ? 1 : 0);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    pos = close + 1;
    long repeat = 1;
    if (pos < t.size() && t[pos] == '*') {
      std::size_t end = pos + 1;
      while (end < t.size() && std::isdigit(static_cast<unsigned char>(t[end]))) ++end;
      if (end == pos + 1 || end - pos > 7) return fail("bad repeat count");
      repeat = std::stol(t.substr(pos + 1, end - pos - 1));
      pos = end;
    }
    // Checked before the list is built: "[1,1,1]*999999" must not allocate millions of entries.
    if (static_cast<std::int64_t>(items.size()) * repeat > num_layers - static_cast<std::int64_t>(out.size()))
      return fail("longer than the number of layers");
    for (long k = 0; k < repeat; ++k) out.insert(out.end(), items.begin(), items.end());
    if (pos < t.size()) {
      if (t[pos] != '+') return fail("expected '+' at position " + std::to_string(pos));
      ++pos;
    }
  }
  if (static_cast<std::int64_t>(out.size()) != num_layers)
    return fail(fmt::format("gives {} entries for {} layers", out.size(), num_layers));
  return out;
}

}  // namespace mme
