// The WebAssembly entry of mme (docs/web.md): one request in, one document out, both JSON text.
//
//   {"model": "deepseek-ai/DeepSeek-V3" | {config.json object}, "setup": {the `setup` block of
//    `mme estimate --json`}, "gpu": "H100-SXM-80GB" (optional)}
//     -> the document of `mme estimate --json` (estimate_to_json and next_steps)
//     with "config_text": the text of a config.json (pasted, uploaded or fetched from the hub by
//       the page) instead of "model": written to the module's file system as config.json and
//       loaded as `mme estimate config.json` loads it (the same errors, the same adapters);
//     with "svg": true, also "svg": the per-stage chart (`mme estimate --svg`, inline SVG);
//     with "breakdown": true, also "breakdown": the module tree `mme estimate --breakdown` prints;
//     with "megatron_args": true, also "megatron_args": the argument file of
//     `mme estimate --print-megatron-args` (or "megatron_args_error": why no flags express it).
//   {"command": "models"} -> {"models": ["org/name", ...]}   (the bundled zoo, under /models)
//   {"command": "config", "model": "org/name"} -> {"config": the text of its config.json}
//   {"command": "gpus"}   -> {"gpus": [{"name", "memory_bytes"}, ...]}
//   {"command": "limits", "model" | "config_text"} -> {"num_layers", "mtp_layers", "tp_divides",
//     "ep_divides", "etp_divides"}: what TP, EP (0: no experts) and ETP must divide (the gcd of the
//     heads, query groups and MLP widths the block models check), for the page's suggestions
//   {"command": "plan", "model" | "config_text" as above, "setup": {the base setup: its layout,
//    split and recompute are the planner's}, "num_gpus": N, "gpu": "H100-SXM-80GB" (optional: the
//    GPU with the most memory, as `mme plan --json` without --gpu), "top": K (default 10),
//    "sort": "score" | "peak" | "bubble" | "comm", "micro_batch_sizes": [1, 2, 4],
//    "recompute": ["none", "selective", "full"]}
//     -> the document of `mme plan --json` (plan_result_to_json), on one thread; while it runs,
//        Module.onPlanProgress(done, total, elapsed_s) is called about ten times a second.
//   any failure           -> {"error": {"code": exit code of the CLI, "message": text}}
//
// The registry holds the built-in plugins (compiled in, web/CMakeLists.txt); the bundled models
// are files of the module's file system (--embed-file).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <mme/engine/estimator.hpp>
#include <mme/engine/fit.hpp>
#include <mme/engine/registry.hpp>
#include <mme/inputs/gpu_lookup.hpp>
#include <mme/inputs/megatron_args.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/model_source.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/planner/planner.hpp>
#include <mme/report/next_steps.hpp>
#include <mme/report/render_estimate.hpp>
#include <mme/report/render_plan.hpp>
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

const Registry& registry() {
  static const Registry* r = [] {
    auto* reg = new Registry;
    for (const auto entry : builtin_plugin_entries()) {
      const PluginInfo* info = entry();
      if (!reg->register_plugin(info->name, info->version, "", info->register_plugin))
        spdlog::warn("built-in plugin '{}' was not registered", info->name);
    }
    return reg;
  }();
  return *r;
}

nlohmann::json error_document(int code, const std::string& message) {
  return {{"error", {{"code", code}, {"message", message}}}};
}

ModelSpec request_model(const nlohmann::json& model) {
  if (model.is_string()) return load_model(model.get<std::string>(), registry());
  if (model.is_object()) {
    const auto it = model.find("_name_or_path");
    const std::string name = it != model.end() && it->is_string() ? it->get<std::string>() : "config.json";
    return adapt_config(model, name, "config.json given to the page", registry());
  }
  throw UsageError("\"model\" must be a bundled model name or a config.json object");
}

// A config.json given as text: the file the CLI would read (its errors name it "config.json").
ModelSpec text_model(const std::string& text) {
  const char* path = "config.json";  // in the module's working folder, "/"
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw UsageError("config.json could not be written to the page's file system");
  }
  return load_model(path, registry());
}

ModelSpec any_model(const nlohmann::json& request) {
  const auto config_text = request.find("config_text");
  if (config_text != request.end()) {
    if (!config_text->is_string()) throw UsageError("\"config_text\" must be the text of a config.json");
    return text_model(config_text->get<std::string>());
  }
  if (!request.contains("model")) throw UsageError("the request has no \"model\"");
  return request_model(request["model"]);
}

nlohmann::json estimate(const nlohmann::json& request) {
  const ModelSpec model = any_model(request);
  TrainingSetup setup;
  const auto block = request.find("setup");
  if (block != request.end()) {
    if (!block->is_object()) throw UsageError("\"setup\" must be an object (the setup block of `mme estimate --json`)");
    setup = setup_from_json_block(*block, setup);
  }
  std::optional<std::string> gpu_name;
  if (const auto g = request.find("gpu"); g != request.end() && g->is_string() && !g->get<std::string>().empty())
    gpu_name = g->get<std::string>();
  const HardwareProfile* gpu = find_gpu(registry(), gpu_name);
  EstimateOptions eo;
  eo.layer_breakdown = true;  // as `mme estimate --json`
  if (gpu) eo.compute_capability = gpu->compute_capability;
  const Estimator estimator(model, registry());
  const Estimate est = estimator.run(setup, eo);
  std::vector<const HardwareProfile*> judged;
  if (gpu) {
    judged.push_back(gpu);
  } else {
    for (const auto& h : registry().hardware()) judged.push_back(h.object.get());
    std::stable_sort(judged.begin(), judged.end(),
                     [](const auto* a, const auto* b) { return a->memory_bytes < b->memory_bytes; });
  }
  std::vector<FitVerdict> fits;
  for (const auto* h : judged) fits.push_back(judge_fit(est, *h, kHeadroomUnset, true, -1));
  nlohmann::json doc = cli::estimate_to_json(model, est, fits);
  // When nothing fits: the changes that would (the CLI's next_steps, the same defaults).
  nlohmann::json steps = nlohmann::json::array();
  if (!fits.empty() && std::none_of(fits.begin(), fits.end(), [](const FitVerdict& f) { return f.fits; })) {
    std::string name = model.name;  // as the CLI names MODEL in its hint to `mme plan`
    if (request.contains("config_text"))
      name = "config.json";
    else if (request.contains("model") && request["model"].is_string())
      name = request["model"].get<std::string>();
    for (const auto& st : cli::next_steps(model, setup, gpu, name, registry(), judged, kDefaultHeadroom, true, -1))
      steps.push_back({{"change", st.change}, {"needed_bytes", st.needed_bytes}, {"fits", st.fits_on}});
  }
  doc["next_steps"] = steps;
  if (request.value("breakdown", false)) {  // the module tree of `mme estimate --breakdown`, as text
    std::ostringstream tree;
    cli::render_module_tree(tree, model, est);
    doc["breakdown"] = tree.str();
  }
  if (request.value("megatron_args", false)) {
    // The launch flags of `mme estimate --print-megatron-args` (an argument file), or why there are none.
    try {
      doc["megatron_args"] = megatron_args_file_text(megatron_launch_args(model, est.setup, registry()));
    } catch (const UsageError& e) {
      doc["megatron_args_error"] = e.what();
    }
  }
  if (request.value("svg", false)) {
    cli::SvgOptions so;
    so.chosen_gpu = gpu;
    so.standalone = false;
    doc["svg"] = cli::render_estimate_svg(model, est, fits, so);
  }
  return doc;
}

std::int64_t request_int(const nlohmann::json& request, const char* key, std::int64_t fallback, std::int64_t max) {
  const auto it = request.find(key);
  if (it == request.end()) return fallback;
  if (!it->is_number_integer() || it->get<std::int64_t>() < 1 || it->get<std::int64_t>() > max)
    throw UsageError(fmt::format("\"{}\" must be an integer in [1, {}]", key, max));
  return it->get<std::int64_t>();
}

// The numbers the layout checks divide by (the engine's and the block models' validate()): what
// the page narrows the TP, EP, ETP, PP and split fields with.
nlohmann::json limits(const nlohmann::json& request) {
  const ModelSpec model = any_model(request);
  std::int64_t tp = 0, ep = 0, etp = 0;
  for (const auto& layer : model.layers) {
    const auto& a = layer.attention;
    if (a.kind == "gqa" || a.kind == "mla") tp = std::gcd(tp, a.num_heads);
    if (a.kind == "gqa") tp = std::gcd(tp, a.num_query_groups);
    const auto& m = layer.mlp;
    if (m.kind == "dense") tp = std::gcd(tp, m.ffn_hidden_size);
    if (m.kind == "moe") {
      ep = std::gcd(ep, m.num_experts);
      etp = std::gcd(etp, m.expert_ffn_hidden_size);
      if (m.shared_expert_ffn_hidden_size > 0) tp = std::gcd(tp, m.shared_expert_ffn_hidden_size);
    }
  }
  return {{"num_layers", model.num_layers},
          {"mtp_layers", model.mtp_num_layers},
          {"tp_divides", tp},
          {"ep_divides", ep},
          {"etp_divides", etp}};
}

// `mme plan MODEL --num-gpus N [--gpu G] --json --threads 1`, the flags as request keys.
nlohmann::json plan(const nlohmann::json& request) {
  PlanOptions o;
  if (!request.contains("num_gpus")) throw UsageError("plan needs \"num_gpus\"");
  o.num_gpus = request_int(request, "num_gpus", 0, kMaxWorldSize);
  o.top_k = static_cast<std::size_t>(request_int(request, "top", 10, 100000));
  o.threads = 1;  // no threads in the browser build: the page runs the plan in a Web Worker
  if (const auto it = request.find("sort"); it != request.end() && it->is_string())
    o.sort = parse_plan_sort_key(it->get<std::string>());
  if (const auto it = request.find("micro_batch_sizes"); it != request.end()) {
    if (!it->is_array() || it->empty()) throw UsageError("\"micro_batch_sizes\" must be a list of integers");
    o.micro_batch_sizes.clear();
    for (const auto& b : *it) {
      if (!b.is_number_integer() || b.get<std::int64_t>() < 1 || b.get<std::int64_t>() > kMaxSequenceSize)
        throw UsageError("\"micro_batch_sizes\" must be a list of positive integers");
      if (std::find(o.micro_batch_sizes.begin(), o.micro_batch_sizes.end(), b.get<std::int64_t>()) ==
          o.micro_batch_sizes.end())
        o.micro_batch_sizes.push_back(b.get<std::int64_t>());
    }
  }
  if (const auto it = request.find("recompute"); it != request.end()) {
    if (!it->is_array() || it->empty()) throw UsageError("\"recompute\" must be a list of none, selective, full");
    o.recompute.clear();
    for (const auto& v : *it) {
      const RecomputeVariant r = parse_recompute_variant(v.is_string() ? v.get<std::string>() : std::string());
      if (std::find(o.recompute.begin(), o.recompute.end(), r) == o.recompute.end()) o.recompute.push_back(r);
    }
  }
  if (const auto block = request.find("setup"); block != request.end()) {
    if (!block->is_object()) throw UsageError("\"setup\" must be an object (the setup block of `mme estimate --json`)");
    o.base = setup_from_json_block(*block, o.base);
  }
  std::optional<std::string> gpu_name;
  if (const auto g = request.find("gpu"); g != request.end() && g->is_string() && !g->get<std::string>().empty())
    gpu_name = g->get<std::string>();
  if (gpu_name) {
    o.gpu = find_gpu(registry(), gpu_name);
  } else {  // as `mme plan --json` without --gpu: the GPU with the most memory
    for (const auto& h : registry().hardware()) {
      const HardwareProfile* c = h.object.get();
      if (!o.gpu || c->memory_bytes > o.gpu->memory_bytes ||
          (c->memory_bytes == o.gpu->memory_bytes && c->name < o.gpu->name))
        o.gpu = c;
    }
  }
  if (!o.gpu) throw UsageError("no GPU profile is known");
  const ModelSpec model = any_model(request);
  const Planner planner(model, registry());
  o.progress = [](std::uint64_t done, std::uint64_t total, double elapsed) {
    mme_web_plan_progress(static_cast<double>(done), static_cast<double>(total), elapsed);
  };
  const PlanResult r = planner.run(o);
  if (r.valid == 0)
    throw LayoutError(fmt::format("no layout of {} GPUs is valid for {}: {}", o.num_gpus, model.name,
                                  r.first_error.empty() ? "no candidate" : r.first_error));
  std::vector<PlanSuggestion> suggestions;
  if (r.fitting == 0) suggestions = planner.suggest(o);
  return cli::plan_result_to_json(model, planner, o, r, suggestions);
}

nlohmann::json run(const std::string& text) {
  const nlohmann::json request = nlohmann::json::parse(text, nullptr, false);
  if (request.is_discarded() || !request.is_object()) throw UsageError("the request is not a JSON object");
  const std::string command = request.value("command", std::string("estimate"));
  if (command == "models") {
    nlohmann::json names = nlohmann::json::array();
    for (const auto& b : list_bundled_models(default_zoo_dirs())) names.push_back(b.name);
    return {{"models", names}};
  }
  if (command == "config") {
    const std::string name = request.value("model", std::string());
    for (const auto& b : list_bundled_models(default_zoo_dirs())) {
      if (b.name != name) continue;
      std::ifstream in(b.path, std::ios::binary);
      return {{"config", std::string(std::istreambuf_iterator<char>(in), {})}};
    }
    throw UsageError("'" + name + "' is not a bundled model");
  }
  if (command == "gpus") {
    nlohmann::json gpus = nlohmann::json::array();
    for (const auto& h : registry().hardware())
      gpus.push_back({{"name", h.object->name}, {"memory_bytes", h.object->memory_bytes}});
    return {{"gpus", gpus}};
  }
  if (command == "estimate") return estimate(request);
  if (command == "plan") return plan(request);
  if (command == "limits") return limits(request);
  throw UsageError("unknown command '" + command + "' (estimate, plan, limits, models, config, gpus)");
}

}  // namespace

}  // namespace mme::web

// The returned text is malloc'ed: free it with mme_web_free.
extern "C" EMSCRIPTEN_KEEPALIVE char* mme_web_run(const char* request) {
  static const bool once = [] {
    mme::set_bundled_models_dir("/models");
    spdlog::set_level(spdlog::level::err);  // the adapters' warnings stay in the document
    return true;
  }();
  (void)once;
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
