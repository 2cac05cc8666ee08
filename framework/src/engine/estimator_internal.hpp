// The engine's internals shared by the Estimator (estimator.cpp), the phases of a pass
// (estimator_phases.hpp: estimator_stages.cpp, forward_backward.cpp, optimizer_step.cpp,
// upper_bound.cpp, composed by estimator_pass.cpp), their helpers (activation offloading, CUDA
// graphs, communication buffers, LoRA) and the planner (framework/src/planner/), which reads the
// same layer table, block contexts, element sizes and stage extras instead of rebuilding them.
// Not part of the SDK.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mme/engine/estimator.hpp"
#include "mme/engine/pipeline.hpp"
#include "mme/sdk/checked.hpp"
#include "mme/sdk/layer_model.hpp"

namespace mme {

inline constexpr std::int64_t kMiB = 1024 * 1024;
// PyTorch's caching allocator (c10/cuda/CUDACachingAllocator.cpp): a cached block of the large
// pool (requests above 1 MiB) is split only when more than kSmallSize = 1 MiB would remain, so
// such a tensor's block, which max_memory_allocated counts, can exceed its size by up to 1 MiB.
inline constexpr std::int64_t kLargeAlloc = kMiB;

inline CheckedInt ceil_div(CheckedInt a, CheckedInt b) { return (a + b - 1) / b; }

// FNV-1a over 64-bit words: the engine's memos' cheap filter (a hit then compares the whole key).
template <class Words>
std::uint64_t fnv1a_words(const Words& words) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (const std::int64_t v : words) h = (h ^ static_cast<std::uint64_t>(v)) * 0x100000001B3ull;
  return h;
}

// A layer kind's parameter terms as its block models report them on one GPU (no
// parallelism): each term's unsharded total and what one token uses.
struct KindParams {
  BlockParams attention, mlp;
};

// One distinct decoder-layer kind of the model (DeepSeek-V3 has two: dense-MLA and MoE-MLA).
struct LayerType {
  LayerSpec spec;
  const LayerMemoryModel* attention = nullptr;
  const LayerMemoryModel* mlp = nullptr;
  bool moe = false;       // routed experts (expert-sharded parameters)
  KindParams single_gpu;  // the decoder layer's terms (is_mtp false)
};

// A block around the decoder layers (embedding, output head, MTP projection): its model, the
// decoder layer its context carries, and its terms on one GPU.
struct LmBlock {
  const LayerMemoryModel* model = nullptr;  // null: not in this model (no MTP)
  const LayerSpec* layer = nullptr;         // in EngineTables::model
  BlockParams single_gpu;
};

// A layer type evaluated under one layout.
// Sizes are CheckedInt (checked.hpp): every sum and product below is checked for overflow.
// What per-layer CUDA graphs capture of one layer kind (cuda_graphs.cpp evaluate_layer_graphs),
// per micro-batch: the saved bytes and working memory inside the graphs, the working memory of
// the parts that still run eagerly, and the static buffers of the layer's graph.
struct LayerGraphs {
  bool graphed = false;              // the layer is one of the graphed callables
  bool attention_inside = false;     // its graph holds the attention (a static attention mask input)
  CheckedInt saved = 0;              // saved for backward inside the graph (the graph pool's)
  CheckedInt transient_inside = 0;   // the graphed blocks' busiest moment (in the pool)
  CheckedInt transient_outside = 0;  // the eager blocks' busiest moment
  CheckedInt grad_output_bytes = 0;  // the static gradient buffers of the graph's outputs
};

struct TypeEval {
  // User-provided: vector::resize value-initialises, which would zero the term lists' whole
  // capacity first (an implicit constructor); this one leaves that storage alone (term_list.hpp).
  TypeEval() {}
  CheckedInt tp_params = 0, rep_params = 0, exp_params = 0;  // per rank
  CheckedInt fp8_params = 0;                                 // per-rank parameters of GEMM weights (FP8-castable)
  CheckedInt fp8_exp_params = 0;                             // of them, the routed experts'
  CheckedInt train_dense = 0, train_exp = 0;                 // of the per-rank ones, those trained (LoRA: adapters)
  CheckedInt saved = 0;                                      // bytes kept for backward per micro-batch
  CheckedInt transient = 0;                                  // working bytes at the layer's busiest moment
  CheckedInt global_buffer = 0;                              // Megatron global memory buffer the layer gathers into
  BlockParams attn_params, mlp_params;
  BlockActivations attn_acts, mlp_acts;
  std::vector<std::pair<std::string, std::int64_t>> named_saved;  // "activations/<term>", bytes
  CheckedInt large_saved = 0;  // saved tensors of at least kLargeAlloc bytes (allocator rounding)
  CheckedInt gemms = 0;        // quantized TE GEMMs (te_gemm_count, low_precision.hpp); 0 in bf16 layers
  LayerGraphs graphs;          // with per-layer CUDA graphs
};

// Accumulates named components (only when asked for: the planner skips it).
class ComponentSink {
 public:
  explicit ComponentSink(bool enabled) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }
  // Names are few (tens per stage): a linear scan beats hashing or a tree here.
  void add(MemoryCategory cat, std::string_view name, CheckedInt bytes) {
    if (!enabled_ || bytes == 0) return;
    for (auto& c : items_) {
      if (c.category == cat && c.name == name) {
        c.bytes = (bytes + c.bytes).value();
        return;
      }
    }
    items_.push_back(Component{std::string(name), cat, bytes.value()});
  }
  // Terms activation offloading moved to the host entirely are dropped.
  std::vector<Component> take() {
    std::erase_if(items_, [](const Component& c) { return c.bytes == 0; });
    return std::move(items_);
  }

 private:
  bool enabled_;
  std::vector<Component> items_;
};

// The model's layer table, built once by the Estimator: its distinct layer kinds with their
// memory models, and where each kind occurs.
struct EngineTables {
  // Unique per Estimator for the life of the process (never reused): what the engine's memo of
  // layer evaluations (estimator_stages.cpp) keys the tables by.
  std::uint64_t id = 0;
  ModelSpec model;
  std::vector<LayerType> types;
  std::vector<std::size_t> layer_type;            // per decoder layer
  std::vector<std::vector<std::int64_t>> prefix;  // prefix[type][i]: layers of that type before i
  std::size_t mtp_type = 0;
  KindParams mtp_single_gpu;  // an MTP layer's terms (of the mtp_type kind, is_mtp true); empty without MTP
  LmBlock embedding, output_head, mtp_projection;
  bool any_moe = false;
  Estimator::ParamCount params;  // exact counts, computed once

  std::int64_t count_in(std::size_t type, std::int64_t first, std::int64_t n) const {
    const auto& pre = prefix[type];
    return pre[static_cast<std::size_t>(first + n)] - pre[static_cast<std::size_t>(first)];
  }
};

// The tables of an Estimator (the planner evaluates the same ones).
const EngineTables& engine_tables(const Estimator& estimator);

// The planner's estimate: Estimator::run without components, bound terms or the device total,
// whose stages are only those that may set the peak or the bound (StageSelection::kMaySetPeak,
// estimator_phases.hpp). Its peak(), upper_bytes() and every stage's weights, gradients and
// optimizer states equal run()'s; a skipped stage holds the same as one that is kept.
Estimate estimate_peak_stages(const Estimator& estimator, const TrainingSetup& setup, const EstimateOptions& options);

// Bytes per element of what a step holds, from the precision and the optimizer's dtypes.
struct ElementBytes {
  bool fp8 = false;
  std::int64_t act = 2;           // activations: the training dtype (bf16/fp16 2, fp32 4)
  std::int64_t linear_input = 2;  // a saved GEMM input (FP8 GEMM inputs: 1)
  std::int64_t wgrad = 2;         // a weight gradient as TE returns it, in the parameter dtype
  DType param_dtype = DType::kBF16, grad_dtype = DType::kFP32;
  std::int64_t param = 2, grad = 4;
};
ElementBytes element_bytes(const TrainingSetup& s);

// A block around the decoder layers under one layout: its terms, and its parameters per rank
// by shard class (GEMM weights FP8 can cast apart).
struct LmBlockEval {
  BlockParams params;
  BlockActivations acts;
  CheckedInt tp = 0, rep = 0;  // by shard class (TP-split, replicated)
  CheckedInt fp8 = 0;          // of which FP8-castable GEMM weights
  CheckedInt train = 0;        // of which trained (none under LoRA: the base is frozen)
  CheckedInt dense() const { return tp + rep; }
};

// What the block models of a layout see: the setup with the pass's attention backend and
// routed-token factor, without its pipeline partition (which stage holds a layer does not change
// what the layer keeps: block_layout clears the split and VPP), and the sizes every block context
// shares (make_context).
struct BlockLayout {
  TrainingSetup setup;
  std::int64_t tp = 1, cp = 1, ep = 1, etp = 1;
  bool sp = false;                          // sequence parallelism, as the setup resolves it
  CheckedInt tokens = 0, local_tokens = 0;  // T per CP rank; T / TP under SP
  std::int64_t act_bytes = 2;               // activation dtype bytes
  std::int64_t linear_input_bytes = 2;      // a saved GEMM input (FP8: 1)
  std::int64_t weight_bytes = 2;            // a weight element as the GEMMs read it (FP8: 1)
  std::int64_t pp = 1;
  CheckedInt vocab_local = 0;  // the padded vocabulary per TP rank
  double hidden_dropout = 0, attention_dropout = 0;

  bool operator==(const BlockLayout&) const = default;
};
// What a block model sees of the layout: `layer` is the decoder layer it belongs to (or, for a
// block around the layers, the one LmBlock::layer names). Inline: the planner's hot path.
inline BlockContext make_context(const ModelSpec& m, const BlockLayout& b, const LayerSpec& layer, bool is_mtp) {
  BlockContext ctx{m, layer, b.setup};
  ctx.tp = b.tp;
  ctx.cp = b.cp;
  ctx.ep = b.ep;
  ctx.etp = b.etp;
  ctx.sequence_parallel = b.sp;
  ctx.tokens = b.tokens.value();
  ctx.local_tokens = b.local_tokens.value();
  ctx.act_bytes = b.act_bytes;
  ctx.linear_input_bytes = b.linear_input_bytes;
  ctx.weight_bytes = b.weight_bytes;
  ctx.pp = b.pp;
  ctx.vocab_local = b.vocab_local.value();
  ctx.hidden_dropout = b.hidden_dropout;
  ctx.attention_dropout = b.attention_dropout;
  ctx.is_mtp = is_mtp;
  return ctx;
}

// The blocks' parameters, by shard class, into an LmBlockEval (FP8-castable: GEMM weights only).
void add_block_params(LmBlockEval& e, const BlockParams& p, const TrainingSetup& s);

// Transformer Engine casts the GEMM weights of the transformer layers to FP8; norms and the
// router stay in the training dtype, and so do the embedding and Megatron's own output layer,
// and the GEMMs' biases (transformer_config.py fp8_param: "biases will remain unchanged"; a
// routed-experts term holds its biases inside and is taken whole).
inline bool is_fp8_gemm_weight(const ParamTerm& t) {
  if (t.name.ends_with("_bias")) return false;
  switch (t.group) {
    case ParamGroup::kNorms:
    case ParamGroup::kRouter:
    case ParamGroup::kEmbedding:
    case ParamGroup::kPositionEmbedding:
    case ParamGroup::kOutputLayer:
    case ParamGroup::kLoraAdapter:
      return false;  // Megatron's own linears, not Transformer Engine's
    // A Mamba mixer's in_proj and out_proj are TE linears; its conv1d, dt_bias, A_log, D and norm
    // are plain parameters (mamba_mixer.py).
    case ParamGroup::kMamba: return t.name == "in_proj" || t.name == "out_proj";
    default: return true;
  }
}
// Whether a parameter trains (a main_grad buffer slot and optimizer states): every one, or under
// LoRA the adapters only (the base weights are frozen, requires_grad False: param_and_grad_buffer.py
// gives buffer slots only to parameters that require a gradient, the optimizer gets only those).
inline bool is_trainable(const ParamTerm& t, const TrainingSetup& s) {
  return !s.lora.on() || t.group == ParamGroup::kLoraAdapter;
}

// The setup of a pass: --num-layers-per-virtual-pipeline-stage as VPP, then resolve_setup.
TrainingSetup resolve_pass_setup(const ModelSpec& m, const TrainingSetup& requested);
// `resolved` is resolve_pass_setup's; `attention` the backend the blocks are evaluated with.
BlockLayout block_layout(const ModelSpec& m, const TrainingSetup& resolved, AttentionBackend attention,
                         double imbalance);
// The block models' own checks (heads, widths by TP/ETP, CP under the backend): LayoutError.
void validate_blocks(const EngineTables& im, const BlockLayout& blocks);

// ---- Phase 1 of a pass, the stages (estimator_stages.cpp) -------------------------------
// The pass's resolved setup and its layers under the layout: each layer kind and each block
// around the decoder layers evaluated once, and the pipeline partition. The later phases read
// the model through it, and so do the activation offloading, CUDA graph, communication and LoRA
// steps.
// Each layer kind and each block around the decoder layers evaluated under one layout, with the
// block models' own checks passed: a function of the model's tables and the BlockLayout alone
// (evaluate_layers, estimator_stages.cpp), so passes that differ only in their pipeline partition
// (the planner's splits of a layout) share one.
struct LayerEvals {
  // User-provided for the reason TypeEval's is: make_shared value-initialises, which would zero
  // the term lists' inline storage of every member before constructing them.
  LayerEvals() {}
  // Unique to this evaluation in the process (evaluate_layers): the stage memo's name for it,
  // which an evaluation freed and another made at the same address cannot take.
  std::uint64_t serial = 0;
  std::vector<TypeEval> evals;  // per layer type
  // Per layer type, the layers --first-last-layers-bf16 keeps in bf16 (empty unless it applies).
  std::vector<TypeEval> bf16_evals;
  TypeEval mtp_eval;
  LmBlockEval embedding, output_head, mtp_projection;  // mtp_projection: empty without MTP

  // The slots of what a stage can hold, for placeholder_elements: evals[i] is slot i, bf16_evals[i]
  // slot n + i, the MTP layer slot 2n, then the embedding, the MTP projection and the output head.
  std::size_t slots() const { return 2 * evals.size() + 4; }
  // The elements of TE's cached weight-gradient placeholders (weight_gradients.hpp) of a stage
  // holding the slots of `mask` (slots() <= 64), each shape once.
  CheckedInt placeholder_elements(std::uint64_t mask, const TrainingSetup& s) const;
  // The same for any number of slots (`present[slot]`), without the memo.
  CheckedInt placeholder_elements(const std::vector<std::uint8_t>& present, const TrainingSetup& s) const;

 private:
  template <class Has>
  CheckedInt placeholders_of(Has has, const TrainingSetup& s) const;
  // placeholder_elements by mask, filled on first use. A LayerEvals is only ever used on the
  // thread whose memo made it (plan_stages), so this needs no lock.
  mutable std::vector<std::pair<std::uint64_t, CheckedInt>> placeholders_by_mask_;
};

struct StagePlan {
  const EngineTables& im;
  TrainingSetup s;                           // resolve_pass_setup's
  BlockLayout blocks;                        // what the block models see
  std::int64_t p = 1, v = 1;                 // pipeline stages, virtual chunks per stage
  CheckedInt h = 0;                          // hidden size
  ElementBytes bytes;                        // element_bytes of the setup
  std::shared_ptr<const LayerEvals> layers;  // the layer kinds and blocks under `blocks`
  std::shared_ptr<const PipelinePartition>
      part;                       // partition_pipeline_cached: shared with the other passes of its layout
  std::int64_t extra_warmup = 0;  // ep_overlap_extra_warmup: the combined 1F1B schedule's extra forward
  // Full recompute (transformer_block.py _checkpointed_forward): a checkpointed layer keeps
  // only its input hidden states, layer_input_bytes per micro-batch.
  bool full_recompute = false;
  CheckedInt layer_input_bytes = 0;
  bool record_chunks = true;  // fill StageEstimate::chunks (the planner reads none)

  // The pass's setup (moved in) and the blocks' view of it (block_layout), built in place:
  // default-constructing and assigning them costs the planner.
  StagePlan(const EngineTables& tables, TrainingSetup&& setup, AttentionBackend attention, double imbalance)
      : im(tables), s(std::move(setup)), blocks(blocks_of(tables, s, attention, imbalance)) {}

 private:
  // block_layout of the setup. The blocks' view drops the pipeline layout text, so it is moved
  // out of the way of block_layout's copy and back (the planner's layouts carry one, on the heap).
  static BlockLayout blocks_of(const EngineTables& tables, TrainingSetup& s, AttentionBackend attention,
                               double imbalance) {
    std::string layout = std::move(s.pipeline.layout);
    s.pipeline.layout.clear();
    BlockLayout b = block_layout(tables.model, s, attention, imbalance);
    s.pipeline.layout = std::move(layout);
    return b;
  }
};

// LoRA's checks on the evaluated layer kinds (lora.cpp): every target wraps a linear of the model,
// the rank splits over TP, and what is not modelled with it (LayoutError).
void validate_lora(const EngineTables& im, const BlockLayout& blocks, const LayerEvals& layers);
// The report's LoRA line (lora.cpp); empty without LoRA.
std::string lora_assumption(const LoraSettings& lora);

}  // namespace mme
