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

#include <mme/engine/estimator.hpp>
#include <mme/inputs/megatron_args.hpp>
#include <mme/inputs/model_loader.hpp>

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
    mme::fuzz::check_estimates_agree("megatron_args", estimator.run(setup, with), estimator.run(setup, without));
  });
  return 0;
}
