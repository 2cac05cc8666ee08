// The HTML reports: `mme estimate --html FILE` (the per-stage chart of render_svg, the
// configuration summary, the per-stage and per-component tables, the fit verdicts) and
// `mme plan --html FILE` (a fit map of the searched space and the top plans). Each is one
// self-contained file: inline SVG and CSS, no script, nothing fetched from the network.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <mme/engine/estimator.hpp>
#include <mme/engine/fit.hpp>
#include <mme/planner/planner.hpp>
#include <mme/sdk/model_spec.hpp>

namespace mme::cli {

// A report file. A regular file (or a new name) is replaced atomically: the constructor
// creates a temporary file next to it (so an unwritable place is reported before any work is
// done), commit() writes the content and renames it over the target; the temporary file is
// removed whenever the content is not committed (also on SIGINT / SIGTERM), so the target is
// either the old file (or absent) or the whole new one. A symlink is never replaced: one to a
// regular file has that file replaced, one to a character device or FIFO is written through.
// Character devices and FIFOs are written directly, "-" is standard output; other kinds of
// file are refused. A failure is a UsageError naming the flag and the path.
class OutputFile {
 public:
  OutputFile(std::filesystem::path target, std::string flag);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&&) = delete;

  void commit(const std::string& content);
  const std::filesystem::path& target() const { return target_; }
  // Whether both name one file (by device and inode when it exists, else by normalised path).
  bool same_file(const OutputFile& other) const { return identity_ == other.identity_; }

 private:
  enum class Mode { kAtomic, kDirect, kStdout };
  [[noreturn]] void fail(const std::string& what, int err);
  std::filesystem::path target_, write_path_, temp_;
  std::string flag_, identity_;
  Mode mode_ = Mode::kAtomic;
  int fd_ = -1;
  int slot_ = -1;  // the temporary file's place in the signal handler's list
  bool committed_ = false;
};

struct HtmlOptions {
  const HardwareProfile* chosen_gpu = nullptr;  // --gpu
  double headroom_fraction = kDefaultHeadroom;
};

std::string render_estimate_html(const ModelSpec& model, const Estimate& est, const std::vector<FitVerdict>& fits,
                                 const HtmlOptions& options);

// The fit map of a plan search, gathered from every valid layout (PlanOptions::on_valid): per
// facet (EP, recompute variant), a TP x PP grid whose cell holds the smallest peak over the
// other dimensions (VPP, ETP, CP, micro-batch size, pipeline split).
class FitMap {
 public:
  struct Cell {
    std::int64_t min_peak = 0;
    PlanLayout smallest;        // the layout with that peak
    std::uint64_t valid = 0;    // valid layouts with these coordinates
    std::uint64_t fitting = 0;  // of which fit
  };
  using FacetKey = std::pair<std::int64_t, RecomputeVariant>;  // EP, recompute
  using CellKey = std::pair<std::int64_t, std::int64_t>;       // PP, TP

  void add(const Plan& plan);
  const std::map<FacetKey, std::map<CellKey, Cell>>& facets() const { return facets_; }
  std::uint64_t layouts() const { return layouts_; }

 private:
  std::map<FacetKey, std::map<CellKey, Cell>> facets_;
  std::uint64_t layouts_ = 0;
};

std::string render_plan_html(const ModelSpec& model, const Planner& planner, const PlanOptions& options,
                             const PlanResult& result, const std::vector<PlanSuggestion>& suggestions,
                             const FitMap& map);

}  // namespace mme::cli
