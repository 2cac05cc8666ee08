#include "mme/validation.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/core.h>

#include "mme/baselines.hpp"
#include "mme/error.hpp"
#include "mme/estimator.hpp"
#include "mme/megatron_args.hpp"
#include "mme/model_loader.hpp"
#include "mme/units.hpp"

namespace mme {

double ValidationCase::peak_error() const {
  return measured_peak_gib > 0 ? (estimated_peak_gib - measured_peak_gib) / measured_peak_gib : 0.0;
}
double ValidationCase::baseline_error() const {
  return measured_peak_gib > 0 ? (megatron_theoretical_gib - measured_peak_gib) / measured_peak_gib : 0.0;
}
double ValidationCase::seed_error() const {
  return measured_peak_gib > 0 ? (seed_tool_gib - measured_peak_gib) / measured_peak_gib : 0.0;
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
  static const char* kMeta[] = {"model", "test_case", "golden", "n_iters", "max_alloc_GiB_max", "max_alloc_GiB_last",
                                "alloc_GiB_median", "alloc_GiB_first", "nodes_gpus"};
  return std::any_of(std::begin(kMeta), std::end(kMeta), [&](const char* m) { return c == m; });
}

double number(const CsvRow& row, const char* col) {
  auto it = row.find(col);
  if (it == row.end()) return 0.0;
  try {
    return std::stod(it->second);
  } catch (const std::exception&) {
    throw ConfigError(fmt::format("column {}: '{}' is not a number", col, it->second));
  }
}

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
    std::int64_t n = 0;
    try {
      n = std::stoll(entry.substr(colon + 1, x - colon - 1)) * std::stoll(entry.substr(x + 1));
    } catch (const std::exception&) {
      continue;
    }
    if (first == 0) first = n;
    if (golden.find(platform) != std::string::npos) return n;
  }
  // H100 and A100 recipes default to 1 node x 8 GPUs.
  return first > 0 && golden.find("gb200") != std::string::npos ? first : fallback;
}

std::string architecture_of(const std::string& golden) {
  if (golden.find("a100") != std::string::npos) return "ampere";
  if (golden.find("gb200") != std::string::npos || golden.find("b200") != std::string::npos) return "blackwell";
  return "hopper";
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// Why a row is outside what mme models (empty: it is modelled).
std::string skip_reason(const CsvRow& row) {
  const std::string model = get(row, "model");
  const std::string tc = get(row, "test_case");
  if (model == "t5") return "T5 encoder-decoder models are not modelled (decoder-only GPT/MoE only)";
  if (model == "bert") return "BERT encoder models are not modelled (decoder-only GPT/MoE only)";
  if (model == "hybrid") return "hybrid Mamba/attention models are not modelled";
  if (model.rfind("multimodal", 0) == 0) return "multimodal models (vision encoder + LM) are not modelled";
  if (model != "gpt" && model != "moe") return fmt::format("model kind '{}' is not modelled", model);
  if (!get(row, "use-megatron-fsdp").empty() || !get(row, "use-torch-fsdp2").empty() ||
      !get(row, "data-parallel-sharding-strategy").empty() || contains(tc, "fsdp") || contains(tc, "zp_z3"))
    return "FSDP / ZeRO-3 (parameters sharded over data parallel) is not modelled";
  if (contains(tc, "grpo") || contains(tc, "_rl_") || contains(tc, "inference"))
    return "RL / inference loops (generation engine next to training) are not modelled";
  if (!get(row, "fine-grained-activation-offloading").empty() || !get(row, "cpu-offloading").empty())
    return "activation offloading to the host is not modelled";
  const std::string tokenizer = get(row, "tokenizer-type");
  if (get(row, "vocab-size").empty() && !tokenizer.empty() && tokenizer != "GPT2BPETokenizer" &&
      tokenizer != "NullTokenizer" && tokenizer != "TikTokenizer")
    return fmt::format("the row does not record the vocabulary size of {}", tokenizer);
  return {};
}

}  // namespace

std::vector<CsvRow> read_csv(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw NotFoundError(fmt::format("{}: cannot open the file", path.string()));
  std::string line;
  if (!std::getline(in, line)) throw ConfigError(fmt::format("{}: empty file", path.string()));
  const auto header = split_csv_line(line, path.string() + ":1");
  for (const char* required : {"model", "test_case", "max_alloc_GiB_max", "alloc_GiB_median"})
    if (std::find(header.begin(), header.end(), required) == header.end())
      throw ConfigError(fmt::format("{}: missing column '{}'", path.string(), required));
  std::vector<CsvRow> rows;
  std::size_t lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    const auto cells = split_csv_line(line, fmt::format("{}:{}", path.string(), lineno));
    if (cells.size() != header.size())
      throw ConfigError(fmt::format("{}:{}: {} cells for {} columns", path.string(), lineno, cells.size(),
                                    header.size()));
    CsvRow row;
    for (std::size_t i = 0; i < cells.size(); ++i)
      if (!cells[i].empty()) row[header[i]] = cells[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

ValidationCase validate_row(const CsvRow& row, const Registry& registry) {
  ValidationCase c;
  c.model = get(row, "model");
  c.test_case = get(row, "test_case");
  c.golden = get(row, "golden");
  c.measured_peak_gib = number(row, "max_alloc_GiB_max");
  c.measured_static_gib = number(row, "alloc_GiB_median");
  c.world_size = world_size_of(get(row, "nodes_gpus"), c.golden);
  c.gpu_architecture = architecture_of(c.golden);
  if (std::string why = skip_reason(row); !why.empty()) {
    c.status = "skipped";
    c.reason = why;
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
    if (value == "True" || value == "true") args.set(col, {});
    else if (value == "False" || value == "false") continue;
    else args.set(col, {value});
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
    options.gpu_architecture = c.gpu_architecture;
    options.components = false;
    const Estimate est = estimator.run(setup, options);
    const StageEstimate& last = est.stages.back();  // the last rank logs the memory
    c.estimated_peak_gib = to_gib(last.total_bytes);
    c.estimated_static_gib = to_gib(last.static_bytes);
    c.estimated_upper_gib = to_gib(last.upper_bytes);
    c.megatron_theoretical_gib = to_gib(megatron_theoretical_memory(model, est.setup));
    c.seed_tool_gib = to_gib(seed_tool_peak(model, est.setup));
    c.status = "ok";
  } catch (const Error& e) {
    c.status = "error";
    c.reason = e.what();
  }
  return c;
}

namespace {

// A row filter. libstdc++'s regex compiler reads back-references and repeat counts into a
// long without an overflow check (a 20-digit \N is undefined behaviour) and expands {N} into
// N states, so numbers in a pattern are kept to 4 digits and patterns to 256 characters; a
// filter on test-case names needs neither more.
std::regex compile_filter(std::string_view flag, const std::string& pattern) {
  constexpr std::size_t kMaxLength = 256;
  constexpr std::size_t kMaxDigits = 4;
  if (pattern.size() > kMaxLength)
    throw UsageError(fmt::format("{}: the regular expression is longer than {} characters", flag, kMaxLength));
  std::size_t run = 0;
  for (const char c : pattern) {
    run = std::isdigit(static_cast<unsigned char>(c)) ? run + 1 : 0;
    if (run > kMaxDigits)
      throw UsageError(fmt::format("{}: a number of more than {} digits in the regular expression; repeat counts "
                                   "and back-references that large are not supported", flag, kMaxDigits));
  }
  try {
    return std::regex(pattern);
  } catch (const std::regex_error& e) {
    throw UsageError(fmt::format("{}: invalid regular expression: {}", flag, e.what()));
  }
}

}  // namespace

std::vector<ValidationCase> run_validation(const std::filesystem::path& csv, const Registry& registry,
                                           const ValidationOptions& options) {
  std::optional<std::regex> golden_re, case_re;
  if (!options.golden_regex.empty()) golden_re.emplace(compile_filter("--golden", options.golden_regex));
  if (!options.case_regex.empty()) case_re.emplace(compile_filter("--case", options.case_regex));
  std::vector<ValidationCase> out;
  for (const auto& row : read_csv(csv)) {
    if (golden_re && !std::regex_search(get(row, "golden"), *golden_re)) continue;
    if (case_re && !std::regex_search(get(row, "test_case"), *case_re)) continue;
    out.push_back(validate_row(row, registry));
  }
  return out;
}

namespace {
ErrorStats stats(std::vector<double> errs) {
  ErrorStats s;
  s.count = errs.size();
  if (errs.empty()) return s;
  for (auto& e : errs) e = std::fabs(e);
  std::sort(errs.begin(), errs.end());
  auto quantile = [&](double q) {
    // Linear interpolation between closest ranks (numpy's default).
    const double pos = q * static_cast<double>(errs.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const auto hi = std::min(lo + 1, errs.size() - 1);
    return errs[lo] + (errs[hi] - errs[lo]) * (pos - static_cast<double>(lo));
  };
  s.median = quantile(0.5);
  s.p90 = quantile(0.9);
  s.max = errs.back();
  return s;
}
}  // namespace

ValidationSummary summarize(const std::vector<ValidationCase>& cases) {
  ValidationSummary s;
  s.total = cases.size();
  std::vector<double> peak, stat, large, baseline, seed;
  for (const auto& c : cases) {
    if (c.status == "skipped") {
      ++s.skipped;
      continue;
    }
    if (c.status != "ok") {
      ++s.errors;
      continue;
    }
    ++s.evaluated;
    peak.push_back(c.peak_error());
    stat.push_back(c.static_error());
    baseline.push_back(c.baseline_error());
    seed.push_back(c.seed_error());
    if (c.measured_peak_gib >= 5.0) large.push_back(c.peak_error());
  }
  s.peak = stats(peak);
  s.static_mem = stats(stat);
  s.peak_large = stats(large);
  s.megatron_theoretical = stats(baseline);
  s.seed_tool = stats(seed);
  return s;
}

}  // namespace mme
