#include "mme/validate/validation.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <istream>
#include <optional>
#include <sstream>
#include <string_view>

#include <fmt/core.h>

#include "mme/engine/estimator.hpp"
#include "mme/inputs/megatron_args.hpp"
#include "mme/inputs/model_loader.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/input_text.hpp"
#include "mme/sdk/number_text.hpp"
#include "mme/sdk/training_setup.hpp"
#include "mme/sdk/units.hpp"
#include "mme/validate/baselines.hpp"

namespace mme {

const char* csv_format_name(CsvFormat f) { return f == CsvFormat::kRealRuns ? "real_runs" : "functional_test"; }

double ValidationCase::peak_error() const {
  return measured_peak_gib > 0 ? (estimated_peak_gib - measured_peak_gib) / measured_peak_gib : 0.0;
}
double ValidationCase::baseline_error() const {
  return measured_peak_gib > 0 ? (megatron_theoretical_gib - measured_peak_gib) / measured_peak_gib : 0.0;
}
double ValidationCase::seed_error() const {
  return measured_peak_gib > 0 ? (seed_tool_gib - measured_peak_gib) / measured_peak_gib : 0.0;
}
double ValidationCase::reserved_error() const {
  return measured_reserved_gib > 0 ? (estimated_reserved_gib - measured_reserved_gib) / measured_reserved_gib : 0.0;
}
double ValidationCase::reserved_gap_error_gib() const {
  return (estimated_reserved_gib - estimated_peak_gib) - (measured_reserved_gib - measured_peak_gib);
}
double ValidationCase::static_error() const {
  return measured_static_gib > 0 ? (estimated_static_gib - measured_static_gib) / measured_static_gib : 0.0;
}

namespace {

std::vector<std::string> split_csv_line(const std::string& line, const std::string& where) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur.push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur.push_back(c);
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(std::move(cur));
      cur.clear();
    } else if (c != '\r') {
      cur.push_back(c);
    }
  }
  if (quoted) throw ConfigError(fmt::format("{}: unterminated quote", where));
  out.push_back(std::move(cur));
  return out;
}

// Columns that describe the measurement, not Megatron flags.
bool is_meta_column(const std::string& c) {
  static const char* kMeta[] = {"model",
                                "test_case",
                                "golden",
                                "n_iters",
                                "max_alloc_GiB_max",
                                "max_alloc_GiB_last",
                                "alloc_GiB_median",
                                "alloc_GiB_first",
                                "nodes_gpus"};
  return std::any_of(std::begin(kMeta), std::end(kMeta), [&](const char* m) { return c == m; });
}

// A measured figure of GiB from its cell, or a ConfigError with the reason. The whole cell must
// be a decimal number, read the same under every locale ("56,335" was once read as 56 and
// "56.335abc" as 56.335); a peak (`peak`) must be at least kMinMeasuredGib, other figures 0
// (not measured) or at least that.
double measured_gib(const CsvRow& row, const char* col, bool peak) {
  auto it = row.find(col);
  if (it == row.end()) {
    if (peak) throw ConfigError(fmt::format("{} is empty; it is the measured peak", col));
    return 0.0;
  }
  const std::string& text = it->second;
  const auto v = parse_decimal(text);
  if (!v) {
    const bool comma = text.find(',') != std::string::npos;
    throw ConfigError(
        fmt::format("{} '{}' is not a number{}", col, text, comma ? " (a ',' is no decimal point; write '.')" : ""));
  }
  if (!std::isfinite(*v)) throw ConfigError(fmt::format("{} '{}' is not a finite number of GiB", col, text));
  if (*v < 0 || (peak && *v == 0)) throw ConfigError(fmt::format("{} '{}' is not a positive number of GiB", col, text));
  if (*v > 0 && *v < kMinMeasuredGib)
    throw ConfigError(fmt::format("{} '{}' is less than 1 MiB ({} GiB); no training run measures that little", col,
                                  text, kMinMeasuredGib));
  return *v;
}

std::string line_prefix(std::size_t line) { return line > 0 ? fmt::format("line {}: ", line) : std::string(); }

std::string get(const CsvRow& row, const char* col) {
  auto it = row.find(col);
  return it == row.end() ? "" : it->second;
}

// nodes_gpus like "gb200:2x4;h100:1x8": the launch size of the platform the golden ran on.
std::int64_t world_size_of(const std::string& nodes_gpus, const std::string& golden) {
  std::int64_t fallback = 8;
  std::stringstream ss(nodes_gpus);
  std::string entry;
  std::int64_t first = 0;
  while (std::getline(ss, entry, ';')) {
    const auto colon = entry.find(':');
    const auto x = entry.find('x', colon == std::string::npos ? 0 : colon);
    if (colon == std::string::npos || x == std::string::npos) continue;
    const std::string platform = entry.substr(0, colon);
    bool nodes_too_large = false, gpus_too_large = false;
    const auto n_nodes = parse_integer(entry.substr(colon + 1, x - colon - 1), &nodes_too_large);
    const auto n_gpus = parse_integer(entry.substr(x + 1), &gpus_too_large);
    // Counts are whole decimal numbers ("1x8abc" was once read as 1 x 8); one beyond 64 bits is
    // refused below as no launch size.
    if ((!n_nodes && !nodes_too_large) || (!n_gpus && !gpus_too_large))
      throw ConfigError(fmt::format("nodes_gpus '{}' is not PLATFORM:NODESxGPUS (e.g. h100:1x8)", entry));
    const std::int64_t nodes = n_nodes.value_or(0), gpus = n_gpus.value_or(0);
    // A product beyond any launch (or one that would not fit in 64 bits) is an error of the row,
    // never a wrapped number (4611686018427387906x4 once became 8 GPUs).
    std::int64_t n = 0;
    if (nodes < 1 || gpus < 1 || __builtin_mul_overflow(nodes, gpus, &n) || n > kMaxWorldSize)
      throw ConfigError(fmt::format("nodes_gpus '{}': {} nodes x {} GPUs is not a launch size (1 to {} GPUs)", entry,
                                    entry.substr(colon + 1, x - colon - 1), entry.substr(x + 1), kMaxWorldSize));
    if (first == 0) first = n;
    if (golden.find(platform) != std::string::npos) return n;
  }
  // H100 and A100 recipes default to 1 node x 8 GPUs.
  return first > 0 && golden.find("gb200") != std::string::npos ? first : fallback;
}

// The CUDA compute capability of a golden file's platform: A100 sm80, GB200 sm100, H100 sm90.
int compute_capability_of(const std::string& golden) {
  if (golden.find("a100") != std::string::npos) return 80;
  if (golden.find("gb200") != std::string::npos || golden.find("b200") != std::string::npos) return 100;
  return 90;
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// Why a row is outside what mme models (empty: it is modelled).
std::string skip_reason(const CsvRow& row) {
  const std::string model = get(row, "model");
  const std::string tc = get(row, "test_case");
  if (model == "t5") return "T5 encoder-decoder models are not modelled (decoder-only GPT/MoE only)";
  if (model == "bert") return "BERT encoder models are not modelled (decoder-only GPT/MoE only)";
  // Flextron: an elastic hybrid model whose router picks a sub-network per sample (--flextron).
  if (model == "hybrid" && !get(row, "flextron").empty())
    return "Flextron elastic hybrid models (a router choosing sub-networks) are not modelled";
  if (model.rfind("multimodal", 0) == 0) return "multimodal models (vision encoder + LM) are not modelled";
  if (model != "gpt" && model != "moe" && model != "hybrid")
    return fmt::format("model kind '{}' is not modelled", model);
  if (contains(tc, "grpo") || contains(tc, "_rl_") || contains(tc, "inference"))
    return "RL / inference loops (generation engine next to training) are not modelled";
  const std::string tokenizer = get(row, "tokenizer-type");
  if (get(row, "vocab-size").empty() && !tokenizer.empty() && tokenizer != "GPT2BPETokenizer" &&
      tokenizer != "NullTokenizer" && tokenizer != "TikTokenizer")
    return fmt::format("the row does not record the vocabulary size of {}", tokenizer);
  return {};
}

}  // namespace

namespace {
constexpr const char* kFunctionalColumns[] = {"test_case", "max_alloc_GiB_max", "model", "alloc_GiB_median"};
constexpr const char* kRealRunsColumns[] = {"id", "metric", "measured_gib", "mme_args"};

bool has_column(const std::vector<std::string>& header, const char* name) {
  return std::find(header.begin(), header.end(), name) != header.end();
}

template <std::size_t N>
std::string column_list(const char* const (&cols)[N]) {
  std::string out;
  for (const char* c : cols) out += (out.empty() ? "" : ", ") + std::string(c);
  return out;
}
}  // namespace

CsvFormat detect_csv_format(const std::vector<std::string>& header, const std::string& where) {
  const CsvFormat format = has_column(header, "test_case") || has_column(header, "max_alloc_GiB_max")
                               ? CsvFormat::kFunctionalTest
                           : has_column(header, "mme_args") || has_column(header, "measured_gib") ? CsvFormat::kRealRuns
                                                                                                  : [&]() -> CsvFormat {
    std::string got;
    for (const auto& h : header) got += (got.empty() ? "" : ", ") + h;
    throw ConfigError(
        fmt::format("{}: unknown set of columns ({}); expected a functional-test file (columns {}, then "
                    "one per Megatron-LM flag) or a real-runs file (columns {})",
                    where, got, column_list(kFunctionalColumns), column_list(kRealRunsColumns)));
  }();
  if (format == CsvFormat::kFunctionalTest) {
    for (const char* required : kFunctionalColumns)
      if (!has_column(header, required))
        throw ConfigError(fmt::format("{}: missing column '{}' (a functional-test file has the columns {})", where,
                                      required, column_list(kFunctionalColumns)));
  } else {
    for (const char* required : kRealRunsColumns)
      if (!has_column(header, required))
        throw ConfigError(fmt::format("{}: missing column '{}' (a real-runs file has the columns {})", where, required,
                                      column_list(kRealRunsColumns)));
  }
  return format;
}

CsvTable read_csv_table(const std::filesystem::path& path) {
  // Regular files only, with a size cap (a folder once gave "internal error", /dev/zero grew
  // until memory ran out); the project's own file is 0.5 MiB.
  return parse_csv_table(read_text_file(path, kMaxCsvBytes, "a CSV of measured cases"), path.string());
}

CsvTable parse_csv_table(std::string_view text, const std::string& where) {
  std::istringstream in{std::string(text)};
  std::string line;
  if (!std::getline(in, line)) throw ConfigError(fmt::format("{}: empty file", where));
  CsvTable table;
  table.header = split_csv_line(line, where + ":1");
  table.format = detect_csv_format(table.header, where);
  std::size_t lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    const auto cells = split_csv_line(line, fmt::format("{}:{}", where, lineno));
    if (cells.size() != table.header.size())
      throw ConfigError(
          fmt::format("{}:{}: {} cells for {} columns", where, lineno, cells.size(), table.header.size()));
    CsvRow row;
    for (std::size_t i = 0; i < cells.size(); ++i)
      if (!cells[i].empty()) row[table.header[i]] = cells[i];
    table.rows.push_back(std::move(row));
    table.lines.push_back(lineno);
  }
  return table;
}

std::vector<CsvRow> read_csv(const std::filesystem::path& path) { return read_csv_table(path).rows; }

std::vector<std::string> split_shell_words(std::string_view text, const std::string& where) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\'') {
      const auto end = text.find('\'', i + 1);
      if (end == std::string_view::npos) throw ConfigError(fmt::format("{}: unterminated single quote", where));
      cur.append(text.substr(i + 1, end - i - 1));
      in_word = true;
      i = end;
    } else if (c == '"') {
      in_word = true;
      for (++i;; ++i) {
        if (i >= text.size()) throw ConfigError(fmt::format("{}: unterminated double quote", where));
        if (text[i] == '"') break;
        if (text[i] == '\\' && i + 1 < text.size() &&
            (text[i + 1] == '"' || text[i + 1] == '\\' || text[i + 1] == '$' || text[i + 1] == '`')) {
          cur.push_back(text[++i]);
        } else if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {
          ++i;  // a line continuation inside double quotes
        } else {
          cur.push_back(text[i]);
        }
      }
    } else if (c == '\\') {
      if (i + 1 < text.size() && text[i + 1] == '\n') {
        ++i;  // a line continuation
      } else if (i + 1 < text.size()) {
        cur.push_back(text[++i]);
        in_word = true;
      }
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (in_word) words.push_back(std::move(cur));
      cur.clear();
      in_word = false;
    } else {
      cur.push_back(c);
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(cur));
  return words;
}

double measured_reserved_from_notes(std::string_view notes, const std::string& where) {
  // The notes' own wording (bench/accuracy/simumax_b200.md): "max_reserved 72586 MB = 70.88 GiB".
  constexpr std::string_view kKey = "max_reserved ";
  const std::size_t at = notes.find(kKey);
  if (at == std::string_view::npos) return 0.0;
  std::size_t i = at + kKey.size(), digits = 0;
  const std::size_t start = i;
  while (i < notes.size() && (std::isdigit(static_cast<unsigned char>(notes[i])) || notes[i] == '.')) ++i, ++digits;
  const std::string_view number = notes.substr(start, digits);
  double mib = 0;
  bool ok = digits > 0 && notes.substr(i, 3) == " MB";
  if (ok) {
    try {
      std::size_t used = 0;
      mib = std::stod(std::string(number), &used);
      ok = used == number.size() && std::isfinite(mib) && mib > 0;
    } catch (const std::exception&) {
      ok = false;
    }
  }
  if (!ok) throw ConfigError(fmt::format("{}: notes: 'max_reserved' is not followed by a number of MB", where));
  return mib / 1024.0;
}

namespace {
// The estimate of one stage into the case.
void take_stage(ValidationCase& c, const StageEstimate& stage) {
  c.stage = stage.pp_rank;
  c.estimated_reserved_gib = to_gib(stage.reserved_bytes);
  c.estimated_device_gib = to_gib(stage.device_bytes);
  if (stage.device_upper_bytes > 0)
    c.estimated_reserved_upper_gib = to_gib(stage.device_upper_bytes - stage.outside_pytorch_bytes);
  c.estimated_peak_gib = to_gib(stage.total_bytes);
  c.estimated_static_gib = to_gib(stage.static_bytes);
  c.estimated_upper_gib = stage.upper_bytes > 0 ? to_gib(stage.upper_bytes) : c.estimated_peak_gib;
}
}  // namespace

ValidationCase validate_row(const CsvRow& row, const Registry& registry, std::size_t line) {
  ValidationCase c;
  c.line = line;
  c.model = printable(get(row, "model"));          // printed in the report
  c.test_case = printable(get(row, "test_case"));  // printed in the report
  c.golden = printable(get(row, "golden"));        // printed in the report
  c.compute_capability = compute_capability_of(c.golden);
  // Invalid measurements refuse the row: reported, never estimated nor counted (a NaN, zero or
  // negative peak once counted as 0 % error).
  std::string invalid;
  try {
    c.measured_peak_gib = measured_gib(row, "max_alloc_GiB_max", true);
    c.measured_static_gib = measured_gib(row, "alloc_GiB_median", false);
    c.world_size = world_size_of(get(row, "nodes_gpus"), c.golden);
  } catch (const ConfigError& e) {
    invalid = printable(line_prefix(line) + e.what());
  }
  if (std::string why = skip_reason(row); !why.empty()) {
    c.status = "skipped";
    c.reason = why;
    return c;
  }
  if (!invalid.empty()) {
    c.measured_peak_gib = c.measured_static_gib = 0;
    c.status = "refused";
    c.reason = invalid;
    return c;
  }
  MegatronArgs args;
  for (const auto& [col, value] : row) {
    if (is_meta_column(col)) continue;
    // env:NAME columns: the case's ENV_VARS (attention kernels, cuBLAS workspaces).
    if (col.rfind("env:", 0) == 0) {
      args.set_env(col.substr(4), value);
      continue;
    }
    if (value == "True" || value == "true")
      args.set(col, {});
    else if (value == "False" || value == "false")
      continue;
    else
      args.set(col, {value});
  }
  try {
    const ModelSpec model = adapt_config(args.to_config(), c.test_case, "ground-truth row " + c.test_case, registry);
    TrainingSetup base;
    base.parallel.world_size = c.world_size;
    // The container: Megatron-LM's `lts` images carry no flash-attn >= 2.4.1 and the `dev`
    // images do (TE's deterministic filter then decides between flash and unfused attention
    // on GPUs before sm90; training_setup.cpp resolve_attention).
    base.attention_env.flash_attn_installed = c.golden.rfind("lts", 0) != 0;
    const TrainingSetup setup = setup_from_megatron_args(args, base);
    const Estimator estimator(model, registry);
    EstimateOptions options;
    options.compute_capability = c.compute_capability;
    options.components = false;
    const Estimate est = estimator.run(setup, options);
    take_stage(c, est.stages.back());  // the last rank logs the memory
    c.megatron_theoretical_gib = to_gib(megatron_theoretical_memory(model, est.setup));
    c.seed_tool_gib = to_gib(seed_tool_peak(model, est.setup));
    c.status = "ok";
  } catch (const Error& e) {
    c.status = "error";
    c.reason = printable(e.what());
  }
  return c;
}

namespace {
// "pp_rank=N" in a real-runs row's rank_note: the figure is that stage's (N a small integer).
std::optional<std::int64_t> stated_pp_rank(std::string_view note) {
  constexpr std::string_view key = "pp_rank=";
  const auto at = note.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  std::int64_t v = 0;
  std::size_t i = at + key.size(), digits = 0;
  for (; i < note.size() && note[i] >= '0' && note[i] <= '9' && digits < 6; ++i, ++digits) v = v * 10 + (note[i] - '0');
  if (digits == 0 || (i < note.size() && note[i] >= '0' && note[i] <= '9'))
    throw ConfigError(fmt::format("rank_note '{}': pp_rank= needs a stage number", note));
  return v;
}
}  // namespace

ValidationCase validate_real_run_row(const CsvRow& row, const ArgsEstimator& estimate_args, std::size_t line) {
  ValidationCase c;
  c.format = CsvFormat::kRealRuns;
  c.line = line;
  c.id = printable(get(row, "id"));  // printed in the report
  c.test_case = c.id;
  c.model = printable(get(row, "model"));    // printed in the report
  c.source = printable(get(row, "source"));  // printed in the report
  c.metric = get(row, "metric");
  c.rank_note = printable(get(row, "rank_note"));  // printed in the report
  c.mme_args = get(row, "mme_args");
  const std::string where = fmt::format("real-runs row '{}'", c.id);
  if (c.id.empty()) throw ConfigError("a real-runs row has no id");
  if (c.metric != "max_allocated" && c.metric != "other")
    throw ConfigError(fmt::format("{}: metric '{}' is neither max_allocated nor other", where, c.metric));
  try {
    c.measured_peak_gib = measured_gib(row, "measured_gib", true);
  } catch (const ConfigError& e) {
    c.status = "refused";
    c.reason = printable(line_prefix(line) + e.what());
    return c;
  }
  try {
    c.measured_reserved_gib = measured_reserved_from_notes(get(row, "notes"), where);
  } catch (const ConfigError& e) {
    c.status = "refused";
    c.reason = printable(line_prefix(line) + e.what());
    return c;
  }
  try {
    const auto args = split_shell_words(c.mme_args, where + ": mme_args");
    if (args.empty()) throw ConfigError(fmt::format("{}: mme_args is empty", where));
    if (!estimate_args) throw ConfigError(fmt::format("{}: no estimator for mme_args was given", where));
    const ArgsEstimate r = estimate_args(args);
    // A rank_note "pp_rank=N" names the pipeline stage the figure was measured on; otherwise the
    // rank is not stated: compare with the peak stage.
    const std::optional<std::int64_t> pp_rank = stated_pp_rank(c.rank_note);
    if (pp_rank && *pp_rank >= static_cast<std::int64_t>(r.estimate.stages.size()))
      throw ConfigError(fmt::format("{}: rank_note names pp_rank={}, but the layout has {} pipeline stages", where,
                                    *pp_rank, r.estimate.stages.size()));
    take_stage(c, pp_rank ? r.estimate.stages[static_cast<std::size_t>(*pp_rank)] : r.estimate.peak());
    c.world_size = r.estimate.setup.parallel.world_size;
    c.megatron_theoretical_gib = to_gib(megatron_theoretical_memory(r.model, r.estimate.setup));
    c.seed_tool_gib = to_gib(seed_tool_peak(r.model, r.estimate.setup));
    c.status = "ok";
  } catch (const Error& e) {
    c.status = "error";
    c.reason = printable(e.what());
  }
  return c;
}

std::vector<ValidationCase> run_validation(const std::filesystem::path& csv, const Registry& registry,
                                           const ValidationOptions& options) {
  std::optional<RowFilter> golden_re, case_re;
  if (!options.golden_regex.empty()) golden_re.emplace("--golden", options.golden_regex);
  if (!options.case_regex.empty()) case_re.emplace("--case", options.case_regex);
  const CsvTable table = read_csv_table(csv);
  const bool real = table.format == CsvFormat::kRealRuns;
  std::vector<ValidationCase> out;
  for (std::size_t i = 0; i < table.rows.size(); ++i) {
    const CsvRow& row = table.rows[i];
    if (golden_re && !golden_re->search(get(row, "golden"))) continue;
    if (case_re && !case_re->search(get(row, real ? "id" : "test_case"))) continue;
    out.push_back(real ? validate_real_run_row(row, options.estimate_args, table.lines[i])
                       : validate_row(row, registry, table.lines[i]));
  }
  return out;
}

namespace {
// Linear interpolation between closest ranks (numpy's default) of sorted values.
double quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

ErrorStats stats(std::vector<double> errs) {
  ErrorStats s;
  s.count = errs.size();
  if (errs.empty()) return s;
  for (auto& e : errs) e = std::fabs(e);
  std::sort(errs.begin(), errs.end());
  s.median = quantile(errs, 0.5);
  s.p90 = quantile(errs, 0.9);
  s.max = errs.back();
  return s;
}

constexpr double kSignedThreshold = 0.05;  // "under" / "over" the measured peak by more than 5 %

SignedStats signed_stats(std::vector<double> errs) {
  SignedStats s;
  s.count = errs.size();
  if (errs.empty()) return s;
  std::sort(errs.begin(), errs.end());
  s.median = quantile(errs, 0.5);
  for (const double e : errs) {
    if (e < -kSignedThreshold) ++s.under;
    if (e > kSignedThreshold) ++s.over;
  }
  s.under_share = static_cast<double>(s.under) / static_cast<double>(s.count);
  s.over_share = static_cast<double>(s.over) / static_cast<double>(s.count);
  return s;
}
}  // namespace

ValidationSummary summarize(const std::vector<ValidationCase>& cases) {
  ValidationSummary s;
  s.total = cases.size();
  std::vector<double> peak, stat, large, baseline, seed;
  std::vector<double> reserved, gap_measured, gap_estimated, gap_error;
  struct Bucket {
    const char* label;
    double min, max;
    std::vector<double> errs;
  };
  Bucket buckets[] = {{"<5GiB", 0.0, 5.0, {}}, {"5-40GiB", 5.0, 40.0, {}}, {">40GiB", 40.0, HUGE_VAL, {}}};
  for (const auto& c : cases) {
    if (c.status == "skipped") {
      ++s.skipped;
      continue;
    }
    if (c.status == "refused") {
      ++s.refused;
      continue;
    }
    if (c.status != "ok") {
      ++s.errors;
      continue;
    }
    ++s.evaluated;
    peak.push_back(c.peak_error());
    if (c.measured_static_gib > 0) stat.push_back(c.static_error());  // real runs measure no static memory
    // < 5 GiB, 5-40 GiB (both ends included), > 40 GiB.
    const std::size_t bucket = c.measured_peak_gib < 5.0 ? 0 : c.measured_peak_gib <= 40.0 ? 1 : 2;
    buckets[bucket].errs.push_back(c.peak_error());
    ++s.bound.count;
    if (c.within_bound()) {
      ++s.bound.covered;
    } else {
      ++s.bound.exceeded;
      s.bound.max_excess =
          std::max(s.bound.max_excess, (c.measured_peak_gib - c.estimated_upper_gib) / c.measured_peak_gib);
    }
    baseline.push_back(c.baseline_error());
    seed.push_back(c.seed_error());
    if (c.measured_peak_gib >= 5.0) large.push_back(c.peak_error());
    if (c.reserved_compared()) {
      reserved.push_back(c.reserved_error());
      if (c.estimated_reserved_gib < c.measured_reserved_gib) ++s.reserved.under;
      if (c.estimated_reserved_upper_gib >= c.measured_reserved_gib)
        ++s.reserved.bound_covered;
      else
        s.reserved.bound_max_excess =
            std::max(s.reserved.bound_max_excess,
                     (c.measured_reserved_gib - c.estimated_reserved_upper_gib) / c.measured_reserved_gib);
      gap_measured.push_back(c.measured_reserved_gib - c.measured_peak_gib);
      gap_estimated.push_back(c.estimated_reserved_gib - c.estimated_peak_gib);
      gap_error.push_back(c.reserved_gap_error_gib());
    }
  }
  s.reserved.count = reserved.size();
  s.reserved.error = stats(reserved);
  if (!reserved.empty()) {
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return quantile(v, 0.5);
    };
    s.reserved.signed_median = median(reserved);
    s.reserved.gap_measured_median_gib = median(gap_measured);
    s.reserved.gap_estimated_median_gib = median(gap_estimated);
    const ErrorStats g = stats(gap_error);
    s.reserved.gap_error_median_gib = g.median;
    s.reserved.gap_error_max_gib = g.max;
  }
  s.peak = stats(peak);
  s.static_mem = stats(stat);
  s.peak_large = stats(large);
  s.megatron_theoretical = stats(baseline);
  s.seed_tool = stats(seed);
  for (auto& b : buckets) s.by_size.push_back({b.label, b.min, b.max, stats(b.errs)});
  s.signed_peak = signed_stats(peak);
  s.bound.share = s.bound.count ? static_cast<double>(s.bound.covered) / static_cast<double>(s.bound.count) : 0.0;
  return s;
}

}  // namespace mme
