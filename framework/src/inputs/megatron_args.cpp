#include "mme/inputs/megatron_args.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>
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

namespace {

// A value of --moe-layer-freq's list grammar: an integer or a list of integers.
struct FreqValue {
  bool is_list = false;
  std::int64_t number = 0;
  std::vector<int> items;
};

// The expressions arguments.py `_eval_pattern` hands to Python's eval after its character check
// (only digits, ',', '[', ']', '(', ')', '+', '*'): integers, list literals, `+` (list
// concatenation or integer sum), `*` (list repetition or integer product), parentheses. Evaluated
// here by a recursive-descent reader of that grammar, never by a general eval; lists are bounded
// by the layer count before they are built, so "[1]*999999999" costs nothing.
class FreqExpression {
 public:
  FreqExpression(const std::string& text, std::int64_t max_items) : t_(text), max_items_(max_items) {}

  FreqValue parse() {
    FreqValue v = sum();
    if (pos_ != t_.size()) fail(fmt::format("unexpected '{}' at position {}", t_[pos_], pos_));
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw std::invalid_argument(why); }
  bool take(char c) {
    if (pos_ < t_.size() && t_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void enter() {
    if (++depth_ > 64) fail("nested more than 64 levels deep");
  }

  FreqValue sum() {
    FreqValue v = product();
    while (take('+')) {
      FreqValue r = product();
      if (v.is_list != r.is_list) fail("'+' adds a list and an integer");
      if (v.is_list) {
        if (static_cast<std::int64_t>(v.items.size() + r.items.size()) > max_items_) too_long();
        v.items.insert(v.items.end(), r.items.begin(), r.items.end());
      } else {
        v.number = bounded(v.number + r.number);
      }
    }
    return v;
  }

  FreqValue product() {
    FreqValue v = atom();
    while (take('*')) {
      FreqValue r = atom();
      if (v.is_list && r.is_list) fail("'*' multiplies two lists");
      if (!v.is_list && !r.is_list) {
        if (v.number != 0 && r.number > kMaxNumber / v.number) fail("a number larger than any model's layer count");
        v.number *= r.number;
        continue;
      }
      FreqValue& list = v.is_list ? v : r;
      const std::int64_t times = v.is_list ? r.number : v.number;
      // Checked before the list is built: "[1,1,1]*999999" must not allocate millions of entries.
      if (!list.items.empty() && times > max_items_ / static_cast<std::int64_t>(list.items.size())) too_long();
      std::vector<int> out;
      out.reserve(list.items.size() * static_cast<std::size_t>(times));
      for (std::int64_t k = 0; k < times; ++k) out.insert(out.end(), list.items.begin(), list.items.end());
      v.is_list = true;
      v.items = std::move(out);
    }
    return v;
  }

  FreqValue atom() {
    if (pos_ >= t_.size()) fail("ends where a number, '[' or '(' is expected");
    if (take('(')) {
      enter();
      FreqValue v = sum();
      if (take(',')) fail("a tuple, not a list (Megatron-LM needs a list)");
      if (!take(')')) fail(fmt::format("missing ')' at position {}", pos_));
      --depth_;
      return v;
    }
    if (take('[')) {
      enter();
      FreqValue v;
      v.is_list = true;
      if (!take(']')) {
        for (;;) {
          const FreqValue item = sum();
          if (item.is_list) fail("a list inside a list");
          if (item.number != 0 && item.number != 1) fail("list items must be 0 or 1");
          if (static_cast<std::int64_t>(v.items.size()) >= max_items_) too_long();
          v.items.push_back(static_cast<int>(item.number));
          if (take(']')) break;
          if (!take(',')) fail(fmt::format("expected ',' or ']' at position {}", pos_));
          if (take(']')) break;  // a trailing comma, as Python allows
        }
      }
      --depth_;
      return v;
    }
    const std::size_t start = pos_;
    while (pos_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[pos_]))) ++pos_;
    if (pos_ == start) fail(fmt::format("unexpected '{}' at position {}", t_[pos_], pos_));
    const std::size_t first = std::min(t_.find_first_not_of('0', start), pos_);
    if (pos_ - first > 9) fail("a number larger than any model's layer count");
    FreqValue v;
    v.number = pos_ == first ? 0 : std::stoll(t_.substr(first, pos_ - first));
    return v;
  }

  static constexpr std::int64_t kMaxNumber = 1'000'000'000;
  std::int64_t bounded(std::int64_t n) const {
    if (n > kMaxNumber) fail("a number larger than any model's layer count");
    return n;
  }
  [[noreturn]] void too_long() const { fail("longer than the number of layers"); }

  const std::string& t_;
  std::int64_t max_items_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

std::vector<int> parse_moe_layer_freq(const std::string& text, std::int64_t num_layers) {
  std::string t;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) t.push_back(c);
  auto fail = [&](const std::string& why) -> std::vector<int> {
    throw ConfigError(fmt::format("--moe-layer-freq '{}': {}", text, why));
  };
  if (t.empty()) return fail("empty");
  if (t.find('[') == std::string::npos) {
    // moe_freq_type: without a list, an integer N (every N-th layer). An N beyond the layer count
    // means only layer 0 (and 18 digits fit a long).
    if (!std::all_of(t.begin(), t.end(), [](unsigned char c) { return std::isdigit(c); }))
      return fail(
          "expected an integer N (one MoE layer every N) or a Python list expression such as "
          "'([0]*1+[1]*3)*2'");
    const std::size_t digits = t.size() - std::min(t.find_first_not_of('0'), t.size());
    if (digits > 18) return fail("the interval is larger than any model's layer count");
    const long n = std::stol(t);
    if (n <= 0) return fail("must be positive");
    std::vector<int> out(static_cast<std::size_t>(num_layers));
    for (std::int64_t i = 0; i < num_layers; ++i) out[static_cast<std::size_t>(i)] = (i % n == 0) ? 1 : 0;
    return out;
  }
  // arguments.py `_eval_pattern`: only digits and ",[]()+*" pass its check.
  if (const auto bad = t.find_first_not_of("0123456789,[]()+*"); bad != std::string::npos)
    return fail(fmt::format("'{}' is not allowed: Megatron-LM takes only digits and , [ ] ( ) + *", t[bad]));
  FreqValue v;
  try {
    v = FreqExpression(t, num_layers).parse();
  } catch (const std::invalid_argument& e) {
    return fail(e.what());
  }
  if (!v.is_list) return fail("evaluates to an integer, not a list");
  if (static_cast<std::int64_t>(v.items.size()) != num_layers)
    return fail(fmt::format("gives {} entries for {} layers", v.items.size(), num_layers));
  return std::move(v.items);
}

}  // namespace mme
