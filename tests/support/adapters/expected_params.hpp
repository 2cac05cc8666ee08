// The known answers: tests/data/expected_params.csv (model, total_params, active_params,
// notes), read from the source tree at test time, and where each bundled config lives.
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace mme::test {

struct ExpectedParams {
  std::string model;  // org/name
  std::int64_t total = 0;
  std::int64_t active = 0;
};

// GoogleTest prints a parameter with this instead of its bytes.
inline void PrintTo(const ExpectedParams& e, std::ostream* os) {
  *os << e.model << " (total " << e.total << ", active " << e.active << ")";
}

// All rows of the CSV; throws std::runtime_error if the file is missing or a row is malformed.
std::vector<ExpectedParams> expected_params();
// models/<org>--<name>/config.json in the source tree.
std::filesystem::path bundled_config(const std::string& model);
// A GoogleTest-safe name for a model id ("Qwen/Qwen2.5-7B" -> "Qwen_Qwen2_5_7B").
std::string test_name(const std::string& model);

}  // namespace mme::test
