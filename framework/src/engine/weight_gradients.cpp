#include "weight_gradients.hpp"

#include "estimator_internal.hpp"

namespace mme {

void CachedDummyWgrads::add(const BlockParams& p, const TrainingSetup& s, std::vector<std::int64_t>* added) {
  const bool all_train = !s.lora.on();
  for (const auto& w : p.gemm_weights) {
    if (!all_train && w.group != ParamGroup::kLoraAdapter) continue;  // frozen base (is_trainable)
    const CheckedInt elements = CheckedInt(w.rows) * w.cols;
    bool seen = false;
    for (std::size_t i = 0; i < count_ && !seen; ++i) seen = rows_[i] == w.rows && elements_[i] == elements.value();
    if (seen) continue;
    if (added != nullptr) added->push_back(elements.value());
    if (count_ == kShapes) {
      beyond_ += elements;
      continue;
    }
    rows_[count_] = w.rows;
    elements_[count_++] = elements.value();
  }
}

CheckedInt CachedDummyWgrads::bytes(std::int64_t element_bytes) const {
  CheckedInt sum = beyond_;
  for (std::size_t i = 0; i < count_; ++i) sum += elements_[i];
  return sum * element_bytes;
}

bool uses_cached_dummy_wgrads(const TrainingSetup& s) {
  // transformer_engine/pytorch/module/linear.py (and layernorm_linear.py, grouped_linear.py):
  // the placeholder path needs fuse_wgrad_accumulation and the attribute Megatron's DDP and
  // Megatron-FSDP set (distributed_data_parallel.py, megatron_fsdp.py); PyTorch FSDP2 runs
  // without gradient accumulation fusion (arguments.py refuses the pair).
  return s.gradient_accumulation_fusion && s.fsdp.kind != FsdpKind::kTorchFsdp2 && s.transformer_engine;
}

}  // namespace mme
