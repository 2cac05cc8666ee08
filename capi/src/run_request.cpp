// One request of the embedding hosts: the JSON request, bounded in size and depth, is read into
// the command layer's typed request of its command (mme/commands/), run there with a context of
// its own, and the typed result written as the command's JSON document; the response carries it,
// or the error the CLI would report with its exit code, and the request's log lines.
#include <algorithm>
#include <new>
#include <optional>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <mme/commands/catalog.hpp>
#include <mme/commands/compare.hpp>
#include <mme/commands/documents.hpp>
#include <mme/commands/estimate.hpp>
#include <mme/commands/init.hpp>
#include <mme/commands/plan.hpp>
#include <mme/commands/validate.hpp>
#include <mme/inputs/megatron_args.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/inputs/spec_file.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>
#include <mme/sdk/json_text.hpp>

#include "embedded.hpp"

namespace mme::embedded {

namespace {

using J = nlohmann::ordered_json;

const char* const kCommands =
    "estimate, plan, params, models, hardware, validate, compare, init, plugins, version, schema";

// Before parsing: the size, and how deep brackets nest outside strings (a deep document would
// exhaust the stack of whatever walks it; a thread may have little).
void check_bounds(std::string_view text) {
  if (text.size() > kMaxRequestBytes)
    throw UsageError(
        fmt::format("the request is {} bytes; at most {} bytes are accepted", text.size(), kMaxRequestBytes));
  if (json_nests_deeper(text, kMaxRequestDepth))
    throw UsageError(fmt::format(
        "the request nests more than {} levels deep; a request is an object of scalars and lists", kMaxRequestDepth));
}

std::string type_of(const J& v) {
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_null()) return "null";
  return v.type_name();
}

std::string dashed(std::string key) {
  for (char& c : key)
    if (c == '_') c = '-';
  return key;
}

// A NUL cannot be in a path, a name or a flag value (the C string of a path would end there,
// and another file would be read); only the C API and Python can pass one.
void check_no_nul(const std::string& key, const J& value) {
  if (value.is_array()) {
    for (const auto& e : value) check_no_nul(key, e);
  } else if (value.is_string() && value.get_ref<const std::string&>().find('\0') != std::string::npos) {
    throw UsageError(fmt::format("args.{}: '{}' holds a NUL character (\\u0000), which no path, name or value may hold",
                                 key, value.get<std::string>()));
  }
}

// The request's "args": each key by its flag name ('_' or '-'), read once by the command; keys
// left unread are an error naming them.
class Args {
 public:
  Args() = default;
  explicit Args(const J& args) {
    if (!args.is_object()) throw UsageError("\"args\" must be an object of flags: {\"tp\": 4, \"gpu\": \"H100\", ...}");
    for (const auto& [key, value] : args.items()) {
      const std::string name = dashed(key);
      if (name.empty() || name.front() == '-')
        throw UsageError(fmt::format("args: '{}' is not a flag name (no leading dashes)", printable(key)));
      if (value.is_null()) continue;  // not given
      if (entries_.count(name))
        throw UsageError(fmt::format("args: '{}' is given twice (as '{}' and '{}')", name, entries_[name].key, key));
      if (value.is_array() && value.size() > kMaxListEntries)
        throw UsageError(
            fmt::format("args.{}: {} entries; a list holds at most {}", key, value.size(), kMaxListEntries));
      check_no_nul(key, value);
      entries_[name] = {key, value};
    }
  }

  bool has(const std::string& name) const { return entries_.count(name) > 0; }

  // A string or a number, as the flag's text.
  std::optional<std::string> text(const std::string& name) {
    const J* v = take(name);
    if (!v) return std::nullopt;
    return scalar(*v, name);
  }
  // A string (a path, a name).
  std::optional<std::string> string(const std::string& name) {
    const J* v = take(name);
    if (!v) return std::nullopt;
    if (!v->is_string()) throw UsageError(fmt::format("args.{}: expected a string, got {}", key_of(name), type_of(*v)));
    return v->get<std::string>();
  }
  // A string or a list of them.
  std::vector<std::string> strings(const std::string& name) {
    const J* v = take(name);
    if (!v) return {};
    if (v->is_string()) return {v->get<std::string>()};
    std::vector<std::string> out;
    if (v->is_array())
      for (const auto& e : *v) {
        if (!e.is_string()) break;
        out.push_back(e.get<std::string>());
      }
    if (!v->is_array() || out.size() != v->size())
      throw UsageError(
          fmt::format("args.{}: expected a string or a list of strings, got {}", key_of(name), type_of(*v)));
    return out;
  }
  // A switch: true or false.
  bool on(const std::string& name) {
    const J* v = take(name);
    if (!v) return false;
    if (!v->is_boolean())
      throw UsageError(fmt::format("args.{}: expected true or false, got {}", key_of(name), type_of(*v)));
    return v->get<bool>();
  }
  // A string, a number, or a list of them joined by commas ("1,2,4").
  std::optional<std::string> list_text(const std::string& name) {
    const J* v = take(name);
    if (!v) return std::nullopt;
    if (!v->is_array()) return scalar(*v, name);
    std::string out;
    for (const auto& e : *v) out += (out.empty() ? "" : ",") + scalar(e, name);
    return out;
  }

  // The setup knobs among the keys (every flag, alias, off switch and value switch of the setup
  // schema, and a boolean knob's id), read as the CLI reads its flags; a list value is a comma
  // list (compare's varied flags, --recompute-modules core_attn,mlp).
  commands::SetupFlags setup() {
    commands::SetupFlags f;
    for (const SetupKnob* k : setup_knobs_in_flag_order()) {
      switch (k->kind) {
        case KnobKind::kBool: {
          // True is the switch, false the off switch; the off switch's own name: true is it.
          for (const char* name : {k->id, k->flag}) {
            if (!name || !has(name)) continue;
            const bool value = on(name);
            if (value && k->flag) f.set_switch(k->flag);
            if (!value && k->off_flag) f.set_switch(k->off_flag);
          }
          if (k->off_flag && has(k->off_flag) && on(k->off_flag)) f.set_switch(k->off_flag);
          break;
        }
        case KnobKind::kEnv:
          for (const auto& v : strings(k->flag)) f.add(k->flag, v);
          break;
        default:
          for (const char* name : names_of(*k))
            if (const auto v = list_text(name)) f.set(name, *v);
          for (const auto& sw : k->switches)
            if (has(sw.flag) && on(sw.flag)) f.set_switch(sw.flag);
      }
    }
    return f;
  }

  // Every key must have been read: an unknown one is an error naming the closest known name.
  void done(const std::string& command, const std::vector<std::string>& known) const {
    for (const auto& [name, entry] : entries_) {
      if (entry.read) continue;
      const std::string close = closest_name(name, known);
      throw UsageError(fmt::format("args: unknown key '{}' for {}{}", printable(entry.key), command,
                                   close.empty() ? "" : fmt::format("; did you mean '{}'?", close)));
    }
  }

  static std::vector<const char*> names_of(const SetupKnob& k) {
    std::vector<const char*> names{k.flag};
    names.insert(names.end(), k.aliases.begin(), k.aliases.end());
    return names;
  }

 private:
  struct Entry {
    std::string key;
    J value;
    bool read = false;
  };
  const J* take(const std::string& name) {
    const auto it = entries_.find(name);
    if (it == entries_.end()) return nullptr;
    it->second.read = true;
    return &it->second.value;
  }
  std::string key_of(const std::string& name) const {
    const auto it = entries_.find(name);
    return it == entries_.end() ? name : printable(it->second.key);
  }
  std::string scalar(const J& v, const std::string& name) const {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number()) return v.dump();
    throw UsageError(fmt::format("args.{}: expected a string or a number, got {}", key_of(name), type_of(v)));
  }
  std::map<std::string, Entry> entries_;
};

// The names a command's args may hold besides the setup knobs (for the unknown-key message).
std::vector<std::string> known_names(std::vector<std::string> own, bool with_setup) {
  std::vector<std::string> out = std::move(own);
  if (with_setup)
    for (const SetupKnob* k : setup_knobs_in_flag_order()) {
      for (const char* n : Args::names_of(*k))
        if (n) out.emplace_back(n);
      if (k->off_flag) out.emplace_back(k->off_flag);
      for (const auto& sw : k->switches) out.emplace_back(sw.flag);
    }
  return out;
}

// The keys of estimate_request() (and the files and plugins of the context), then `more`.
std::vector<std::string> estimate_keys(std::initializer_list<const char*> more = {}) {
  std::vector<std::string> out{
      "model",         "megatron-args",       "megatron-args-file", "config",     "revision",  "gpu", "headroom",
      "fit-on",        "overhead-per-gpu",    "hardware-file",      "plugin-dir", "log-level", "set", "script-arg",
      "script-source", "extra-megatron-flag", "assume-gpt-entry"};
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

struct Request {
  std::string command;
  Args args;
  commands::Context context;
};

// The common keys every command takes: plugin folders, log level.
void read_common(Args& a, commands::Context& c) {
  for (const auto& d : a.strings("plugin-dir")) c.plugins.dirs.emplace_back(d);
  if (const auto level = a.string("log-level")) c.log_level = commands::parse_log_level(*level);
}
void read_hardware_files(Args& a, commands::Context& c) {
  for (const auto& f : a.strings("hardware-file")) c.hardware_files.emplace_back(f);
}

commands::ModelInput model_input(Args& a, const char* model_key = "model") {
  commands::ModelInput in;
  in.model = a.string(model_key);
  in.megatron_args = a.string("megatron-args");
  in.megatron_args_file = a.string("megatron-args-file");
  in.spec_file = a.string("config");
  in.revision = a.string("revision").value_or("");
  in.script.set = a.strings("set");
  in.script.args = a.strings("script-arg");
  in.script.sources = a.strings("script-source");
  in.script.extra_flags = a.strings("extra-megatron-flag");
  in.script.assume_gpt_entry = a.on("assume-gpt-entry");
  return in;
}

commands::EstimateRequest estimate_request(Args& a) {
  commands::EstimateRequest r;
  r.input = model_input(a);
  r.gpu = a.string("gpu");
  if (const auto v = a.text("headroom")) r.fit.headroom = commands::parse_headroom(*v);
  if (const auto v = a.string("fit-on")) r.fit.on_bound = commands::parse_fit_on(*v);
  if (const auto v = a.text("overhead-per-gpu")) r.fit.reserved = commands::parse_overhead_per_gpu(*v);
  (void)a.on("json");  // the response is JSON anyway
  (void)a.on("verbose");
  r.setup = a.setup();
  return r;
}

// The judged GPUs' names and aliases, normalised, for Python's Estimate.fits(alias): the profiles
// of this request's own registry (its plugin folders and hardware files).
J hardware_aliases(const commands::EstimateResult& r) {
  J out = J::object();
  for (const auto* h : r.judged) {
    out[normalize_hardware_name(h->name)] = h->name;
    for (const auto& alias : h->aliases) {
      const std::string key = normalize_hardware_name(alias);
      if (!out.contains(key)) out[key] = h->name;
    }
  }
  return out;
}

void run_estimate(Request& q, J& response) {
  Args& a = q.args;
  read_hardware_files(a, q.context);
  commands::EstimateRequest r = estimate_request(a);
  r.html = a.string("html");
  r.svg = a.string("svg");
  const bool dump_config = a.on("dump-config"), print_megatron = a.on("print-megatron-args");
  if (a.on("breakdown"))
    throw UsageError(
        "--breakdown is a text view; the JSON document has its figures (stages[].components, layer_kinds)");
  a.done("estimate", known_names(estimate_keys({"html", "svg", "dump-config", "print-megatron-args"}), true));
  if (dump_config && (r.html || r.svg))
    throw UsageError("--dump-config prints the spec instead of the report; drop --html / --svg");
  if (print_megatron && (dump_config || r.html || r.svg))
    throw UsageError(
        "--print-megatron-args prints the launch flags instead of the report; drop --dump-config, --html, --svg and "
        "--breakdown");
  r.layer_breakdown = true;  // as `mme estimate --json`
  r.judge = !dump_config && !print_megatron;
  const commands::EstimateResult result = commands::estimate(r, q.context);
  if (print_megatron) {
    response["result"] = megatron_launch_args(result.model, result.estimate.setup, *result.registry);
    return;
  }
  if (dump_config) {
    response["result"] = J::parse(commands::resolved_spec_text(result, true));
    return;
  }
  response["result"] = commands::estimate_document(result);
  response["hardware_aliases"] = hardware_aliases(result);
}

void run_compare(Request& q, J& response) {
  Args& a = q.args;
  read_hardware_files(a, q.context);
  commands::CompareRequest r;
  r.base = estimate_request(a);
  a.done("compare", known_names(estimate_keys(), true));
  // The command line the rows echo: MODEL, then each setup flag as given (a list flag's values
  // varied).
  if (r.base.input.model) r.slots.push_back({"", {*r.base.input.model}});
  const auto& lists = commands::compare_list_flags();
  for (const auto& name : r.base.setup.names()) {
    const auto value = r.base.setup.value(name);
    if (value && std::find(lists.begin(), lists.end(), name) != lists.end()) {
      commands::CompareSlot s{name, {}};
      for (const auto& item : commands::compare_slots({"--" + name, *value}).front().values) s.values.push_back(item);
      r.slots.push_back(std::move(s));
    } else if (value) {
      r.slots.push_back({"", {"--" + name}});
      r.slots.push_back({"", {*value}});
    } else {
      r.slots.push_back({"", {"--" + name}});
    }
  }
  response["result"] = commands::compare_document(commands::compare(r, q.context));
}

void run_plan(Request& q, J& response) {
  Args& a = q.args;
  read_hardware_files(a, q.context);
  commands::PlanRequest r;
  r.input.model = a.string("model");
  r.input.revision = a.string("revision").value_or("");
  r.gpu = a.string("gpu");
  r.headroom = a.text("headroom");
  r.recompute = a.list_text("recompute");
  r.dp_sharding = a.list_text("dp-sharding");
  r.cuda_graphs = a.list_text("cuda-graphs");
  r.max_tp = a.text("max-tp");
  r.gpus_per_node = a.text("gpus-per-node");
  r.inter_node_bandwidth = a.text("inter-node-bandwidth");
  r.sort = a.string("sort");
  r.top = a.text("top");
  r.threads = a.text("threads");
  r.html = a.string("html");
  r.max_candidates = a.text("max-candidates");
  r.no_overlap = a.on("no-overlap");
  const bool csv = a.on("csv");
  (void)a.on("json");
  r.setup = a.setup();
  a.done("plan", known_names({"model",          "revision",    "gpu",           "headroom",      "recompute",
                              "dp-sharding",    "cuda-graphs", "max-tp",        "gpus-per-node", "inter-node-bandwidth",
                              "sort",           "top",         "threads",       "html",          "csv",
                              "max-candidates", "no-overlap",  "hardware-file", "plugin-dir",    "log-level"},
                             true));
  std::string text;
  if (csv)
    r.on_valid = [&text](const Plan& p, const Planner& planner, const PlanOptions& o) {
      if (text.empty()) text = commands::plan_csv_header(o);
      text += commands::plan_csv_row(p, planner, o);
    };
  const commands::PlanOutcome outcome = commands::plan(r, q.context);
  if (csv) {
    response["text"] = text.empty() ? commands::plan_csv_header(outcome.options) : text;
    return;
  }
  response["result"] = commands::plan_document(outcome);
}

void run_params(Request& q, J& response) {
  Args& a = q.args;
  commands::ParamsRequest r;
  const auto model = a.string("model");
  r.revision = a.string("revision").value_or("");
  r.lora_rank = a.text("lora-rank");
  r.lora_target_modules = a.list_text("lora-target-modules");
  (void)a.on("json");
  a.done("params",
         known_names({"model", "revision", "lora-rank", "lora-target-modules", "plugin-dir", "log-level"}, false));
  if (!model) throw UsageError("params needs a MODEL (a hub id, a config.json or a folder)");
  r.model = *model;
  response["result"] = commands::params_document(commands::params(r, q.context));
}

void run_validate(Request& q, J& response) {
  Args& a = q.args;
  read_hardware_files(a, q.context);
  commands::ValidateRequest r;
  r.cases = a.string("cases");
  r.golden = a.string("golden");
  r.case_filter = a.string("case");
  r.from_log = a.string("from-log");
  (void)a.on("show-skipped");
  (void)a.on("json");
  r.run.input = model_input(a, "model");
  if (r.run.input.model) {
    if (r.cases) throw UsageError("validate: give \"cases\" (a CSV file) or \"model\" (with \"from_log\"), not both");
    r.cases = r.run.input.model;
    r.run.input.model.reset();
  }
  r.run.gpu = a.string("gpu");
  r.run.setup = a.setup();
  a.done("validate",
         known_names({"cases", "golden", "case", "from-log", "show-skipped", "model", "megatron-args",
                      "megatron-args-file", "config", "revision", "gpu", "hardware-file", "plugin-dir", "log-level",
                      "set", "script-arg", "script-source", "extra-megatron-flag", "assume-gpt-entry"},
                     true));
  response["result"] = commands::validate_document(commands::validate(r, q.context));
}

void run_init(Request& q, J& response) {
  Args& a = q.args;
  read_hardware_files(a, q.context);
  commands::InitRequest r;
  r.input.model = a.string("model");
  r.input.revision = a.string("revision").value_or("");
  r.gpu = a.string("gpu");
  (void)a.on("json");
  r.json = true;
  r.setup = a.setup();
  a.done("init", known_names({"model", "revision", "gpu", "hardware-file", "plugin-dir", "log-level"}, true));
  response["result"] = J::parse(commands::init_spec(r, q.context));
}

void run_command(Request& q, J& response) {
  Args& a = q.args;
  const std::string& c = q.command;
  if (c == "schema" || c == "version") {
    a.done(c, {});
    if (c == "schema") {
      response["result"] = commands::schema_document();
    } else {
      J v = commands::version_document();
      v["api_version"] = kApiVersion;
      response["result"] = v;
    }
    return;
  }
  read_common(a, q.context);
  if (c == "estimate") return run_estimate(q, response);
  if (c == "compare") return run_compare(q, response);
  if (c == "plan") return run_plan(q, response);
  if (c == "params") return run_params(q, response);
  if (c == "validate") return run_validate(q, response);
  if (c == "init") return run_init(q, response);
  if (c == "models") {
    (void)a.on("json");
    (void)a.on("verbose");
    a.done(c, {"plugin-dir", "log-level"});
    response["result"] = commands::models_document(commands::models(q.context));
    return;
  }
  if (c == "hardware" || c == "plugins") {
    if (c == "hardware") read_hardware_files(a, q.context);
    (void)a.on("json");
    a.done(c, {"hardware-file", "plugin-dir", "log-level"});
    response["result"] = c == "hardware" ? commands::hardware_document(commands::hardware(q.context))
                                         : commands::plugins_document(commands::plugins(q.context));
    return;
  }
  throw std::logic_error("run_command: " + c);
}
// The request document, read by nlohmann's own tree builder with three differences, for callers
// that never wrote JSON themselves (Python's json.dumps writes the request): an integer beyond
// 64 bits keeps its digits (as a string, so a flag's message names 2**70 as written, not as
// 1.1805916207174113e+21); NaN and Infinity (which json.dumps writes for float('nan') and
// float('inf')) and a lone UTF-16 surrogate (\ud800) are named as what they are, with the key
// that holds them, instead of as a JSON syntax error.
class RequestReader : public nlohmann::detail::json_sax_dom_parser<J> {
  using Base = nlohmann::detail::json_sax_dom_parser<J>;

 public:
  RequestReader(J& document, std::string_view text) : Base(document, true), text_(text) {}
  bool number_float(number_float_t v, const string_t& text) {
    const std::size_t digits = text.find_first_not_of('-') == std::string::npos ? 0 : text.find_first_not_of('-');
    if (!text.empty() && text.find_first_not_of("0123456789", digits) == std::string::npos) {
      string_t copy = text;
      return Base::string(copy);
    }
    return Base::number_float(v, text);
  }
  bool start_object(std::size_t n) {
    keys_.emplace_back();
    return Base::start_object(n);
  }
  bool key(string_t& k) {
    if (!keys_.empty()) keys_.back() = k;
    return Base::key(k);
  }
  bool end_object() {
    if (!keys_.empty()) keys_.pop_back();
    return Base::end_object();
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& ex) {
    std::string where;
    for (const auto& k : keys_)
      if (!k.empty()) where += (where.empty() ? "" : ".") + k;
    where = where.empty() ? "the request" : "the request's " + where;
    // `position` counts the characters read, the one the lexer stopped at (N, I) included.
    const std::string_view at = text_.substr(std::min(text_.size(), position - std::min<std::size_t>(position, 1)));
    if (at.rfind("NaN", 0) == 0 || at.rfind("Infinity", 0) == 0)
      throw UsageError(
          fmt::format("{}: NaN and Infinity are not numbers mme takes (Python writes float('nan') and "
                      "float('inf') so); give a finite number",
                      where));
    if (std::string_view(ex.what()).find("surrogate") != std::string_view::npos) {
      const std::size_t escape = token.rfind("\\u");
      throw UsageError(fmt::format("{}: a string holds a lone UTF-16 surrogate{}, which is no Unicode character", where,
                                   escape == std::string::npos ? "" : " (" + token.substr(escape, 6) + ")"));
    }
    throw UsageError(fmt::format("the request is not JSON: {} (byte {})", ex.what(), position));
  }

 private:
  std::string_view text_;
  std::vector<std::string> keys_;  // the key being read at each open object
};

Request read_request(std::string_view text, const RunDefaults& defaults) {
  check_bounds(text);
  J req;
  RequestReader reader(req, text);
  J::sax_parse(text, &reader);
  if (!req.is_object()) throw UsageError("the request must be a JSON object");
  for (const auto& [key, value] : req.items()) {
    if (key == "argv")
      throw UsageError(
          "\"argv\" is not accepted (since the command layer): give the flags in \"args\", each by its name");
    static const char* kKeys[] = {"api_version", "command", "args", "models_dir", "log", "offline"};
    if (std::none_of(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return key == k; }))
      throw UsageError(
          fmt::format("the request has an unknown key '{}' (api_version, command, args, models_dir, log, "
                      "offline)",
                      printable(key)));
  }
  if (req.contains("api_version")) {
    const J& v = req["api_version"];
    if (!v.is_number_integer() || v.get<std::int64_t>() != kApiVersion)
      throw UsageError(fmt::format("api_version {} is not supported (this library speaks {})",
                                   v.is_primitive() ? printable(v.dump()).substr(0, 64) : type_of(v), kApiVersion));
  }
  if (!req.contains("command") || !req["command"].is_string() || req["command"].get<std::string>().empty())
    throw UsageError(fmt::format("the request needs a \"command\" ({})", kCommands));
  Request r;
  r.command = req["command"].get<std::string>();
  static const char* kKnown[] = {"estimate", "plan", "params",  "models",  "hardware", "validate",
                                 "compare",  "init", "plugins", "version", "schema"};
  if (std::none_of(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return r.command == k; })) {
    const std::string close = closest_name(r.command, {std::begin(kKnown), std::end(kKnown)});
    throw UsageError(
        fmt::format("unknown command '{}'{}", printable(r.command),
                    close.empty() ? fmt::format(" ({})", kCommands) : fmt::format("; did you mean '{}'?", close)));
  }
  if (req.contains("args")) r.args = Args(req["args"]);
  commands::Context& c = r.context;
  c.environment = defaults.environment ? *defaults.environment : commands::Environment::from_process();
  c.environment.sources.bundled_dir = defaults.models_dir;
  if (req.contains("models_dir")) {
    if (!req["models_dir"].is_string()) throw UsageError("\"models_dir\" must be a string (a folder)");
    c.environment.sources.bundled_dir = req["models_dir"].get<std::string>();
  }
  c.plugins.install_dir = false;  // beside python3 or a C program is not mme's folder
  c.plugins.builtins = builtin_plugins();
  if (req.contains("offline")) {
    if (!req["offline"].is_boolean()) throw UsageError("\"offline\" must be true or false");
    c.offline = req["offline"].get<bool>();
  }
  if (req.contains("log") && req["log"] != "capture" && req["log"] != "stderr")
    throw UsageError("\"log\" is \"capture\" or \"stderr\"");
  if (req.contains("log") && req["log"] == "stderr") c.log = stderr_log_sink();
  return r;
}

const char* error_type(const Error& e) {
  if (dynamic_cast<const UsageError*>(&e)) return "UsageError";
  if (dynamic_cast<const ConfigError*>(&e)) return "ConfigError";
  if (dynamic_cast<const LayoutError*>(&e)) return "LayoutError";
  if (dynamic_cast<const PluginError*>(&e)) return "PluginError";
  if (dynamic_cast<const NotFoundError*>(&e)) return "NotFoundError";
  return "Error";
}

void set_error(J& response, int code, const std::string& type, const std::string& message) {
  response["ok"] = false;
  response["exit_code"] = code;
  // The message as the CLI's error line has it (mme/sdk/input_text.hpp: no control characters).
  response["error"] = {{"type", type}, {"message", printable(message)}};
}

}  // namespace

std::string run_request(std::string_view request_json, const RunDefaults& defaults) {
  J response;
  response["api_version"] = kApiVersion;
  response["ok"] = true;
  response["exit_code"] = 0;
  // The request's log lines, whether it succeeds or fails.
  J lines = J::array();
  try {
    try {
      Request r = read_request(request_json, defaults);
      response["command"] = r.command;
      if (!r.context.log)
        r.context.log = [&lines](std::string_view level, std::string_view message) {
          lines.push_back({{"level", std::string(level)}, {"message", std::string(message)}});
        };
      run_command(r, response);
    } catch (const Error& e) {
      set_error(response, static_cast<int>(e.code()), error_type(e), e.what());
    } catch (const std::bad_alloc&) {
      set_error(response, static_cast<int>(ExitCode::kInternal), "InternalError", "out of memory");
    } catch (const std::exception& e) {
      set_error(response, static_cast<int>(ExitCode::kInternal), "InternalError",
                std::string("internal error: ") + e.what());
    } catch (...) {
      set_error(response, static_cast<int>(ExitCode::kInternal), "InternalError", "internal error: unknown exception");
    }
    response["log"] = std::move(lines);
    return json_text(response);
  } catch (...) {
    // Even the response could not be written (out of memory): the smallest error document.
    return R"({"api_version":1,"ok":false,"exit_code":1,"error":{"type":"InternalError","message":"out of memory"}})";
  }
}

}  // namespace mme::embedded
