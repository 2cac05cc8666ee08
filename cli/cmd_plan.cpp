// mme plan: every parallel layout of N GPUs that fits a GPU, ranked by a speed proxy. The
// search is the command layer's plan (mme/commands/plan.hpp, over mme::Planner); this file reads
// the flags and prints the table, the JSON document or the CSV stream.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <iostream>
#include <optional>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <mme/commands/documents.hpp>
#include <mme/commands/plan.hpp>
#include <mme/report/render_estimate.hpp>
#include <mme/report/render_plan.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>
#include <mme/sdk/json_text.hpp>
#include <mme/sdk/units.hpp>

#include "command.hpp"
#include "context.hpp"
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
  // The variants' names are the schema's (the --recompute-granularity knob's).
  static const std::string recompute_help = fmt::format(
      "recompute variants to try, comma separated: {} (default all three)", fmt::join(recompute_names(), ", "));
  static const std::string dp_sharding_help = fmt::format(
      "data-parallel sharding to try, comma separated (also as --data-parallel-sharding-strategy LIST): {} "
      "(the distributed optimizer), {}, {}, {} (Megatron-FSDP); default: the base setup's",
      to_string(DpSharding::kDistributedOptimizer), to_string(DpSharding::kOptim), to_string(DpSharding::kOptimGrads),
      to_string(DpSharding::kOptimGradsParams));
  // The scopes' names are the engine's (enums.py CudaGraphModule's, training_setup.cpp).
  std::string scopes = cuda_graph_modules_to_string(~std::uint32_t{0});
  for (std::size_t at = 0; (at = scopes.find(',', at)) != std::string::npos; at += 2) scopes.replace(at, 1, ", ");
  static const std::string cuda_graphs_help = fmt::format(
      "per-layer CUDA graphs to try, comma separated: off, full (the whole layer) or scopes joined by '+' "
      "({}: attn+moe_router); default: the base setup's",
      scopes);
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
      "recompute", choice_value(recompute_names()), recompute_help.c_str())(
      "dp-sharding", po::value<std::string>(), dp_sharding_help.c_str())("cuda-graphs", po::value<std::string>(),
                                                                         cuda_graphs_help.c_str())(
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

// The step-time model's figures: the calibration, the overlaps and the network figures assumed.
std::string model_line(const PlanOptions& o) {
  std::string out = fmt::format(
      "Step time: predicted from {} x {:g} TFLOP/s BF16{}, calibrated on measured runs (docs/planner.md); overlaps {}",
      o.gpu->name, o.gpu->bf16_tflops,
      o.gpu->fp8_tflops > 0 ? fmt::format(" / {:g} FP8", o.gpu->fp8_tflops) : std::string(),
      o.recipe_overlaps ? "as recipes set them (--no-overlap: the flags given)" : "as the flags give them");
  const std::vector<std::string> assumed = plan_assumed_figures(o);
  if (!assumed.empty()) out += fmt::format("; assumed: {}", fmt::join(assumed, ", "));
  return out + "\n";
}

// The figures the knobs' cost terms assume (none when no knob is searched).
std::string knob_figures_line(const PlanOptions& o) {
  std::string out;
  if (!o.optimizer_offload_fractions.empty())
    out += fmt::format("; host link {:g} GB/s per GPU, CPU optimizer {:g} parameters/s per GPU",
                       plan_host_link_bandwidth(o), o.cpu_optimizer_params_per_second);
  if (!o.cuda_graphs.empty())
    out += fmt::format("; kernel launch {:g} us, graph launch {:g} us (host time, hidden when the GPU is busier)",
                       o.kernel_launch_us, o.graph_launch_us);
  if (!o.dp_sharding.empty()) out += "; Megatron-FSDP traffic hidden under the other micro-batches' compute";
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

// Ctrl-C stops the search instead of killing the process: the first SIGINT sets the planner's
// cancellation flag (PlanRequest::cancel: the search throws InterruptedError within a second,
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
void print_every_gpu(const commands::PlanOutcome& outcome) {
  const PlanOptions& o = outcome.options;
  const ModelSpec& model = *outcome.model;
  std::string text;  // written whole: an invalid layout stays one error line and an empty stdout
  text += fmt::format(
      "mme plan: {} on {} GPUs, the best layout for each known GPU ({:g}% headroom; --gpu NAME "
      "ranks every layout for one)\n",
      model.name, o.num_gpus, o.headroom_fraction * 100);
  text += global_batch_line(o) + "\n";
  bool any_tight = false, any = false;
  text += fmt::format("{:<16} {:>9} {:>9} {:>9} {:>11}  {}\n", "GPU", "peak GiB", "free GiB", "step s", "tok/s/GPU",
                      "best layout");
  for (const auto& g : outcome.per_gpu) {
    if (!g.best) {
      text += fmt::format("{:<16} {:>9} {:>9} {:>9} {:>11}  no layout fits\n", g.gpu->name, "-", "-", "-", "-");
      continue;
    }
    any = true;
    const bool tight = is_tight(*g.best);
    any_tight = any_tight || tight;
    text += fmt::format("{:<16} {:>9.2f} {:>9.2f}{}{:>9.3g} {:>11.0f}  {}\n", g.gpu->name, to_gib(g.best->peak_bytes),
                        to_gib(static_cast<std::int64_t>(g.usable_bytes - g.best->peak_bytes)), tight ? "!" : " ",
                        g.best->score.step_seconds, g.best->score.tokens_per_second_per_gpu,
                        shell_command(outcome.planner->args_for(g.best->layout, g.options)));
  }
  if (any_tight)
    text += fmt::format(
        "\n! less than {} GiB free beyond the headroom: the fastest layout barely fits; `mme plan "
        "... --gpu NAME` lists the others\n",
        kTightHeadroomBytes >> 30);
  if (!any) text += "\nNo layout fits any known GPU; `mme plan ... --gpu NAME` shows what would make one fit.\n";
  std::cout << text;
}

// Without --num-gpus: the smallest GPU count with a fitting layout and the fastest plans at it and
// at 2x and 4x, each with its step time and GPU-hours per step.
void print_gpu_counts(const commands::PlanOutcome& outcome) {
  const GpuCountResult& g = *outcome.gpu_counts;
  const PlanOptions& o = outcome.options;
  const Planner& planner = *outcome.planner;
  std::string tried;
  for (const std::int64_t n : g.tried) tried += (tried.empty() ? "" : ", ") + std::to_string(n);
  std::cout << fmt::format(
      "mme plan: {} on {}: how many GPUs? ({:g}% headroom; --num-gpus N ranks every layout of one count)\n",
      outcome.model->name, o.gpu->name, o.headroom_fraction * 100);
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
  for (const auto& [variant, reason] : r.refused_recompute)
    std::cout << fmt::format("Not searched: {} recompute, which these flags rule out: {}\n", to_string(variant),
                             reason);
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
  std::cout << fmt::format(
      "{:>3} {:>3} {:>3} {:>3} {:>4} {:>3} {:>4} {:>6} {:>3}  {:<9} {:<10}{} {:>9} {:>9}  {:>7} {:>8} {:>9} {:>7}\n",
      "#", "TP", "PP", "VPP", "EP", "ETP", "CP", "DP", "MBS", "recompute", "split",
      commands::plan_knob_header(o, " ", false), "peak GiB", "free GiB", "bubble", "step s", "tok/s/GPU", "TFLOP/s");
  int rank = 0;
  for (const auto& p : r.plans) {
    const auto& l = p.layout;
    std::cout << fmt::format(
        "{:>3} {:>3} {:>3} {:>3} {:>4} {:>3} {:>4} {:>6} {:>3}  {:<9} {:<10}{} {:>9.2f} {:>9.2f}{} "
        "{:>6.1f}% {:>8.3g} {:>9.0f} {:>7.0f}\n",
        ++rank, l.tp, l.pp, l.vpp, l.ep, l.etp, l.cp, l.dp, l.micro_batch_size, to_string(l.recompute),
        plan_split_text(l), commands::plan_knob_cells(l, o, " ", false), to_gib(p.peak_bytes), to_gib(p.headroom_bytes),
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
  const po::variables_map vm = parse("plan", args, visible_options(), model_and_setup_hidden_options(), pos);
  const CommonSettings common = read_common(vm);
  const bool json = switch_on(vm, "json"), csv = switch_on(vm, "csv");
  commands::PlanRequest request;
  request.input.model = model_argument(vm);
  request.input.revision = flag_text(vm, "revision").value_or("");
  request.setup = setup_flags(vm);
  request.gpu = flag_text(vm, "gpu");
  request.headroom = flag_text(vm, "headroom");
  request.recompute = flag_text(vm, "recompute");
  request.dp_sharding = flag_text(vm, "dp-sharding");
  request.cuda_graphs = flag_text(vm, "cuda-graphs");
  request.max_tp = flag_text(vm, "max-tp");
  request.gpus_per_node = flag_text(vm, "gpus-per-node");
  request.inter_node_bandwidth = flag_text(vm, "inter-node-bandwidth");
  request.sort = flag_text(vm, "sort");
  request.top = flag_text(vm, "top");
  request.threads = flag_text(vm, "threads");
  request.html = flag_text(vm, "html");
  request.max_candidates = flag_text(vm, "max-candidates");
  request.no_overlap = switch_on(vm, "no-overlap");
  if (json && csv) throw UsageError("give --json or --csv, not both");
  request.best_per_gpu = !json && !csv && !request.html;

  ProgressBar bar;
  request.progress = [&bar](std::uint64_t done, std::uint64_t total, double elapsed) {
    bar.update(done, total, elapsed);
  };
  bool header = false;
  if (csv)
    request.on_valid = [&header](const Plan& p, const Planner& planner, const PlanOptions& o) {
      if (!header) std::cout << commands::plan_csv_header(o);
      header = true;
      std::cout << commands::plan_csv_row(p, planner, o);
    };
  const InterruptGuard interrupt_guard;
  g_interrupted = false;
  request.cancel = &g_interrupted;
  const commands::PlanOutcome outcome = commands::plan(request, make_context(vm, common));
  bar.clear();
  if (!outcome.per_gpu.empty()) {
    print_every_gpu(outcome);
    return 0;
  }
  if (outcome.gpu_counts && !json) {
    print_gpu_counts(outcome);
    return 0;
  }
  const PlanResult& r = outcome.result;
  const PlanOptions& o = outcome.options;
  if (csv) {
    if (!header) std::cout << commands::plan_csv_header(o);
    if (r.fitting == 0)
      std::cerr << fmt::format(
          "mme: no layout of {} x {} fits {}{}\n", o.num_gpus, o.gpu->name, outcome.model->name,
          outcome.suggestions.empty() ? "" : "; it would with " + outcome.suggestions.front().change);
    return 0;
  }
  if (json) {
    std::cout << json_text(commands::plan_document(outcome), 2) << "\n";
    return 0;
  }
  print_plan_text(*outcome.model, *outcome.planner, o, r, outcome.suggestions);
  return 0;
}

po::options_description options_plan() { return visible_options(); }

}  // namespace mme::cli
