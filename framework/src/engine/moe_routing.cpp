#include "moe_routing.hpp"

#include <algorithm>
#include <cmath>

#include "estimator_internal.hpp"

namespace mme {

double normal_upper_quantile(double p) {
  // Q(z) = erfc(z / sqrt 2) / 2 falls monotonically: bisect on [0, 40].
  double lo = 0, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(mid / std::sqrt(2.0)) > p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

double uniform_routing_imbalance(const EngineTables& im, const TrainingSetup& s) {
  const ParallelLayout& par = s.parallel;
  const double ep = static_cast<double>(par.ep);
  if (par.ep <= 1) return 1.0;
  double tokens =
      static_cast<double>(s.seq_length) * static_cast<double>(s.micro_batch_size) / static_cast<double>(par.cp);
  if (sequence_parallel_on(par)) tokens /= static_cast<double>(par.tp);
  const double n = tokens * static_cast<double>(effective_etp(par)) * ep;  // the group's tokens
  const double z = normal_upper_quantile(0.001 / ep);
  double worst = 1.0;
  for (const auto& lt : im.types) {
    if (!lt.moe) continue;
    const double e = static_cast<double>(lt.spec.mlp.num_experts), k = static_cast<double>(lt.spec.mlp.top_k);
    if (e <= 1 || n <= 0) continue;
    const double per_token = k / ep;          // a token's mean (expert, token) pairs on one rank
    const double most = std::min(k, e / ep);  // the most one token can send one rank
    const double mu = n * per_token;
    const double var = n * std::max(0.0, most - per_token) * per_token;  // Bhatia-Davis
    worst = std::max(worst, (mu + z * std::sqrt(var)) / mu);
  }
  return worst;
}

}  // namespace mme
