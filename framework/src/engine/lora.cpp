// LoRA as Megatron-Bridge runs it (TrainingSetup::lora): the checks of a pass and the report's
// line. The memory itself is where every parameter's is: the block models report the adapters'
// parameters (ParamGroup::kLoraAdapter) and what the adapters and the frozen linears keep
// (block_helpers.hpp, "LoRA"); model_state (optimizer_step.cpp) gives gradients and optimizer states to the trained
// parameters only (is_trainable).
#include <fmt/core.h>

#include "mme/sdk/block_helpers.hpp"
#include "mme/sdk/error.hpp"

#include "estimator_internal.hpp"

namespace mme {

namespace {

constexpr LoraTarget kTargets[] = {kLoraLinearQkv, kLoraLinearProj, kLoraLinearFc1, kLoraLinearFc2};
constexpr LoraScope kScopes[] = {LoraScope::kLayer, LoraScope::kSharedExperts, LoraScope::kRoutedExperts};

// Whether an evaluated layer kind holds an adapter of target `t` in `scope`.
bool holds_adapter(const TypeEval& e, LoraTarget t, LoraScope scope) {
  const std::string_view name = lora_term_names(t, scope).params;
  for (const auto* bp : {&e.attn_params, &e.mlp_params})
    for (const auto& term : bp->terms)
      if (term.group == ParamGroup::kLoraAdapter && term.name == name) return true;
  return false;
}

}  // namespace

void validate_lora(const EngineTables& im, const BlockLayout& blocks, const LayerEvals& layers) {
  const TrainingSetup& s = blocks.setup;
  const LoraSettings& lora = s.lora;
  if (!lora.on()) return;
  // Not modelled together with LoRA: refused rather than estimated as if LoRA were off.
  if (s.fsdp.kind != FsdpKind::kNone)
    throw LayoutError("LoRA with sharded data parallelism (Megatron-FSDP, FSDP2) is not modelled");
  if (s.optimizer.name == "muon") throw LayoutError("LoRA with the Muon optimizer is not modelled");
  // A block whose linears are not the targets' (multi-latent attention) refuses LoRA in its own
  // validate(), which validate_blocks ran before.
  // ColumnParallelLinear(in, r) beside a column-parallel linear splits the r outputs over TP
  // (tensor_parallel/layers.py: divide(output_size, world_size) asserts divisibility); beside
  // routed experts over ETP.
  const bool column = (lora.targets & (kLoraLinearQkv | kLoraLinearFc1)) != 0;
  if (column && lora.rank % blocks.tp != 0)
    throw LayoutError(fmt::format(
        "LoRA rank {} is not divisible by --tp {}: the adapter of a column-parallel linear (linear_qkv, linear_fc1) "
        "splits its rank over TP",
        lora.rank, blocks.tp));
  bool any_expert_fc1 = false;
  for (const auto& e : layers.evals) any_expert_fc1 |= holds_adapter(e, kLoraLinearFc1, LoraScope::kRoutedExperts);
  if (any_expert_fc1 && lora.rank % blocks.etp != 0)
    throw LayoutError(
        fmt::format("LoRA rank {} is not divisible by --etp {}: the routed experts' linear_fc1 adapters "
                    "split their rank over expert TP",
                    lora.rank, blocks.etp));
  // Every target wraps a linear somewhere: linear_fc1 on a model of MoE layers only wraps the
  // experts' linears, which is fine; a target no layer has is a mistake.
  for (const LoraTarget t : kTargets) {
    if (!(lora.targets & t)) continue;
    bool found = false;
    for (const auto& e : layers.evals)
      for (const LoraScope scope : kScopes) found |= holds_adapter(e, t, scope);
    if (!found)
      throw LayoutError(fmt::format("LoRA target module {} wraps no linear of {} (--lora-target-modules)",
                                    lora_targets_to_string(t), im.model.name));
  }
}

std::string lora_assumption(const LoraSettings& lora) {
  if (!lora.on()) return "";
  std::string dropout = "no adapter dropout";
  if (lora.dropout > 0)
    dropout = fmt::format("adapter dropout {} at its {} (1-byte masks)", lora.dropout,
                          lora.dropout_position == LoraDropoutPosition::kPre ? "input" : "output");
  return fmt::format(
      "LoRA (Megatron-Bridge): rank {}, alpha {}, on {}; base weights frozen (no gradient, no optimizer state); "
      "adapters as ParallelLinearAdapter, r x (in + out) / TP per rank, trained like any parameter{}; frozen "
      "Transformer Engine linears keep no inputs for weight gradients, a wrapped one's norm output stays for its "
      "adapter; {}",
      lora.rank, lora.alpha, lora_targets_to_string(lora.targets),
      lora.a2a_experimental ? " (a2a_experimental is not modelled: the default path)" : "", dropout);
}

}  // namespace mme
