// The upper bound's MoE routing imbalance sized from the run's router settings
// (docs/memory-model.md, "Upper bound").
#pragma once

#include "mme/sdk/training_setup.hpp"

namespace mme {

struct EngineTables;

// --moe-router-force-load-balancing (router.py, moe_utils.py RandomSTE / apply_random_logits):
// every token draws fresh normal logits, so tokens route independently and, the experts being
// alike, each expert rank receives top-k / EP (expert, token) pairs per token on average. One
// token sends a rank at most m = min(top-k, E / EP) of them, so their variance is at most
// (m - k/EP) x k/EP (Bhatia-Davis), plain top-k or group-limited routing alike. Over the
// n = Tl x ETP x EP tokens of the expert-parallel group the rank's share has mean mu = n k / EP and
// sigma^2 <= n (m - k/EP) k/EP; the busiest of the EP ranks exceeds mu + z sigma with probability
// at most 0.1 % (a union bound: EP x Q(z) = 0.001, Q normal). Returns (mu + z sigma) / mu for the
// MoE layer kind where that is largest (1 with EP 1).
double uniform_routing_imbalance(const EngineTables& im, const TrainingSetup& s);

// z with Q(z) = p, Q the standard normal's upper tail (0 < p < 0.5).
double normal_upper_quantile(double p);

}  // namespace mme
