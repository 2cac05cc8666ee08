// Per-layer CUDA graphs (--cuda-graph-impl transformer_engine | local, --cuda-graph-modules).
// What Megatron-LM graphs and how that shows in torch.cuda.max_memory_allocated:
//  - transformer_engine: core/transformer/cuda_graphs.py TECudaGraphHelper captures every
//    graphed layer once per micro-batch of the pipeline schedule (one micro-batch with PP 1),
//    after --cuda-graph-warmup-steps eager steps, through TE's make_graphed_callables
//    (transformer_engine/pytorch/graph.py) in the schedule's order, all graphs sharing one
//    private memory pool. During capture the graphed scopes' saved tensors and working memory
//    are allocated from that pool as an eager step would allocate them; afterwards the pool is
//    reserved but its blocks are not allocated, so replayed graphs add nothing the allocator
//    counts. What stays allocated: the static inputs (hidden states, the attention mask),
//    reused once a micro-batch's backward is done (_get_sample_arguments), one gradient buffer
//    per output signature and the last inputs' gradients (_reuse_graph_input_output_buffers).
//  - local: CudaGraphManager records the graphed layers during an eager step and captures them
//    after it; the same buffers, with the eager step's peak always in the run.
// The step's peak is the largest of: the eager warm-up steps (absent with transformer_engine and
// --cuda-graph-warmup-steps 0), the capture, the replayed steps and the optimizer step. The
// pool is memory the GPU must hold next to the replayed steps: the upper bound adds it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "estimator_internal.hpp"

namespace mme {

// What Megatron-LM refuses with CUDA graphs (transformer_config.py __post_init__, arguments.py
// validate_args, transformer_layer.py) and what mme does not model: LayoutError.
void validate_cuda_graphs(const ModelSpec& model, const TrainingSetup& setup);

// Fills e.graphs for a layer kind whose blocks are evaluated (e.attn_acts, e.mlp_acts).
void evaluate_layer_graphs(const ModelSpec& m, const BlockLayout& blocks, const LayerSpec& layer, bool moe,
                           TypeEval& e);

// A stage's graphed layers, summed over its chunks by stage_layers (estimator_stages.cpp).
struct StageGraphs {
  CheckedInt saved = 0;            // graphed saved bytes of every layer and micro-batch in flight
  CheckedInt transient = 0;        // the largest graphed working set
  CheckedInt eager_transient = 0;  // the largest working set outside the graphs
  CheckedInt static_inputs = 0;    // static input buffers (one per graphed layer and micro-batch in flight)
  CheckedInt grad_outputs = 0;     // the largest output-gradient buffer set
  // Adds n layers of kind e with mb micro-batches in flight.
  void add_layers(const StagePlan& plan, const TypeEval& e, CheckedInt n, std::int64_t mb);
};

// The graphs' buffers on a stage, allocated from the capture on: the static inputs and the
// gradient buffers (0 without graphs).
CheckedInt graph_buffers(const StagePlan& plan, const StageGraphs& g);

// The phases of a stage with CUDA graphs, from its memory without them.
struct GraphPhases {
  CheckedInt capture = 0;  // the capture: static memory, buffers, the graphed scopes' activations
  CheckedInt replay = 0;   // a replayed step's forward/backward: what runs eagerly
  CheckedInt eager = 0;    // a warm-up step's forward/backward (0: none runs)
  CheckedInt pool = 0;     // the graphs' private pool: reserved, not allocated, during replay
};
// `base`: static memory during forward/backward without the `buffers` (graph_buffers); `saved`
// and `transient`: the stage's activations as if no graph ran.
GraphPhases graph_phases(const CudaGraphSettings& g, const StageGraphs& graphs, CheckedInt buffers, CheckedInt base,
                         CheckedInt saved, CheckedInt transient);

// The assumption lines of a CUDA-graph setup (none without graphs).
void add_graph_assumptions(const CudaGraphSettings& g, std::vector<std::string>& out);

}  // namespace mme
