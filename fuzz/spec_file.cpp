// Fuzz target: spec files (`mme estimate --config spec.yaml|spec.json`), YAML and JSON: the
// readers (yaml-cpp with aliases, a cycle or an alias bomb included; nlohmann's SAX parser),
// the nesting and expansion bounds, the field checks, the spec_file adapter, the guide's layout
// constraints and the engine on what passes.
//
// Input: the bytes of a spec file; JSON when the first non-blank character is '{', else YAML
// (spec_format_for, as for a file without a telling extension).
//
// Oracle: only mme::Error may come out (fuzz_support.hpp); an estimate holds together
// (non-negative byte counts, static + activations = total, components on or off alike).
#include <cstdint>
#include <string>
#include <string_view>

#include <mme/engine/estimator.hpp>
#include <mme/inputs/spec_file.hpp>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  mme::fuzz::run_checked("spec_file", [&] {
    const mme::SpecFile spec = mme::parse_spec_text(text, "spec", mme::spec_format_for("spec", text));
    // `hf: MODEL` loads another model (a file or the hub): outside this target.
    if (!spec.has_model || spec.hf) return;
    const mme::ModelSpec model = mme::load_spec_model(spec, mme::fuzz::registry());
    mme::check_spec_layout(&spec, model, spec.setup);
    // At the accepted limits (512 layers and MTP layers, no empty pipeline chunks) an estimate is
    // small: every accepted model is estimated (issue 20 item 15).
    const mme::Estimator estimator(model, mme::fuzz::registry());
    mme::EstimateOptions with, without;
    with.layer_breakdown = true;
    without.components = false;
    mme::fuzz::check_estimates_agree("spec_file", estimator.run(spec.setup, with), estimator.run(spec.setup, without));
  });
  return 0;
}
