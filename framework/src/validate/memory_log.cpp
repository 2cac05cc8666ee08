// `mme validate --from-log`: the memory reports of a Megatron-LM training log, per rank, against
// the estimate of the stage each rank belongs to (validation.hpp).
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <istream>
#include <sstream>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"
#include "mme/sdk/input_text.hpp"
#include "mme/sdk/number_text.hpp"
#include "mme/sdk/units.hpp"
#include "mme/validate/validation.hpp"

namespace mme {

// ---- Training logs ----------------------------------------------------------------------------

namespace {

// The value token after `key` in `line`: up to white space, '|', ',' or '}'. Empty if none.
std::string token_after(const std::string& line, std::size_t at) {
  std::size_t b = at;
  while (b < line.size() &&
         (line[b] == ' ' || line[b] == '\t' || line[b] == ':' || line[b] == '=' || line[b] == '\'' || line[b] == '"'))
    ++b;
  std::size_t e = b;
  while (e < line.size() && line[e] != ' ' && line[e] != '\t' && line[e] != '|' && line[e] != ',' && line[e] != '}' &&
         line[e] != '\r')
    ++e;
  return line.substr(b, e - b);
}

double log_number(const std::string& token, const char* what, const std::string& where) {
  if (token.empty()) throw ConfigError(fmt::format("{}: no value after '{}'", where, what));
  const auto v = parse_decimal(token);  // the same under every locale (number_text.hpp)
  if (!v || !std::isfinite(*v) || *v < 0)
    throw ConfigError(fmt::format("{}: '{}' after '{}' is not a non-negative number", where, token, what));
  return *v;
}

// "[Rank N]" anywhere in the line.
std::optional<std::int64_t> rank_of(const std::string& line, const std::string& where) {
  const auto at = line.find("[Rank ");
  if (at == std::string::npos) return std::nullopt;
  std::size_t b = at + 6, e = b;
  while (e < line.size() && std::isdigit(static_cast<unsigned char>(line[e]))) ++e;
  if (e == b || e >= line.size() || line[e] != ']')
    throw ConfigError(fmt::format("{}: '[Rank' is not followed by a rank number and ']'", where));
  if (e - b > 18)
    throw ConfigError(fmt::format("{}: the rank {} is beyond any world size", where, line.substr(b, e - b)));
  return std::stoll(line.substr(b, e - b));
}

// The position right after `key` where it stands as a whole word (not inside a longer name).
std::size_t find_key(const std::string& line, const std::string& key) {
  for (std::size_t at = line.find(key); at != std::string::npos; at = line.find(key, at + 1)) {
    const bool start_ok = at == 0 || !(std::isalnum(static_cast<unsigned char>(line[at - 1])) || line[at - 1] == '-' ||
                                       line[at - 1] == '_');
    if (start_ok) return at + key.size();
  }
  return std::string::npos;
}

}  // namespace

std::vector<MemoryReport> parse_memory_log(std::istream& in, const std::string& source) {
  std::vector<MemoryReport> out;
  std::string line;
  std::size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    const std::string where = fmt::format("{}:{}", source, lineno);
    MemoryReport r;
    r.line = lineno;
    if (line.find("memory (MB)") != std::string::npos &&
        (line.find("max allocated:") != std::string::npos || line.find("| allocated:") != std::string::npos)) {
      // report_memory: values in MB (2^20 bytes).
      if (const auto at = find_key(line, "max allocated:"); at != std::string::npos)
        r.max_allocated_bytes = kMiB * log_number(token_after(line, at), "max allocated:", where);
      if (const auto at = line.find("| allocated:"); at != std::string::npos)
        r.allocated_bytes = kMiB * log_number(token_after(line, at + 12), "allocated:", where);
      r.rank = rank_of(line, where);
      out.push_back(r);
      continue;
    }
    const auto max_at = find_key(line, "mem-max-allocated-bytes");
    const auto cur_at = find_key(line, "mem-allocated-bytes");
    if (max_at == std::string::npos && cur_at == std::string::npos) continue;
    // A scalar written as text: "mem-max-allocated-bytes: V", "mem-max-allocated-bytes V",
    // also quoted in a printed dict ('mem-max-allocated-bytes': V); values in bytes.
    r.scalar = true;
    if (max_at != std::string::npos)
      r.max_allocated_bytes = log_number(token_after(line, max_at), "mem-max-allocated-bytes", where);
    if (cur_at != std::string::npos)
      r.allocated_bytes = log_number(token_after(line, cur_at), "mem-allocated-bytes", where);
    r.rank = rank_of(line, where);
    out.push_back(r);
  }
  const bool any_peak =
      std::any_of(out.begin(), out.end(), [](const MemoryReport& r) { return r.max_allocated_bytes.has_value(); });
  if (!any_peak)
    throw ConfigError(fmt::format(
        "{}: no memory lines found: looked for Megatron-LM's report_memory lines ('[Rank N] (after N iterations) "
        "memory (MB) | allocated: X | max allocated: Y | ...') and mem-max-allocated-bytes scalars "
        "('mem-max-allocated-bytes: V'); Megatron-LM prints the first after the first iterations (and with "
        "--log-memory-interval), the second with --log-memory-to-tensorboard",
        source));
  return out;
}

std::vector<MemoryReport> read_memory_log(const std::filesystem::path& path) {
  // Regular files only, with a size cap: a whole log is read (a single line may be all of it).
  const std::string text = read_text_file(path, kMaxLogBytes, "a training log");
  std::istringstream in(text);
  return parse_memory_log(in, path.string());
}

std::int64_t pipeline_stage_of_rank(std::int64_t rank, std::int64_t world_size, std::int64_t pp) {
  if (world_size < 1 || pp < 1 || world_size % pp != 0)
    throw ConfigError(fmt::format("a world size of {} GPUs does not split into {} pipeline stages", world_size, pp));
  if (rank < 0 || rank >= world_size)
    throw ConfigError(
        fmt::format("rank {} is beyond the world size of {} GPUs (ranks 0 to {}); give the run's "
                    "--num-gpus",
                    rank, world_size, world_size - 1));
  return rank / (world_size / pp);
}

double RankComparison::peak_error() const {
  return measured_max_allocated_gib > 0 ? (estimated_peak_gib - measured_max_allocated_gib) / measured_max_allocated_gib
                                        : 0.0;
}

std::vector<RankComparison> compare_memory_log(const std::vector<MemoryReport>& reports, const Estimate& estimate,
                                               const std::string& source) {
  if (estimate.stages.empty()) throw ConfigError("the estimate has no pipeline stage");
  // Key: the rank, or -1 for lines without one (sorted last below).
  std::map<std::int64_t, RankComparison> by_rank;
  for (const auto& r : reports) {
    if (!r.max_allocated_bytes) continue;
    const std::int64_t key = r.rank.value_or(-1);
    auto [it, fresh] = by_rank.try_emplace(key);
    RankComparison& c = it->second;
    if (fresh) {
      c.rank = r.rank;
      try {
        c.stage = r.rank
                      ? pipeline_stage_of_rank(*r.rank, estimate.setup.parallel.world_size, estimate.setup.parallel.pp)
                      : static_cast<std::int64_t>(estimate.stages.size()) - 1;
      } catch (const ConfigError& e) {
        throw ConfigError(fmt::format("{}:{}: {}", source, r.line, e.what()));
      }
      const StageEstimate& st = estimate.stages.at(static_cast<std::size_t>(c.stage));
      c.estimated_peak_gib = to_gib(st.total_bytes);
      c.estimated_upper_gib = st.upper_bytes > 0 ? to_gib(st.upper_bytes) : c.estimated_peak_gib;
      c.estimated_static_gib = to_gib(st.static_bytes);
    }
    ++c.reports;
    c.measured_max_allocated_gib = std::max(c.measured_max_allocated_gib, *r.max_allocated_bytes / kGiB);
    if (r.allocated_bytes) c.measured_allocated_gib = *r.allocated_bytes / kGiB;
  }
  if (by_rank.empty()) throw ConfigError(fmt::format("{}: no max-allocated value in the memory lines", source));
  std::vector<RankComparison> out;
  for (auto& [key, c] : by_rank)
    if (key >= 0) out.push_back(c);
  if (auto it = by_rank.find(-1); it != by_rank.end()) out.push_back(it->second);
  return out;
}

}  // namespace mme
