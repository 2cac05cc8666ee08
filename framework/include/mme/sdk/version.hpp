// Version of the SDK and of the plugin ABI.
#pragma once

#include <cstdint>
#include <string_view>

// nlohmann_json's version macros (for the ABI tag below) without the library itself.
#if __has_include(<nlohmann/detail/abi_macros.hpp>)
#include <nlohmann/detail/abi_macros.hpp>  // nlohmann_json 3.11 and later
#else
#include <nlohmann/json_fwd.hpp>
#endif

#define MME_VERSION_MAJOR 0
#define MME_VERSION_MINOR 1
#define MME_VERSION_PATCH 0
#define MME_VERSION_STRING "0.1.0"

// The plugin API version. Bump it whenever a type that crosses the plugin boundary
// (ModelSpec, TrainingSetup, the three interfaces, Registrar) changes layout or meaning.
// 3: the entry is a plain extern "C" function (mme_plugin_info) and registration receives an
//    add-only Registrar instead of the host Registry.
// 4: LayerMemoryModel::costs (FLOPs, weight bytes, collective bytes per micro-batch); the blocks
//    around the decoder layers (embedding, output head, MTP projection) are layer-memory models
//    too (BlockRole, ModelSpec::lm_blocks); BlockContext gains weight_bytes, pp and vocab_local;
//    ActTerm gains module and tensor_elements (activation offloading); TrainingSetup gains
//    activation_offload and `comm` (CommunicationSettings: flex backend, overlaps, DDP buckets).
// 5: ActTerm gains graph_scope (the partial CUDA-graph scopes that capture a term); TrainingSetup
//    gains cuda_graph (CudaGraphSettings), low_precision (FP8/FP4 recipes) and the bias-activation,
//    RoPE and bias-dropout fusion switches.
// 6: LayerMemoryModel::megatron_block (the Megatron-LM module class a block models, kNone by
//    default), which the host asks instead of naming block kinds; BlockParams gains gemm_weights
//    (the per-rank shapes of a block's Transformer Engine linears, whose cached placeholder weight
//    gradients the engine counts); HardwareProfile gains fp4_tflops, inter_node_bandwidth_gbps,
//    gpus_per_node and host_link_bandwidth_gbps; BlockCosts gains gemms (each forward GEMM's shape on a rank),
//    elementwise_bytes and elementwise_saved_bytes (the planner's step-time model).
// 7: AttentionBackend gains kFused (cuDNN fused attention, Transformer Engine's FusedAttention);
//    kFlash now means its FlashAttention over flash-attn only, which keeps a second copy of the
//    attention output (block_helpers.hpp flash_attn_output_copy_bytes). A block that asked
//    `== kFlash` for "no score tensors" asks fused_kernel_attention() instead.
// 8: BlockActivations gains side_stream (StreamTensors: what a block's forward allocates on a CUDA
//    stream of its own, kept in a caching-allocator pool of its own by the reserved-memory replay);
//    block_helpers.hpp add_context_parallel_side_stream reports TE's CP ring steps on its second
//    stream; and transient_parts (the backward working set's tensors in allocation order, for
//    the same replay).
// 9: ActTerm gains side_stream (a saved tensor allocated on the block's own CUDA stream) and
//    BlockActivations side_stream_backward (what its backward allocates there); block_helpers.hpp
//    add_a2a_context_parallel_stream reports Transformer Engine's Ulysses exchange on cp_stream.
// 10: AttentionSpec gains window (sliding-window attention) and softmax_type (SoftmaxType: GPT-OSS's
//    learnable attention sinks); ModelSpec gains glu_linear_offset and activation_clamp_value (the
//    clamped quick-GEGLU); resolve_attention takes the model (a softmax other than vanilla rules
//    out FlashAttention); ModelSpec gains rope_yarn_factor (YaRN: the unfused RoPE).
// 11: hybrid models: AttentionSpec gains the Mamba-2 mixer's sizes (mamba_num_heads, mamba_head_dim,
//    mamba_state_dim, mamba_num_groups); MegatronBlock gains kMambaMixer and kIdentity, ParamGroup
//    kMamba.
#define MME_PLUGIN_API_VERSION 11

#define MME_STRINGIFY_INNER(x) #x
#define MME_STRINGIFY(x) MME_STRINGIFY_INNER(x)

// The C++ ABI a plugin was built against. Objects cross the boundary as C++ types
// (std::string, std::shared_ptr, nlohmann::json), so host and plugin must agree on the
// standard library ABI and on the nlohmann_json major.minor version.
#define MME_ABI_TAG                                                                   \
  "libstdc++-cxx11abi" MME_STRINGIFY(_GLIBCXX_USE_CXX11_ABI) "-gxxabi" MME_STRINGIFY( \
      __GXX_ABI_VERSION) "-json" MME_STRINGIFY(NLOHMANN_JSON_VERSION_MAJOR) "." MME_STRINGIFY(NLOHMANN_JSON_VERSION_MINOR)

namespace mme {

inline constexpr std::uint32_t kPluginApiVersion = MME_PLUGIN_API_VERSION;
inline constexpr std::string_view kAbiTag = MME_ABI_TAG;
inline constexpr std::string_view kVersion = MME_VERSION_STRING;

// The version of the libmme the process actually loaded (may differ from the headers a
// plugin was compiled against; the API version is what must match).
std::string_view library_version() noexcept;

}  // namespace mme
