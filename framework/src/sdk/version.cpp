#include "mme/sdk/version.hpp"

namespace mme {
std::string_view library_version() noexcept { return MME_VERSION_STRING; }
}  // namespace mme
