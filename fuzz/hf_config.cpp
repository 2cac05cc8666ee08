// Fuzz target: the Hugging Face config adapters, JSON bytes to ModelSpec, and the engine on
// what they accept.
//
// Input: the bytes of a config.json. They go the way `mme estimate ./config.json` takes them:
// parse_config_text (NUL bytes, emptiness, JSON syntax, nesting), adapt_config (the best
// adapter of the in-tree plugins: deepseek, qwen, moonlight_kimi, generic_hf, and the
// megatron_args / spec_file documents), validate_model_spec; then, for a spec that passes, the
// exact parameter count and the estimate under a few layouts (a layout the model refuses is a
// LayoutError, an answer like any other).
//
// Oracle: only mme::Error may come out (fuzz_support.hpp); an estimate must hold together
// (non-negative byte counts, static + activations = total, components on or off alike).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <mme/engine/estimator.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/model_source.hpp>

#include "fuzz_support.hpp"

namespace {

std::vector<mme::TrainingSetup> layouts() {
  std::vector<mme::TrainingSetup> out;
  mme::TrainingSetup one;  // one GPU, the defaults
  one.parallel.world_size = 1;
  out.push_back(one);
  mme::TrainingSetup big;  // TP, PP with VPP, EP, selective recompute of everything, FP8
  big.parallel = {.tp = 2, .pp = 2, .vpp = 2, .ep = 2, .etp = 1, .cp = 1, .world_size = 16};
  big.micro_batch_size = 2;
  big.seq_length = 8192;
  big.global_batch_size = 64;
  big.precision = mme::Precision::kFP8;
  big.recompute.granularity = mme::RecomputeGranularity::kSelective;
  big.recompute.modules = 0x7f;
  big.dispatcher = mme::TokenDispatcher::kAllGather;
  big.moe_capacity_factor = 1.5;
  big.moe_pad_to_capacity = true;
  out.push_back(big);
  mme::TrainingSetup odd;  // CP, full recompute, unfused attention, fp32, plain optimizer, dropout
  odd.parallel = {.tp = 1, .pp = 4, .vpp = 1, .ep = 1, .etp = 0, .cp = 2, .world_size = 8};
  odd.attention_backend = mme::AttentionBackend::kFlash;
  odd.precision = mme::Precision::kFP32;
  odd.recompute.granularity = mme::RecomputeGranularity::kFull;
  odd.recompute.num_layers = 3;
  odd.optimizer.distributed = false;
  odd.hidden_dropout = 0.1;
  odd.attention_dropout = 0.1;
  odd.pipeline.account_for_embedding = true;
  odd.pipeline.account_for_loss = true;
  out.push_back(odd);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static const std::vector<mme::TrainingSetup> setups = layouts();
  mme::fuzz::run_checked("hf_config", [&] {
    const nlohmann::json config = mme::parse_config_text(text, "config.json");
    const mme::ModelSpec spec = mme::adapt_config(config, "fuzz/model", "config.json", mme::fuzz::registry());
    const mme::Estimator estimator(spec, mme::fuzz::registry());
    const auto params = estimator.count_parameters();
    if (params.total < 0 || params.active < 0 || params.mtp < 0)
      mme::fuzz::finding("hf_config", "a negative parameter count");
    for (const auto& setup : setups) {
      mme::fuzz::run_checked("hf_config", [&] {
        mme::EstimateOptions with, without;
        with.layer_breakdown = true;
        without.components = false;
        mme::fuzz::check_estimates_agree("hf_config", estimator.run(setup, with), estimator.run(setup, without));
      });
    }
  });
  return 0;
}
