#include "throughput_rows.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>

#include <fmt/core.h>

#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/model_source.hpp>
#include <mme/inputs/setup_schema.hpp>
#include <mme/sdk/error.hpp>
#include <mme/validate/validation.hpp>

namespace mme::calibration {

namespace {

using CsvRow = std::map<std::string, std::string>;

// A CSV file of a header and rows, RFC 4180 quoting (these two files have quoted commas), as
// column -> value with empty cells left out.
std::vector<CsvRow> read_csv_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw NotFoundError(fmt::format("cannot read {}", path.string()));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::vector<std::string>> records(1);
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      records.back().push_back(std::move(field));
      field.clear();
    } else if (c == '\n') {
      records.back().push_back(std::move(field));
      field.clear();
      records.emplace_back();
    } else if (c != '\r') {
      field += c;
    }
  }
  if (!field.empty() || !records.back().empty()) records.back().push_back(std::move(field));
  if (records.back().empty()) records.pop_back();
  if (records.empty()) throw ConfigError(fmt::format("{}: empty", path.string()));
  std::vector<CsvRow> rows;
  const auto& header = records.front();
  for (std::size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != header.size())
      throw ConfigError(fmt::format("{}: line {} has {} fields, the header {}", path.string(), r + 1, records[r].size(),
                                    header.size()));
    CsvRow row;
    for (std::size_t c = 0; c < header.size(); ++c)
      if (!records[r][c].empty()) row[header[c]] = records[r][c];
    rows.push_back(std::move(row));
  }
  return rows;
}

double number(const CsvRow& r, const char* column, const std::string& where) {
  const auto it = r.find(column);
  if (it == r.end()) throw ConfigError(fmt::format("{}: no {}", where, column));
  return std::stod(it->second);
}

std::string text(const CsvRow& r, const char* column) {
  const auto it = r.find(column);
  return it == r.end() ? std::string() : it->second;
}

}  // namespace

std::vector<ThroughputRow> read_throughput_rows(const std::filesystem::path& dir) {
  const std::vector<CsvRow> measured = read_csv_file(dir / "throughput_runs.csv");
  const std::vector<CsvRow> mapping = read_csv_file(dir / "throughput_runs_mme.csv");
  std::map<int, const CsvRow*> by_row;
  for (const CsvRow& m : mapping) by_row[std::stoi(text(m, "row"))] = &m;
  std::vector<ThroughputRow> out;
  for (std::size_t i = 0; i < measured.size(); ++i) {
    const CsvRow& r = measured[i];
    ThroughputRow t;
    t.row = static_cast<int>(i + 1);
    const std::string where = fmt::format("throughput_runs.csv row {}", t.row);
    t.label = text(r, "model");
    t.gpu_label = text(r, "gpu");
    t.measured_step_seconds = number(r, "step_time_s", where);
    t.measured_tokens_per_gpu = number(r, "tokens_per_s_per_gpu", where);
    t.measured_tflops_per_gpu = number(r, "model_tflops_per_gpu", where);
    const auto m = by_row.find(t.row);
    if (m == by_row.end()) throw ConfigError(fmt::format("{}: no line in throughput_runs_mme.csv", where));
    t.source = text(*m->second, "model");
    t.status = text(*m->second, "status");
    t.split = text(*m->second, "split");
    t.assumptions = text(*m->second, "assumptions");
    t.args = split_shell_words(text(*m->second, "args"), where);
    if (t.modelled() && (t.source.empty() || t.args.empty()))
      throw ConfigError(fmt::format("{}: a modelled row needs a model and flags", where));
    out.push_back(std::move(t));
  }
  return out;
}

RowSetup row_setup(const ThroughputRow& row, const Registry& registry, const std::filesystem::path& source_dir) {
  RowSetup out;
  // The model: a config path of the source tree, or a bundled id (models/<org>--<name>).
  std::filesystem::path path;
  if (row.source.find(".json") != std::string::npos) {
    path = source_dir / row.source;
  } else {
    std::string folder = row.source;
    folder.replace(folder.find('/'), 1, "--");
    path = source_dir / "models" / folder / "config.json";
  }
  out.model = adapt_config(read_config_file(path), row.source, path.string(), registry);
  // The flags: --gpu is the planner's; the rest is the setup (its layout is the measured one).
  std::vector<std::string> flags;
  std::string gpu;
  for (std::size_t i = 0; i < row.args.size(); ++i) {
    if (row.args[i] == "--gpu" && i + 1 < row.args.size()) {
      gpu = row.args[++i];
      continue;
    }
    flags.push_back(row.args[i]);
  }
  const TrainingSetup setup = setup_from_mme_flags(*mme_flags_from_args(flags), TrainingSetup{});
  PlanOptions& o = out.options;
  o.base = setup;
  o.num_gpus = setup.parallel.world_size;
  o.gpu = registry.find_hardware(gpu);
  if (!o.gpu) throw ConfigError(fmt::format("row {}: unknown GPU '{}'", row.row, gpu));
  o.micro_batch_sizes = {setup.micro_batch_size};
  // Megatron-LM refuses full recompute with per-layer CUDA graphs (transformer_config.py).
  // and with --overlap-moe-expert-parallel-comm (transformer_config.py).
  if (setup.cuda_graph.on() || setup.comm.ep_overlap)
    o.recompute = {RecomputeVariant::kNone, RecomputeVariant::kSelective};
  // and activation offloading with recompute (the engine, as TE's cpu_offload refuses it).
  if (setup.activation_offload.cpu_offloading) o.recompute = {RecomputeVariant::kNone};
  o.threads = 2;
  // These layouts ran: they fit the GPU by definition, so the fits are judged without the 5 %
  // headroom a new run keeps (the engine's bound of Llama-3-70B's TP 4 PP 8 VPP 5 on 64 H100s is
  // 76.0 GiB, 1.3 GiB above 95 % of the allocatable 79.65).
  o.headroom_fraction = 0;
  PlanLayout& l = out.layout;
  const ParallelLayout& p = setup.parallel;
  l.tp = p.tp, l.pp = p.pp, l.vpp = p.vpp, l.ep = p.ep, l.cp = p.cp, l.etp = effective_etp(p);
  l.dp = o.num_gpus / (l.tp * l.cp * l.pp);
  l.micro_batch_size = setup.micro_batch_size;
  l.recompute = setup.recompute.granularity == RecomputeGranularity::kSelective ? RecomputeVariant::kSelective
                : setup.recompute.granularity == RecomputeGranularity::kFull    ? RecomputeVariant::kFull
                                                                                : RecomputeVariant::kNone;
  const std::int64_t L = out.model.num_layers;
  if (row.split == "even") {
    l.even_split = true;
    l.first_stage_layers = l.middle_stage_layers = l.last_stage_layers = L / l.pp;
  } else {
    // cF/C/L, or cF/C/L+R: R middle ranks hold one layer more in their last chunk.
    std::int64_t f = 0, c = 0, z = 0, r = 0;
    const int read = std::sscanf(row.split.c_str(), "c%ld/%ld/%ld+%ld", &f, &c, &z, &r);
    if (read != 3 && read != 4)
      throw ConfigError(fmt::format("row {}: split '{}' is neither even nor cF/C/L[+R]", row.row, row.split));
    l.even_split = false;
    l.chunk_split = true;
    l.first_chunk_layers = f, l.chunk_layers = c, l.last_chunk_layers = z, l.chunk_extra_layers = r;
    l.first_stage_layers = f + (l.vpp - 1) * c;
    l.middle_stage_layers = l.vpp * c;
    l.last_stage_layers = z + (l.vpp - 1) * c;
  }
  return out;
}

double predicted_step_seconds(const Planner& planner, const RowSetup& setup, const StepTimeConstants& constants) {
  PlanOptions o = setup.options;
  o.step_time = constants;
  return planner.score(setup.layout, o).step_seconds;
}

std::vector<PreparedRow> prepare_rows(const std::vector<ThroughputRow>& rows, const Registry& registry,
                                      const std::filesystem::path& source_dir, const std::string& status) {
  std::vector<PreparedRow> out;
  for (const ThroughputRow& r : rows) {
    if (r.status != status) continue;
    PreparedRow p;
    p.row = &r;
    p.setup = row_setup(r, registry, source_dir);
    p.planner = std::make_unique<Planner>(p.setup.model, registry);
    out.push_back(std::move(p));
  }
  return out;
}

double fit_objective(const std::vector<PreparedRow>& rows, const StepTimeConstants& constants) {
  double sum = 0;
  for (const PreparedRow& p : rows) {
    const double r = std::log(predicted_step_seconds(*p.planner, p.setup, constants) / p.row->measured_step_seconds);
    sum += r * r;
  }
  return rows.empty() ? 0 : sum / static_cast<double>(rows.size());
}

// The fitted constants: the FP8 GEMMs' efficiency and the memory-bound passes. gemm_bf16 and
// attention stay as given (StepTimeConstants says where their figures come from): no modelled row
// trains in BF16 (only the output layer and the router run BF16 GEMMs under FP8), and the rows
// cannot tell attention's time from the memory-bound kernels' (both grow with the sequence).
StepTimeConstants fit_constants(const std::vector<PreparedRow>& rows, const StepTimeConstants& start) {
  constexpr int kDims = 2;
  using Point = std::array<double, kDims>;
  auto constants_of = [&](const Point& x) {
    StepTimeConstants k = start;
    k.gemm_fp8 = std::min(1.0, std::exp(x[0]));
    k.elementwise_passes = std::exp(x[1]);
    return k;
  };
  auto f = [&](const Point& x) { return fit_objective(rows, constants_of(x)); };
  std::array<Point, kDims + 1> simplex;
  simplex[0] = {std::log(start.gemm_fp8), std::log(start.elementwise_passes)};
  for (int i = 0; i < kDims; ++i) {
    simplex[i + 1] = simplex[0];
    simplex[i + 1][i] -= 0.2;
  }
  std::array<double, kDims + 1> value{};
  for (int i = 0; i <= kDims; ++i) value[i] = f(simplex[i]);
  for (int iteration = 0; iteration < 400; ++iteration) {
    std::array<int, kDims + 1> order{};
    for (int i = 0; i <= kDims; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](int a, int b) { return value[a] < value[b]; });
    const int best = order[0], worst = order[kDims], second = order[kDims - 1];
    if (value[worst] - value[best] < 1e-10) break;
    Point centroid{};
    for (int i = 0; i <= kDims; ++i)
      if (i != worst)
        for (int d = 0; d < kDims; ++d) centroid[d] += simplex[i][d] / kDims;
    auto along = [&](double t) {
      Point x;
      for (int d = 0; d < kDims; ++d) x[d] = centroid[d] + t * (simplex[worst][d] - centroid[d]);
      return x;
    };
    const Point reflected = along(-1);
    const double fr = f(reflected);
    if (fr < value[best]) {
      const Point expanded = along(-2);
      const double fe = f(expanded);
      if (fe < fr)
        simplex[worst] = expanded, value[worst] = fe;
      else
        simplex[worst] = reflected, value[worst] = fr;
    } else if (fr < value[second]) {
      simplex[worst] = reflected, value[worst] = fr;
    } else {
      const Point contracted = along(0.5);
      const double fc = f(contracted);
      if (fc < value[worst]) {
        simplex[worst] = contracted, value[worst] = fc;
      } else {
        for (int i = 0; i <= kDims; ++i) {
          if (i == best) continue;
          for (int d = 0; d < kDims; ++d) simplex[i][d] = simplex[best][d] + 0.5 * (simplex[i][d] - simplex[best][d]);
          value[i] = f(simplex[i]);
        }
      }
    }
  }
  const int best = static_cast<int>(std::min_element(value.begin(), value.end()) - value.begin());
  return constants_of(simplex[best]);
}

}  // namespace mme::calibration
