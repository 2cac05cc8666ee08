// Accuracy against measured Megatron-LM runs. Two CSV formats, told apart by their columns:
//  - functional tests (bench/accuracy/megatron_functional_test_memory.csv: test_case,
//    max_alloc_GiB_max, ...): measured peak and static memory next to the run's Megatron-LM
//    flags, one column per flag; compared with the rank that logged it (the last stage);
//  - real runs (bench/accuracy/real_runs.csv: id, metric, measured_gib, mme_args, ...): one
//    measured peak per run and the `mme estimate` arguments that reproduce it; compared with the
//    peak stage (those sources do not say which rank they measured).
// And a user's own training log: Megatron-LM's memory report lines, per rank.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mme/engine/estimator.hpp"
#include "mme/engine/registry.hpp"
#include "mme/sdk/model_spec.hpp"

namespace re2 {
class RE2;
}  // namespace re2

namespace mme {

enum class CsvFormat { kFunctionalTest, kRealRuns };
const char* csv_format_name(CsvFormat f);  // "functional_test" / "real_runs"

struct ValidationCase {
  CsvFormat format = CsvFormat::kFunctionalTest;
  std::string model, test_case, golden;
  // Real-runs rows: the row id, its source, the metric ("max_allocated" or "other"), the rank
  // note and the mme_args as written.
  std::string id, source, metric, rank_note, mme_args;
  // "ok", "skipped", "refused" (a measurement that is no number of GiB, or a launch size that
  // is none: never estimated nor counted) or "error" (the estimate itself failed).
  std::string status;
  std::string reason;                                     // why skipped, refused / the error
  std::size_t line = 0;                                   // of the row in its CSV file (0: not from a file)
  double measured_peak_gib = 0, measured_static_gib = 0;  // static: 0 = not measured
  double estimated_peak_gib = 0, estimated_static_gib = 0;
  // The engine's bound for the compared stage (StageEstimate::upper_bytes); an engine that
  // reports no bound (0) gives the peak itself.
  double estimated_upper_gib = 0;
  std::int64_t stage = 0;               // pipeline rank of the compared stage
  double megatron_theoretical_gib = 0;  // Megatron-LM's theoretical_memory_usage, for comparison
  double seed_tool_gib = 0;             // the seed Python tool's formulas, for comparison
  std::int64_t world_size = 0;
  int compute_capability = 90;  // of the row's platform (A100 80, H100 90, GB200 100)
  // PyTorch's reserved memory: measured (torch.cuda.max_memory_reserved; 0 = not measured: a
  // real-runs row's notes carry it as "max_reserved N MB", MB = 2^20 bytes) and the compared
  // stage's StageEstimate::reserved_bytes (0 when the estimate has no device total).
  double measured_reserved_gib = 0, estimated_reserved_gib = 0;
  double estimated_device_gib = 0;  // the compared stage's device total
  // The PyTorch part of the device bound the fit verdict is judged on: StageEstimate::
  // device_upper_bytes less what lies outside PyTorch (0 when the estimate has no device total).
  double estimated_reserved_upper_gib = 0;

  bool reserved_compared() const { return measured_reserved_gib > 0 && estimated_reserved_gib > 0; }
  double reserved_error() const;  // (estimated - measured) / measured reserved, signed
  // The allocator's share on its own: (estimated reserved - estimated peak) minus (measured
  // reserved - measured peak), in GiB, so the allocated estimate's own error does not count.
  double reserved_gap_error_gib() const;

  double peak_error() const;  // (estimated - measured) / measured, signed
  double static_error() const;
  double baseline_error() const;  // Megatron-LM's formula against the measured peak
  double seed_error() const;      // the seed tool's formulas against the measured peak
  // Counted in the headline statistics: functional-test rows and real-runs rows whose metric is
  // max_allocated (the others are reported, not counted).
  bool counted() const { return format == CsvFormat::kFunctionalTest || metric == "max_allocated"; }
  bool within_bound() const { return measured_peak_gib <= estimated_upper_gib; }
};

struct ErrorStats {
  std::size_t count = 0;
  double median = 0, p90 = 0, max = 0;  // of the absolute relative error
};

// The peak |error| of the evaluated cases by measured peak: < 5 GiB, 5-40 GiB (5 and 40
// included), > 40 GiB.
struct SizeBucket {
  std::string label;  // "<5GiB", "5-40GiB", ">40GiB"
  double min_gib = 0, max_gib = 0;
  ErrorStats peak;
};

// The signed peak error (estimate - measured) / measured of the evaluated cases.
struct SignedStats {
  std::size_t count = 0;
  double median = 0;
  std::size_t under = 0, over = 0;         // more than 5 % below / above the measured peak
  double under_share = 0, over_share = 0;  // of count
};

// How often the measured peak stays at or below the estimate's bound.
struct BoundStats {
  std::size_t count = 0, covered = 0;
  double share = 0;  // covered / count
  // The rows whose measured peak exceeds the bound (count - covered), and by how much at most,
  // (measured - bound) / measured (0 when none does).
  std::size_t exceeded = 0;
  double max_excess = 0;
};

// The reserved memory on the rows that measured it (ValidationCase::reserved_compared).
struct ReservedStats {
  std::size_t count = 0;
  ErrorStats error;          // |estimated - measured| / measured reserved
  double signed_median = 0;  // (estimated - measured) / measured
  std::size_t under = 0;     // rows whose estimate is below the measured reserved
  // reserved - peak (what the caching allocator keeps beyond the blocks handed out), in GiB:
  // medians of the measured and estimated figures and of |estimated - measured|.
  double gap_measured_median_gib = 0, gap_estimated_median_gib = 0, gap_error_median_gib = 0;
  double gap_error_max_gib = 0;
  // The reserved part of the device bound (ValidationCase::estimated_reserved_upper_gib) against
  // the measured reserved: rows at or below it, and (measured - bound) / measured at most (0
  // when none is above).
  std::size_t bound_covered = 0;
  double bound_max_excess = 0;
};

struct ValidationSummary {
  std::size_t total = 0, evaluated = 0, skipped = 0, refused = 0, errors = 0;
  ErrorStats peak, static_mem, peak_large;  // peak_large: cases with measured peak >= 5 GiB
  ErrorStats megatron_theoretical;          // Megatron-LM's own formula on the same cases
  ErrorStats seed_tool;                     // the seed tool's formulas on the same cases
  std::vector<SizeBucket> by_size;          // < 5 GiB, 5-40 GiB, > 40 GiB
  SignedStats signed_peak;
  BoundStats bound;
  ReservedStats reserved;
};

// A real-runs row's measured reserved memory from its notes: "max_reserved N MB" (N a number of
// MiB, as Megatron-LM's report_memory prints it), in GiB; 0 when the notes name none. ConfigError
// when "max_reserved" is not followed by a number and " MB".
double measured_reserved_from_notes(std::string_view notes, const std::string& where);

// What a real-runs row's mme_args estimate to: the model and the estimate, exactly as
// `mme estimate ARGS` would (the CLI supplies the option parsing).
struct ArgsEstimate {
  ModelSpec model;
  Estimate estimate;
};
using ArgsEstimator = std::function<ArgsEstimate(const std::vector<std::string>& args)>;

// The row filter of `validate --golden/--case`: a regular expression in RE2's syntax (which for
// such filters is ECMAScript's: literals, '.', [...] classes, \d \w \s, \xHH, ( ) and (?: ), '|',
// repeats with counts up to 1000, lazy '?', the anchors ^ $ and \b), searched for in a field's
// bytes (unanchored unless ^ / $ say otherwise) in time linear in the field, whatever the pattern
// (RE2 runs automata, never a backtracking search). Refused with a UsageError: back-references,
// lookaround, patterns over 256 characters or whose automaton needs more than 1 MiB.
class RowFilter {
 public:
  RowFilter(std::string_view flag, std::string_view pattern);
  bool search(std::string_view text) const;

 private:
  std::shared_ptr<const re2::RE2> re_;
};

struct ValidationOptions {
  std::string golden_regex;     // keep rows whose golden matches (RowFilter); empty = all
  std::string case_regex;       // keep rows whose test_case (real runs: id) matches
  ArgsEstimator estimate_args;  // needed for real-runs files
};

// One CSV row as column -> value (empty cells omitted).
using CsvRow = std::map<std::string, std::string>;
struct CsvTable {
  CsvFormat format = CsvFormat::kFunctionalTest;
  std::vector<std::string> header;
  std::vector<CsvRow> rows;
  std::vector<std::size_t> lines;  // the 1-based line of each row in the file
};
// The smallest measured peak (or static memory) a row may give: 1 MiB. A smaller positive
// figure is no training run (the project's smallest peak is 0.4 GiB), and a denormal one once
// made every relative error infinite (the summary's max and p90 became null).
inline constexpr double kMinMeasuredGib = 1.0 / 1024;
// Decides the format from the header; ConfigError naming the columns each format needs.
CsvFormat detect_csv_format(const std::vector<std::string>& header, const std::string& where);
// A CSV of cases is a regular file of at most kMaxCsvBytes; a training log at most kMaxLogBytes
// (`grep 'memory (MB)\|mem-max-allocated' train.log` keeps the lines validate reads).
inline constexpr std::uintmax_t kMaxCsvBytes = std::uintmax_t{64} << 20;
inline constexpr std::uintmax_t kMaxLogBytes = std::uintmax_t{256} << 20;
CsvTable read_csv_table(const std::filesystem::path& path);  // throws NotFoundError / ConfigError
// The same from the text of the file; `where` names it in messages.
CsvTable parse_csv_table(std::string_view text, const std::string& where);
std::vector<CsvRow> read_csv(const std::filesystem::path& path);  // the rows of read_csv_table

// Splits a shell-quoted argument string into words as a POSIX shell would (single quotes,
// double quotes with \ \" \$ \` escapes, backslash escapes outside quotes); no expansion.
// ConfigError on an unterminated quote.
std::vector<std::string> split_shell_words(std::string_view text, const std::string& where);

// Evaluates one functional-test row. Rows outside what mme models come back "skipped" with the
// reason; a row whose measurements are not numbers of GiB (a cell that is not wholly a decimal
// number, such as "56,335" or "56.335abc"; NaN, infinite, negative, zero or under
// kMinMeasuredGib) or whose nodes_gpus is no launch size comes back "refused", the reason
// starting with "line N: " when `line` is given.
ValidationCase validate_row(const CsvRow& row, const Registry& registry, std::size_t line = 0);
// Evaluates one real-runs row with `estimate_args`; a failing estimate is status "error", an
// invalid measured_gib "refused" (as above).
ValidationCase validate_real_run_row(const CsvRow& row, const ArgsEstimator& estimate_args, std::size_t line = 0);

// Runs every row of a file of either format.
std::vector<ValidationCase> run_validation(const std::filesystem::path& csv, const Registry& registry,
                                           const ValidationOptions& options = {});
ValidationSummary summarize(const std::vector<ValidationCase>& cases);

// ---- A training log: Megatron-LM's memory report lines -------------------------------------

// One memory line of a log:
//  - report_memory (megatron/training/utils/common_utils.py), values in MB (2^20 bytes):
//    "[Rank N] (after K iterations) memory (MB) | allocated: X | max allocated: Y | reserved: Z |
//    max reserved: W"; reports around a checkpoint save ("(before save_checkpoint ...)") are
//    read but are no training step;
//  - training_log's TensorBoard scalars written as text (--log-memory-to-tensorboard), in bytes:
//    "mem-max-allocated-bytes: V" / "mem-max-allocated-bytes V" / "'mem-allocated-bytes': V",
//    and mem-reserved-bytes;
//  - Megatron-Bridge's figures in GB (1e9 bytes): mem-max-allocated-gigabytes,
//    mem-allocated-gigabytes, mem-reserved-gigabytes (or mem_allocated_gb, ...).
// A scalar line's iteration is the "iteration K" on it.
struct MemoryReport {
  std::optional<std::int64_t> rank;       // [Rank N]; none on scalar lines (the last rank logs them)
  std::optional<std::int64_t> iteration;  // "(after K iterations)", "iteration K"
  std::optional<double> max_allocated_bytes, allocated_bytes, reserved_bytes, max_reserved_bytes;
  std::size_t line = 0;     // 1-based line number
  const char* format = "";  // "report_memory", "scalar" or "bridge"
  bool training = true;     // false: a report around a checkpoint save
};

// One line: the report it holds, nullopt for a line that holds none (`refused` empty) or a memory
// line whose figures are not a measurement (`refused` says why: not a number, 0 or negative,
// beyond any GPU, a current figure above its peak or allocated above reserved).
std::optional<MemoryReport> parse_memory_line(std::string_view line, std::size_t lineno, std::string& refused);

// One rank's figures: the reports after its first iteration (where later ones are logged).
struct RankMemory {
  std::optional<std::int64_t> rank;  // none: lines without a rank
  std::size_t reports = 0;           // training reports of the rank
  std::size_t used = 0;              // of them, the ones the figures come from
  std::size_t first_line = 0;
  std::optional<std::int64_t> first_iteration;  // the first iteration logged, left out when later ones exist
  bool steady = false;  // the figures come from after the first iteration (false: only it was logged)
  std::optional<double> max_allocated_bytes, max_reserved_bytes;  // the largest
  std::optional<double> allocated_bytes, reserved_bytes;          // the last logged
};

struct RefusedMeasurement {
  std::size_t line = 0;
  std::optional<std::int64_t> rank;
  std::string reason;
};

inline constexpr std::size_t kMaxRefusedListed = 100;                   // listed; all are counted
inline constexpr std::size_t kMaxLogLineBytes = std::size_t{64} << 10;  // a longer line is read up to this

struct MemoryLog {
  std::vector<RankMemory> ranks;            // by rank, the rank-less last
  std::vector<RefusedMeasurement> refused;  // the first kMaxRefusedListed
  std::size_t refused_count = 0;
  std::size_t lines = 0, memory_lines = 0, long_lines = 0;
};

// Reads a log line by line in bounded memory (docs/reliability.md): the memory lines, per rank;
// refused measurements are listed and counted, never compared. ConfigError when no memory line
// is found (the message says what was looked for) or every one is refused, or the stream holds
// more than `max_bytes`. `source` names the log in errors.
MemoryLog parse_memory_log(std::istream& in, const std::string& source, std::uintmax_t max_bytes = kMaxLogBytes);
MemoryLog read_memory_log(const std::filesystem::path& path);  // + NotFoundError

// Megatron-LM's default rank order (tp-cp-ep-dp-pp, pipeline outermost): pipeline rank =
// rank / (world_size / pp). ConfigError if the rank is outside [0, world_size).
std::int64_t pipeline_stage_of_rank(std::int64_t rank, std::int64_t world_size, std::int64_t pp);

// One rank of the log against the estimate of its stage.
struct RankComparison {
  std::optional<std::int64_t> rank;  // none: lines without a rank, compared with the last stage
  std::int64_t stage = 0;
  std::size_t reports = 0, used = 0;  // RankMemory's
  bool steady = true;
  std::optional<std::int64_t> first_iteration;
  double measured_max_allocated_gib = 0;  // the largest, after the first iteration
  std::optional<double> measured_allocated_gib, measured_reserved_gib, measured_max_reserved_gib;
  double estimated_peak_gib = 0, estimated_upper_gib = 0, estimated_static_gib = 0;
  // The estimate's reserved memory of the stage, when the estimate predicts one (ReservedEstimate).
  std::optional<double> estimated_reserved_gib;
  double peak_error() const;                   // (estimated - measured) / measured, signed
  std::optional<double> static_error() const;  // the static estimate against the allocated figure
  // The reserved estimate against the max reserved (else reserved) figure; nullopt without both.
  std::optional<double> reserved_error() const;
  bool within_bound() const { return measured_max_allocated_gib <= estimated_upper_gib; }
};

// The reserved bytes an estimate predicts for a stage, where it predicts them.
using ReservedEstimate = std::function<std::optional<std::int64_t>(const StageEstimate&)>;

// Compares each rank with its stage of `estimate` (ranks without a max-allocated figure are
// left out). ConfigError if none has one, or a rank lies beyond the world size.
std::vector<RankComparison> compare_memory_log(const MemoryLog& log, const Estimate& estimate,
                                               const std::string& source, const ReservedEstimate& reserved = {});

// `mme validate --from-log`'s document (format "log", schema/validate.schema.json) and text report.
nlohmann::json log_comparison_json(const std::string& log_path, const MemoryLog& log,
                                   const std::vector<RankComparison>& ranks, const Estimate& estimate);
void render_log_comparison(std::ostream& out, const std::string& log_path, const MemoryLog& log,
                           const std::vector<RankComparison>& ranks, const Estimate& estimate);

}  // namespace mme
