#include "mme/sdk/layer_model.hpp"

#include "mme/sdk/checked.hpp"

namespace mme {

std::int64_t sum_per_rank(const BlockParams& p, ShardClass shard) {
  CheckedInt s = 0;
  for (const auto& t : p.terms)
    if (t.shard == shard) s += t.per_rank;
  return s.value();
}

std::int64_t sum_per_rank(const BlockParams& p) {
  CheckedInt s = 0;
  for (const auto& t : p.terms) s += t.per_rank;
  return s.value();
}

std::int64_t sum_total(const BlockParams& p) {
  CheckedInt s = 0;
  for (const auto& t : p.terms) s += t.total;
  return s.value();
}

std::int64_t sum_active(const BlockParams& p) {
  CheckedInt s = 0;
  for (const auto& t : p.terms) s += t.active;
  return s.value();
}

std::int64_t sum_saved(const BlockActivations& a) {
  CheckedInt s = 0;
  for (const auto& t : a.saved) s += t.bytes;
  return s.value();
}

const char* to_string(ParamGroup g) {
  switch (g) {
    case ParamGroup::kEmbedding: return "embedding";
    case ParamGroup::kOutputLayer: return "output_layer";
    case ParamGroup::kAttention: return "attention";
    case ParamGroup::kDenseMlp: return "dense_mlp";
    case ParamGroup::kRoutedExperts: return "routed_experts";
    case ParamGroup::kSharedExperts: return "shared_experts";
    case ParamGroup::kRouter: return "router";
    case ParamGroup::kNorms: return "norms";
    case ParamGroup::kMtp: return "mtp";
  }
  return "?";
}

const char* to_string(ShardClass s) {
  switch (s) {
    case ShardClass::kTensorParallel: return "tensor_parallel";
    case ShardClass::kReplicated: return "replicated";
    case ShardClass::kExpert: return "expert";
  }
  return "?";
}

}  // namespace mme
