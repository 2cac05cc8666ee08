// Renderers of an Estimate: the seed tool's text layout (with truthful GiB labels) and the
// schema_version 1 JSON document (docs/cli.md).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <mme/engine/estimator.hpp>
#include <mme/engine/fit.hpp>
#include <mme/sdk/model_spec.hpp>

namespace mme::cli {

struct RenderOptions {
  bool verbose = false;                         // per-stage components, chunks and assumptions
  bool colour = false;                          // ANSI colour (terminal, no NO_COLOR)
  bool bars = false;                            // stacked bar per stage (terminal only)
  const HardwareProfile* chosen_gpu = nullptr;  // --gpu
  std::string etp_note;                         // a line under Parallelism when ETP took the seed's default
  std::string gpus_note;                        // after "Total GPUs: N" when --num-gpus was not given
  std::vector<std::string> next_steps;          // when nothing fits: the changes that would, ranked
};

void render_text(std::ostream& out, const ModelSpec& model, const Estimate& est, const std::vector<FitVerdict>& fits,
                 const RenderOptions& options);
// `--breakdown`: the module tree of each pipeline stage, as the Hugging Face Space's "Raw" view
// has it: the stage's memory by category, block and term (every named component, sums at each
// node), then its chunks and the decoder layers of each kind they hold, with the parameters of
// one rank and the activations one micro-batch keeps. Needs Estimate::layer_kinds.
void render_module_tree(std::ostream& out, const ModelSpec& model, const Estimate& est);

nlohmann::json estimate_to_json(const ModelSpec& model, const Estimate& est, const std::vector<FitVerdict>& fits);
nlohmann::json setup_to_json(const TrainingSetup& s);

// Text pieces every renderer shares: "selective (core_attn, mlp)" / "full (uniform, 1 layer)",
// and 1927314 as "1,927,314".
std::string recompute_text(const RecomputeSettings& r);
std::string thousands(std::uint64_t n);
// A hybrid model's layers by kind, "23 Mamba (64 heads of 64, 8 groups of state 128), 6
// attention, 23 MoE"; "" for a model whose every layer has both an attention and an MLP block.
std::string hybrid_layers_text(const ModelSpec& model);

}  // namespace mme::cli
