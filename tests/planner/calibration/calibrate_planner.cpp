// mme_calibrate_planner: the step-time model against the measured runs of
// bench/accuracy/throughput_runs.csv (docs/planner.md, "Calibration"). It prints, for every row,
// the predicted and the measured step time and, with --ranks, where the measured layout ranks
// among the distinct fitting layouts (TP, PP, VPP, EP, ETP, CP) of its model, GPU count, GPU,
// sequence, batch, micro-batch and precision; with --fit it first fits the constants of
// StepTimeConstants on the rows marked "fit" (the "holdout" rows are never used by the fit) and
// reports with the fitted values. The figures in docs/planner.md come from
//   build/release/tests/bin/mme_calibrate_planner --fit --ranks
// (not run by CTest: calibration_test.cpp checks that the defaults are the fit's minimum).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <tuple>

#include <fmt/core.h>

#include <mme/sdk/error.hpp>

#include "deepseek_adapter.hpp"
#include "generic_hf_adapter.hpp"
#include "gpt_oss_adapter.hpp"
#include "layer_plugins.hpp"
#include "nemotron_h_adapter.hpp"
#include "nvidia_blackwell.hpp"
#include "nvidia_hopper.hpp"
#include "qwen_adapter.hpp"
#include "throughput_rows.hpp"

namespace {

using namespace mme;
using namespace mme::calibration;

struct Rank {
  std::size_t rank = 0, count = 0;              // among the distinct layouts that fit
  std::size_t rank_valid = 0, count_valid = 0;  // among every distinct valid layout, fit or not
  bool fits = false;
  double headroom_gib = 0;  // the measured layout's (its best split and recompute)
};

// Every valid layout of the row's search, grouped by its sizes: each group's fastest candidate
// (over splits and recompute variants) against the measured layout's group, among the groups that
// fit and among all valid ones (the step-time model's order whatever the memory engine says).
Rank rank_of(const PreparedRow& p, const StepTimeConstants& constants) {
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t>;
  std::map<Key, double> best, best_valid;
  std::map<Key, std::int64_t> headroom;
  PlanOptions o = p.setup.options;
  o.step_time = constants;
  o.top_k = 1;
  o.on_valid = [&](const Plan& plan) {
    const PlanLayout& l = plan.layout;
    const Key k{l.tp, l.pp, l.vpp, l.ep, l.etp, l.cp};
    auto keep = [&](std::map<Key, double>& m) {
      const auto it = m.find(k);
      if (it == m.end() || plan.score.step_seconds < it->second) m[k] = plan.score.step_seconds;
    };
    keep(best_valid);
    if (plan.fits) keep(best);
    const auto h = headroom.find(k);
    if (h == headroom.end() || plan.headroom_bytes > h->second) headroom[k] = plan.headroom_bytes;
  };
  (void)p.planner->run(o);
  const PlanLayout& m = p.setup.layout;
  const Key key{m.tp, m.pp, m.vpp, m.ep, m.etp, m.cp};
  Rank r;
  r.count = best.size();
  r.count_valid = best_valid.size();
  auto rank_in = [&](const std::map<Key, double>& in) -> std::size_t {
    const auto mine = in.find(key);
    if (mine == in.end()) return 0;
    return 1 + static_cast<std::size_t>(
                   std::count_if(in.begin(), in.end(), [&](const auto& e) { return e.second < mine->second; }));
  };
  r.rank = rank_in(best);
  r.rank_valid = rank_in(best_valid);
  r.fits = r.rank > 0;
  if (headroom.count(key)) r.headroom_gib = static_cast<double>(headroom[key]) / (1 << 30);
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string layout_text(const PlanLayout& l) {
  return fmt::format(
      "TP{} PP{} VPP{} EP{} ETP{} CP{}{}", l.tp, l.pp, l.vpp, l.ep, l.etp, l.cp,
      l.chunk_split ? fmt::format(" c{}/{}/{}{}", l.first_chunk_layers, l.chunk_layers, l.last_chunk_layers,
                                  l.chunk_extra_layers > 0 ? fmt::format("+{}", l.chunk_extra_layers) : std::string())
                    : std::string());
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path source = MME_SOURCE_DIR;
  bool fit = false, ranks = false, parts = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--fit")) {
      fit = true;
    } else if (!std::strcmp(argv[i], "--ranks")) {
      ranks = true;
    } else if (!std::strcmp(argv[i], "--parts")) {
      parts = true;
    } else if (!std::strcmp(argv[i], "--source-dir") && i + 1 < argc) {
      source = argv[++i];
    } else {
      std::cerr << "usage: mme_calibrate_planner [--fit] [--ranks] [--parts] [--source-dir DIR]\n";
      return 2;
    }
  }
  try {
    Registry registry;
    registry.register_plugin("adapter_deepseek", "tool", "", plugins::register_deepseek_adapter);
    registry.register_plugin("adapter_qwen", "tool", "", plugins::register_qwen_adapter);
    registry.register_plugin("adapter_generic_hf", "tool", "", plugins::register_generic_hf_adapter);
    registry.register_plugin("adapter_gpt_oss", "tool", "", plugins::register_gpt_oss_adapter);
    registry.register_plugin("adapter_nemotron_h", "tool", "", plugins::register_nemotron_h_adapter);
    test::register_layer_plugins(registry);
    registry.register_plugin("hw_nvidia_hopper", "tool", "", plugins::register_nvidia_hopper);
    registry.register_plugin("hw_nvidia_blackwell", "tool", "", plugins::register_nvidia_blackwell);

    const std::vector<ThroughputRow> rows = read_throughput_rows(source / "bench" / "accuracy");
    const std::vector<PreparedRow> train = prepare_rows(rows, registry, source, "fit");
    const std::vector<PreparedRow> holdout = prepare_rows(rows, registry, source, "holdout");
    StepTimeConstants k;
    std::cout << fmt::format(
        "defaults: gemm_bf16 {:.3f}, gemm_fp8 {:.3f}, attention {:.3f}, elementwise_passes {:.3f}; "
        "objective {:.5f} on {} fit rows\n",
        k.gemm_bf16, k.gemm_fp8, k.attention, k.elementwise_passes, fit_objective(train, k), train.size());
    if (fit) {
      k = fit_constants(train, k);
      std::cout << fmt::format(
          "fitted:   gemm_bf16 {:.3f}, gemm_fp8 {:.3f}, attention {:.3f}, elementwise_passes {:.3f}; "
          "objective {:.5f}\n",
          k.gemm_bf16, k.gemm_fp8, k.attention, k.elementwise_passes, fit_objective(train, k));
    }
    std::cout << "\n| row | model | GPUs | layout | set | measured s | predicted s | residual | "
              << (ranks ? "rank / fitting | top | free GiB | rank / valid | top |" : "")
              << "\n|---|---|---|---|---|---|---|---|" << (ranks ? "---|---|---|---|---|" : "") << "\n";
    std::map<std::string, std::vector<double>> residuals;
    for (const auto* set : {&train, &holdout}) {
      for (const PreparedRow& p : *set) {
        const double predicted = predicted_step_seconds(*p.planner, p.setup, k);
        const double residual = predicted / p.row->measured_step_seconds - 1;
        residuals[p.row->status].push_back(std::abs(residual));
        std::string rank_cells;
        if (ranks) {
          const Rank r = rank_of(p, k);
          auto pct = [](std::size_t a, std::size_t b) {
            return 100.0 * static_cast<double>(a) / static_cast<double>(b);
          };
          rank_cells = (r.fits ? fmt::format(" {} / {} | {:.0f} % |", r.rank, r.count, pct(r.rank, r.count))
                               : fmt::format(" does not fit ({} fitting) | |", r.count)) +
                       fmt::format(" {:.1f} | {} / {} | {:.0f} % |", r.headroom_gib, r.rank_valid, r.count_valid,
                                   pct(r.rank_valid, r.count_valid));
        }
        std::cout << fmt::format("| {} | {} | {} x {} | {} | {} | {:.2f} | {:.2f} | {:+.1f} % |{}\n", p.row->row,
                                 p.row->label, p.setup.options.num_gpus, p.row->gpu_label, layout_text(p.setup.layout),
                                 p.row->status, p.row->measured_step_seconds, predicted, 100 * residual, rank_cells);
      }
    }
    if (parts) {
      // What each prediction is made of: per micro-batch on the slowest rank, and per step.
      std::cout << "\n| row | m | bubble | stage s | GEMM | attention | memory-bound | recompute | TP | EP | CP | PP | "
                   "launch | act. offload | DP s | optimizer s | FSDP s | offload s "
                   "|\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
      for (const auto* set : {&train, &holdout})
        for (const PreparedRow& p : *set) {
          PlanOptions o = p.setup.options;
          o.step_time = k;
          const PlanScore s = p.planner->score(p.setup.layout, o);
          std::cout << fmt::format(
              "| {} | {:.0f} | {:.1f} % | {:.4f} | {:.4f} | {:.4f} | {:.4f} | {:.4f} | {:.4f} | {:.4f} | {:.4f} | "
              "{:.4f} | "
              "{:.4f} | {:.4f} | {:.3f} | {:.3f} | {:.3f} | {:.3f} |\n",
              p.row->row, s.micro_batches, 100 * s.bubble, s.stage_seconds, s.gemm_seconds, s.attention_seconds,
              s.elementwise_seconds, s.recompute_seconds, s.tp_seconds, s.ep_seconds, s.cp_seconds, s.pp_seconds,
              s.launch_seconds, s.activation_offload_seconds, s.dp_seconds, s.optimizer_seconds, s.fsdp_seconds,
              s.offload_seconds);
        }
    }
    for (const ThroughputRow& r : rows)
      if (!r.modelled())
        std::cout << fmt::format("| {} | {} | | | {} | | | | {}\n", r.row, r.label, r.status, ranks ? "| | | | |" : "");
    for (const auto& [set, v] : residuals)
      std::cout << fmt::format("\n{}: median |residual| {:.1f} %, largest {:.1f} % ({} rows)", set, 100 * median(v),
                               100 * *std::max_element(v.begin(), v.end()), v.size());
    std::cout << "\n";
  } catch (const Error& e) {
    std::cerr << "mme_calibrate_planner: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
