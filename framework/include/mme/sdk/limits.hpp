// The largest sizes mme accepts wherever a model enters (config adapters through ConfigReader,
// spec files, Megatron-LM flags) and where a block model checks its own fields
// (require_layer_field): plain constants, so a layer-memory plugin that needs only the bounds
// does not pull in the JSON library with config_reader.hpp.
#pragma once

#include <cstdint>

namespace mme::limits {

// Largest size accepted for any dimension; bigger values are refused, since no real model
// has them and products of them would overflow 64-bit byte counts.
inline constexpr std::int64_t kMaxDimension = std::int64_t{1} << 24;  // 16,777,216
inline constexpr std::int64_t kMaxCount = std::int64_t{1} << 20;      // experts, router top-k
// Largest number of decoder layers (and of MTP layers) accepted: 512, four times the
// deepest real models (Llama 3.1 405B has 126 layers, the bundled models at most 94). The
// planner's search grows with the square of the layer count (1 024 layers already take half
// a minute on 1 024 GPUs), so deeper models are refused where they enter, with
// too_many_layers() (config_reader.hpp) as the message.
inline constexpr std::int64_t kMaxLayers = 512;

}  // namespace mme::limits
