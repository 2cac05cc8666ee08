// The WebAssembly entry of mme (docs/web.md): one request in, one document out, both JSON text.
// The page's work is the command layer's (mme/commands/), compiled here as for the CLI: the same
// request types, the same orchestration, the same layout rules.
//
//   {"command": "form"} -> {"fields": [...]}: the page's fields from the setup schema (each field's
//     flag, kind, range, enum values and off switch), so the page spells no knob value itself
//   {"command": "estimate", "model": "org/name" | "config_text": "...", "flags": {"tp": "4",
//    "sequence-parallel": true, ...} (mme estimate's setup flags, as the form holds them),
//    "gpu": "H100-SXM-80GB" (optional), "name": what MODEL the command line shows (optional)}
//     -> the document of `mme estimate --json` (commands::estimate, estimate_document), with
//        "command": the `mme estimate` words of the same estimate, "svg": the per-stage chart
//        (`--svg`, inline), "breakdown": the module tree (`--breakdown`), "megatron_args": the
//        argument file of `--print-megatron-args` (or "megatron_args_error"), "spec": the spec file
//        of `--dump-config` (or "spec_error"). "config_text": the text of a config.json (pasted,
//        uploaded or fetched by the page), written to the module's file system as config.json and
//        read as `mme estimate config.json` reads it.
//   {"command": "choices", "model" | "config_text", "flags": {...}} -> {"values": {"tp": [...],
//     ...}, "lines": [...]}: the layout values the engine accepts (commands::layout_choices)
//   {"command": "plan", "model" | "config_text", "flags": {...}, "num_gpus": N, "gpu": "..."
//    (optional), "top": K} -> the document of `mme plan --json` (commands::plan, on one thread);
//     while it runs, Module.onPlanProgress(done, total, elapsed_s) is called about ten times a second.
//   {"command": "models"} -> {"models": ["org/name", ...]}   (the bundled zoo, under /models)
//   {"command": "config", "model": "org/name"} -> {"config": the text of its config.json}
//   {"command": "gpus"}   -> {"gpus": [{"name", "memory_bytes"}, ...]}
//   any failure           -> {"error": {"code": exit code of the CLI, "message": text}}
//
// The registry holds the built-in plugins (compiled in, web/CMakeLists.txt); the bundled models
// are files of the module's file system (--embed-file).
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <mme/commands/documents.hpp>
#include <mme/commands/estimate.hpp>
#include <mme/commands/layout_choices.hpp>
#include <mme/commands/plan.hpp>
#include <mme/inputs/megatron_args.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/report/render_estimate.hpp>
#include <mme/report/render_svg.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/json_text.hpp>
#include <mme/sdk/plugin.hpp>

#include <emscripten/emscripten.h>

// The planner's progress, handed to the page's worker (Module.onPlanProgress, if set).
EM_JS(void, mme_web_plan_progress, (double done, double total, double elapsed), {
  if (Module["onPlanProgress"]) Module["onPlanProgress"](done, total, elapsed);
});

namespace mme::web {

const std::vector<const PluginInfo* (*)()>& builtin_plugin_entries();  // generated (web_plugins.cpp)

namespace {

using J = nlohmann::json;

// The page's one context: the built-in plugins, the bundled models under /models, no hub
// download (the page fetches a config.json itself), the log lines dropped (a document carries
// what the page shows: the model's warnings, the assumptions).
const commands::Context& context() {
  static const commands::Context c = [] {
    commands::Context ctx;
    ctx.plugins.install_dir = false;
    for (const auto entry : builtin_plugin_entries()) {
      const PluginInfo* info = entry();
      ctx.plugins.builtins.push_back({info->name, info->version, info->register_plugin});
    }
    ctx.environment.sources.bundled_dir = "/models";
    ctx.offline = true;
    ctx.log = [](std::string_view, std::string_view) {};
    ctx.log_level = "off";
    return ctx;
  }();
  return c;
}

J error_document(int code, const std::string& message) { return {{"error", {{"code", code}, {"message", message}}}}; }

// The page's fields, by the id of their element, and the knob each sets.
struct Field {
  const char* id;
  const char* knob;
};
constexpr Field kFields[] = {{"tp", "tp"},
                             {"pp", "pp"},
                             {"vpp", "vpp"},
                             {"cp", "cp"},
                             {"ep", "ep"},
                             {"etp", "etp"},
                             {"num_gpus", "num-gpus"},
                             {"num_layers_in_first_pipeline_stage", "num-layers-in-first-pipeline-stage"},
                             {"num_layers_in_last_pipeline_stage", "num-layers-in-last-pipeline-stage"},
                             {"pipeline_layout", "pipeline-layout"},
                             {"account_for_embedding_in_pipeline_split", "account-for-embedding-in-pipeline-split"},
                             {"account_for_loss_in_pipeline_split", "account-for-loss-in-pipeline-split"},
                             {"micro_batch_size", "micro-batch-size"},
                             {"seq_length", "seq-length"},
                             {"recompute_granularity", "recompute-granularity"},
                             {"sequence_parallel", "sequence-parallel"},
                             {"distributed_optimizer", "use-distributed-optimizer"},
                             {"overlap_grad_reduce", "overlap-grad-reduce"},
                             {"overlap_param_gather", "overlap-param-gather"},
                             {"tp_comm_overlap", "tp-comm-overlap"}};

J form() {
  J fields = J::array();
  for (const Field& f : kFields) {
    const SetupKnob* k = find_knob(f.knob);
    if (!k) throw std::logic_error(fmt::format("the page's field {} has no knob {}", f.id, f.knob));
    J j{{"id", f.id}, {"flag", k->flag ? k->flag : ""}, {"help", k->help}, {"default", k->doc_default}};
    switch (k->kind) {
      case KnobKind::kInt:
        j["kind"] = "int";
        j["min"] = k->min;
        j["max"] = k->max;
        break;
      case KnobKind::kEnum:
        j["kind"] = "enum";
        j["values"] = J(std::vector<std::string>(k->values.begin(), k->values.end()));
        j["null_name"] = k->null_name ? k->null_name : "";
        break;
      case KnobKind::kBool:
        j["kind"] = "bool";
        j["off_flag"] = k->off_flag ? k->off_flag : "";
        // A checkbox's state when the flag is not given (the spec file's default).
        j["on_by_default"] = std::string_view(k->spec_default) == "true";
        break;
      case KnobKind::kString: j["kind"] = "text"; break;
      default: throw std::logic_error(fmt::format("the page's field {} is of a kind the page does not show", f.id));
    }
    fields.push_back(j);
  }
  return {{"fields", fields}};
}

// The form's flags: each a knob's flag (text) or a switch (true); anything else is refused.
commands::SetupFlags request_flags(const J& request) {
  commands::SetupFlags flags;
  const auto it = request.find("flags");
  if (it == request.end()) return flags;
  if (!it->is_object()) throw UsageError("\"flags\" must be an object of mme estimate's setup flags");
  for (const auto& [name, value] : it->items()) {
    const SetupKnob* k = find_knob(name);
    if (!k) throw UsageError(fmt::format("\"flags\": '{}' is not a setup flag of mme estimate", name));
    if (value.is_boolean()) {
      if (value.get<bool>()) flags.set_switch(name);
    } else if (value.is_string()) {
      flags.set(name, value.get<std::string>());
    } else if (value.is_number()) {
      flags.set(name, value.dump());
    } else {
      throw UsageError(fmt::format("\"flags\".{}: expected a string, a number or true", name));
    }
  }
  return flags;
}

// MODEL: a bundled model's name, or config.json written from the page's text.
std::string request_model(const J& request) {
  const auto config_text = request.find("config_text");
  if (config_text != request.end()) {
    if (!config_text->is_string()) throw UsageError("\"config_text\" must be the text of a config.json");
    const char* path = "config.json";  // in the module's working folder, "/"
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << config_text->get<std::string>();
    if (!out) throw UsageError("config.json could not be written to the page's file system");
    return path;
  }
  const auto model = request.find("model");
  if (model == request.end() || !model->is_string()) throw UsageError("the request has no \"model\"");
  return model->get<std::string>();
}

std::optional<std::string> request_gpu(const J& request) {
  if (const auto g = request.find("gpu"); g != request.end() && g->is_string() && !g->get<std::string>().empty())
    return g->get<std::string>();
  return std::nullopt;
}

// The `mme estimate` words of a request: MODEL, the flags in the schema's order, --gpu.
std::vector<std::string> command_words(const std::string& model, const commands::SetupFlags& flags,
                                       const std::optional<std::string>& gpu) {
  std::vector<std::string> words{"mme", "estimate", model};
  for (const SetupKnob* k : setup_knobs_in_flag_order()) {
    for (const char* name : {k->flag, k->off_flag}) {
      if (!name) continue;
      if (const auto v = flags.value(name))
        words.insert(words.end(), {fmt::format("--{}", name), *v});
      else if (flags.on(name))
        words.push_back(fmt::format("--{}", name));
    }
  }
  if (gpu) words.insert(words.end(), {"--gpu", *gpu});
  return words;
}

J estimate(const J& request) {
  commands::EstimateRequest r;
  r.input.model = request_model(request);
  r.setup = request_flags(request);
  r.gpu = request_gpu(request);
  r.layer_breakdown = true;  // as `mme estimate --json`
  const commands::EstimateResult result = commands::estimate(r, context());
  J doc = commands::estimate_document(result);
  const std::string shown =
      request.contains("name") && request["name"].is_string() ? request["name"].get<std::string>() : *r.input.model;
  doc["command"] = command_words(shown, r.setup, r.gpu);
  if (request.value("breakdown", false)) {  // the module tree of `mme estimate --breakdown`, as text
    std::ostringstream tree;
    cli::render_module_tree(tree, result.model, result.estimate);
    doc["breakdown"] = tree.str();
  }
  if (request.value("megatron_args", false)) {
    // The launch flags of `mme estimate --print-megatron-args` (an argument file), or why there are none.
    try {
      doc["megatron_args"] =
          megatron_args_file_text(megatron_launch_args(result.model, result.estimate.setup, *result.registry));
    } catch (const UsageError& e) {
      doc["megatron_args_error"] = e.what();
    }
  }
  if (request.value("spec", false)) {
    // The spec file of `mme estimate --dump-config`, or why the layout has none.
    try {
      doc["spec"] = commands::resolved_spec_text(result, false);
    } catch (const Error& e) {
      doc["spec_error"] = e.what();
    }
  }
  if (request.value("svg", false)) {
    cli::SvgOptions so;
    so.chosen_gpu = result.gpu;
    so.standalone = false;
    doc["svg"] = cli::render_estimate_svg(result.model, result.estimate, result.fits, so);
  }
  return doc;
}

// The block limits of the last model asked about: found once per model (a few estimates), then
// reused on every keystroke.
J choices(const J& request) {
  static std::string last_key;
  static ModelSpec model;
  static commands::BlockLimits limits;
  const std::string key = request.value("model", std::string()) + "\n" + request.value("config_text", std::string());
  if (key != last_key) {
    const auto registry = commands::load_registry(context());
    model = load_model(request_model(request), *registry, commands::source_options(context()));
    limits = commands::block_limits(model, *registry);
    last_key = key;
  }
  const commands::LayoutChoices c = commands::layout_choices(model, limits, request_flags(request));
  J values = J::object();
  for (const auto& [field, list] : c.values) values[field] = list;
  return {{"values", values}, {"lines", c.lines}};
}

std::optional<std::string> text_of(const J& request, const char* key) {
  const auto it = request.find(key);
  if (it == request.end() || it->is_null()) return std::nullopt;
  if (it->is_number_integer()) return it->dump();
  if (it->is_string()) return it->get<std::string>();
  throw UsageError(fmt::format("\"{}\" must be an integer", key));
}

// `mme plan MODEL --num-gpus N [--gpu G] --json --threads 1`, the flags as request keys.
J plan(const J& request) {
  commands::PlanRequest r;
  r.input.model = request_model(request);
  r.setup = request_flags(request);
  const auto gpus = text_of(request, "num_gpus");
  if (!gpus) throw UsageError("plan needs \"num_gpus\"");
  r.setup.set("num-gpus", *gpus);
  r.gpu = request_gpu(request);
  r.top = text_of(request, "top");
  r.threads = "1";  // no threads in the browser build: the page runs the plan in a Web Worker
  r.progress = [](std::uint64_t done, std::uint64_t total, double elapsed) {
    mme_web_plan_progress(static_cast<double>(done), static_cast<double>(total), elapsed);
  };
  return commands::plan_document(commands::plan(r, context()));
}

J run(const std::string& text) {
  const J request = J::parse(text, nullptr, false);
  if (request.is_discarded() || !request.is_object()) throw UsageError("the request is not a JSON object");
  const std::string command = request.value("command", std::string("estimate"));
  if (command == "form") return form();
  if (command == "models") {
    J names = J::array();
    for (const auto& b : list_bundled_models(zoo_dirs(context().environment.sources))) names.push_back(b.name);
    return {{"models", names}};
  }
  if (command == "config") {
    const std::string name = request.value("model", std::string());
    for (const auto& b : list_bundled_models(zoo_dirs(context().environment.sources))) {
      if (b.name != name) continue;
      std::ifstream in(b.path, std::ios::binary);
      return {{"config", std::string(std::istreambuf_iterator<char>(in), {})}};
    }
    throw UsageError("'" + name + "' is not a bundled model");
  }
  if (command == "gpus") {
    J gpus = J::array();
    for (const auto& h : commands::load_registry(context())->hardware())
      gpus.push_back({{"name", h.object->name}, {"memory_bytes", h.object->memory_bytes}});
    return {{"gpus", gpus}};
  }
  if (command == "estimate") return estimate(request);
  if (command == "choices") return choices(request);
  if (command == "plan") return plan(request);
  throw UsageError("unknown command '" + command + "' (form, estimate, choices, plan, models, config, gpus)");
}

}  // namespace

}  // namespace mme::web

// The returned text is malloc'ed: free it with mme_web_free.
extern "C" EMSCRIPTEN_KEEPALIVE char* mme_web_run(const char* request) {
  nlohmann::json doc;
  try {
    doc = mme::web::run(request ? request : "");
  } catch (const mme::Error& e) {
    doc = mme::web::error_document(static_cast<int>(e.code()), e.what());
  } catch (const std::exception& e) {
    doc = mme::web::error_document(1, std::string("internal error: ") + e.what());
  }
  const std::string text = mme::json_text(doc, 2);
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

extern "C" EMSCRIPTEN_KEEPALIVE void mme_web_free(char* text) { std::free(text); }
