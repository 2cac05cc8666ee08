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

double sum_forward_bytes(const BlockCosts& c, CommGroup group) {
  double s = 0;
  for (const auto& t : c.collectives)
    if (t.group == group) s += t.forward_bytes;
  return s;
}

double sum_backward_bytes(const BlockCosts& c, CommGroup group) {
  double s = 0;
  for (const auto& t : c.collectives)
    if (t.group == group) s += t.backward_bytes;
  return s;
}

const char* to_string(BlockRole r) {
  switch (r) {
    case BlockRole::kAttention: return "attention";
    case BlockRole::kMlp: return "mlp";
    case BlockRole::kEmbedding: return "embedding";
    case BlockRole::kOutputHead: return "output_head";
    case BlockRole::kMtpProjection: return "mtp_projection";
  }
  return "?";
}

const char* to_string(CommGroup g) {
  switch (g) {
    case CommGroup::kTensor: return "tp";
    case CommGroup::kContext: return "cp";
    case CommGroup::kExpert: return "ep";
    case CommGroup::kExpertTensor: return "etp";
  }
  return "?";
}

const char* to_string(ParamGroup g) {
  switch (g) {
    case ParamGroup::kEmbedding: return "embedding";
    case ParamGroup::kPositionEmbedding: return "position_embedding";
    case ParamGroup::kOutputLayer: return "output_layer";
    case ParamGroup::kAttention: return "attention";
    case ParamGroup::kDenseMlp: return "dense_mlp";
    case ParamGroup::kRoutedExperts: return "routed_experts";
    case ParamGroup::kSharedExperts: return "shared_experts";
    case ParamGroup::kRouter: return "router";
    case ParamGroup::kNorms: return "norms";
    case ParamGroup::kMtp: return "mtp";
    case ParamGroup::kLoraAdapter: return "lora_adapters";
    case ParamGroup::kMamba: return "mamba";
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
