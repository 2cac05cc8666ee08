// The compare use case: several layouts of one model, each estimated exactly as `mme estimate`
// with its flags would be, side by side.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <mme/commands/estimate.hpp>

namespace mme::commands {

// The setup flags whose value may be a list in `mme compare` (each takes one value in estimate).
const std::vector<std::string>& compare_list_flags();
inline constexpr std::size_t kMaxCompareLayouts = 64;

// One position of the command line as given: a fixed word, or a list flag and its values (in the
// order given, repeats dropped). The rows' `args` are these words with one value per list.
struct CompareSlot {
  std::string flag;                 // empty: a fixed word
  std::vector<std::string> values;  // the word itself when fixed
};
// The slots of `mme compare ARGS` (a list flag's value split at commas; UsageError for an
// empty item or list).
std::vector<CompareSlot> compare_slots(const std::vector<std::string>& words);

struct CompareRequest {
  // Every layout's request but the list flags (their values are set per layout).
  EstimateRequest base;
  std::vector<CompareSlot> slots;
};

struct CompareRow {
  std::vector<std::string> args;    // the layout's `mme estimate` words
  std::vector<std::string> varied;  // the list flags' values of this layout ("--tp", "2", ...)
  std::optional<EstimateResult> result;
  std::string error;  // the layout error when the layout is refused
};

struct CompareResult {
  std::vector<CompareRow> rows;
  const EstimateResult& any() const;  // the first row that was estimated
  bool one_gpu = false;               // --gpu given or one profile known: one fit column
};

// LayoutError when no layout is valid (naming the first's reason); UsageError beyond
// kMaxCompareLayouts combinations.
CompareResult compare(const CompareRequest& request, const Context& context);

}  // namespace mme::commands
