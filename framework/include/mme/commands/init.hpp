// The init use case: a commented spec file to start from (docs/spec-files.md).
#pragma once

#include <optional>
#include <string>

#include <mme/commands/estimate.hpp>

namespace mme::commands {

struct InitRequest {
  ModelInput input;                // MODEL, or none: an example in the shape of Llama-3-8B
  SetupFlags setup;                // the layout flags, with the seed's defaults as `mme estimate MODEL` reads them
  std::optional<std::string> gpu;  // infrastructure.gpu
  bool json = false;               // JSON (no comments) instead of commented YAML
};

// The spec file's text. The layout is checked the way an estimate checks it, so the template
// always estimates (LayoutError otherwise).
std::string init_spec(const InitRequest& request, const Context& context);

}  // namespace mme::commands
