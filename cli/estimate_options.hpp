// The training-layout flags shared by `estimate`, `plan`, `init`, `compare` and `validate`: every
// knob of the setup schema, the seed tool's names and defaults, Megatron-LM's long names as aliases.
#pragma once

#include "options.hpp"

namespace mme::cli {

// Adds the layout/training flags to `visible`, and Megatron-LM alias spellings to `hidden`.
void add_setup_options(po::options_description& visible, po::options_description& hidden);

// The hidden options of a command that takes MODEL and the layout flags: the Megatron-LM
// aliases and the positional "model".
po::options_description model_and_setup_hidden_options();

}  // namespace mme::cli
