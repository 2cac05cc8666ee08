#include <mme/sdk/plugin.hpp>

#include "json_profiles.hpp"

MME_PLUGIN("json_profiles", MME_VERSION_STRING, mme::plugins::register_json_profiles)
