// Fuzz target: Megatron-LM flags as input (`mme estimate --megatron-args TEXT` and
// --megatron-args-file): the shell-like tokenizer, the training setup the flags describe, the
// megatron_args adapter (the model they describe, --moe-layer-freq included) and the engine.
//
// Input: the text of a launch line or an argument file.
//
// Oracle: only mme::Error may come out (fuzz_support.hpp); the flags survive a round trip
// through their config document; an estimate holds together (non-negative byte counts,
// static + activations = total, components on or off alike).
#include <cstdint>
#include <string>
#include <string_view>

#include <mme/estimator.hpp>
#include <mme/megatron_args.hpp>
#include <mme/model_loader.hpp>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  mme::fuzz::run_checked("megatron_args", [&] {
    const mme::MegatronArgs args = mme::parse_megatron_args(text, "--megatron-args");
    const nlohmann::json config = args.to_config();
    const mme::MegatronArgs back = mme::MegatronArgs::from_config(config);
    for (const auto& f : args.flags())
      if (back.value(f.name) != args.value(f.name) && !(f.values.empty() && back.enabled(f.name)))
        mme::fuzz::finding("megatron_args", "--" + f.name + " does not survive the config round trip");
    const mme::TrainingSetup setup = mme::setup_from_megatron_args(args, mme::TrainingSetup{});
    const mme::ModelSpec spec = mme::adapt_config(config, "megatron", "--megatron-args", mme::fuzz::registry());
    const mme::Estimator estimator(spec, mme::fuzz::registry());
    mme::EstimateOptions with, without;
    with.layer_breakdown = true;
    without.components = false;
    const mme::Estimate a = estimator.run(setup, with);
    const mme::Estimate b = estimator.run(setup, without);
    if (a.stages.size() != b.stages.size() || a.peak_stage != b.peak_stage)
      mme::fuzz::finding("megatron_args", "the estimate differs with and without components");
    for (std::size_t i = 0; i < a.stages.size(); ++i) {
      const auto& s = a.stages[i];
      if (s.total_bytes != b.stages[i].total_bytes)
        mme::fuzz::finding("megatron_args", "a stage total differs with and without components");
      for (std::int64_t v : {s.weight_bytes, s.gradient_bytes, s.optimizer_bytes, s.activation_bytes, s.other_bytes})
        if (v < 0) mme::fuzz::finding("megatron_args", "a negative byte count");
      if (s.weight_bytes + s.gradient_bytes + s.optimizer_bytes + s.other_bytes != s.static_bytes ||
          s.static_bytes + s.activation_bytes != s.total_bytes)
        mme::fuzz::finding("megatron_args", "the stage's parts do not add up to its total");
    }
  });
  return 0;
}
