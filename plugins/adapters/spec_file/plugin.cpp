#include <mme/sdk/plugin.hpp>

#include "spec_file_adapter.hpp"

MME_PLUGIN("adapter_spec_file", MME_VERSION_STRING, mme::plugins::register_spec_file_adapter)
