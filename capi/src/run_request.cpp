// One request of the C entry point: the JSON request becomes the argument vector of
// `mme COMMAND`, the CLI's own command runs in-process (its stdout captured, its log lines
// collected), and the response document carries what it printed or the error main.cpp would
// report, with the same exit code and message.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <new>
#include <optional>
#include <sstream>

#include <fmt/core.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <mme/inputs/model_source.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>
#include <mme/sdk/json_text.hpp>
#include <mme/sdk/log.hpp>
#include <mme/sdk/version.hpp>

#include "command.hpp"
#include "embedded.hpp"

namespace mme::embedded {

namespace {

using J = nlohmann::ordered_json;

std::mutex g_call_mutex;

// The positional argument of a command, by the name its option table gives it.
const char* positional_of(const std::string& command) {
  if (command == "validate") return "cases";
  for (const char* c : {"estimate", "plan", "params", "compare", "init"})
    if (command == c) return "model";
  return nullptr;
}

// The commands whose --json prints one JSON document.
bool takes_json(const std::string& command) {
  for (const char* c : {"estimate", "plan", "params", "compare", "init", "models", "hardware", "validate", "plugins"})
    if (command == c) return true;
  return false;
}

std::string dashed(const std::string& key) {
  std::string out = key.substr(std::min(key.find_first_not_of('-'), key.size()));
  for (char& c : out)
    if (c == '_') c = '-';
  return out;
}

std::string scalar_text(const J& v, const std::string& key) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return v.dump();
  throw UsageError(fmt::format("args.{}: expected a string, a number or a list of them, got {}", key, v.type_name()));
}

// The switch a boolean knob's key names, or null when the key is not the knob's own name.
const SetupKnob* bool_knob(const std::string& name) {
  const SetupKnob* k = find_knob(name);
  if (!k || k->kind != KnobKind::kBool) return nullptr;
  if (name == k->id || (k->flag && name == k->flag) || (k->off_flag && name == k->off_flag)) return k;
  return nullptr;
}

// Log lines of the running request, into current_log().
class CaptureSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const auto level = spdlog::level::to_string_view(msg.level);
    current_log().lines.emplace_back(std::string(level.data(), level.size()),
                                     printable(std::string_view(msg.payload.data(), msg.payload.size())));
  }
  void flush_() override {}
};

// Everything a request changes in the process, put back when it ends.
class RequestScope {
 public:
  RequestScope(bool log_to_stderr, const std::filesystem::path& models_dir, bool offline)
      : saved_cout_(std::cout.rdbuf(out_.rdbuf())),
        saved_logger_(spdlog::default_logger()),
        saved_models_(bundled_models_dir()) {
    save_env("MME_HARDWARE_FILES");  // --hardware-file appends to it
    save_env("HF_HUB_OFFLINE");
    if (offline) ::setenv("HF_HUB_OFFLINE", "1", 1);
    set_bundled_models_dir(models_dir);
    current_log() = LogCapture{};
    current_log().to_stderr = log_to_stderr;
    if (log_to_stderr) {
      init_logging("warn");
    } else {
      auto logger = std::make_shared<spdlog::logger>("mme", std::make_shared<CaptureSink>());
      logger->set_level(spdlog::level::warn);
      spdlog::set_default_logger(logger);
    }
  }
  ~RequestScope() {
    std::cout.rdbuf(saved_cout_);
    std::cout.clear();
    spdlog::set_default_logger(saved_logger_);
    set_bundled_models_dir(saved_models_);
    for (const auto& [name, value] : saved_env_) {
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }
  RequestScope(const RequestScope&) = delete;
  RequestScope& operator=(const RequestScope&) = delete;
  std::string output() const { return out_.str(); }

 private:
  void save_env(const char* name) {
    const char* v = std::getenv(name);
    saved_env_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
  }
  std::ostringstream out_;
  std::streambuf* saved_cout_;
  std::shared_ptr<spdlog::logger> saved_logger_;
  std::filesystem::path saved_models_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_env_;
};

struct Request {
  std::string command;
  std::vector<std::string> args;  // after the command
  std::filesystem::path models_dir;
  bool log_to_stderr = false;
  bool offline = false;
};

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
  J req;
  RequestReader reader(req, text);
  J::sax_parse(text, &reader);
  if (!req.is_object()) throw UsageError("the request must be a JSON object");
  for (const auto& [key, value] : req.items()) {
    static const char* kKeys[] = {"api_version", "command", "args", "argv", "models_dir", "log", "offline"};
    if (std::none_of(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return key == k; }))
      throw UsageError(
          fmt::format("the request has an unknown key '{}' (api_version, command, args, argv, "
                      "models_dir, log, offline)",
                      key));
  }
  if (req.contains("api_version") &&
      (!req["api_version"].is_number_integer() || req["api_version"].get<std::int64_t>() != kApiVersion))
    throw UsageError(fmt::format("api_version {} is not supported (this library speaks {})", req["api_version"].dump(),
                                 kApiVersion));
  if (!req.contains("command") || !req["command"].is_string() || req["command"].get<std::string>().empty())
    throw UsageError("the request needs a \"command\" (estimate, plan, params, models, hardware, validate, ...)");
  Request r;
  r.command = req["command"].get<std::string>();
  if (req.contains("args")) r.args = request_argv(r.command, req["args"]);
  if (req.contains("argv")) {
    if (!req["argv"].is_array()) throw UsageError("\"argv\" must be a list of strings");
    for (const auto& a : req["argv"]) {
      if (!a.is_string()) throw UsageError("\"argv\" must be a list of strings");
      r.args.push_back(a.get<std::string>());
    }
  }
  // A NUL cannot be in a path, a name or a flag value (the C string of a path would end there,
  // and another file would be read); only the C API and Python can pass one.
  for (std::size_t i = 0; i < r.args.size(); ++i)
    if (r.args[i].find('\0') != std::string::npos)
      throw UsageError(fmt::format(
          "argument '{}' holds a NUL character (\\u0000), which no path, name or value may hold", r.args[i]));
  r.models_dir = defaults.models_dir;
  if (req.contains("models_dir")) {
    if (!req["models_dir"].is_string()) throw UsageError("\"models_dir\" must be a string (a folder)");
    r.models_dir = req["models_dir"].get<std::string>();
  }
  if (req.contains("log")) {
    if (req["log"] != "capture" && req["log"] != "stderr") throw UsageError("\"log\" is \"capture\" or \"stderr\"");
    r.log_to_stderr = req["log"] == "stderr";
  }
  if (req.contains("offline")) {
    if (!req["offline"].is_boolean()) throw UsageError("\"offline\" must be true or false");
    r.offline = req["offline"].get<bool>();
  }
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

// Runs the command as cli/main.cpp does; fills "result" (a JSON document) or "text".
void run_command(const Request& r, J& response) {
  if (r.command == "schema") {
    response["result"] = schema_document();
    return;
  }
  if (r.command == "version") {
    response["result"] = {{"mme", MME_VERSION_STRING},
                          {"libmme", std::string(library_version())},
                          {"plugin_api", kPluginApiVersion},
                          {"abi_tag", std::string(kAbiTag)},
                          {"api_version", kApiVersion}};
    return;
  }
  std::vector<std::string> argv{r.command};
  argv.insert(argv.end(), r.args.begin(), r.args.end());
  const bool json = takes_json(r.command) && std::find(argv.begin(), argv.end(), "--csv") == argv.end();
  if (json && std::find(argv.begin(), argv.end(), "--json") == argv.end()) argv.push_back("--json");
  const cli::Invocation inv = cli::parse_invocation(std::move(argv));
  if (!inv.command) throw UsageError(cli::unknown_command_message(inv.name));
  RequestScope scope(r.log_to_stderr, r.models_dir, r.offline);
  // The log lines go into the response whether the command succeeds or throws.
  auto keep_log = [&response] {
    J lines = J::array();
    for (const auto& [level, message] : current_log().lines) lines.push_back({{"level", level}, {"message", message}});
    response["log"] = std::move(lines);
  };
  int rc = 0;
  try {
    if (inv.wants_help)
      inv.command->help(std::cout);
    else
      rc = inv.command->run(inv.args);
  } catch (...) {
    keep_log();
    throw;
  }
  keep_log();
  const std::string out = scope.output();
  if (rc != 0) {
    set_error(response, rc, "Error", fmt::format("mme {} exited with status {}", inv.name, rc));
    return;
  }
  if (json && !inv.wants_help) {
    try {
      response["result"] = J::parse(out);
      return;
    } catch (const nlohmann::json::exception&) {
      // Not one document (a command that streams): the text as printed.
    }
  }
  response["text"] = out;
}

}  // namespace

std::vector<std::string> request_argv(const std::string& command, const nlohmann::ordered_json& args) {
  if (!args.is_object()) throw UsageError("\"args\" must be an object of flags: {\"tp\": 4, \"gpu\": \"H100\", ...}");
  const char* positional = positional_of(command);
  std::vector<std::string> front, flags;
  for (const auto& [key, value] : args.items()) {
    const std::string name = dashed(key);
    if (name.empty()) throw UsageError(fmt::format("args: '{}' is not a flag name", key));
    if (value.is_null()) continue;  // not given
    if (positional && name == positional) {
      if (!value.is_string()) throw UsageError(fmt::format("args.{}: expected a string", key));
      front.push_back(value.get<std::string>());
      continue;
    }
    if (value.is_boolean()) {
      const bool on = value.get<bool>();
      // A boolean knob of the setup schema: true and false are its switch and its off switch.
      if (const SetupKnob* k = bool_knob(name); k && !(k->off_flag && name == k->off_flag)) {
        if (on && k->flag) flags.push_back(fmt::format("--{}", k->flag));
        if (!on && k->off_flag) flags.push_back(fmt::format("--{}", k->off_flag));
        continue;
      }
      if (on) flags.push_back("--" + name);  // a switch; false leaves it out
      continue;
    }
    if (value.is_array()) {
      const SetupKnob* k = find_knob(name);
      if (k && k->kind != KnobKind::kEnv && k->kind != KnobKind::kBool) {
        // A setup value as a list: `compare --tp 1,2,4`, `--recompute-modules core_attn,mlp`.
        std::string joined;
        for (const auto& v : value) joined += (joined.empty() ? "" : ",") + scalar_text(v, key);
        flags.push_back(fmt::format("--{}={}", name, joined));
      } else {
        for (const auto& v : value) flags.push_back(fmt::format("--{}={}", name, scalar_text(v, key)));
      }
      continue;
    }
    if (value.is_object()) throw UsageError(fmt::format("args.{}: expected a string, a number or a list", key));
    flags.push_back(fmt::format("--{}={}", name, scalar_text(value, key)));
  }
  front.insert(front.end(), flags.begin(), flags.end());
  return front;
}

std::string run_request(std::string_view request_json, const RunDefaults& defaults) {
  const std::lock_guard<std::mutex> lock(g_call_mutex);
  J response;
  response["api_version"] = kApiVersion;
  response["ok"] = true;
  response["exit_code"] = 0;
  try {
    try {
      const Request r = read_request(request_json, defaults);
      response["command"] = r.command;
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
    return json_text(response);
  } catch (...) {
    // Even the response could not be written (out of memory): the smallest error document.
    return R"({"api_version":1,"ok":false,"exit_code":1,"error":{"type":"InternalError","message":"out of memory"}})";
  }
}

}  // namespace mme::embedded
