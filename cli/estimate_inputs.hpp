// The options of `mme estimate` and the request they make (mme/commands/estimate.hpp). `estimate`,
// `compare` and `validate --from-log` share them, so the same words mean the same run everywhere;
// a real-runs row's words are read by the command layer's own reader of the same names
// (commands::estimate_request_from_words; tests/cli checks the two agree).
#pragma once

#include <string>
#include <vector>

#include <mme/commands/estimate.hpp>

#include "options.hpp"

namespace mme::cli {

// --gpu, --revision, --megatron-args, --megatron-args-file, --config and the layout flags
// (visible); the layout flags' Megatron-LM alias spellings (hidden).
void add_estimate_input_options(po::options_description& visible, po::options_description& hidden);

// `mme estimate`'s whole option table (visible, and hidden: MODEL and the aliases).
void estimate_options(po::options_description& visible, po::options_description& hidden);
// Parses `mme estimate` words with that table (`command` names the command in messages).
po::variables_map parse_estimate_args(const std::string& command, const std::vector<std::string>& args);

// The request of parsed estimate flags: the model input, the setup flags, --gpu and the fit rule
// (--fit-on, --headroom, --overhead-per-gpu).
commands::EstimateRequest estimate_request(const po::variables_map& vm);

}  // namespace mme::cli
