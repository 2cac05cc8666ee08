// mme plan: every parallel layout of N GPUs that fits a GPU, ranked by a speed proxy. The
// search is mme::Planner (framework/include/mme/planner/planner.hpp); this file reads the flags and
// prints the table, the JSON document or the CSV stream.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <iostream>
#include <optional>
#include <sstream>
#include <tuple>

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/model_source.hpp>
#include <mme/planner/planner.hpp>
#include <mme/report/render_estimate.hpp>
#include <mme/report/render_html.hpp>
#include <mme/report/render_plan.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>
#include <mme/sdk/json_text.hpp>
#include <mme/sdk/units.hpp>

#include "command.hpp"
#include "context.hpp"
#include "estimate_inputs.hpp"
#include "estimate_options.hpp"
#include <unistd.h>

namespace mme::cli {

namespace {

std::vector<std::string> recompute_names() {
  std::vector<std::string> out;
  for (const RecomputeVariant v : all_recompute_variants()) out.emplace_back(to_string(v));
  return out;
}

std::vector<std::string> sort_key_names() {
  std::vector<std::string> out;
  for (const PlanSortKey k :
       {PlanSortKey::kScore, PlanSortKey::kPeak, PlanSortKey::kBubble, PlanSortKey::kCommunication})
    out.emplace_back(to_string(k));
  return out;
}

po::options_description visible_options() {
  po::options_description d("Options");
  po::options_description hidden;
  d.add_options()("json", po::bool_switch(), "one JSON document on stdout (docs/planner.md)")(
      "csv", po::bool_switch(), "stream every valid layout as CSV on stdout, in enumeration order")(
      "html", file_value(), "also write an HTML report to FILE: a fit map of the searched space and the top plans")(
      "gpu", po::value<std::string>(),
      "the GPU to fit (name or alias, see `mme hardware`); without it: the best layout for each known GPU "
      "(--json/--csv/--html: the one with the most memory)")(
      "headroom", po::value<std::string>(),
      "share of GPU memory kept free: a fraction (0.05) or a percentage (5%); default 5%")(
      "recompute", choice_value(recompute_names()),
      "recompute variants to try, comma separated: none, selective, full (default all three)")(
      "dp-sharding", po::value<std::string>(),
      "data-parallel sharding to try, comma separated (also as --data-parallel-sharding-strategy LIST): dist_opt "
      "(the distributed optimizer), optim, optim_grads, optim_grads_params (Megatron-FSDP); default: the base "
      "setup's")("cuda-graphs", po::value<std::string>(),
                 "per-layer CUDA graphs to try, comma separated: off, full (the whole layer) or scopes joined by '+' "
                 "(attn, mlp, moe, moe_router, moe_preprocess: attn+moe_router); default: the base setup's")(
      "max-tp", po::value<std::string>(), "largest TP and ETP (default: 8, or the NVLink domain if smaller)")(
      "gpus-per-node", po::value<std::string>(),
      "GPUs of one NVLink domain: groups beyond it use --inter-node-bandwidth (default: the GPU profile's, else 8)")(
      "inter-node-bandwidth", po::value<std::string>(),
      "per-GPU bandwidth between nodes in GB/s for the step-time model (default: the GPU profile's, else 50)")(
      "no-overlap", po::bool_switch(),
      "leave the communication overlaps to the base flags instead of turning on --overlap-grad-reduce, "
      "--overlap-param-gather and --tp-comm-overlap in every candidate, as Megatron-Bridge's recipes do")(
      "max-candidates", po::value<std::string>(),
      "judge at most N candidates (default 200000000; 0: no bound): a larger space is cut at a slice of "
      "(TP, CP, EP, ETP) and the report says what was skipped")(
      "sort", choice_value(sort_key_names()), "order of the plans: score (default), peak, bubble, comm")(
      "top", po::value<std::string>(), "how many plans to show (default 10)")("threads", po::value<std::string>(),
                                                                              "worker threads (default: every core)")(
      "revision", po::value<std::string>(), "hub revision to download (default main)");
  add_setup_options(d, hidden);
  add_hardware_file_option(d);
  d.add(common_options());
  return d;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::stringstream ss(text);
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    out.push_back(item);
  }
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
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
  std::string header(const char* sep, bool csv) const {
    std::string out;
    if (sharding) out += sep + cell("dp_sharding", 18, false, csv);
    if (offload) out += sep + cell(csv ? "optimizer_offload_fraction" : "offload", 7, true, csv);
    if (graphs) out += sep + cell("cuda_graphs", 14, false, csv);
    return out;
  }
  std::string row(const PlanLayout& l, const char* sep, bool csv) const {
    const PlanKnobs& k = l.knobs;
    std::string out;
    if (sharding) out += sep + cell(k.dp_sharding ? to_string(*k.dp_sharding) : "", 18, false, csv);
    if (offload) out += sep + cell(fmt::format("{:g}", k.optimizer_offload_fraction.value_or(0.0)), 7, true, csv);
    if (graphs) out += sep + cell(k.cuda_graphs ? to_string(*k.cuda_graphs) : "", 14, false, csv);
    return out;
  }
};

// The step-time model's figures: the calibration, the overlaps and the network figures assumed.
std::string model_line(const PlanOptions& o) {
  std::string out = fmt::format(
      "Step time: predicted from {} x {:g} TFLOP/s BF16{}, calibrated on measured runs (docs/planner.md); overlaps {}",
      o.gpu->name, o.gpu->bf16_tflops,
      o.gpu->fp8_tflops > 0 ? fmt::format(" / {:g} FP8", o.gpu->fp8_tflops) : std::string(),
      o.recipe_overlaps ? "as recipes set them (--no-overlap: the flags given)" : "as the flags give them");
  const std::vector<std::string> assumed = plan_assumed_figures(o);
  if (!assumed.empty()) {
    out += "; assumed: ";
    for (std::size_t i = 0; i < assumed.size(); ++i) out += (i ? ", " : "") + assumed[i];
  }
  return out + "\n";
}

// The figures the knobs' cost terms assume (none when no knob is searched).
std::string knob_figures_line(const PlanOptions& o) {
  const KnobColumns k(o);
  std::string out;
  if (k.offload)
    out += fmt::format("; host link {:g} GB/s per GPU, CPU optimizer {:g} parameters/s per GPU",
                       plan_host_link_bandwidth(o), o.cpu_optimizer_params_per_second);
  if (k.graphs)
    out += fmt::format("; kernel launch {:g} us, graph launch {:g} us (host time, hidden when the GPU is busier)",
                       o.kernel_launch_us, o.graph_launch_us);
  if (k.sharding) out += "; Megatron-FSDP traffic hidden under the other micro-batches' compute";
  return out.empty() ? "" : "Cost figures assumed: " + out.substr(2) + " (docs/planner.md)\n";
}

// A progress bar on stderr when it is a terminal and the search has run for a second.
class ProgressBar {
 public:
  ProgressBar() : enabled_(::isatty(STDERR_FILENO) != 0) {}
  ~ProgressBar() { clear(); }
  void update(std::uint64_t done, std::uint64_t total, double elapsed) {
    if (!enabled_ || elapsed < 1.0 || total == 0) return;
    const double f = static_cast<double>(done) / static_cast<double>(total);
    const int width = 30;
    const int full = static_cast<int>(f * width);
    std::string bar(static_cast<std::size_t>(full), '#');
    bar.resize(width, '.');
    std::cerr << fmt::format("\r[{}] {:3.0f}%  {} / {} layouts  {:.1f} s", bar, 100 * f, thousands(done),
                             thousands(total), elapsed)
              << std::flush;
    drawn_ = true;
  }
  void clear() {
    if (drawn_) std::cerr << "\r\033[K" << std::flush;
    drawn_ = false;
  }

 private:
  bool enabled_;
  bool drawn_ = false;
};

bool switch_on(const po::variables_map& vm, const char* name) { return vm.count(name) && vm[name].as<bool>(); }

// Ctrl-C stops the search instead of killing the process: the first SIGINT sets the planner's
// cancellation flag (PlanOptions::cancel: the search throws InterruptedError within a second,
// which exits 130 with one error line); a second one kills as usual (SA_RESETHAND).
std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted.store(true, std::memory_order_relaxed); }

class InterruptGuard {
 public:
  InterruptGuard() {
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    installed_ = ::sigaction(SIGINT, &sa, &previous_) == 0;
  }
  ~InterruptGuard() {
    if (installed_) ::sigaction(SIGINT, &previous_, nullptr);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct sigaction previous_ {};
  bool installed_ = false;
};

// The line saying which global batch the speed proxy assumed.
std::string global_batch_line(const PlanOptions& o) {
  if (o.base.global_batch_size > 0)
    return fmt::format("Global batch: {} sequences (--global-batch-size)\n", o.base.global_batch_size);
  const std::int64_t largest = *std::max_element(o.micro_batch_sizes.begin(), o.micro_batch_sizes.end());
  return fmt::format(
      "Global batch: {:.0f} sequences assumed ({} GPUs x the largest micro-batch size {}; "
      "--global-batch-size sets it): the bubble and the score follow from it\n",
      plan_global_batch(o), o.num_gpus, largest);
}

// The knob lists (--dp-sharding / --data-parallel-sharding-strategy, --optimizer-offload-fraction /
// --optimizer-cpu-offload-fraction, --cuda-graphs): taken out of the setup flags, which take
// one value each.
void read_knob_lists(po::variables_map& vm, PlanOptions& o) {
  if (const auto v = get_aliased(vm, {"dp-sharding", "data-parallel-sharding-strategy"})) {
    for (const auto& item : split_list(*v)) {
      const DpSharding d = parse_dp_sharding(item);
      if (std::find(o.dp_sharding.begin(), o.dp_sharding.end(), d) == o.dp_sharding.end()) o.dp_sharding.push_back(d);
    }
    vm.erase("dp-sharding");
    vm.erase("data-parallel-sharding-strategy");
  }
  if (const auto v = get_aliased(vm, {"optimizer-cpu-offload-fraction", "optimizer-offload-fraction"})) {
    for (const auto& item : split_list(*v)) {
      const double f = parse_double("--optimizer-offload-fraction", item, 0, 1);
      if (std::find(o.optimizer_offload_fractions.begin(), o.optimizer_offload_fractions.end(), f) ==
          o.optimizer_offload_fractions.end())
        o.optimizer_offload_fractions.push_back(f);
    }
    vm.erase("optimizer-cpu-offload-fraction");
    vm.erase("optimizer-offload-fraction");
  }
  if (vm.count("cuda-graphs")) {
    for (const auto& item : split_list(vm["cuda-graphs"].as<std::string>())) {
      const CudaGraphChoice g = parse_cuda_graph_choice(item);
      if (std::find(o.cuda_graphs.begin(), o.cuda_graphs.end(), g) == o.cuda_graphs.end()) o.cuda_graphs.push_back(g);
    }
    if (vm.count("cuda-graph-modules"))
      throw UsageError("--cuda-graph-modules: give the scopes to try in --cuda-graphs (off,attn+moe_router,...)");
  }
}

}  // namespace

void help_plan(std::ostream& out) {
  out << "Usage: mme plan MODEL --num-gpus N [--gpu NAME] [options]\n"
         "       mme plan MODEL --gpu NAME [options]     (how many GPUs: no --num-gpus)\n\n"
         "Searches every parallel layout Megatron-LM accepts for N GPUs (TP within a node, PP with\n"
         "its first/last-stage splits and, with VPP, lighter first and last chunks, EP, ETP, CP, DP,\n"
         "micro-batch sizes, recompute), keeps those whose peak fits the GPU with the headroom, and\n"
         "ranks them by a step-time model calibrated on measured runs (each GEMM, attention,\n"
         "memory-bound kernels, TP/EP/CP/DP communication and what overlaps it, the pipeline\n"
         "bubble; docs/planner.md): step time, tokens/s/GPU and model TFLOP/s/GPU in\n"
         "Megatron-Bridge's convention, and why each plan ranks where it does. Without --num-gpus:\n"
         "the smallest GPU count that fits and the fastest plans at 1x, 2x and 4x of it. Sequence\n"
         "parallelism is on with TP > 1, the distributed optimizer and the recipes' overlaps\n"
         "(--no-overlap: the flags given) are on; Ctrl-C stops the search. Every other\n"
         "`mme estimate` flag applies to all candidates; --tp, --pp, --vpp, --ep, --etp and --cp fix\n"
         "that size instead of searching it; --micro-batch-size takes a list (default 1,2,4). The\n"
         "pipeline-split and recompute-granularity flags are the planner's to choose and are refused.\n"
         "The memory-for-time knobs are searched when given as lists, each ranked with its cost:\n"
         "--dp-sharding dist_opt,optim,optim_grads,optim_grads_params (Megatron-FSDP),\n"
         "--optimizer-offload-fraction 0,0.5,1 (HybridDeviceOptimizer) and --cuda-graphs off,full,attn\n"
         "(combinations Megatron-LM refuses, such as CUDA graphs with full recompute, count as invalid).\n\n"
      << visible_options() << "\nExample:\n  mme plan deepseek-ai/DeepSeek-V3 --num-gpus 1024 --gpu H100\n";
}

namespace {

// Without --gpu: the best layout for each known GPU (profiles with the same usable memory share
// one search), then --gpu for the full ranking of one.
int print_every_gpu(const Registry& registry, const ModelSpec& model, const Planner& planner, const PlanOptions& o) {
  // Without --gpu: the best layout for each known GPU (profiles with the same usable memory
  // share one search), then --gpu for the full ranking of one.
  std::string text;  // written whole: an invalid layout stays one error line and an empty stdout
  std::vector<const HardwareProfile*> gpus;
  for (const auto& h : registry.hardware()) gpus.push_back(h.object.get());
  std::stable_sort(gpus.begin(), gpus.end(),
                   [](const auto* a, const auto* b) { return a->memory_bytes < b->memory_bytes; });
  text += fmt::format(
      "mme plan: {} on {} GPUs, the best layout for each known GPU ({:g}% headroom; --gpu NAME "
      "ranks every layout for one)\n",
      model.name, o.num_gpus, o.headroom_fraction * 100);
  text += global_batch_line(o) + "\n";
  bool any_tight = false;
  text += fmt::format("{:<16} {:>9} {:>9} {:>9} {:>11}  {}\n", "GPU", "peak GiB", "free GiB", "step s", "tok/s/GPU",
                      "best layout");
  // Profiles with the same usable memory, compute capability and throughput figures share one
  // search (the H100 SXM and its aliases' twins).
  using Key = std::tuple<std::int64_t, int, double, double, double, double, double, double, std::int64_t>;
  std::optional<Key> last_key;
  std::optional<Plan> last_best;
  bool any = false;
  for (const auto* g : gpus) {
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
      if (gr.valid == 0)
        throw LayoutError(fmt::format("no layout of {} GPUs is valid for {}: {}", o.num_gpus, model.name,
                                      gr.first_error.empty() ? "no candidate" : gr.first_error));
      last_key = key;
      last_best.reset();
      if (!gr.plans.empty()) last_best = gr.plans.front();
    }
    if (!last_best) {
      text += fmt::format("{:<16} {:>9} {:>9} {:>9} {:>11}  no layout fits\n", g->name, "-", "-", "-", "-");
      continue;
    }
    any = true;
    const bool tight = is_tight(*last_best);
    any_tight = any_tight || tight;
    text += fmt::format("{:<16} {:>9.2f} {:>9.2f}{}{:>9.3g} {:>11.0f}  {}\n", g->name, to_gib(last_best->peak_bytes),
                        to_gib(static_cast<std::int64_t>(usable - last_best->peak_bytes)), tight ? "!" : " ",
                        last_best->score.step_seconds, last_best->score.tokens_per_second_per_gpu,
                        shell_command(planner.args_for(last_best->layout, go)));
  }
  if (any_tight)
    text += fmt::format(
        "\n! less than {} GiB free beyond the headroom: the fastest layout barely fits; `mme plan "
        "... --gpu NAME` lists the others\n",
        kTightHeadroomBytes >> 30);
  if (!any) text += "\nNo layout fits any known GPU; `mme plan ... --gpu NAME` shows what would make one fit.\n";
  std::cout << text;
  return 0;
}

// Without --num-gpus: the smallest GPU count with a fitting layout and the fastest plans at it and
// at 2x and 4x, each with its step time and GPU-hours per step.
int print_gpu_counts(const ModelSpec& model, const Planner& planner, PlanOptions o, bool json) {
  o.top_k = json ? o.top_k : 1;
  const GpuCountResult g = planner.gpu_counts(o);
  if (g.smallest == 0 || g.counts.empty())
    throw LayoutError(fmt::format("no count of {} GPUs up to {} fits {} (tried {})", o.gpu->name,
                                  g.tried.empty() ? 0 : g.tried.back(), model.name, g.tried.size()));
  o.num_gpus = g.counts.front().num_gpus;
  o.base.global_batch_size = static_cast<std::int64_t>(g.global_batch);
  if (json) {
    nlohmann::json j = plan_result_to_json(model, planner, o, g.counts.front().result, {});
    j["global_batch_assumed"] = g.global_batch_assumed;
    j["gpu_counts"] = gpu_counts_to_json(planner, o, g);
    std::cout << json_text(j, 2) << "\n";
    return 0;
  }
  std::string tried;
  for (const std::int64_t n : g.tried) tried += (tried.empty() ? "" : ", ") + std::to_string(n);
  std::cout << fmt::format(
      "mme plan: {} on {}: how many GPUs? ({:g}% headroom; --num-gpus N ranks every layout of one count)\n", model.name,
      o.gpu->name, o.headroom_fraction * 100);
  std::cout << fmt::format("The smallest count with a fitting layout: {} GPUs (tried {})\n", g.smallest, tried);
  std::cout << (g.global_batch_assumed
                    ? fmt::format("Global batch: {:.0f} sequences for every count, assumed (the largest count x the "
                                  "largest micro-batch size; --global-batch-size sets it)\n",
                                  g.global_batch)
                    : fmt::format("Global batch: {:.0f} sequences (--global-batch-size)\n", g.global_batch));
  std::cout << model_line(o) << "\n";
  std::cout << fmt::format("{:>7} {:>9} {:>11} {:>10} {:>8} {:>9}  {}\n", "GPUs", "step s", "GPU-h/step", "tok/s/GPU",
                           "TFLOP/s", "free GiB", "fastest layout");
  std::string why;
  for (const GpuCountPlan& c : g.counts) {
    PlanOptions at = o;
    at.num_gpus = c.num_gpus;
    if (c.result.plans.empty()) {
      std::cout << fmt::format("{:>7} {:>9} {:>11} {:>10} {:>8} {:>9}  no layout fits\n", c.num_gpus, "-", "-", "-",
                               "-", "-");
      continue;
    }
    const Plan& p = c.result.plans.front();
    std::cout << fmt::format("{:>7} {:>9.3g} {:>11.3g} {:>10.0f} {:>8.0f} {:>9.2f}  {}\n", c.num_gpus,
                             p.score.step_seconds, p.score.step_seconds * static_cast<double>(c.num_gpus) / 3600,
                             p.score.tokens_per_second_per_gpu, p.score.model_tflops_per_gpu, to_gib(p.headroom_bytes),
                             shell_command(planner.args_for(p.layout, at)));
    why += fmt::format("{:>7}  {}\n", c.num_gpus, why_line(p));
  }
  std::cout << "\nWhy these plans:\n" << why;
  return 0;
}

// --json: the plans, counts and, when nothing fits, the smallest peak and the suggestions.
void print_plan_json(const ModelSpec& model, const Planner& planner, const PlanOptions& o, const PlanResult& r,
                     const std::vector<PlanSuggestion>& suggestions) {
  std::cout << json_text(plan_result_to_json(model, planner, o, r, suggestions), 2) << "\n";
}

// The text report: the counts, the ranked table and the best layout's command (or, when nothing
// fits, the smallest peak and the changes that would make one fit).
void print_plan_text(const ModelSpec& model, const Planner& planner, const PlanOptions& o, const PlanResult& r,
                     const std::vector<PlanSuggestion>& suggestions) {
  std::cout << fmt::format("mme plan: {} on {} x {} ({} usable per GPU, {:g}% headroom)\n", model.name, o.num_gpus,
                           o.gpu->name, format_bytes(r.usable_bytes), o.headroom_fraction * 100);
  std::cout << fmt::format("{} layouts evaluated ({} estimated), {} valid, {} fit ({:.2f} s, {} thread{})\n",
                           thousands(r.evaluated), thousands(r.estimated), thousands(r.valid), thousands(r.fitting),
                           r.elapsed_s, r.threads, r.threads == 1 ? "" : "s");
  if (r.skipped_slices > 0)
    std::cout << fmt::format(
        "Work bound: {} more candidates in {} slices from {} on were not judged (--max-candidates {}; 0 "
        "lifts the bound, --tp/--cp/--ep/--pp narrow the search)\n",
        thousands(r.skipped_candidates), thousands(r.skipped_slices), r.first_skipped, o.max_candidates);
  std::cout << global_batch_line(o) << model_line(o) << knob_figures_line(o);
  if (r.fitting == 0) {
    const Plan& sm = *r.smallest;
    std::cout << fmt::format("\nNo layout fits. The smallest peak is {} ({} short), with\n  mme estimate {} {}\n",
                             format_bytes(sm.peak_bytes), format_bytes(-sm.headroom_bytes), shell_quote(model.name),
                             shell_command(planner.args_for(sm.layout, o)));
    if (suggestions.empty()) {
      std::cout << "No single change tried (full recompute, micro-batch size 1, up to 64x the GPUs, a sequence down "
                   "to 64 tokens) makes one fit.\n";
    } else {
      std::cout << "\nSmallest changes that would make one fit (each with a layout that fits; `mme plan` with the\n"
                   "change ranks them all):\n";
      for (const auto& s : suggestions)
        std::cout << fmt::format("  {}\n    peak {}: mme estimate {} {}\n", s.change, format_bytes(s.plan.peak_bytes),
                                 shell_quote(model.name), shell_command(s.args));
    }
    return;
  }
  std::cout << fmt::format("\nTop {} by {}:\n\n", r.plans.size(), to_string(o.sort));
  const KnobColumns knobs(o);
  std::cout << fmt::format(
      "{:>3} {:>3} {:>3} {:>3} {:>4} {:>3} {:>4} {:>6} {:>3}  {:<9} {:<10}{} {:>9} {:>9}  {:>7} {:>8} {:>9} {:>7}\n",
      "#", "TP", "PP", "VPP", "EP", "ETP", "CP", "DP", "MBS", "recompute", "split", knobs.header(" ", false),
      "peak GiB", "free GiB", "bubble", "step s", "tok/s/GPU", "TFLOP/s");
  int rank = 0;
  for (const auto& p : r.plans) {
    const auto& l = p.layout;
    std::cout << fmt::format(
        "{:>3} {:>3} {:>3} {:>3} {:>4} {:>3} {:>4} {:>6} {:>3}  {:<9} {:<10}{} {:>9.2f} {:>9.2f}{} "
        "{:>6.1f}% {:>8.3g} {:>9.0f} {:>7.0f}\n",
        ++rank, l.tp, l.pp, l.vpp, l.ep, l.etp, l.cp, l.dp, l.micro_batch_size, to_string(l.recompute),
        plan_split_text(l), knobs.row(l, " ", false), to_gib(p.peak_bytes), to_gib(p.headroom_bytes),
        is_tight(p) ? "!" : " ", 100 * p.score.bubble, p.score.step_seconds, p.score.tokens_per_second_per_gpu,
        p.score.model_tflops_per_gpu);
  }
  std::cout << "\nWhy this rank:\n";
  rank = 0;
  for (const auto& p : r.plans) std::cout << fmt::format("{:>3}  {}\n", ++rank, why_line(p));
  const Plan& best = r.plans.front();
  if (std::any_of(r.plans.begin(), r.plans.end(), [](const Plan& p) { return is_tight(p); }))
    std::cout << fmt::format(
        "\n! less than {} GiB free beyond the {:g}% headroom: a longer sequence, another buffer "
        "or fragmentation may not fit\n",
        kTightHeadroomBytes >> 30, o.headroom_fraction * 100);
  std::cout << fmt::format("\nBest{}:\n  mme estimate {} {}\n",
                           is_tight(best) ? fmt::format(" (tight: {:.2f} GiB free)", to_gib(best.headroom_bytes)) : "",
                           shell_quote(model.name), shell_command(planner.args_for(best.layout, o)));
  if (is_tight(best)) {
    const auto roomy = std::find_if(r.plans.begin(), r.plans.end(), [](const Plan& p) { return !is_tight(p); });
    if (roomy == r.plans.end())
      std::cout << fmt::format("No plan listed leaves {} GiB free (--sort peak lists the roomiest).\n",
                               kTightHeadroomBytes >> 30);
    else
      std::cout << fmt::format("The best with at least {} GiB free (#{}, {:.2f} GiB free):\n  mme estimate {} {}\n",
                               kTightHeadroomBytes >> 30, roomy - r.plans.begin() + 1, to_gib(roomy->headroom_bytes),
                               shell_quote(model.name), shell_command(planner.args_for(roomy->layout, o)));
  }
}

}  // namespace

int run_plan(const std::vector<std::string>& args) {
  po::positional_options_description pos;
  pos.add("model", 1);
  po::variables_map vm = parse("plan", args, visible_options(), model_and_setup_hidden_options(), pos);
  const CommonSettings common = read_common(vm);
  // The model and the setup as every command that takes a model reads them (estimate_inputs.hpp);
  // plan takes MODEL only, and reads the setup once the list flags are out of the way.
  EstimateRequest request = read_model_source(vm, model_argument(vm), InputRules{"plan", false, false});
  const auto gpus_text = get_aliased(vm, {"num-gpus", "world-size"});
  // Without --num-gpus: how many GPUs of --gpu the model needs.
  const bool count_gpus = !gpus_text;
  if (count_gpus && !vm.count("gpu"))
    throw UsageError("plan needs --num-gpus N, or --gpu NAME to find how many GPUs the model needs");
  const bool json = switch_on(vm, "json"), csv = switch_on(vm, "csv");
  if (json && csv) throw UsageError("give --json or --csv, not both");
  std::optional<OutputFile> html_file;  // an unwritable path fails now, before the search
  if (vm.count("html")) html_file.emplace(vm["html"].as<std::string>(), "--html");

  // What the planner chooses itself.
  for (const char* name :
       {"num-layers-in-first-pipeline-stage", "decoder-first-pipeline-num-layers", "num-layers-in-last-pipeline-stage",
        "decoder-last-pipeline-num-layers", "pipeline-layout", "pipeline-model-parallel-layout",
        "num-layers-per-virtual-pipeline-stage", "recompute-granularity", "recompute-method", "recompute-num-layers"})
    if (vm.count(name))
      throw UsageError(
          fmt::format("--{}: plan chooses the pipeline split and recompute itself (use --pp, --vpp, "
                      "--recompute to restrict the search)",
                      name));
  for (const char* name : {"account-for-embedding-in-pipeline-split", "account-for-loss-in-pipeline-split",
                           "no-sequence-parallel", "no-distributed-optimizer"})
    if (switch_on(vm, name))
      throw UsageError(
          fmt::format("--{}: plan keeps sequence parallelism (TP > 1) and the distributed optimizer on "
                      "and chooses the pipeline split (first/last-stage counts, --account-for-* and layout "
                      "strings) itself",
                      name));

  PlanOptions o;
  if (gpus_text) o.num_gpus = parse_int("--num-gpus", *gpus_text, 1, kMaxWorldSize);
  if (vm.count("micro-batch-size")) {
    o.micro_batch_sizes.clear();
    for (const auto& item : split_list(vm["micro-batch-size"].as<std::string>())) {
      const std::int64_t b = parse_int("--micro-batch-size", item, 1, kMaxSequenceSize);
      if (std::find(o.micro_batch_sizes.begin(), o.micro_batch_sizes.end(), b) == o.micro_batch_sizes.end())
        o.micro_batch_sizes.push_back(b);
    }
    vm.erase("micro-batch-size");
  }
  if (vm.count("recompute")) {
    o.recompute.clear();
    for (const auto& item : split_list(vm["recompute"].as<std::string>())) {
      const RecomputeVariant v = parse_recompute_variant(item);
      if (std::find(o.recompute.begin(), o.recompute.end(), v) == o.recompute.end()) o.recompute.push_back(v);
    }
  }
  auto fixed = [&](std::initializer_list<const char*> names, std::optional<std::int64_t>& into) {
    if (auto v = get_aliased(vm, names)) into = parse_int(fmt::format("--{}", *names.begin()), *v, 1, kMaxParallelSize);
  };
  fixed({"tp", "tensor-model-parallel-size"}, o.tp);
  fixed({"pp", "pipeline-model-parallel-size"}, o.pp);
  fixed({"vpp", "virtual-pipeline-model-parallel-size", "num-virtual-stages-per-pipeline-rank"}, o.vpp);
  fixed({"ep", "expert-model-parallel-size"}, o.ep);
  fixed({"etp", "expert-tensor-parallel-size"}, o.etp);
  fixed({"cp", "context-parallel-size"}, o.cp);
  read_knob_lists(vm, o);
  read_request_setup(vm, request);
  o.base = request.setup;
  if (vm.count("headroom")) o.headroom_fraction = parse_headroom(vm["headroom"].as<std::string>());
  if (vm.count("gpus-per-node"))
    o.gpus_per_node = parse_int("--gpus-per-node", vm["gpus-per-node"].as<std::string>(), 1, kMaxParallelSize);
  if (vm.count("max-tp")) o.max_tp = parse_int("--max-tp", vm["max-tp"].as<std::string>(), 1, kMaxParallelSize);
  if (vm.count("inter-node-bandwidth"))
    o.inter_node_bandwidth_gbps =
        parse_double("--inter-node-bandwidth", vm["inter-node-bandwidth"].as<std::string>(), 1e-3, 1e9);
  o.recipe_overlaps = !switch_on(vm, "no-overlap");
  if (vm.count("max-candidates"))
    o.max_candidates = static_cast<std::uint64_t>(
        parse_int("--max-candidates", vm["max-candidates"].as<std::string>(), 0, std::int64_t{1} << 62));
  if (vm.count("sort")) o.sort = parse_plan_sort_key(vm["sort"].as<std::string>());
  if (vm.count("top")) o.top_k = static_cast<std::size_t>(parse_int("--top", vm["top"].as<std::string>(), 1, 100000));
  if (vm.count("threads"))
    o.threads = static_cast<unsigned>(parse_int("--threads", vm["threads"].as<std::string>(), 1, 4096));

  Registry registry;
  use_hardware_files(vm);
  load_registry(registry, common);
  if (vm.count("gpu")) {
    o.gpu = request_gpu(request, vm, registry);
  } else {
    for (const auto& h : registry.hardware()) {
      const HardwareProfile* c = h.object.get();
      if (!o.gpu || c->memory_bytes > o.gpu->memory_bytes ||
          (c->memory_bytes == o.gpu->memory_bytes && c->name < o.gpu->name))
        o.gpu = c;
    }
    if (!o.gpu) throw UsageError("no GPU profile is loaded (see `mme plugins`); give --gpu");
  }
  const bool every_gpu = !vm.count("gpu") && !json && !csv && !html_file;
  if (!vm.count("gpu") && !every_gpu)
    spdlog::warn("no --gpu: planning for {}, the GPU with the most memory (give --gpu NAME to choose)", o.gpu->name);
  std::vector<std::string> assumptions;  // only launch flags make any, and plan takes none
  const ModelSpec model = load_request_model(request, vm, registry, assumptions);
  const Planner planner(model, registry);
  const InterruptGuard interrupt_guard;
  g_interrupted = false;
  o.cancel = &g_interrupted;

  if (every_gpu) return print_every_gpu(registry, model, planner, o);
  if (count_gpus) {
    if (csv || html_file) throw UsageError("--csv and --html need --num-gpus");
    return print_gpu_counts(model, planner, o, json);
  }

  ProgressBar bar;
  o.progress = [&bar](std::uint64_t done, std::uint64_t total, double elapsed) { bar.update(done, total, elapsed); };
  if (csv) {
    const KnobColumns knobs(o);
    std::cout << "ordinal,tp,pp,vpp,ep,etp,cp,dp,micro_batch_size,recompute,first_stage_layers,middle_stage_layers,"
                 "last_stage_layers"
              << knobs.header(",", true)
              << ",peak_bytes,headroom_bytes,fits,score,bubble,step_seconds,tokens_per_second_per_gpu,"
                 "model_tflops_per_gpu,args\n";
    o.on_valid = [&, knobs](const Plan& p) {
      const auto& l = p.layout;
      std::cout << fmt::format(
          "{},{},{},{},{},{},{},{},{},{},{},{},{}{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{}\n", p.ordinal, l.tp,
          l.pp, l.vpp, l.ep, l.etp, l.cp, l.dp, l.micro_batch_size, to_string(l.recompute), l.first_stage_layers,
          l.middle_stage_layers, l.last_stage_layers, knobs.row(l, ",", true), p.peak_bytes, p.headroom_bytes,
          p.fits ? "true" : "false", p.score.score, p.score.bubble, p.score.step_seconds,
          p.score.tokens_per_second_per_gpu, p.score.model_tflops_per_gpu,
          csv_field(shell_command(planner.args_for(l, o))));
    };
  }
  FitMap fit_map;  // --html: every valid layout, which the planner then estimates in full
  if (html_file)
    o.on_valid = [&fit_map, csv_row = std::move(o.on_valid)](const Plan& p) {
      if (csv_row) csv_row(p);
      fit_map.add(p);
    };
  const PlanResult r = planner.run(o);
  bar.clear();
  if (r.valid == 0)
    throw LayoutError(fmt::format("no layout of {} GPUs is valid for {}: {}", o.num_gpus, model.name,
                                  r.first_error.empty() ? "no candidate" : r.first_error));
  std::vector<PlanSuggestion> suggestions;
  if (r.fitting == 0) suggestions = planner.suggest(o);
  if (html_file) html_file->commit(render_plan_html(model, planner, o, r, suggestions, fit_map));
  if (csv) {
    if (r.fitting == 0)
      std::cerr << fmt::format("mme: no layout of {} x {} fits {}{}\n", o.num_gpus, o.gpu->name, model.name,
                               suggestions.empty() ? "" : "; it would with " + suggestions.front().change);
    return 0;
  }

  if (json) {
    print_plan_json(model, planner, o, r, suggestions);
    return 0;
  }
  print_plan_text(model, planner, o, r, suggestions);
  return 0;
}

po::options_description options_plan() { return visible_options(); }

}  // namespace mme::cli
