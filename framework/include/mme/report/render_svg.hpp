// The pictures of an estimate and of a plan search, as SVG: a stacked bar per pipeline stage
// (weights, gradients, optimizer, activations, other) with a line at the usable memory of each
// GPU that matters, and the facets of the plan fit map. The palette here is the one the
// terminal bars (render_estimate.cpp) and the HTML report (render_html.cpp) use too.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <mme/engine/estimator.hpp>
#include <mme/engine/fit.hpp>
#include <mme/sdk/model_spec.hpp>

namespace mme::cli {

// One memory category: its name, its colour (as #rrggbb and as the xterm-256 index of exactly
// that colour), and the block its terminal bar segments use when there is no colour.
struct CategoryStyle {
  MemoryCategory category;
  const char* label;  // "weights", "gradients", "optimizer", "activations", "other"
  const char* hex;    // "#5f87d7"
  int ansi256;        // 68
  const char* glyph;  // "█"
};
inline constexpr std::size_t kCategories = 5;
// In stacking order: weights, gradients, optimizer, activations, other.
const std::array<CategoryStyle, kCategories>& category_styles();
// A stage's bytes in that order; they add up to its total.
std::array<std::int64_t, kCategories> category_bytes(const StageEstimate& stage);

// The GPUs whose usable memory gets a line: the chosen GPU (--gpu); else every profile the
// peak fits in; else, when none fits, the largest one (to show how far off the peak is).
std::vector<const FitVerdict*> capacity_lines(const std::vector<FitVerdict>& fits, const HardwareProfile* chosen_gpu);

// Text for XML and HTML, in content and in attribute values: & < > " ' escaped, invalid UTF-8
// and control characters (which XML cannot carry) replaced by U+FFFD.
std::string xml_escape(std::string_view text);

struct SvgOptions {
  const HardwareProfile* chosen_gpu = nullptr;  // --gpu
  bool standalone = true;                       // an .svg file (XML declaration, xmlns) rather than SVG inline in HTML
  int width = 960;                              // CSS pixels
};

// The per-stage chart of an estimate.
std::string render_estimate_svg(const ModelSpec& model, const Estimate& est, const std::vector<FitVerdict>& fits,
                                const SvgOptions& options);

// The fit map: peak memory against the usable memory of the GPU, in fixed bands.
struct FitBand {
  double upto;  // peak / usable below this (the last band: infinity)
  const char* hex;
  const char* label;  // "< 50%"
};
const std::vector<FitBand>& fit_bands();
const char* fit_colour(double peak_over_usable);
inline constexpr const char* kNoLayoutColour = "#e6e6e6";

// One facet of the fit map: a grid of cells, columns (e.g. TP) by rows (e.g. PP).
struct FitMapCellView {
  bool present = false;    // some valid layout has these coordinates
  double ratio = 0;        // smallest peak / usable
  std::string text;        // what the cell shows (the smallest peak in GiB)
  std::string mark;        // shown before the text, e.g. "★" for the best plan
  bool highlight = false;  // framed: holds one of the top plans
  std::string tooltip;
  std::string key;  // for machines: the cell's data-key attribute
};
struct FitMapFacetView {
  std::string title;                  // "EP 8 · recompute none"
  std::string column_name, row_name;  // "TP", "PP"
  std::vector<std::int64_t> columns, rows;
  std::vector<std::vector<FitMapCellView>> cells;  // [row][column]
};
std::string render_fit_map_facet_svg(const FitMapFacetView& facet);

}  // namespace mme::cli
