#include <mme/sdk/plugin.hpp>

#include "language_model.hpp"

MME_PLUGIN("layer_language_model", MME_VERSION_STRING, mme::plugins::register_language_model)
