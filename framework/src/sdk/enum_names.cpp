// The names of every enum of a TrainingSetup, one table each (enum_names.hpp): what to_string()
// prints and what every input (mme flags, Megatron-LM flags, spec files) accepts.
#include "mme/sdk/enum_names.hpp"

#include <string>

#include "mme/sdk/text.hpp"
#include "mme/sdk/training_setup.hpp"

namespace mme {

namespace {

constexpr EnumName kPrecisionArr[] = {{"bf16", static_cast<int>(Precision::kBF16)},
                                      {"fp16", static_cast<int>(Precision::kFP16)},
                                      {"fp8", static_cast<int>(Precision::kFP8)},
                                      {"fp32", static_cast<int>(Precision::kFP32)}};
// The torch spellings are accepted too (PyTorch dtype names; "uint8" is how FP8 states are stored).
constexpr EnumName kDTypeArr[] = {
    {"fp32", static_cast<int>(DType::kFP32)},          {"bf16", static_cast<int>(DType::kBF16)},
    {"fp16", static_cast<int>(DType::kFP16)},          {"fp8", static_cast<int>(DType::kFP8)},
    {"float32", static_cast<int>(DType::kFP32), true}, {"bfloat16", static_cast<int>(DType::kBF16), true},
    {"float16", static_cast<int>(DType::kFP16), true}, {"uint8", static_cast<int>(DType::kFP8), true}};
constexpr EnumName kAttentionBackendArr[] = {{"flash", static_cast<int>(AttentionBackend::kFlash)},
                                             {"fused", static_cast<int>(AttentionBackend::kFused)},
                                             {"unfused", static_cast<int>(AttentionBackend::kUnfused)},
                                             {"local", static_cast<int>(AttentionBackend::kUnfused), true},
                                             {"auto", static_cast<int>(AttentionBackend::kAuto)}};
// alltoall_seq: Megatron-LM's older sequence-parallel all-to-all, the same buffers.
constexpr EnumName kTokenDispatcherArr[] = {{"alltoall", static_cast<int>(TokenDispatcher::kAllToAll)},
                                            {"alltoall_seq", static_cast<int>(TokenDispatcher::kAllToAll), true},
                                            {"allgather", static_cast<int>(TokenDispatcher::kAllGather)},
                                            {"flex", static_cast<int>(TokenDispatcher::kFlex)}};
// transformer_config.py moe_flex_dispatcher_backend (ncclep is refused by the knob: not modelled).
constexpr EnumName kFlexBackendArr[] = {{"deepep", static_cast<int>(FlexBackend::kDeepEP)},
                                        {"hybridep", static_cast<int>(FlexBackend::kHybridEP)}};
// --cuda-graph-impl (transformer_config.py cuda_graph_impl; full_iteration is refused by the knob).
constexpr EnumName kCudaGraphImplArr[] = {{"none", static_cast<int>(CudaGraphImpl::kNone)},
                                          {"local", static_cast<int>(CudaGraphImpl::kLocal)},
                                          {"transformer_engine", static_cast<int>(CudaGraphImpl::kTransformerEngine)}};
// Transformer Engine's names (attn_forward_func_with_cp takes exactly these).
constexpr EnumName kCpCommTypeArr[] = {{"p2p", static_cast<int>(CpCommType::kP2P)},
                                       {"all_gather", static_cast<int>(CpCommType::kAllGather)},
                                       {"a2a", static_cast<int>(CpCommType::kA2A)},
                                       {"a2a+p2p", static_cast<int>(CpCommType::kA2AP2P)}};
constexpr EnumName kRecomputeGranularityArr[] = {{"none", static_cast<int>(RecomputeGranularity::kNone)},
                                                 {"selective", static_cast<int>(RecomputeGranularity::kSelective)},
                                                 {"full", static_cast<int>(RecomputeGranularity::kFull)}};
constexpr EnumName kRecomputeMethodArr[] = {{"uniform", static_cast<int>(RecomputeMethod::kUniform)},
                                            {"block", static_cast<int>(RecomputeMethod::kBlock)}};
// arguments.py: the choices of --data-parallel-sharding-strategy.
constexpr EnumName kFsdpShardingArr[] = {{"no_shard", static_cast<int>(FsdpSharding::kNoShard)},
                                         {"optim", static_cast<int>(FsdpSharding::kOptim)},
                                         {"optim_grads", static_cast<int>(FsdpSharding::kOptimGrads)},
                                         {"optim_grads_params", static_cast<int>(FsdpSharding::kOptimGradsParams)}};
constexpr EnumName kFsdpKindArr[] = {{"none", static_cast<int>(FsdpKind::kNone)},
                                     {"megatron_fsdp", static_cast<int>(FsdpKind::kMegatron)},
                                     {"torch_fsdp2", static_cast<int>(FsdpKind::kTorchFsdp2)}};
constexpr EnumName kTransformerImplArr[] = {{"transformer_engine", 1}, {"local", 0}};
constexpr EnumName kCrossEntropyImplArr[] = {{"native", 0}, {"te", 1}};
constexpr EnumName kOptimizerArr[] = {{"adam", 0}, {"sgd", 1}, {"muon", 2}};
// transformer_config.py fp8_recipe and fp8 (--fp8-format) choices (custom: refused by the knob).
constexpr EnumName kFp8RecipeArr[] = {{"delayed", static_cast<int>(Fp8Recipe::kDelayed)},
                                      {"tensorwise", static_cast<int>(Fp8Recipe::kTensorwise)},
                                      {"blockwise", static_cast<int>(Fp8Recipe::kBlockwise)},
                                      {"mxfp8", static_cast<int>(Fp8Recipe::kMxfp8)}};
constexpr EnumName kFp8FormatArr[] = {{"e4m3", static_cast<int>(Fp8Format::kE4M3)},
                                      {"hybrid", static_cast<int>(Fp8Format::kHybrid)}};
constexpr EnumName kLoraDropoutPositionArr[] = {{"pre", static_cast<int>(LoraDropoutPosition::kPre)},
                                                {"post", static_cast<int>(LoraDropoutPosition::kPost)}};

}  // namespace

const EnumTable kPrecisionNames = kPrecisionArr;
const EnumTable kDTypeNames = kDTypeArr;
const EnumTable kAttentionBackendNames = kAttentionBackendArr;
const EnumTable kTokenDispatcherNames = kTokenDispatcherArr;
const EnumTable kFlexBackendNames = kFlexBackendArr;
const EnumTable kCudaGraphImplNames = kCudaGraphImplArr;
const EnumTable kCpCommTypeNames = kCpCommTypeArr;
const EnumTable kRecomputeGranularityNames = kRecomputeGranularityArr;
const EnumTable kRecomputeMethodNames = kRecomputeMethodArr;
const EnumTable kFsdpShardingNames = kFsdpShardingArr;
const EnumTable kFsdpKindNames = kFsdpKindArr;
const EnumTable kTransformerImplNames = kTransformerImplArr;
const EnumTable kCrossEntropyImplNames = kCrossEntropyImplArr;
const EnumTable kOptimizerNames = kOptimizerArr;
const EnumTable kFp8RecipeNames = kFp8RecipeArr;
const EnumTable kFp8FormatNames = kFp8FormatArr;
const EnumTable kLoraDropoutPositionNames = kLoraDropoutPositionArr;

const char* enum_name(EnumTable table, int value) {
  for (const auto& n : table)
    if (n.value == value && !n.alias) return n.name;
  return "?";
}

std::optional<int> enum_value(EnumTable table, std::string_view text) {
  const std::string t = lower(text);
  for (const auto& n : table)
    if (lower(n.name) == t) return n.value;
  return std::nullopt;
}

}  // namespace mme
