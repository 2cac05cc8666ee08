// The training-layout flags shared by `estimate`, `plan` and `init`: the seed tool's names
// and defaults, Megatron-LM's long names as aliases.
#pragma once

#include <optional>
#include <string>

#include <mme/sdk/training_setup.hpp>

#include "options.hpp"

namespace mme::cli {

// Adds the layout/training flags to `visible`, and Megatron-LM alias spellings to `hidden`.
void add_setup_options(po::options_description& visible, po::options_description& hidden);

// Builds the TrainingSetup from the parsed flags, starting from `base` (defaults or a spec).
TrainingSetup read_setup(const po::variables_map& vm, TrainingSetup base = {});

// The hidden options of a command that takes MODEL and the layout flags: the Megatron-LM
// aliases and the positional "model".
po::options_description model_and_setup_hidden_options();

// --headroom: a fraction (0.1) or a percentage (10%), at most 0.9 / 90%.
double parse_headroom(const std::string& text);

// True when the value flag `name` (e.g. "tp") was given, under its name or a Megatron-LM alias.
bool setup_flag_given(const po::variables_map& vm, const std::string& name);

}  // namespace mme::cli
