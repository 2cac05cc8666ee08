#include "expected_params.hpp"

#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "test_support.hpp"

namespace mme::test {

std::vector<ExpectedParams> expected_params() {
  const auto path = source_dir() / "tests" / "data" / "expected_params.csv";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::vector<ExpectedParams> rows;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (header) {
      if (line.rfind("model,total_params,active_params", 0) != 0)
        throw std::runtime_error(path.string() + ": unexpected header: " + line);
      header = false;
      continue;
    }
    std::stringstream ss(line);
    std::string model, total, active;
    if (!std::getline(ss, model, ',') || !std::getline(ss, total, ',') || !std::getline(ss, active, ','))
      throw std::runtime_error(path.string() + ": malformed row: " + line);
    rows.push_back({model, std::stoll(total), std::stoll(active)});
  }
  return rows;
}

std::filesystem::path bundled_config(const std::string& model) {
  std::string folder = model;
  const auto slash = folder.find('/');
  if (slash != std::string::npos) folder.replace(slash, 1, "--");
  return source_dir() / "models" / folder / "config.json";
}

std::string test_name(const std::string& model) {
  std::string out;
  for (char c : model) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

}  // namespace mme::test
