// LayerMemoryModel: the plugin interface for one block of the model: the attention or the MLP
// block of a decoder layer, or one of the blocks around them (the embedding, the output head
// with the final norm and the loss, an MTP depth's projection). Given the model, the layer and
// the layout, a block reports the parameters one rank holds, by shard class, the bytes it keeps
// for backward per micro-batch, as named terms, and its costs per micro-batch (FLOPs, weight
// bytes read, collective bytes). The engine and the planner only add these up (Calculon style).
#pragma once

#include <cstdint>
#include <string_view>

#include "mme/sdk/model_spec.hpp"
#include "mme/sdk/term_list.hpp"
#include "mme/sdk/training_setup.hpp"

namespace mme {

enum class BlockRole {
  kAttention,      // a decoder layer's attention block
  kMlp,            // a decoder layer's MLP block (dense or mixture of experts)
  kEmbedding,      // the word (and position) embedding, on the first pipeline stage
  kOutputHead,     // the final norm, the output layer and the loss, on the last stage
  kMtpProjection,  // a multi-token-prediction depth beyond its transformer layer (norms, eh_proj)
};
const char* to_string(BlockRole r);

// The Megatron-LM module class a decoder block models: what selects the launch flags that
// describe it when a model is written back as flags (`mme estimate --print-megatron-args`). The
// host asks the block (LayerMemoryModel::megatron_block()) instead of naming block kinds.
enum class MegatronBlock : std::uint8_t {
  kNone,              // no Megatron-LM module class: a model with this block has no launch flags
  kSelfAttention,     // megatron/core/transformer/attention.py SelfAttention (MHA, GQA, MQA)
  kMlaSelfAttention,  // megatron/core/transformer/multi_latent_attention.py MLASelfAttention
  kMlp,               // megatron/core/transformer/mlp.py MLP
  kMoeLayer,          // megatron/core/transformer/moe/moe_layer.py MoELayer
  // Plugin API 11: hybrid models (--hybrid-layer-pattern).
  kMambaMixer,  // megatron/core/ssm/mamba_mixer.py MambaMixer (a Mamba layer, 'M')
  kIdentity,    // IdentityOp: the block a hybrid layer lacks (the MLP of 'M' and '*', the attention of '-' and 'E')
};

// How the distributed optimizer and the parallel layout treat a parameter.
enum class ShardClass : std::uint8_t {
  kTensorParallel,  // split over TP (column/row-parallel linears, vocab rows)
  kReplicated,      // the same on every TP rank (norms, router, MLA down-projections)
  kExpert,          // routed experts: split over EP x ETP, optimizer sharded over expert-DP
};

// What a parameter is, for the `params` breakdown.
enum class ParamGroup : std::uint8_t {
  kEmbedding,
  kPositionEmbedding,
  kOutputLayer,
  kAttention,
  kDenseMlp,
  kRoutedExperts,
  kSharedExperts,
  kRouter,
  kNorms,
  kMtp,
  // A LoRA adapter's linear_in / linear_out (LoraSettings): the only trainable parameters under
  // LoRA; every other group is then frozen.
  kLoraAdapter,
  // Plugin API 11: a Mamba-2 mixer's own parameters (in_proj, conv1d, dt_bias, A_log, D, the gated
  // norm, out_proj).
  kMamba,
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
  // The fine-grained offload group whose context saves the term (an OffloadModule bit of
  // training_setup.hpp; 0: none, e.g. the router or a bias-dropout-add mask).
  std::uint32_t module = 0;
  // Elements of each tensor the term holds (the smallest, if they differ): activation
  // offloading moves only tensors of at least a minimum size. 0: unknown, never offloaded.
  std::int64_t tensor_elements = 0;
  // The partial CUDA-graph scopes (CudaGraphModule bits of training_setup.hpp) whose graph
  // captures the term inside a block the graphs cover only in part: a MoE block's pre-MLP norm
  // and router (moe_router), its dispatcher preprocess (moe_preprocess). 0: only the whole
  // block's scope (attn for an attention block, mlp or moe for an MLP block) captures it.
  std::uint32_t graph_scope = 0;
  // Plugin API 9: allocated on a CUDA stream of the block's own rather than the training loop's
  // (Transformer Engine's Ulysses exchange reorders Q, K, V and the returned output on its
  // cp_stream): the reserved-memory replay keeps the tensor in that stream's pool, from its
  // forward until its backward frees it.
  bool side_stream = false;
};

// A trainable linear's weight as one rank holds it, [rows, cols] (a GroupedLinear's: one
// expert's). With gradient accumulation fusion the weight gradient goes straight into main_grad
// and the linear hands autograd a placeholder of the weight's shape instead: Transformer
// Engine's linears take it from a cache keyed by shape and dtype (module/base.py
// get_dummy_wgrad), so equal shapes share one tensor, kept from the first backward on.
struct GemmWeight {
  ParamGroup group = ParamGroup::kAttention;
  std::int64_t rows = 0, cols = 0;
};

struct BlockParams {
  TermList<ParamTerm, 16> terms;
  // The block's Transformer Engine linears, one entry per distinct per-rank weight shape
  // (add_gemm_weight); Megatron's own linears (the output layer) are not listed.
  TermList<GemmWeight, 8> gemm_weights;
};

// Plugin API 8: tensors of one size that a block allocates on a CUDA stream of its own (not the
// training loop's): in BlockActivations::side_stream, freed before its forward returns; in
// side_stream_backward (API 9), freed with its backward's working set.
struct StreamTensors {
  std::string_view name;   // a string literal of the reporting plugin
  std::int64_t bytes = 0;  // each
  std::int64_t count = 0;
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
  // Tensors held across the micro-batches of a step until the pipeline flush (not per
  // micro-batch in flight), e.g. --defer-embedding-wgrad-compute's buffers of the output layer.
  TermList<ActTerm, 4> held_for_step;
  // Plugin API 8: what the forward allocates on a stream of its own (Transformer Engine's
  // context-parallel attention runs every other ring step on a second stream). Those bytes are in
  // the block's peak already (its `transient`); they matter to reserved memory only: PyTorch's
  // caching allocator serves a stream's requests from that stream's blocks alone, so the engine's
  // allocator replay keeps them in a pool of their own, which the main stream never reuses.
  TermList<StreamTensors, 4> side_stream;
  // Plugin API 8: the tensors of the backward's working set (`transient`) in the order the
  // backward allocates them, for the reserved-memory replay, which otherwise allocates `transient`
  // as one block. Empty: one block.
  TermList<ActTerm, 4> transient_parts;
  // Plugin API 9: what the block's backward allocates on its own stream (the stream of the
  // `side_stream` saved terms) and frees with its working set. Those bytes belong in `transient`
  // as well when they set the block's busiest moment; the list only places them in the replay.
  TermList<StreamTensors, 8> side_stream_backward;
};

// The process group a collective runs over.
enum class CommGroup : std::uint8_t {
  kTensor,        // tensor parallel (TP)
  kContext,       // context parallel (CP)
  kExpert,        // expert parallel (EP)
  kExpertTensor,  // expert tensor parallel (ETP)
};
const char* to_string(CommGroup g);

struct CollectiveTerm {
  std::string_view name;  // a string literal of the reporting plugin
  CommGroup group = CommGroup::kTensor;
  // Bytes one rank sends for one micro-batch (the algorithm's share included: (n-1)/n of the
  // tensor for a ring all-gather or reduce-scatter), in the forward and in the backward pass.
  double forward_bytes = 0;
  double backward_bytes = 0;
};

// How a block's weight [in -> out] is split over tensor parallelism (GemmTerm, add_gemm): what
// the SP collectives around the block overlap with under --tp-comm-overlap.
enum class GemmSplit : std::uint8_t {
  kColumn,      // ColumnParallelLinear: out / TP (its SP input all-gathered first: the full T tokens)
  kRow,         // RowParallelLinear: in / TP (its output reduce-scattered after)
  kReplicated,  // the same on every TP rank (TE parallel_mode='duplicated', the router)
};

// One GEMM of a block's forward pass as one rank runs it (plugin API 6): [m, k] x [k, n], `count`
// times per micro-batch (a grouped GEMM of routed experts: once per local expert, m the tokens
// routed to one expert). The backward pass runs two GEMMs of the same volume (the input gradient
// [m, n] x [n, k] and the weight gradient [k, m] x [m, n]). The planner's step-time model prices
// each at an efficiency that depends on its shape and dtype (docs/planner.md).
struct GemmTerm {
  std::string_view name;  // a string literal of the reporting plugin
  double m = 0, n = 0, k = 0;
  double count = 1;
  bool expert = false;  // a routed expert's GEMM (EP x ETP sharded)
  // Not a Transformer Engine linear: it runs in the parameters' dtype even under FP8/FP4 recipes
  // (Megatron-LM's own ColumnParallelLinear of the output layer, the router).
  bool high_precision = false;
  GemmSplit split = GemmSplit::kColumn;
};

// What one micro-batch costs a rank in the block, the figures of a roofline (the planner's speed
// proxy). FLOPs and bytes are doubles: a layer's FLOPs per micro-batch can pass 2^63.
struct BlockCosts {
  // FLOPs of the forward pass; the backward pass is twice these (input and weight gradients).
  double gemm_flops = 0;       // dense GEMMs (everything but routed experts)
  double attention_flops = 0;  // the attention core, softmax(Q K^T) V, causal
  double expert_flops = 0;     // routed experts' GEMMs
  // HBM bytes the forward pass reads for its GEMM weights (the backward pass reads them twice).
  double weight_bytes = 0;
  double expert_weight_bytes = 0;
  // Forward FLOPs the setup's selective recompute (--recompute-modules) repeats in backward.
  // Full recompute repeats the whole forward pass: the caller's to add.
  double recompute_flops = 0;
  TermList<CollectiveTerm, 8> collectives;
  // Plugin API 6: the forward GEMMs one by one (their FLOPs are part of gemm_flops and
  // expert_flops). A block that leaves the list empty is priced from the sums above.
  TermList<GemmTerm, 12> gemms;
  // Plugin API 6: HBM bytes of memory-bound kernels the block counts itself, forward and backward
  // together (the loss's kernels over the logits), and the saved bytes those kernels stand for,
  // which then leave the planner's measure of the other memory-bound kernels (its calibrated
  // passes over the saved bytes, docs/planner.md). 0: the block counts none.
  double elementwise_bytes = 0;
  double elementwise_saved_bytes = 0;
};

// Everything a block model may read. The engine computes the derived figures once.
struct BlockContext {
  const ModelSpec& model;
  const LayerSpec& layer;
  // The run's setup without its pipeline partition (parallel.vpp is 1; the split fields of
  // `pipeline` are unset): which stage or chunk holds a block does not change what it keeps, so the
  // engine evaluates a layout's blocks once for all its partitions. The PP size is `pp` below.
  const TrainingSetup& setup;
  std::int64_t tp = 1, cp = 1, ep = 1, etp = 1;
  bool sequence_parallel = false;
  std::int64_t tokens = 0;              // T = seq * micro_batch / CP: tokens of a micro-batch on one CP rank
  std::int64_t local_tokens = 0;        // T / TP with sequence parallel, else T
  std::int64_t act_bytes = 2;           // bytes per activation element (bf16/fp16)
  std::int64_t linear_input_bytes = 2;  // bytes of a saved GEMM input (1 under FP8)
  std::int64_t weight_bytes = 2;        // bytes of a weight element as the GEMMs read it (1 under FP8)
  std::int64_t pp = 1;                  // pipeline-parallel size
  std::int64_t vocab_local = 0;         // the padded vocabulary per TP rank (the engine pads like Megatron-LM)
  double hidden_dropout = 0.0;
  double attention_dropout = 0.0;
  bool is_mtp = false;  // the block belongs to a multi-token-prediction layer
};

class LayerMemoryModel {
 public:
  virtual ~LayerMemoryModel() = default;
  virtual std::string_view kind() const = 0;  // "gqa", "mla", "dense", "moe", "embedding", ...
  virtual BlockRole role() const = 0;
  virtual std::string_view description() const = 0;
  // Checks this block's own fields of decoder layer `index` (e.g. MLA's ranks, a MoE's expert
  // counts), before any layout: throws ConfigError naming the model, the layer and the field
  // (require_layer_field). The host runs it for every layer when a model is loaded and when an
  // Estimator is built; validate_model_spec checks only what every block kind shares.
  virtual void validate_spec(const ModelSpec& model, const LayerSpec& layer, std::size_t index) const = 0;
  // Throws LayoutError when the layout cannot split this block (e.g. heads % TP != 0) or the
  // setup asks for what the block does not model (LoRA adapters on linears it does not have).
  virtual void validate(const BlockContext& ctx) const = 0;
  virtual void parameters(const BlockContext& ctx, BlockParams& out) const = 0;
  virtual void activations(const BlockContext& ctx, BlockActivations& out) const = 0;
  // The block's costs for one micro-batch under the layout (see BlockCosts).
  virtual void costs(const BlockContext& ctx, BlockCosts& out) const = 0;
  // The Megatron-LM module class this block models (plugin API 6); kNone, the default, for a
  // block no Megatron-LM flag selects: exporting a model that uses it as flags is refused.
  virtual MegatronBlock megatron_block() const { return MegatronBlock::kNone; }
};

// Sum helpers.
std::int64_t sum_per_rank(const BlockParams& p, ShardClass shard);
std::int64_t sum_per_rank(const BlockParams& p);
std::int64_t sum_total(const BlockParams& p);
std::int64_t sum_active(const BlockParams& p);
std::int64_t sum_saved(const BlockActivations& a);
double sum_forward_bytes(const BlockCosts& c, CommGroup group);
double sum_backward_bytes(const BlockCosts& c, CommGroup group);
const char* to_string(ParamGroup g);
const char* to_string(ShardClass s);

}  // namespace mme
