// JSON text for output and messages. Strings in a document may hold bytes that are not UTF-8
// (a path or flag value from the command line, a YAML scalar): nlohmann's dump() throws on
// them; json_text writes U+FFFD in their place, so such input never turns into an internal error.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace mme {

// v.dump(indent), with invalid UTF-8 replaced. indent -1: one line.
template <class Json>
std::string json_text(const Json& v, int indent = -1) {
  return v.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace mme
