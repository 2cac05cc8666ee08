#include <mme/sdk/plugin.hpp>

#include "dense_mlp.hpp"

MME_PLUGIN("layer_dense_mlp", MME_VERSION_STRING, mme::plugins::register_dense_mlp)
