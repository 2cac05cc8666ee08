// LayerMemoryModel: the plugin interface for one block of a decoder layer (the attention
// block or the MLP block). Given the model, the layer and the layout, a block reports the
// parameters one rank holds, by shard class, and the bytes it keeps for backward per
// micro-batch, as named terms. The engine only adds these up (Calculon style).
#pragma once

#include <cstdint>
#include <string_view>

#include "mme/sdk/model_spec.hpp"
#include "mme/sdk/term_list.hpp"
#include "mme/sdk/training_setup.hpp"

namespace mme {

enum class BlockRole { kAttention, kMlp };

// How the distributed optimizer and the parallel layout treat a parameter.
enum class ShardClass : std::uint8_t {
  kTensorParallel,  // split over TP (column/row-parallel linears, vocab rows)
  kReplicated,      // the same on every TP rank (norms, router, MLA down-projections)
  kExpert,          // routed experts: split over EP x ETP, optimizer sharded over expert-DP
};

// What a parameter is, for the `params` breakdown.
enum class ParamGroup : std::uint8_t {
  kEmbedding,
  kOutputLayer,
  kAttention,
  kDenseMlp,
  kRoutedExperts,
  kSharedExperts,
  kRouter,
  kNorms,
  kMtp,
};

struct ParamTerm {
  std::string_view name;  // a string literal of the reporting plugin
  ParamGroup group = ParamGroup::kAttention;
  ShardClass shard = ShardClass::kTensorParallel;
  std::int64_t total = 0;     // elements in the whole layer, unsharded
  std::int64_t per_rank = 0;  // elements one rank holds under the layout
  std::int64_t active = 0;    // elements one token uses (top-k share of routed experts)
};

struct ActTerm {
  std::string_view name;  // a string literal of the reporting plugin
  std::int64_t bytes = 0;
};

struct BlockParams {
  TermList<ParamTerm, 16> terms;
};

struct BlockActivations {
  // Tensors kept alive from this block's forward until its backward, for one micro-batch.
  TermList<ActTerm, 24> saved;
  // Extra short-lived bytes at the block's busiest moment (all-gather buffers, gradients of
  // its largest activations during backward), on top of what is saved.
  std::int64_t transient = 0;
  // Bytes of Megatron's global memory buffer (parallel_state.get_global_memory_buffer) the
  // block gathers into. The buffer is allocated once and kept, shared by every user: the
  // engine keeps the largest request as persistent memory.
  std::int64_t global_buffer = 0;
};

// Everything a block model may read. The engine computes the derived figures once.
struct BlockContext {
  const ModelSpec& model;
  const LayerSpec& layer;
  const TrainingSetup& setup;
  std::int64_t tp = 1, cp = 1, ep = 1, etp = 1;
  bool sequence_parallel = false;
  std::int64_t tokens = 0;              // T = seq * micro_batch / CP: tokens of a micro-batch on one CP rank
  std::int64_t local_tokens = 0;        // T / TP with sequence parallel, else T
  std::int64_t act_bytes = 2;           // bytes per activation element (bf16/fp16)
  std::int64_t linear_input_bytes = 2;  // bytes of a saved GEMM input (1 under FP8)
  double hidden_dropout = 0.0;
  double attention_dropout = 0.0;
  bool is_mtp = false;  // the block belongs to a multi-token-prediction layer
};

class LayerMemoryModel {
 public:
  virtual ~LayerMemoryModel() = default;
  virtual std::string_view kind() const = 0;  // "gqa", "mla", "dense", "moe", ...
  virtual BlockRole role() const = 0;
  virtual std::string_view description() const = 0;
  // Checks this block's own fields of decoder layer `index` (e.g. MLA's ranks, a MoE's expert
  // counts), before any layout: throws ConfigError naming the model, the layer and the field
  // (require_layer_field). The host runs it for every layer when a model is loaded and when an
  // Estimator is built; validate_model_spec checks only what every block kind shares.
  virtual void validate_spec(const ModelSpec& model, const LayerSpec& layer, std::size_t index) const = 0;
  // Throws LayoutError when the layout cannot split this block (e.g. heads % TP != 0).
  virtual void validate(const BlockContext& ctx) const = 0;
  virtual void parameters(const BlockContext& ctx, BlockParams& out) const = 0;
  virtual void activations(const BlockContext& ctx, BlockActivations& out) const = 0;
};

// Sum helpers.
std::int64_t sum_per_rank(const BlockParams& p, ShardClass shard);
std::int64_t sum_per_rank(const BlockParams& p);
std::int64_t sum_total(const BlockParams& p);
std::int64_t sum_active(const BlockParams& p);
std::int64_t sum_saved(const BlockActivations& a);
const char* to_string(ParamGroup g);
const char* to_string(ShardClass s);

}  // namespace mme
