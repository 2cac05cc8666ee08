// The device total of a pipeline stage (device_memory.hpp). Each step of the replayed sequence
// names the Megatron-LM / PyTorch code whose allocations it stands for.
#include "device_memory.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"

#include "estimator_phases.hpp"
#include "weight_gradients.hpp"

namespace mme {

namespace {

std::optional<std::string> environment_value(const TrainingSetup& s, std::string_view name) {
  for (const auto& e : s.environment_used)
    if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=')
      return e.substr(name.size() + 1);
  return std::nullopt;
}

}  // namespace

std::string allocator_config_text(const TrainingSetup& s) {
  // c10/core/AllocatorConfig.cpp: PYTORCH_ALLOC_CONF, else the older PYTORCH_CUDA_ALLOC_CONF.
  if (auto v = environment_value(s, "PYTORCH_ALLOC_CONF")) return *v;
  return environment_value(s, "PYTORCH_CUDA_ALLOC_CONF").value_or("");
}

AllocatorConfig allocator_config(const TrainingSetup& s) {
  AllocatorConfig c = parse_alloc_conf(allocator_config_text(s));
  // c10/cuda/CUDACachingAllocator.cpp forceUncachedAllocator: PYTORCH_NO_CUDA_MEMORY_CACHING=1.
  if (auto n = environment_value(s, "PYTORCH_NO_CUDA_MEMORY_CACHING")) c.caching = *n != "1";
  return c;
}

namespace {

// One parameter tensor of the stage as the model builds it (forward order).
struct ParamTensor {
  std::int64_t elements = 0;
  bool expert = false;
};

// One decoder (or MTP) layer of a chunk in forward order.
struct LayerRef {
  const TypeEval* eval = nullptr;
  bool recomputed = false;   // full recompute: only its input (its group's) is kept
  bool group_start = false;  // the first layer of a recompute group (keeps the group's input)
};

// What one micro-batch of a chunk keeps between its forward and backward: the handles of each
// piece in forward order.
struct Record {
  enum Kind { kBlock, kLayer, kGroup } kind = kBlock;
  std::vector<int> saved;                  // kBlock / kLayer: the saved tensors
  std::int64_t transient = 0;              // the piece's backward working set
  std::vector<const TypeEval*> group;      // kGroup: the recomputed layers
  int input = -1;                          // kGroup: the group's kept input
  const TypeEval* layer = nullptr;         // kLayer: the layer's kind
  const BlockParams* params = nullptr;     // kBlock: the block's parameters (its linears' weight shapes)
  const BlockActivations* acts = nullptr;  // kBlock: its working set's tensors, those on its own stream
};
using MicroBatch = std::vector<Record>;

class StageReplay {
 public:
  StageReplay(const Pass& ps, const StageEstimate& st, const AllocatorConfig& config)
      : ps_(ps), st_(st), alloc_(config), side_(config), streams_(config.caching) {}

  // Replays the model's construction, the same on every data-parallel rank; a copy of the
  // replay then goes on for one rank.
  void build();
  // Replays the rest of the run for data-parallel shard (dense_rank, expert_rank); returns the
  // allocator.
  const CachingAllocatorModel& run(std::int64_t dense_rank, std::int64_t expert_rank);
  // The pool of the blocks' own CUDA stream (BlockActivations::side_stream, ActTerm::side_stream).
  const CachingAllocatorModel& side_pool() const { return side_; }

 private:
  void build_model();
  void build_optimizer(std::int64_t dense_rank, std::int64_t expert_rank);
  void forward(std::int64_t vr);
  void backward(std::int64_t vr);
  void iteration(bool first);
  void place_dummy_wgrads(const BlockParams& p);
  std::vector<ParamTensor> param_tensors() const;
  std::vector<LayerRef> chunk_layers(std::int64_t vr) const;
  double activation_scale(std::int64_t vr) const;
  int take(double bytes) { return alloc_.malloc(static_cast<std::int64_t>(bytes)); }
  // A saved tensor: from the side stream's pool when its block allocates it there (handles of
  // that pool are stored as -2 - handle), else from the main one.
  int take_saved(const ActTerm& t, double bytes) {
    if (streams_ && t.side_stream) return -2 - side_.malloc(static_cast<std::int64_t>(bytes));
    return take(bytes);
  }
  void release(int h) {
    if (h <= -2)
      side_.free(-2 - h);
    else
      alloc_.free(h);
  }
  // What a block's forward allocates on its stream and frees before it returns.
  void side_forward(const BlockActivations& a);
  // What its backward allocates there, freed with its working set (appended to `held`).
  void side_backward(const BlockActivations& a, std::vector<int>& held);
  std::uint64_t digest() const { return alloc_.state_digest() * 0x9E3779B97F4A7C15ULL + side_.state_digest(); }

  const Pass& ps_;
  const StageEstimate& st_;
  CachingAllocatorModel alloc_;
  // PyTorch's caching allocator serves a request only from blocks of the requesting stream
  // (CUDACachingAllocator.cpp get_free_block: BlockComparatorSize orders a pool by stream first,
  // and a split block keeps its segment's stream): what the blocks allocate on a stream of their
  // own takes segments of its own, which only that stream reuses. Without caching
  // (PYTORCH_NO_CUDA_MEMORY_CACHING) every free goes back, so one pool holds everything.
  CachingAllocatorModel side_;
  bool streams_ = true;
  std::vector<ParamTensor> params_;
  std::vector<std::pair<std::int64_t, bool>> shard_pieces_;  // elements, expert: this rank's optimizer shard
  std::vector<int> step_only_;                               // the step's fp32 gradient copies
  std::vector<std::deque<MicroBatch>> in_flight_;            // per chunk, oldest first
  std::vector<double> scale_;                                // per chunk: activation offload's share kept
  std::vector<std::vector<LayerRef>> layers_;                // per chunk
  // TE's weight-gradient placeholders (weight_gradients.hpp): the shapes the backward passes
  // have created so far, and the bytes of the engine's figure (stage_buffers) not yet placed.
  CachedDummyWgrads dummies_;
  CheckedInt dummy_left_ = 0;
};

std::vector<ParamTensor> StageReplay::param_tensors() const {
  const auto& im = ps_.stages.im;
  std::vector<ParamTensor> out;
  auto block = [&](const BlockParams& p, std::int64_t local_experts) {
    for (const auto& t : p.terms) {
      if (t.per_rank <= 0) continue;
      if (t.shard == ShardClass::kExpert && local_experts > 1) {
        // TE GroupedLinear / SequentialMLP: one weight per local expert (grouped_linear.py weight{i}).
        for (std::int64_t i = 0; i < local_experts; ++i) out.push_back({t.per_rank / local_experts, true});
      } else {
        out.push_back({t.per_rank, t.shard == ShardClass::kExpert});
      }
    }
  };
  for (std::int64_t vr = 0; vr < ps_.stages.v; ++vr) {
    const ChunkLayout& ch = ps_.stages.part->at(st_.pp_rank, vr);
    if (ch.embedding) block(ps_.stages.layers->embedding.params, 1);
    for (std::int64_t i = ch.first_layer; i < ch.first_layer + ch.num_layers; ++i) {
      const std::size_t ti = im.layer_type[static_cast<std::size_t>(i)];
      const TypeEval& e = ps_.stages.layers->evals[ti];
      const std::int64_t local = std::max<std::int64_t>(1, im.types[ti].spec.mlp.num_experts / ps_.stages.blocks.ep);
      block(e.attn_params, local);
      block(e.mlp_params, local);
    }
    for (std::int64_t k = 0; k < ch.mtp_layers; ++k) {
      block(ps_.stages.layers->mtp_projection.params, 1);
      const std::int64_t local =
          std::max<std::int64_t>(1, im.types[im.mtp_type].spec.mlp.num_experts / ps_.stages.blocks.ep);
      block(ps_.stages.layers->mtp_eval.attn_params, local);
      block(ps_.stages.layers->mtp_eval.mlp_params, local);
    }
    if (ch.loss) block(ps_.stages.layers->output_head.params, 1);
  }
  return out;
}

std::vector<LayerRef> StageReplay::chunk_layers(std::int64_t vr) const {
  const auto& im = ps_.stages.im;
  const auto& rc = ps_.stages.s.recompute;
  const ChunkLayout& ch = ps_.stages.part->at(st_.pp_rank, vr);
  std::vector<LayerRef> out;
  for (std::int64_t i = ch.first_layer; i < ch.first_layer + ch.num_layers; ++i)
    out.push_back({&ps_.stages.layers->evals[im.layer_type[static_cast<std::size_t>(i)]]});
  for (std::int64_t k = 0; k < ch.mtp_layers; ++k) out.push_back({&ps_.stages.layers->mtp_eval});
  if (ps_.stages.full_recompute && rc.num_layers > 0) {
    // transformer_block.py _checkpointed_forward: uniform checkpoints every layer in groups of
    // N (one input per group); block the first N layers of the chunk, one at a time.
    const bool uniform = rc.method == RecomputeMethod::kUniform;
    const std::size_t n = static_cast<std::size_t>(
        uniform ? out.size() : std::min<std::int64_t>(rc.num_layers, static_cast<std::int64_t>(out.size())));
    const std::size_t group = uniform ? static_cast<std::size_t>(rc.num_layers) : 1;
    for (std::size_t j = 0; j < n; ++j) {
      out[j].recomputed = true;
      out[j].group_start = j % group == 0;
    }
  }
  return out;
}

// The share of a chunk's saved tensors that stays on the GPU: what the engine counts per
// micro-batch (activation offloading sends part of it to the host) against what the terms add up to.
double StageReplay::activation_scale(std::int64_t vr) const {
  const ChunkLayout& ch = ps_.stages.part->at(st_.pp_rank, vr);
  CheckedInt sum = 0;
  auto block = [&](const BlockActivations& a, std::int64_t n) {
    for (const auto& t : a.saved) sum += CheckedInt(t.bytes) * n;
  };
  if (ch.embedding) block(ps_.stages.layers->embedding.acts, 1);
  for (const LayerRef& l : layers_[static_cast<std::size_t>(vr)]) {
    if (l.recomputed) {
      if (l.group_start) sum += ps_.stages.layer_input_bytes;
      continue;
    }
    block(l.eval->attn_acts, 1);
    block(l.eval->mlp_acts, 1);
  }
  if (ch.mtp_layers > 0) block(ps_.stages.layers->mtp_projection.acts, ch.mtp_layers);
  if (ch.loss) block(ps_.stages.layers->output_head.acts, 1 + ch.mtp_layers);
  const std::int64_t engine = st_.chunks[static_cast<std::size_t>(vr)].activation_bytes_per_microbatch;
  if (sum.value() <= 0 || engine >= sum.value()) return 1.0;
  return static_cast<double>(engine) / static_cast<double>(sum.value());
}

void StageReplay::build_model() {
  // The model's modules create their weights one by one on the GPU (TE modules with
  // device=cuda, training/training.py get_model). Megatron's DDP (distributed_data_parallel.py,
  // param_and_grad_buffer.py _ParamAndGradBuffer.__init__) then allocates, per buffer (dense,
  // then expert), the contiguous parameter buffer (distributed optimizer only) and the gradient
  // buffer, copies each weight into the parameter buffer and frees the original.
  const auto& s = ps_.stages.s;
  const std::int64_t pb = ps_.parameters.param;
  std::vector<int> originals;
  originals.reserve(params_.size());
  for (const auto& p : params_) originals.push_back(take(static_cast<double>(p.elements * pb)));
  if (s.fsdp.kind != FsdpKind::kNone) {
    // Megatron-FSDP / FSDP2: their own buffers replace the weights (sharded_data_parallel.cpp's
    // figures, one allocation each).
    for (int h : originals) alloc_.free(h);
    take(static_cast<double>(st_.weight_bytes));
    take(static_cast<double>(st_.gradient_bytes));
    return;
  }
  const double expert_share =
      st_.parameters > 0 ? static_cast<double>(st_.expert_parameters) / static_cast<double>(st_.parameters) : 0.0;
  const bool remap = s.optimizer.distributed && !s.lora.on();
  for (const bool expert : {false, true}) {
    const double share = expert ? expert_share : 1.0 - expert_share;
    if (share <= 0) continue;
    if (remap) take(static_cast<double>(st_.weight_bytes) * share);
    take(static_cast<double>(st_.gradient_bytes) * share);
    if (!remap) continue;
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].expert == expert) alloc_.free(originals[i]);
  }
}

void StageReplay::build_optimizer(std::int64_t dense_rank, std::int64_t expert_rank) {
  // distrib_optimizer.py _build_model_gbuf_range_map: each gradient buffer (one bucket without
  // --overlap-grad-reduce; the parameters in reverse order) is cut into DP x CP equal ranges; a
  // rank's shard is the parameters' pieces in its range. Without the distributed optimizer the
  // "shard" is every parameter.
  shard_pieces_.clear();
  if (ps_.stages.s.fsdp.kind != FsdpKind::kNone) return;
  for (const bool expert : {false, true}) {
    const std::int64_t shards = expert ? ps_.parameters.expert_shards : ps_.parameters.dense_shards;
    const std::int64_t rank = expert ? expert_rank : dense_rank;
    CheckedInt total = 0;
    for (const auto& p : params_)
      if (p.expert == expert) total += p.elements;
    if (total == 0) continue;
    const std::int64_t lo = (total * rank / shards).value(), hi = (total * (rank + 1) / shards).value();
    std::int64_t at = 0;
    std::vector<std::pair<std::int64_t, bool>> mine;
    for (auto it = params_.rbegin(); it != params_.rend(); ++it) {
      if (it->expert != expert) continue;
      const std::int64_t b = std::max(at, lo), e = std::min(at + it->elements, hi);
      if (e > b) mine.emplace_back(e - b, expert);
      at += it->elements;
    }
    // The optimizer's groups list them in model order (_build_model_and_main_param_groups).
    shard_pieces_.insert(shard_pieces_.end(), mine.rbegin(), mine.rend());
  }
  // shard_main_param = shard_model_param.clone().float(): a 16-bit clone, then the fp32 copy.
  const double keep = ps_.stages.s.optimizer.precision_aware ? ps_.parameters.keep_on_gpu : 1.0;
  if (ps_.parameters.main_param == 0) return;
  for (const auto& [n, expert] : shard_pieces_) {
    const int clone = take(static_cast<double>(n * ps_.parameters.param));
    take(static_cast<double>(n * ps_.parameters.main_param) * keep);
    alloc_.free(clone);
  }
}

void StageReplay::forward(std::int64_t vr) {
  const ChunkLayout& ch = ps_.stages.part->at(st_.pp_rank, vr);
  const double f = scale_[static_cast<std::size_t>(vr)];
  MicroBatch mb;
  auto block = [&](const LmBlockEval& b, std::int64_t n) {
    Record r;
    for (std::int64_t k = 0; k < n; ++k) {
      for (const auto& t : b.acts.saved) r.saved.push_back(take_saved(t, static_cast<double>(t.bytes) * f));
      side_forward(b.acts);
    }
    r.transient = b.acts.transient;
    r.params = &b.params;
    r.acts = &b.acts;
    mb.push_back(std::move(r));
  };
  // gpt_model.py forward: embedding, the decoder layers (MTP layers after them), then the output
  // layer and the loss; each block's autograd context saves its tensors as it runs.
  if (ch.embedding) block(ps_.stages.layers->embedding, 1);
  const auto& layers = layers_[static_cast<std::size_t>(vr)];
  for (std::size_t j = 0; j < layers.size(); ++j) {
    const LayerRef& l = layers[j];
    if (l.recomputed) {
      // CheckpointFunction.forward keeps only the group's input (recompute.py).
      if (l.group_start) {
        Record r;
        r.kind = Record::kGroup;
        r.input = take(static_cast<double>(ps_.stages.layer_input_bytes.value()) * f);
        mb.push_back(std::move(r));
      }
      mb.back().group.push_back(l.eval);
      // The checkpointed forward runs without keeping anything, its own stream's steps included.
      side_forward(l.eval->attn_acts);
      side_forward(l.eval->mlp_acts);
      continue;
    }
    Record r;
    r.kind = Record::kLayer;
    r.layer = l.eval;
    for (const auto* acts : {&l.eval->attn_acts, &l.eval->mlp_acts}) {
      for (const auto& t : acts->saved) r.saved.push_back(take_saved(t, static_cast<double>(t.bytes) * f));
      side_forward(*acts);
    }
    r.transient = l.eval->transient.value();
    mb.push_back(std::move(r));
  }
  if (ch.mtp_layers > 0) block(ps_.stages.layers->mtp_projection, ch.mtp_layers);
  if (ch.loss) block(ps_.stages.layers->output_head, 1 + ch.mtp_layers);
  in_flight_[static_cast<std::size_t>(vr)].push_back(std::move(mb));
}

void StageReplay::backward(std::int64_t vr) {
  auto& queue = in_flight_[static_cast<std::size_t>(vr)];
  if (queue.empty()) return;
  MicroBatch mb = std::move(queue.front());
  queue.pop_front();
  // Autograd runs the pieces in reverse: each allocates its gradients (the working set), frees
  // what its context saved, and hands the input gradient on.
  for (auto it = mb.rbegin(); it != mb.rend(); ++it) {
    if (it->kind == Record::kGroup) {
      // CheckpointFunction.backward: the group's layers run their forward again, then backward.
      std::vector<std::vector<int>> again;
      for (const TypeEval* e : it->group) {
        std::vector<int> hs;
        for (const auto* acts : {&e->attn_acts, &e->mlp_acts}) {
          for (const auto& t : acts->saved) hs.push_back(take_saved(t, static_cast<double>(t.bytes)));
          side_forward(*acts);
        }
        again.push_back(std::move(hs));
      }
      for (std::size_t j = again.size(); j-- > 0;) {
        const int work = take(static_cast<double>(it->group[j]->transient.value()));
        std::vector<int> side;
        side_backward(it->group[j]->mlp_acts, side);
        side_backward(it->group[j]->attn_acts, side);
        place_dummy_wgrads(it->group[j]->mlp_params);
        place_dummy_wgrads(it->group[j]->attn_params);
        for (auto h = again[j].rbegin(); h != again[j].rend(); ++h) release(*h);
        alloc_.free(work);
        for (const int h : side) side_.free(h);
      }
      alloc_.free(it->input);
      continue;
    }
    // The working set: its tensors one by one where the block lists them, else one block.
    std::vector<int> work;
    if (it->acts != nullptr && !it->acts->transient_parts.empty())
      for (const ActTerm& t : it->acts->transient_parts) work.push_back(take(static_cast<double>(t.bytes)));
    else
      work.push_back(take(static_cast<double>(it->transient)));
    std::vector<int> side;
    if (it->layer != nullptr) {
      side_backward(it->layer->mlp_acts, side);
      side_backward(it->layer->attn_acts, side);
    } else if (it->acts != nullptr) {
      side_backward(*it->acts, side);
    }
    // The linears' backward (module/linear.py, layernorm_linear.py, grouped_linear.py) returns
    // the placeholders, MLP first: autograd runs the layer in reverse.
    if (it->layer != nullptr) {
      place_dummy_wgrads(it->layer->mlp_params);
      place_dummy_wgrads(it->layer->attn_params);
    } else if (it->params != nullptr) {
      place_dummy_wgrads(*it->params);
    }
    for (auto h = it->saved.rbegin(); h != it->saved.rend(); ++h) release(*h);
    for (const int h : work) alloc_.free(h);
    for (const int h : side) side_.free(h);
  }
}

void StageReplay::side_forward(const BlockActivations& a) {
  if (!streams_ || a.side_stream.empty()) return;
  std::vector<int> live;
  for (const StreamTensors& t : a.side_stream)
    for (std::int64_t k = 0; k < t.count; ++k) live.push_back(side_.malloc(t.bytes));
  for (const int h : live) side_.free(h);
}

void StageReplay::side_backward(const BlockActivations& a, std::vector<int>& held) {
  if (!streams_) return;  // one pool: the bytes are in the block's working set
  for (const StreamTensors& t : a.side_stream_backward)
    for (std::int64_t k = 0; k < t.count; ++k) held.push_back(side_.malloc(t.bytes));
}

void StageReplay::iteration(bool first) {
  // train_step (training.py): zero_grad_buffer and the optimizer's zero_grad(set_to_none=True)
  // free the last step's fp32 gradient copies; then the schedule's forward and backward passes
  // (schedules.py), the gradients' reduce-scatter into the gradient buffer (in place), and the
  // optimizer step. --empty-unused-memory-level 2 emptied the cache after the last step (before
  // this zero_grad; nothing empties it after the model's construction).
  if (!first && ps_.stages.s.empty_unused_memory_level >= 2) alloc_.empty_cache(), side_.empty_cache();
  for (int h : step_only_) alloc_.free(h);
  step_only_.clear();
  const std::int64_t p = ps_.stages.p, v = ps_.stages.v, r = st_.pp_rank;
  const std::int64_t m = ps_.stages.s.num_micro_batches > 0 ? ps_.stages.s.num_micro_batches : 2 * p;
  const std::int64_t group =
      ps_.stages.s.pipeline.microbatch_group_size.value_or(0) > 0 ? *ps_.stages.s.pipeline.microbatch_group_size : p;
  // forward_backward_pipelining_without_interleaving: p - r - 1 warmup forwards, then one
  // forward and one backward at a time, then the cooldown backwards. With interleaving
  // (_with_interleaving): 2 (p - r - 1) + (v - 1) G warmup passes over m v, the chunk of pass k
  // being (k mod Gv) / G (backwards in reverse chunk order). PP = 1 runs one micro-batch at a time.
  const std::int64_t total = m * v;
  const std::int64_t warmup = v == 1 ? std::min(p - r - 1, m) : std::min(2 * (p - r - 1) + (v - 1) * group, total);
  auto fchunk = [&](std::int64_t k) { return v == 1 ? 0 : (k % (group * v)) / group; };
  auto bchunk = [&](std::int64_t k) { return v == 1 ? 0 : v - 1 - (k % (group * v)) / group; };
  std::int64_t fk = 0, bk = 0;
  for (; fk < warmup; ++fk) forward(fchunk(fk));
  // The steady phase repeats: once the allocator's state before a pair recurs at the same
  // place of the chunk cycle, the pairs in between repeat until the end, and are skipped.
  std::map<std::pair<std::uint64_t, std::int64_t>, std::int64_t> seen;
  const std::int64_t steady = total - warmup;
  for (std::int64_t k = 0; k < steady; ++k) {
    const auto key = std::make_pair(digest(), v == 1 ? 0 : fk % (group * v));
    if (auto it = seen.find(key); it != seen.end()) {
      const std::int64_t period = k - it->second;
      const std::int64_t skip = (steady - k) / period * period;
      k += skip, fk += skip, bk += skip;
      seen.clear();
      if (k >= steady) break;
    } else {
      seen.emplace(key, k);
    }
    forward(fchunk(fk++));
    backward(bchunk(bk++));
  }
  for (; bk < total; ++bk) backward(bchunk(bk));
  // Placeholders no backward pass placed (shapes past CachedDummyWgrads' table) stay as one.
  if (dummy_left_ > 0) {
    take(static_cast<double>(dummy_left_.value()));
    dummy_left_ = 0;
  }
  // training.py train_step: --empty-unused-memory-level 1 or 2 empties the cache after the
  // forward and backward passes (2 after the optimizer step as well: above).
  if (ps_.stages.s.empty_unused_memory_level >= 1) alloc_.empty_cache(), side_.empty_cache();
  // The optimizer step (distrib_optimizer.py step): 16-bit gradients become fp32 copies
  // (_copy_model_grads_to_main_grads); the first step creates Adam's exp_avg and exp_avg_sq per
  // shard piece (TE FusedAdam initialize_state, lazily on the first step).
  const double keep = ps_.parameters.keep_on_gpu;
  for (const auto& [n, expert] : shard_pieces_)
    if (ps_.parameters.main_grad_copy > 0)
      step_only_.push_back(take(static_cast<double>(n * ps_.parameters.main_grad_copy)));
  if (!first) return;
  if (ps_.stages.s.fsdp.kind != FsdpKind::kNone) {
    take(static_cast<double>(st_.optimizer_bytes - st_.step_only_bytes));
    return;
  }
  for (const auto& [n, expert] : shard_pieces_) {
    take(static_cast<double>(n * ps_.parameters.exp_avg) * keep);
    take(static_cast<double>(n * ps_.parameters.exp_avg_sq) * keep);
  }
}

// module/base.py get_dummy_wgrad: the first backward through a linear of a new (shape, dtype)
// creates its placeholder with torch.empty, at that moment, and the module-level cache keeps
// it; a placeholder of a weight's shape often lands in the cached segment the weight's original
// tensor left when Megatron's DDP moved the weights into its buffer (build_model).
void StageReplay::place_dummy_wgrads(const BlockParams& p) {
  if (dummy_left_ <= 0) return;
  std::vector<std::int64_t> added;
  dummies_.add(p, ps_.stages.s, &added);
  for (auto e = added.rbegin(); e != added.rend(); ++e) {
    const CheckedInt bytes = CheckedInt(*e) * ps_.stages.bytes.param;
    if (bytes > dummy_left_) break;
    take(static_cast<double>(bytes.value()));
    dummy_left_ -= bytes;
  }
}

void StageReplay::build() {
  params_ = param_tensors();
  layers_.clear();
  scale_.clear();
  for (std::int64_t vr = 0; vr < ps_.stages.v; ++vr) layers_.push_back(chunk_layers(vr));
  for (std::int64_t vr = 0; vr < ps_.stages.v; ++vr) scale_.push_back(activation_scale(vr));
  in_flight_.assign(static_cast<std::size_t>(ps_.stages.v), {});
  build_model();
}

const CachingAllocatorModel& StageReplay::run(std::int64_t dense_rank, std::int64_t expert_rank) {
  build_optimizer(dense_rank, expert_rank);
  // The first forward pass creates the workspaces that live for the run: TE's cuBLAS workspace
  // (module/base.py get_workspace), PyTorch's cuBLAS and cuBLASLt workspaces
  // (CublasHandlePool.cpp), TE grouped GEMM's, and the rest of the persistent buffers (the global
  // memory buffer, FP8 weight caches, CUDA-graph buffers) as they come.
  CheckedInt other = st_.other_bytes;
  // TE's weight-gradient placeholders come one by one in the first backward pass (backward).
  dummy_left_ = std::min(CheckedInt(st_.dummy_wgrad_bytes), other);
  other -= dummy_left_;
  auto persistent = [&](CheckedInt bytes) {
    if (bytes <= 0 || bytes > other) return;
    take(static_cast<double>(bytes.value()));
    other -= bytes;
  };
  persistent(ps_.workspaces.te);
  persistent(ps_.workspaces.torch);
  persistent(ps_.workspaces.torch);
  if (ps_.workspaces.grouped_gemm)
    for (int k = 0; k < 4; ++k) persistent(ps_.workspaces.te);
  persistent(other);
  // Iterations until one leaves the allocator as the previous one did (the first creates the
  // optimizer states, the next ones settle into the cached segments); at most eight.
  std::uint64_t before = 0;
  for (int it = 0; it < 8; ++it) {
    const std::uint64_t start = digest();
    if (it >= 2 && start == before) break;
    before = start;
    iteration(it == 0);
  }
  return alloc_;
}

// NCCL's buffers of one connection (one peer, one channel): the Simple protocol's NCCL_BUFFSIZE
// (DEFAULT_BUFFSIZE 4 MiB, src/init.cc), LL128's 120 x 640 x 8 steps x 8 B (DEFAULT_LL128_BUFFSIZE)
// and LL's 8 x 512 x 8 steps x 16 B (DEFAULT_LL_BUFFSIZE), src/include/device.h.
constexpr std::int64_t kNcclLl128Buffer = 120LL * 640 * 8 * 8;
constexpr std::int64_t kNcclLlBuffer = 8LL * 512 * 8 * 16;
constexpr std::int64_t kNcclSimpleBuffer = 4LL << 20;
// Assumption: NCCL builds 16 ring channels on an NVLink/NVSwitch node (H100, B200), each rank
// holding one connection's buffers per channel; tree and NVLS buffers are not counted.
constexpr std::int64_t kNcclChannels = 16;
// Assumption: the CUDA context of a PyTorch training process with lazy module loading (CUDA 12's
// default), cuBLAS, cuDNN and TE kernels loaded: 512 MiB on every architecture mme knows.
constexpr std::int64_t kCudaContextBytes = 512LL << 20;

std::int64_t nccl_communicator_bytes(const TrainingSetup& s) {
  std::int64_t simple = kNcclSimpleBuffer;
  if (auto v = environment_value(s, "NCCL_BUFFSIZE")) {
    try {
      simple = std::stoll(*v);
    } catch (const std::exception&) {
      throw UsageError(fmt::format("NCCL_BUFFSIZE '{}' is not a number of bytes", *v));
    }
    if (simple <= 0) throw UsageError(fmt::format("NCCL_BUFFSIZE '{}' is not a positive number of bytes", *v));
  }
  return kNcclChannels * (simple + kNcclLl128Buffer + kNcclLlBuffer);
}

// The process groups whose collectives a training step runs, each one NCCL communicator per rank
// (PyTorch's ProcessGroupNCCL creates it at the group's first collective): parallel_state.py
// initialize_model_parallel.
struct Communicator {
  const char* name;
  std::int64_t ranks;
};
std::vector<Communicator> communicators(const Pass& ps, std::int64_t pp_rank) {
  const auto& par = ps.stages.s.parallel;
  std::vector<Communicator> out;
  auto add = [&](const char* name, std::int64_t n) {
    if (n > 1) out.push_back({name, n});
  };
  add("world (torch.distributed.barrier in initialize.py)", par.world_size);
  add("tensor parallel", par.tp);
  add("context parallel", par.cp);
  add("data parallel with context parallel (gradient reduce-scatter, parameter all-gather)", par.dp * par.cp);
  add("pipeline parallel (send/recv)", par.pp);
  add("model parallel (gradient-norm all-reduce)", par.tp * par.pp);
  if (ps.stages.im.any_moe) {
    add("expert parallel (token all-to-all)", par.ep);
    add("expert tensor parallel", effective_etp(par));
    add("expert data parallel (expert gradients)", par.expert_dp);
  }
  const bool ends = pp_rank == 0 || pp_rank == par.pp - 1;
  if (par.pp > 1 && ends && ps.stages.im.model.tie_embeddings) add("embedding (tied embedding gradients)", 2);
  return out;
}

}  // namespace

void add_device_memory(const Pass& ps, StageEstimate& st) {
  const AllocatorConfig config = allocator_config(ps.stages.s);
  // The replay for up to four data-parallel ranks (the first, the last and two between): their
  // optimizer shards hold different parameters, so their segments differ; the largest counts.
  const std::int64_t ranks = std::max(ps.parameters.dense_shards, ps.parameters.expert_shards);
  const std::int64_t samples = std::min<std::int64_t>(ranks, 4);
  std::int64_t reserved = 0, requested = 0, side = 0;
  StageReplay built(ps, st, config);
  built.build();
  for (std::int64_t k = 0; k < samples; ++k) {
    auto pick = [&](std::int64_t n) { return samples > 1 ? k * (n - 1) / (samples - 1) : 0; };
    StageReplay replay = k + 1 < samples ? StageReplay(built) : std::move(built);  // the last one takes it
    const CachingAllocatorModel& a = replay.run(pick(ps.parameters.dense_shards), pick(ps.parameters.expert_shards));
    // The blocks' own stream keeps its segments beside the main stream's: reserved memory never
    // shrinks (nothing empties the cache), so the two pools' peaks add up.
    const CachingAllocatorModel& b = replay.side_pool();
    if (a.peak_reserved() + b.peak_reserved() > reserved + side)
      reserved = a.peak_reserved(), side = b.peak_reserved(), requested = a.peak_requested() + b.peak_requested();
  }
  // Bytes of the estimate's peak that the replayed sequence does not hold (terms with no place
  // of their own in it) take segments of their own, rounded like one.
  if (st.total_bytes > requested) reserved += allocator_segment_size(st.total_bytes - requested);
  // CUDA graphs: the graphs' private pool stays reserved beside the eager segments (cuda_graphs.cpp).
  reserved += st.cuda_graph_pool_bytes;
  st.side_stream_reserved_bytes = side;
  reserved += side;
  st.reserved_bytes = std::max(reserved, st.total_bytes);

  std::vector<Component> outside;
  // The CUDA context (driver, module images of the kernels used).
  outside.push_back({"device/cuda_context", MemoryCategory::kOther, kCudaContextBytes});
  const std::int64_t per_comm = nccl_communicator_bytes(ps.stages.s);
  for (const auto& c : communicators(ps, st.pp_rank))
    outside.push_back({fmt::format("device/nccl/{}", c.name), MemoryCategory::kOther, per_comm});
  // TE userbuffers of --tp-comm-overlap (communication_buffers.cpp): cudaMalloc'd by TE.
  if (st.outside_allocator_bytes > 0)
    outside.push_back({"device/te_userbuffers", MemoryCategory::kOther, st.outside_allocator_bytes});
  CheckedInt sum = 0;
  for (const auto& c : outside) sum += c.bytes;
  st.outside_pytorch_bytes = sum.value();
  st.device_bytes = (CheckedInt(st.reserved_bytes) + sum).value();
  st.device_upper_bytes = st.device_bytes;
  st.device_components = std::move(outside);
}

void finish_device_memory(Estimate& est) {
  for (std::size_t i = 0; i < est.stages.size(); ++i) {
    auto& st = est.stages[i];
    if (st.device_bytes == 0) continue;
    // What the bound adds beyond the estimate, without the allocator's block rounding (which the
    // replay holds) and the userbuffers (in outside_pytorch_bytes already).
    const std::int64_t beyond = st.upper_bytes - st.outside_allocator_bytes - st.allocator_slack_bytes - st.total_bytes;
    st.device_upper_bytes = (CheckedInt(st.device_bytes) + std::max<std::int64_t>(0, beyond)).value();
    if (st.device_upper_bytes > est.stages[est.device_stage].device_upper_bytes) est.device_stage = i;
  }
}

void add_device_assumptions(const Pass& ps, std::vector<std::string>& a) {
  if (!ps.options.device_memory) return;
  const AllocatorConfig c = allocator_config(ps.stages.s);
  a.push_back(
      "device total: the CUDA context taken as 512 MiB; NCCL as 16 ring channels of Simple + LL128 + LL buffers "
      "per communicator of the groups a step uses (tree and NVLS buffers not counted)");
  a.push_back(fmt::format(
      "reserved memory: PyTorch's caching allocator replayed over one rank's model build, optimizer shards and "
      "training iterations on the main stream{}{}",
      !c.caching              ? " (PYTORCH_NO_CUDA_MEMORY_CACHING: nothing cached)"
      : c.expandable_segments ? " (expandable segments)"
                              : "",
      c.async_backend ? "; backend:cudaMallocAsync is not modelled (the native allocator is replayed instead)" : ""));
  const TrainingSetup& s = ps.stages.s;
  if (s.parallel.cp > 1 && (s.cp_comm_type == CpCommType::kP2P || s.cp_comm_type == CpCommType::kA2AP2P))
    a.push_back(
        "reserved memory: Transformer Engine's CP ring runs every other step on a second CUDA stream, whose "
        "segments (side_stream_reserved_bytes) the main stream never reuses");
  if (s.parallel.cp > 1 && s.cp_comm_type == CpCommType::kA2A)
    a.push_back(
        "reserved memory: Transformer Engine's a2a exchange reorders Q, K, V, the output and their gradients on its "
        "CP stream, whose segments (side_stream_reserved_bytes) the main stream never reuses");
  if (s.parallel.cp > 1 && s.cp_comm_type == CpCommType::kA2AP2P)
    a.push_back(
        "reserved memory: the a2a half of a2a+p2p reorders Q, K, V and the output on the CP stream too; only the "
        "ring's steps are replayed there");
  if (const std::int64_t level = s.empty_unused_memory_level; level > 0)
    a.push_back(
        fmt::format("--empty-unused-memory-level {}: torch.cuda.empty_cache() after each step's forward and "
                    "backward passes{} gives the whole cached segments back (reserved memory only)",
                    level, level >= 2 ? " and after the optimizer step" : ""));
  if (c.garbage_collection_threshold > 0)
    a.push_back(
        "garbage_collection_threshold acts only under torch.cuda.set_per_process_memory_fraction, which "
        "Megatron-LM does not call: no effect");
}

}  // namespace mme
