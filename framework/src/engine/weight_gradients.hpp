// Weight gradients that are not main_grad (docs/memory-model.md, "Weight gradients"): the
// placeholders Transformer Engine's linears hand autograd under gradient accumulation fusion,
// cached per shape for the rest of the run.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "mme/sdk/checked.hpp"
#include "mme/sdk/layer_model.hpp"
#include "mme/sdk/training_setup.hpp"

namespace mme {

// The distinct weight shapes of a stage's TE linears. With gradient accumulation fusion TE's
// Linear, LayerNormLinear and GroupedLinear write the weight gradient into main_grad and return
// get_dummy_wgrad(shape, weight.dtype) (module/base.py): one tensor per (shape, dtype) in a
// module-level dict, allocated at the first backward and never freed. Equal shapes of different
// layers, kinds or experts share one.
class CachedDummyWgrads {
 public:
  // The trainable linears of a block (under LoRA the base is frozen and returns no gradient).
  // `added`, if given, receives the elements of each tensor this call creates (a shape not seen
  // before, in the block's order), as the first backward through the block allocates them.
  void add(const BlockParams& p, const TrainingSetup& s, std::vector<std::int64_t>* added = nullptr);
  // Bytes of the cached tensors, `element_bytes` each (the parameter dtype).
  CheckedInt bytes(std::int64_t element_bytes) const;

 private:
  static constexpr std::size_t kShapes = 48;
  std::array<std::int64_t, kShapes> elements_{};
  std::array<std::int64_t, kShapes> rows_{};
  std::size_t count_ = 0;
  CheckedInt beyond_ = 0;  // shapes past the table, counted without merging (never less)
};

// Whether the linears take the placeholder path at all: gradient accumulation fusion on and
// Megatron's DDP or Megatron-FSDP (they give every parameter grad_added_to_main_grad).
bool uses_cached_dummy_wgrads(const TrainingSetup& s);

}  // namespace mme
