// The layout values a model allows, for a front end that offers choices (the browser page's
// field lists and hints): every value is checked by the engine's own rules (the blocks' checks
// through an estimate, resolve_setup, validate_setup, partition_pipeline), so what is offered is
// what `mme estimate` accepts, never a second copy of its rules.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <mme/commands/estimate.hpp>
#include <mme/engine/registry.hpp>
#include <mme/sdk/model_spec.hpp>

namespace mme::commands {

// What the blocks of a model accept, found once per model by estimating each candidate with
// everything else at its default: TP among the divisors of the attention heads, EP among those of
// the experts, ETP among those of the expert MLP width (up to 64).
struct BlockLimits {
  std::int64_t num_layers = 0, mtp_layers = 0;
  std::int64_t experts = 0, expert_width = 0;  // 0: a dense model
  std::vector<std::int64_t> tp, ep, etp;
};
BlockLimits block_limits(const ModelSpec& model, const Registry& registry);

struct LayoutChoices {
  // Per field (tp, pp, vpp, cp, ep, etp, num_gpus, first, last): the values allowed with the
  // other fields as the form has them, in increasing order.
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> values;
  std::vector<std::string> lines;  // one hint line per field, as the page shows them
};
// `form`: the setup flags the form holds; a field that does not parse counts as unset.
LayoutChoices layout_choices(const ModelSpec& model, const BlockLimits& limits, const SetupFlags& form);

}  // namespace mme::commands
