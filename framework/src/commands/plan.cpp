#include "mme/commands/plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <tuple>

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <mme/report/render_html.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>

#include "resolve.hpp"

namespace mme::commands {

namespace {

using detail::split_list;

template <class T>
void add_once(std::vector<T>& list, const T& v) {
  if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
}

// The knobs a search compares, as table and CSV columns: only those it searches.
struct KnobColumns {
  bool sharding = false, offload = false, graphs = false;
  explicit KnobColumns(const PlanOptions& o)
      : sharding(!o.dp_sharding.empty()),
        offload(!o.optimizer_offload_fractions.empty()),
        graphs(!o.cuda_graphs.empty()) {}
  // Table cells are padded to the column; CSV fields are the bare values.
  static std::string cell(const std::string& text, std::size_t width, bool right, bool csv) {
    if (csv || text.size() >= width) return text;
    const std::string pad(width - text.size(), ' ');
    return right ? pad + text : text + pad;
  }
};

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string plan_knob_header(const PlanOptions& o, const char* sep, bool csv) {
  const KnobColumns k(o);
  std::string out;
  if (k.sharding) out += sep + KnobColumns::cell("dp_sharding", 18, false, csv);
  if (k.offload) out += sep + KnobColumns::cell(csv ? "optimizer_offload_fraction" : "offload", 7, true, csv);
  if (k.graphs) out += sep + KnobColumns::cell("cuda_graphs", 14, false, csv);
  return out;
}

std::string plan_knob_cells(const PlanLayout& l, const PlanOptions& o, const char* sep, bool csv) {
  const KnobColumns k(o);
  const PlanKnobs& knobs = l.knobs;
  std::string out;
  if (k.sharding)
    out += sep + KnobColumns::cell(knobs.dp_sharding ? to_string(*knobs.dp_sharding) : "", 18, false, csv);
  if (k.offload)
    out += sep + KnobColumns::cell(fmt::format("{:g}", knobs.optimizer_offload_fraction.value_or(0.0)), 7, true, csv);
  if (k.graphs) out += sep + KnobColumns::cell(knobs.cuda_graphs ? to_string(*knobs.cuda_graphs) : "", 14, false, csv);
  return out;
}

std::string plan_csv_header(const PlanOptions& o) {
  return "ordinal,tp,pp,vpp,ep,etp,cp,dp,micro_batch_size,recompute,first_stage_layers,middle_stage_layers,"
         "last_stage_layers" +
         plan_knob_header(o, ",", true) +
         ",peak_bytes,headroom_bytes,fits,score,bubble,step_seconds,tokens_per_second_per_gpu,model_tflops_per_gpu,"
         "args\n";
}

std::string plan_csv_row(const Plan& p, const Planner& planner, const PlanOptions& o) {
  const auto& l = p.layout;
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{}\n",
                     p.ordinal, l.tp, l.pp, l.vpp, l.ep, l.etp, l.cp, l.dp, l.micro_batch_size, to_string(l.recompute),
                     l.first_stage_layers, l.middle_stage_layers, l.last_stage_layers, plan_knob_cells(l, o, ",", true),
                     p.peak_bytes, p.headroom_bytes, p.fits ? "true" : "false", p.score.score, p.score.bubble,
                     p.score.step_seconds, p.score.tokens_per_second_per_gpu, p.score.model_tflops_per_gpu,
                     csv_field(shell_command(planner.args_for(l, o))));
}

PlanOutcome plan(const PlanRequest& request, const Context& context) {
  using namespace detail;
  const RequestLog log(context);
  SetupFlags flags = request.setup;
  // The model and the setup as every use case that takes a model reads them (resolve.hpp); plan
  // takes MODEL only, and reads the setup once the list flags are out of the way.
  ReadInputs read = read_model_source(request.input, flags, InputRules{"plan", false, false});
  const auto gpus_text = flags.agreed_value({"num-gpus", "world-size"});
  // Without --num-gpus: how many GPUs of --gpu the model needs.
  const bool count_gpus = !gpus_text;
  if (count_gpus && !request.gpu)
    throw UsageError("plan needs --num-gpus N, or --gpu NAME to find how many GPUs the model needs");
  std::optional<cli::OutputFile> html_file;  // an unwritable path fails now, before the search
  if (request.html) html_file.emplace(*request.html, "--html");

  // What the planner chooses itself.
  for (const char* name :
       {"num-layers-in-first-pipeline-stage", "decoder-first-pipeline-num-layers", "num-layers-in-last-pipeline-stage",
        "decoder-last-pipeline-num-layers", "pipeline-layout", "pipeline-model-parallel-layout",
        "num-layers-per-virtual-pipeline-stage", "recompute-granularity", "recompute-method", "recompute-num-layers"})
    if (flags.has(name))
      throw UsageError(
          fmt::format("--{}: plan chooses the pipeline split and recompute itself (use --pp, --vpp, "
                      "--recompute to restrict the search)",
                      name));
  for (const char* name : {"account-for-embedding-in-pipeline-split", "account-for-loss-in-pipeline-split",
                           "no-sequence-parallel", "no-distributed-optimizer"})
    if (flags.on(name))
      throw UsageError(
          fmt::format("--{}: plan keeps sequence parallelism (TP > 1) and the distributed optimizer on "
                      "and chooses the pipeline split (first/last-stage counts, --account-for-* and layout "
                      "strings) itself",
                      name));

  PlanOptions o;
  if (gpus_text) o.num_gpus = parse_int("--num-gpus", *gpus_text, 1, kMaxWorldSize);
  if (const auto v = flags.value("micro-batch-size")) {
    o.micro_batch_sizes.clear();
    for (const auto& item : split_list(*v))
      add_once(o.micro_batch_sizes, parse_int("--micro-batch-size", item, 1, kMaxSequenceSize));
    flags.erase("micro-batch-size");
  }
  if (request.recompute) {
    o.recompute.clear();
    for (const auto& item : split_list(*request.recompute)) add_once(o.recompute, parse_recompute_variant(item));
  }
  auto fixed = [&](std::initializer_list<const char*> names, std::optional<std::int64_t>& into) {
    if (auto v = flags.agreed_value(names))
      into = parse_int(fmt::format("--{}", *names.begin()), *v, 1, kMaxParallelSize);
  };
  fixed({"tp", "tensor-model-parallel-size"}, o.tp);
  fixed({"pp", "pipeline-model-parallel-size"}, o.pp);
  fixed({"vpp", "virtual-pipeline-model-parallel-size", "num-virtual-stages-per-pipeline-rank"}, o.vpp);
  fixed({"ep", "expert-model-parallel-size"}, o.ep);
  fixed({"etp", "expert-tensor-parallel-size"}, o.etp);
  fixed({"cp", "context-parallel-size"}, o.cp);
  // The knob lists (--dp-sharding / --data-parallel-sharding-strategy, --optimizer-offload-fraction /
  // --optimizer-cpu-offload-fraction, --cuda-graphs): taken out of the setup flags, which take
  // one value each.
  {
    std::optional<std::string> sharding = flags.agreed_value({"data-parallel-sharding-strategy"});
    if (request.dp_sharding && sharding && *sharding != *request.dp_sharding)
      throw UsageError(fmt::format("--dp-sharding {} and --data-parallel-sharding-strategy {} disagree",
                                   *request.dp_sharding, *sharding));
    if (request.dp_sharding) sharding = request.dp_sharding;
    if (sharding) {
      for (const auto& item : split_list(*sharding)) add_once(o.dp_sharding, parse_dp_sharding(item));
      flags.erase("data-parallel-sharding-strategy");
    }
  }
  if (const auto v = flags.agreed_value({"optimizer-cpu-offload-fraction", "optimizer-offload-fraction"})) {
    for (const auto& item : split_list(*v))
      add_once(o.optimizer_offload_fractions, parse_number("--optimizer-offload-fraction", item, 0, 1));
    flags.erase("optimizer-cpu-offload-fraction");
    flags.erase("optimizer-offload-fraction");
  }
  if (request.cuda_graphs) {
    for (const auto& item : split_list(*request.cuda_graphs)) add_once(o.cuda_graphs, parse_cuda_graph_choice(item));
    if (flags.has("cuda-graph-modules"))
      throw UsageError("--cuda-graph-modules: give the scopes to try in --cuda-graphs (off,attn+moe_router,...)");
  }
  read_request_setup(flags, read);
  o.base = read.setup;
  if (request.headroom) o.headroom_fraction = parse_headroom(*request.headroom);
  if (request.gpus_per_node)
    o.gpus_per_node = parse_int("--gpus-per-node", *request.gpus_per_node, 1, kMaxParallelSize);
  if (request.max_tp) o.max_tp = parse_int("--max-tp", *request.max_tp, 1, kMaxParallelSize);
  if (request.inter_node_bandwidth)
    o.inter_node_bandwidth_gbps = parse_number("--inter-node-bandwidth", *request.inter_node_bandwidth, 1e-3, 1e9);
  o.recipe_overlaps = !request.no_overlap;
  if (request.max_candidates)
    o.max_candidates =
        static_cast<std::uint64_t>(parse_int("--max-candidates", *request.max_candidates, 0, std::int64_t{1} << 62));
  if (request.sort) o.sort = parse_plan_sort_key(*request.sort);
  if (request.top) o.top_k = static_cast<std::size_t>(parse_int("--top", *request.top, 1, 100000));
  if (request.threads) o.threads = static_cast<unsigned>(parse_int("--threads", *request.threads, 1, 4096));

  PlanOutcome out;
  out.registry = load_registry(context);
  const Registry& registry = *out.registry;
  if (request.gpu) {
    o.gpu = request_gpu(read, request.gpu, registry);
  } else {
    for (const auto& h : registry.hardware()) {
      const HardwareProfile* c = h.object.get();
      if (!o.gpu || c->memory_bytes > o.gpu->memory_bytes ||
          (c->memory_bytes == o.gpu->memory_bytes && c->name < o.gpu->name))
        o.gpu = c;
    }
    if (!o.gpu) throw UsageError("no GPU profile is loaded (see `mme plugins`); give --gpu");
  }
  const bool every_gpu = !request.gpu && request.best_per_gpu;
  if (!request.gpu && !every_gpu)
    spdlog::warn("no --gpu: planning for {}, the GPU with the most memory (give --gpu NAME to choose)", o.gpu->name);
  std::vector<std::string> assumptions;  // only launch flags make any, and plan takes none
  out.model = std::make_shared<const ModelSpec>(
      load_request_model(read, registry, source_options(context, request.input.revision), assumptions));
  out.planner = std::make_shared<const Planner>(*out.model, registry);
  const Planner& planner = *out.planner;
  const ModelSpec& model = *out.model;
  o.cancel = request.cancel;
  auto no_valid = [&](const PlanResult& r) {
    return LayoutError(fmt::format("no layout of {} GPUs is valid for {}: {}", o.num_gpus, model.name,
                                   r.first_error.empty() ? "no candidate" : r.first_error));
  };

  if (every_gpu) {
    // Profiles with the same usable memory, compute capability and throughput figures share one
    // search (the H100 SXM and its aliases' twins).
    out.options = o;
    using Key = std::tuple<std::int64_t, int, double, double, double, double, double, double, std::int64_t>;
    std::optional<Key> last_key;
    std::optional<Plan> last_best;
    for (const auto* g : profiles_by_memory(registry)) {
      PlanOptions go = o;
      go.gpu = g;
      go.top_k = 1;
      const std::int64_t usable = usable_memory_bytes(*g, o.headroom_fraction);
      const Key key{usable,
                    g->compute_capability,
                    g->bf16_tflops,
                    g->fp8_tflops,
                    g->fp4_tflops,
                    g->hbm_bandwidth_gbps,
                    g->link_bandwidth_gbps,
                    plan_inter_node_bandwidth(go),
                    plan_gpus_per_node(go)};
      if (last_key != key) {
        const PlanResult gr = planner.run(go);
        if (gr.valid == 0) throw no_valid(gr);
        last_key = key;
        last_best.reset();
        if (!gr.plans.empty()) last_best = gr.plans.front();
      }
      go.cancel = nullptr;
      out.per_gpu.push_back({g, usable, last_best, go});
    }
    out.options.cancel = nullptr;
    return out;
  }

  if (count_gpus) {
    if (request.on_valid || html_file) throw UsageError("--csv and --html need --num-gpus");
    if (request.best_per_gpu) o.top_k = 1;
    GpuCountResult g = planner.gpu_counts(o);
    if (g.smallest == 0 || g.counts.empty())
      throw LayoutError(fmt::format("no count of {} GPUs up to {} fits {} (tried {})", o.gpu->name,
                                    g.tried.empty() ? 0 : g.tried.back(), model.name, g.tried.size()));
    o.num_gpus = g.counts.front().num_gpus;
    o.base.global_batch_size = static_cast<std::int64_t>(g.global_batch);
    out.options = o;
    out.options.cancel = nullptr;
    out.result = g.counts.front().result;
    out.gpu_counts = std::move(g);
    return out;
  }

  PlanOptions run_options = o;
  run_options.progress = request.progress;
  cli::FitMap fit_map;  // --html: every valid layout, which the planner then estimates in full
  if (request.on_valid || html_file)
    run_options.on_valid = [&](const Plan& p) {
      if (request.on_valid) request.on_valid(p, planner, o);
      if (html_file) fit_map.add(p);
    };
  out.result = planner.run(run_options);
  out.options = o;
  out.options.cancel = nullptr;  // the caller's flag need not outlive the call
  if (out.result.valid == 0) throw no_valid(out.result);
  if (out.result.fitting == 0) out.suggestions = planner.suggest(o);
  if (html_file) html_file->commit(cli::render_plan_html(model, planner, o, out.result, out.suggestions, fit_map));
  return out;
}

}  // namespace mme::commands
