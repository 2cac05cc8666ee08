#include "mme/sdk/hardware_profile.hpp"

#include <cctype>

namespace mme {

std::string normalize_hardware_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (unsigned char c : name) {
    if (c == '-' || c == '_' || c == ' ') continue;
    out.push_back(static_cast<char>(std::tolower(c)));
  }
  return out;
}

}  // namespace mme
