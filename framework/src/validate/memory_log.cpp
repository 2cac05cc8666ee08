// `mme validate --from-log`: the memory reports of a training log (Megatron-LM's report_memory
// lines, its TensorBoard scalars as text, Megatron-Bridge's GB figures), read line by line in
// bounded memory, per rank, against the estimate of the stage each rank belongs to
// (validation.hpp).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <istream>
#include <limits>
#include <map>

#include <fmt/core.h>

#include "mme/inputs/json_schema.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/input_text.hpp"
#include "mme/sdk/number_text.hpp"
#include "mme/sdk/units.hpp"
#include "mme/validate/validation.hpp"

namespace mme {

// ---- Training logs ----------------------------------------------------------------------------

namespace {

// No GPU holds a petabyte: a larger figure is not a measurement.
constexpr double kMaxMeasuredBytes = 1e15;

// The value token after position `at`: up to white space, '|', ',' or '}'. Empty if none.
std::string_view token_after(std::string_view line, std::size_t at) {
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

// The position right after `key` where it stands as a whole word (not inside a longer name).
std::size_t find_key(std::string_view line, std::string_view key) {
  for (std::size_t at = line.find(key); at != std::string_view::npos; at = line.find(key, at + 1)) {
    const bool start_ok = at == 0 || !(std::isalnum(static_cast<unsigned char>(line[at - 1])) || line[at - 1] == '-' ||
                                       line[at - 1] == '_');
    const std::size_t end = at + key.size();
    const bool end_ok = end == line.size() ||
                        !(std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '-' || line[end] == '_');
    if (start_ok && end_ok) return end;
  }
  return std::string_view::npos;
}

// A decimal integer of at most 18 digits at `b` (nullopt otherwise); `e` is set past it.
std::optional<std::int64_t> integer_at(std::string_view line, std::size_t b, std::size_t& e) {
  e = b;
  while (e < line.size() && std::isdigit(static_cast<unsigned char>(line[e]))) ++e;
  if (e == b || e - b > 18) return std::nullopt;
  std::int64_t v = 0;
  for (std::size_t k = b; k < e; ++k) v = v * 10 + (line[k] - '0');
  return v;
}

// A measured figure in bytes, or why it is not one.
struct Figure {
  std::optional<double> bytes;
  std::string refused;
};

Figure figure(std::string_view token, std::string_view key, double unit) {
  Figure f;
  if (token.empty()) {
    f.refused = fmt::format("no value after '{}'", key);
    return f;
  }
  // The whole token must be a number, read the same under every locale (number_text.hpp).
  const std::optional<double> parsed = parse_decimal(token);
  const double v = parsed.value_or(0);
  if (!parsed) {
    f.refused = fmt::format("'{}' after '{}' is not a number", printable(token.substr(0, 40)), key);
  } else if (!std::isfinite(v) || !(v > 0)) {
    f.refused = fmt::format("'{}' after '{}' is not a positive amount of memory (a run that trained allocates some)",
                            printable(token.substr(0, 40)), key);
  } else if (v * unit > kMaxMeasuredBytes || !(v * unit >= 1)) {
    // Less than a byte is no measurement (and in GiB, a divisor that overflows the error).
    f.refused =
        fmt::format("'{}' after '{}' is not an amount of memory a GPU holds", printable(token.substr(0, 40)), key);
  } else {
    f.bytes = v * unit;
  }
  return f;
}

struct Key {
  std::string_view key;
  double unit;
  std::optional<double> MemoryReport::*field;
};

}  // namespace

std::optional<MemoryReport> parse_memory_line(std::string_view line, std::size_t lineno, std::string& refused) {
  refused.clear();
  MemoryReport r;
  r.line = lineno;
  // report_memory (megatron/training/utils/common_utils.py): values in MB (2^20 bytes); the name
  // says when: "(after K iterations)", "(before save_checkpoint for iteration K)", ...
  static const Key report[] = {{"max allocated:", kMiB, &MemoryReport::max_allocated_bytes},
                               {"allocated:", kMiB, &MemoryReport::allocated_bytes},
                               {"max reserved:", kMiB, &MemoryReport::max_reserved_bytes},
                               {"reserved:", kMiB, &MemoryReport::reserved_bytes}};
  // training_log's scalars (--log-memory-to-tensorboard) in bytes, and Megatron-Bridge's in GB
  // (1e9 bytes), spelled with '-' or '_'.
  static const Key scalars[] = {{"mem-max-allocated-bytes", 1, &MemoryReport::max_allocated_bytes},
                                {"mem-allocated-bytes", 1, &MemoryReport::allocated_bytes},
                                {"mem-max-reserved-bytes", 1, &MemoryReport::max_reserved_bytes},
                                {"mem-reserved-bytes", 1, &MemoryReport::reserved_bytes},
                                {"mem-max-allocated-gigabytes", 1e9, &MemoryReport::max_allocated_bytes},
                                {"mem-allocated-gigabytes", 1e9, &MemoryReport::allocated_bytes},
                                {"mem-max-reserved-gigabytes", 1e9, &MemoryReport::max_reserved_bytes},
                                {"mem-reserved-gigabytes", 1e9, &MemoryReport::reserved_bytes},
                                {"mem_max_allocated_gb", 1e9, &MemoryReport::max_allocated_bytes},
                                {"mem_allocated_gb", 1e9, &MemoryReport::allocated_bytes},
                                {"mem_max_reserved_gb", 1e9, &MemoryReport::max_reserved_bytes},
                                {"mem_reserved_gb", 1e9, &MemoryReport::reserved_bytes}};
  const bool is_report =
      line.find("memory (MB)") != std::string_view::npos &&
      (line.find("max allocated:") != std::string_view::npos || line.find("| allocated:") != std::string_view::npos);
  if (is_report) {
    r.format = "report_memory";
    for (const auto& k : report) {
      // "allocated:" must not be the tail of "max allocated:".
      std::size_t at = std::string_view::npos;
      for (std::size_t p = line.find(k.key); p != std::string_view::npos; p = line.find(k.key, p + 1)) {
        if (k.key.rfind("max ", 0) != 0 && p >= 4 && line.substr(p - 4, 4) == "max ") continue;
        at = p + k.key.size();
        break;
      }
      if (at == std::string_view::npos) continue;
      Figure f = figure(token_after(line, at), k.key, k.unit);
      if (!f.bytes) {
        refused = f.refused;
        return std::nullopt;
      }
      r.*k.field = f.bytes;
    }
    const auto after = line.find("(after ");
    if (after != std::string_view::npos) {
      std::size_t e = 0;
      if (const auto k = integer_at(line, after + 7, e); k && line.substr(e, 11) == " iterations") r.iteration = *k;
    }
    // Reports around a checkpoint save are not training steps.
    r.training = line.find("save_checkpoint") == std::string_view::npos;
  } else {
    bool any = false;
    for (const auto& k : scalars) {
      const auto at = find_key(line, k.key);
      if (at == std::string_view::npos) continue;
      any = true;
      Figure f = figure(token_after(line, at), k.key, k.unit);
      if (!f.bytes) {
        refused = f.refused;
        return std::nullopt;
      }
      r.*k.field = f.bytes;
      r.format = k.unit == 1 ? "scalar" : "bridge";
    }
    if (!any) return std::nullopt;
    // The iteration of a training-log line: "iteration   12/  100", "iteration 12".
    if (const auto at = find_key(line, "iteration"); at != std::string_view::npos) {
      std::size_t b = at;
      while (b < line.size() && (line[b] == ' ' || line[b] == ':' || line[b] == '=')) ++b;
      std::size_t e = 0;
      if (const auto k = integer_at(line, b, e)) r.iteration = *k;
    }
  }
  // "[Rank N]" anywhere in the line.
  if (const auto at = line.find("[Rank "); at != std::string_view::npos) {
    std::size_t e = 0;
    const auto rank = integer_at(line, at + 6, e);
    if (!rank || e >= line.size() || line[e] != ']') {
      refused = "'[Rank' is not followed by a rank number and ']'";
      return std::nullopt;
    }
    r.rank = *rank;
  }
  // A report of one moment: the peaks hold the current figures, reserved memory holds the
  // allocated.
  auto below = [&](const std::optional<double>& small, const std::optional<double>& big, const char* s, const char* b) {
    if (small && big && *small > *big * (1 + 1e-9)) {
      refused = fmt::format("{} {:.6g} MiB is more than {} {:.6g} MiB", s, *small / kMiB, b, *big / kMiB);
      return true;
    }
    return false;
  };
  if (below(r.allocated_bytes, r.max_allocated_bytes, "allocated", "max allocated") ||
      below(r.allocated_bytes, r.reserved_bytes, "allocated", "reserved") ||
      below(r.reserved_bytes, r.max_reserved_bytes, "reserved", "max reserved") ||
      below(r.max_allocated_bytes, r.max_reserved_bytes, "max allocated", "max reserved"))
    return std::nullopt;
  return r;
}

namespace {

// One rank's figures over its reports.
struct Bucket {
  std::size_t count = 0, first_line = 0;
  std::optional<double> max_allocated, max_reserved;  // the largest
  std::optional<double> allocated, reserved;          // the last logged
  void add(const MemoryReport& r) {
    if (count++ == 0) first_line = r.line;
    auto peak = [](std::optional<double>& to, const std::optional<double>& v) {
      if (v) to = to ? std::max(*to, *v) : *v;
    };
    peak(max_allocated, r.max_allocated_bytes);
    peak(max_reserved, r.max_reserved_bytes);
    if (r.allocated_bytes) allocated = r.allocated_bytes;
    if (r.reserved_bytes) reserved = r.reserved_bytes;
  }
  void merge(const Bucket& later) {
    if (later.count == 0) return;
    if (count == 0) {
      *this = later;
      return;
    }
    const std::size_t first = std::min(first_line, later.first_line);
    MemoryReport r;
    r.max_allocated_bytes = later.max_allocated;
    r.max_reserved_bytes = later.max_reserved;
    r.allocated_bytes = later.allocated;
    r.reserved_bytes = later.reserved;
    const std::size_t n = count + later.count;
    add(r);
    count = n;
    first_line = first;
  }
};

struct RankState {
  std::optional<std::int64_t> first_iteration;
  Bucket first, steady;
  std::size_t reports = 0, first_line = 0;
};

}  // namespace

MemoryLog parse_memory_log(std::istream& in, const std::string& source, std::uintmax_t max_bytes) {
  MemoryLog log;
  std::map<std::int64_t, RankState> ranks;  // key: the rank, -1 for lines without one
  std::string refused;
  auto take = [&](std::string_view line) {
    ++log.lines;
    if (line.find("mem") == std::string_view::npos) return;
    const auto r = parse_memory_line(line, log.lines, refused);
    if (r || !refused.empty()) ++log.memory_lines;
    if (!r) {
      if (refused.empty()) return;
      ++log.refused_count;
      if (log.refused.size() >= kMaxRefusedListed) return;
      RefusedMeasurement m;
      m.line = log.lines;
      m.reason = refused;
      if (const auto at = line.find("[Rank "); at != std::string_view::npos) {
        std::size_t e = 0;
        if (const auto k = integer_at(line, at + 6, e); k && e < line.size() && line[e] == ']') m.rank = *k;
      }
      log.refused.push_back(std::move(m));
      return;
    }
    if (!r->training) return;
    RankState& st = ranks[r->rank.value_or(-1)];
    if (st.reports++ == 0) st.first_line = r->line;
    // The run's first iteration is left out where later ones are logged: its report can come
    // before the optimizer's states exist (training.py reports again after the second).
    if (!r->iteration) {
      st.steady.add(*r);
    } else if (!st.first_iteration || *r->iteration < *st.first_iteration) {
      st.steady.merge(st.first);
      st.first = Bucket{};
      st.first.add(*r);
      st.first_iteration = r->iteration;
    } else if (*r->iteration == *st.first_iteration) {
      st.first.add(*r);
    } else {
      st.steady.add(*r);
    }
  };
  // Read in blocks, one line at a time: memory stays bounded whatever the log's size. A line
  // longer than kMaxLogLineBytes is read up to that length (a memory report is a few hundred
  // bytes).
  std::vector<char> block(std::size_t{1} << 20);
  std::string line;
  bool overlong = false;
  std::uintmax_t total = 0;
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    const auto n = static_cast<std::size_t>(in.gcount());
    if (n == 0) break;
    total += n;
    if (total > max_bytes)
      throw ConfigError(fmt::format("{}: more than the {} bytes a training log may have", source, max_bytes));
    const char* p = block.data();
    const char* end = p + n;
    while (p < end) {
      const auto* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
      const char* stop = nl ? nl : end;
      const std::size_t room = kMaxLogLineBytes - line.size();
      const auto length = static_cast<std::size_t>(stop - p);
      line.append(p, std::min(length, room));
      if (length > room) overlong = true;
      if (!nl) break;
      log.long_lines += overlong ? 1 : 0;
      take(line);
      line.clear();
      overlong = false;
      p = nl + 1;
    }
  }
  if (!line.empty() || overlong) {
    log.long_lines += overlong ? 1 : 0;
    take(line);
  }
  if (in.bad()) throw ConfigError(fmt::format("{}: a read error after line {}", source, log.lines));
  // A rank's figures: from its steady iterations when it logged any, else from its first.
  auto rank_memory = [](const RankState& st) {
    RankMemory m;
    m.reports = st.reports;
    m.first_line = st.first_line;
    m.first_iteration = st.first_iteration;
    m.steady = st.steady.count > 0;
    const Bucket& b = m.steady ? st.steady : st.first;
    m.used = b.count;
    m.max_allocated_bytes = b.max_allocated;
    m.allocated_bytes = b.allocated;
    m.reserved_bytes = b.reserved;
    m.max_reserved_bytes = b.max_reserved;
    return m;
  };
  // The numbered ranks in order, then the lines that name no rank (key -1).
  for (const auto& [key, st] : ranks) {
    if (key < 0) continue;
    RankMemory m = rank_memory(st);
    m.rank = key;
    log.ranks.push_back(m);
  }
  if (const auto it = ranks.find(-1); it != ranks.end()) log.ranks.push_back(rank_memory(it->second));
  const bool any_peak = std::any_of(log.ranks.begin(), log.ranks.end(),
                                    [](const RankMemory& r) { return r.max_allocated_bytes.has_value(); });
  if (!any_peak && log.refused_count > 0)
    throw ConfigError(fmt::format("{}: every memory line is refused ({}); the first, line {}: {}", source,
                                  log.refused_count, log.refused.front().line, log.refused.front().reason));
  if (!any_peak)
    throw ConfigError(fmt::format(
        "{}: no memory lines found: looked for Megatron-LM's report_memory lines ('[Rank N] (after N iterations) "
        "memory (MB) | allocated: X | max allocated: Y | ...'), its mem-max-allocated-bytes scalars "
        "('mem-max-allocated-bytes: V') and Megatron-Bridge's mem-max-allocated-gigabytes (GB); Megatron-LM prints the "
        "first after the first iterations (and with --log-memory-interval), the second with "
        "--log-memory-to-tensorboard",
        source));
  return log;
}

MemoryLog read_memory_log(const std::filesystem::path& path) {
  // Regular files only, with the size cap; read as a stream, never whole.
  std::ifstream in = open_text_file(path, kMaxLogBytes, "a training log");
  return parse_memory_log(in, path.string(), kMaxLogBytes);
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
  return (estimated_peak_gib - measured_max_allocated_gib) / measured_max_allocated_gib;
}

std::optional<double> RankComparison::static_error() const {
  if (!measured_allocated_gib) return std::nullopt;
  return (estimated_static_gib - *measured_allocated_gib) / *measured_allocated_gib;
}

std::optional<double> RankComparison::reserved_error() const {
  const auto& measured = measured_max_reserved_gib ? measured_max_reserved_gib : measured_reserved_gib;
  if (!estimated_reserved_gib || !measured) return std::nullopt;
  return (*estimated_reserved_gib - *measured) / *measured;
}

std::vector<RankComparison> compare_memory_log(const MemoryLog& log, const Estimate& estimate,
                                               const std::string& source, const ReservedEstimate& reserved) {
  if (estimate.stages.empty()) throw ConfigError("the estimate has no pipeline stage");
  std::vector<RankComparison> out;
  for (const RankMemory& m : log.ranks) {
    if (!m.max_allocated_bytes) continue;
    RankComparison c;
    c.rank = m.rank;
    try {
      c.stage = m.rank ? pipeline_stage_of_rank(*m.rank, estimate.setup.parallel.world_size, estimate.setup.parallel.pp)
                       : static_cast<std::int64_t>(estimate.stages.size()) - 1;
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("{}:{}: {}", source, m.first_line, e.what()));
    }
    const StageEstimate& st = estimate.stages.at(static_cast<std::size_t>(c.stage));
    c.reports = m.reports;
    c.used = m.used;
    c.steady = m.steady;
    c.first_iteration = m.first_iteration;
    c.measured_max_allocated_gib = *m.max_allocated_bytes / kGiB;
    if (m.allocated_bytes) c.measured_allocated_gib = *m.allocated_bytes / kGiB;
    if (m.reserved_bytes) c.measured_reserved_gib = *m.reserved_bytes / kGiB;
    if (m.max_reserved_bytes) c.measured_max_reserved_gib = *m.max_reserved_bytes / kGiB;
    c.estimated_peak_gib = to_gib(st.total_bytes);
    c.estimated_upper_gib = st.upper_bytes > 0 ? to_gib(st.upper_bytes) : c.estimated_peak_gib;
    c.estimated_static_gib = to_gib(st.static_bytes);
    if (reserved)
      if (const auto r = reserved(st)) c.estimated_reserved_gib = to_gib(*r);
    out.push_back(c);
  }
  if (out.empty()) throw ConfigError(fmt::format("{}: no max-allocated value in the memory lines", source));
  return out;
}

nlohmann::json log_comparison_json(const std::string& log_path, const MemoryLog& log,
                                   const std::vector<RankComparison>& ranks, const Estimate& estimate) {
  using J = nlohmann::json;
  auto opt = [](const std::optional<double>& v, double scale = 1) { return v ? J(*v * scale) : J(nullptr); };
  J list = J::array();
  std::size_t covered = 0;
  double max_excess = 0;  // (measured - bound) / measured, over the ranks above the bound
  for (const auto& r : ranks) {
    covered += r.within_bound() ? 1 : 0;
    if (!r.within_bound() && r.measured_max_allocated_gib > 0)
      max_excess =
          std::max(max_excess, (r.measured_max_allocated_gib - r.estimated_upper_gib) / r.measured_max_allocated_gib);
    list.push_back({{"rank", r.rank ? J(*r.rank) : J(nullptr)},
                    {"stage", r.stage},
                    {"reports", r.reports},
                    {"used", r.used},
                    {"steady", r.steady},
                    {"first_iteration", r.first_iteration ? J(*r.first_iteration) : J(nullptr)},
                    {"measured_max_allocated_gib", r.measured_max_allocated_gib},
                    {"measured_allocated_gib", opt(r.measured_allocated_gib)},
                    {"measured_reserved_gib", opt(r.measured_reserved_gib)},
                    {"measured_max_reserved_gib", opt(r.measured_max_reserved_gib)},
                    {"estimated_peak_gib", r.estimated_peak_gib},
                    {"estimated_upper_gib", r.estimated_upper_gib},
                    {"estimated_static_gib", r.estimated_static_gib},
                    {"estimated_reserved_gib", opt(r.estimated_reserved_gib)},
                    {"peak_error_pct", 100 * r.peak_error()},
                    {"static_error_pct", opt(r.static_error(), 100)},
                    {"reserved_error_pct", opt(r.reserved_error(), 100)},
                    {"within_bound", r.within_bound()}});
  }
  J refused = J::array();
  for (const auto& m : log.refused)
    refused.push_back({{"line", m.line}, {"rank", m.rank ? J(*m.rank) : J(nullptr)}, {"reason", m.reason}});
  const auto& p = estimate.setup.parallel;
  return {{"schema_version", kSchemaVersion},
          {"format", "log"},
          {"log", log_path},
          {"model", estimate.model.name},
          {"world_size", p.world_size},
          {"pp", p.pp},
          {"ranks", list},
          {"refused", refused},
          {"summary",
           {{"ranks", ranks.size()},
            {"lines", log.lines},
            {"memory_lines", log.memory_lines},
            {"refused", log.refused_count},
            {"bound",
             {{"count", ranks.size()},
              {"covered", covered},
              {"share", ranks.empty() ? 0.0 : static_cast<double>(covered) / static_cast<double>(ranks.size())},
              {"exceeded", ranks.size() - covered},
              {"max_excess_pct", 100 * max_excess}}}}}};
}

void render_log_comparison(std::ostream& out, const std::string& log_path, const MemoryLog& log,
                           const std::vector<RankComparison>& ranks, const Estimate& estimate) {
  const auto& p = estimate.setup.parallel;
  out << fmt::format("{}: {} memory lines ({} refused); {} on {} GPUs, PP {} ({} GPUs per stage)\n", log_path,
                     log.memory_lines, log.refused_count, estimate.model.name, p.world_size, p.pp, p.world_size / p.pp);
  out << fmt::format("{:<10} {:>5} {:>7} {:>10} {:>9} {:>8} {:>9} {:>6} {:>10} {:>9} {:>8} {:>10}\n", "RANK", "STAGE",
                     "LINES", "MAX ALLOC", "EST", "ERR", "BOUND", "<=BND", "ALLOC", "STATIC", "ERR", "MAX RSVD");
  auto pct = [](const std::optional<double>& e) { return e ? fmt::format("{:.1f}%", 100 * *e) : std::string("-"); };
  auto gib = [](const std::optional<double>& v) { return v ? fmt::format("{:.3f}", *v) : std::string("-"); };
  for (const auto& r : ranks)
    out << fmt::format("{:<10} {:>5} {:>7} {:>10.3f} {:>9.3f} {:>7.1f}% {:>9.3f} {:>6} {:>10} {:>9.3f} {:>8} {:>10}\n",
                       r.rank ? std::to_string(*r.rank) : std::string("last"), r.stage, r.used,
                       r.measured_max_allocated_gib, r.estimated_peak_gib, 100 * r.peak_error(), r.estimated_upper_gib,
                       r.within_bound() ? "yes" : "no", gib(r.measured_allocated_gib), r.estimated_static_gib,
                       pct(r.static_error()), gib(r.measured_max_reserved_gib));
  for (const auto& r : ranks)
    if (!r.steady)
      out << fmt::format(
          "rank {}: only its first iteration ({}) is logged; the optimizer's states may be missing "
          "from it\n",
          r.rank ? std::to_string(*r.rank) : std::string("last"), r.first_iteration.value_or(0));
  for (const auto& m : log.refused)
    out << fmt::format("refused: line {}{}: {}\n", m.line, m.rank ? fmt::format(" (rank {})", *m.rank) : "", m.reason);
  if (log.refused_count > log.refused.size())
    out << fmt::format("refused: {} more lines\n", log.refused_count - log.refused.size());
  out << "GiB; MAX ALLOC: the largest max-allocated value of the rank after its first iteration; ALLOC: the last "
         "allocated value, against the estimate's static memory; \"last\": lines without a rank (logged by the last "
         "rank), compared with the last stage\n";
}

}  // namespace mme
