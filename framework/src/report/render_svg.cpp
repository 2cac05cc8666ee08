#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string_view>

#include <fmt/core.h>

#include <mme/report/render_svg.hpp>
#include <mme/sdk/units.hpp>

namespace mme::cli {

namespace {

// xterm-256 colours, so the terminal shows exactly what the SVG shows: the 6x6x6 cube
// (levels 0, 95, 135, 175, 215, 255) and the grey ramp (8 + 10 n).
constexpr std::array<CategoryStyle, kCategories> kStyles{{
    {MemoryCategory::kWeights, "weights", "#5f87d7", 68, "█"},           // cube (1, 2, 4)
    {MemoryCategory::kGradients, "gradients", "#00afaf", 37, "▓"},       // cube (0, 3, 3)
    {MemoryCategory::kOptimizer, "optimizer", "#af5fd7", 134, "▒"},      // cube (3, 1, 4)
    {MemoryCategory::kActivations, "activations", "#ffaf00", 214, "░"},  // cube (5, 3, 0)
    {MemoryCategory::kOther, "other", "#8a8a8a", 245, "·"},              // grey 13
}};

constexpr const char* kFont = "system-ui, 'DejaVu Sans', 'Segoe UI', Arial, sans-serif";
// The same colours as the terminal marker (xterm-256 28 and 160).
constexpr const char* kFitLine = "#008700";
constexpr const char* kMissLine = "#d70000";
constexpr const char* kInk = "#1a1a1a";
constexpr const char* kMuted = "#555555";
constexpr const char* kGrid = "#e3e3e3";
// A white outline under text, so a line that crosses it does not hide it.
constexpr const char* kHalo = " stroke=\"#ffffff\" stroke-width=\"3\" stroke-linejoin=\"round\" paint-order=\"stroke\"";

double gib(std::int64_t b) { return to_gib(b); }

// Rough width of text in the sans-serif fonts above (average advance ~0.6 em).
double text_width(std::string_view s, double font_px) {
  std::size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xC0) != 0x80;  // code points
  return static_cast<double>(chars) * font_px * 0.6;
}

// Cuts text to at most `max_chars` code points, ending it with an ellipsis.
std::string ellipsize(std::string_view s, std::size_t max_chars) {
  std::size_t chars = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (chars == max_chars) return std::string(s.substr(0, i)) + "…";
      ++chars;
    }
  }
  return std::string(s);
}

double nice_step(double range, int target) {
  const double raw = range / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw * (1 - 1e-9)) return m * mag;
  return 10 * mag;
}

std::string num(double v) { return fmt::format("{:.2f}", v); }

std::string tick_label(double v, double step) {
  if (step >= 1) return fmt::format("{:.0f}", v);
  if (step >= 0.1) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

struct Label {
  double x0, x1, line_x;
};

}  // namespace

const std::array<CategoryStyle, kCategories>& category_styles() { return kStyles; }

std::array<std::int64_t, kCategories> category_bytes(const StageEstimate& s) {
  // The composition of the phase that sets the peak, so that the parts add up to the total: at
  // the forward/backward peak the optimizer step's fp32 gradient copies do not exist yet; at the
  // optimizer-step peak the activations are gone.
  if (std::string_view(s.peak_phase) == "optimizer-step")
    return {s.weight_bytes, s.gradient_bytes, s.optimizer_bytes, 0, s.other_bytes};
  return {s.weight_bytes, s.gradient_bytes, s.optimizer_bytes - s.step_only_bytes, s.activation_bytes, s.other_bytes};
}

std::vector<const FitVerdict*> capacity_lines(const std::vector<FitVerdict>& fits, const HardwareProfile* chosen_gpu) {
  std::vector<const FitVerdict*> out;
  if (fits.empty()) return out;
  if (chosen_gpu) {
    for (const auto& f : fits)
      if (f.hardware == chosen_gpu) out.push_back(&f);
    if (out.empty()) out.push_back(&fits.front());
    return out;
  }
  for (const auto& f : fits)
    if (f.fits) out.push_back(&f);
  if (out.empty()) {
    const FitVerdict* largest = &fits.front();
    for (const auto& f : fits)
      if (f.usable_bytes > largest->usable_bytes) largest = &f;
    out.push_back(largest);
  }
  return out;
}

std::string xml_escape(std::string_view s) {
  static constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(s.size() + 16);
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&#39;"; break;
        default:
          if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
            out += kReplacement;
          else
            out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // A multi-byte UTF-8 sequence: well formed, shortest form, no surrogates, at most U+10FFFF.
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
      len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    bool ok = len > 0 && i + len <= s.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    }
    // U+FFFE and U+FFFF are not XML characters either.
    if (ok && len == 3 && c == 0xEF && static_cast<unsigned char>(s[i + 1]) == 0xBF &&
        static_cast<unsigned char>(s[i + 2]) >= 0xBE)
      ok = false;
    if (!ok) {
      out += kReplacement;
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

namespace {

// A capacity line and its label above the plot.
struct PlacedLine {
  const FitVerdict* verdict;
  std::string text;
  double x;
  Label span;
  std::size_t row;
  bool anchor_end;
};

struct PlacedLabels {
  std::vector<PlacedLine> lines;
  std::size_t rows = 0;
};

PlacedLabels place_capacity_labels(const std::vector<const FitVerdict*>& drawn,
                                   const std::function<double(double)>& x_of, double W) {
  // Labels of the capacity lines, in rows above the plot (row 0 at the top); a line runs from
  // its label down through the rows below it. Left to right, each label takes the first row,
  // and side of its line, where it overlaps no label and crosses no line and no line crosses
  // it; else a new row at the bottom. (Labels have a white halo for what still crosses.)
  std::vector<PlacedLine> placed;
  std::size_t label_rows = 0;
  auto inside = [](const Label& a, double x) { return x >= a.x0 - 3 && x <= a.x1 + 3; };
  for (const auto* l : drawn) {
    PlacedLine p{
        l,    fmt::format("{} {:.1f} GiB", l->hardware->name, gib(l->usable_bytes)), x_of(gib(l->usable_bytes)), {}, 0,
        false};
    const double w = text_width(p.text, 11);
    const Label start{p.x + 4, p.x + 4 + w, p.x}, end{p.x - 4 - w, p.x - 4, p.x};
    auto valid = [&](const Label& span, std::size_t row) {
      for (const auto& o : placed) {
        if (o.row == row && span.x0 < o.span.x1 + 8 && o.span.x0 < span.x1 + 8) return false;
        if (o.row < row && inside(span, o.x)) return false;    // that line passes through this row
        if (o.row > row && inside(o.span, p.x)) return false;  // this line passes through that row
      }
      return true;
    };
    bool done = false;
    for (std::size_t row = 0; row <= label_rows && !done; ++row)
      for (const bool at_end : {false, true}) {
        const Label& span = at_end ? end : start;
        if (span.x1 > W - 6 || span.x0 < 6 || !valid(span, row)) continue;
        p.span = span, p.row = row, p.anchor_end = at_end, done = true;
        break;
      }
    if (!done) {
      p.anchor_end = start.x1 > W - 6;
      p.span = p.anchor_end ? end : start;
      p.row = label_rows;
    }
    label_rows = std::max(label_rows, p.row + 1);
    placed.push_back(std::move(p));
  }
  return {std::move(placed), label_rows};
}

// "Also fits, off the scale: ...": as many profiles as the width holds, smallest first, then
// how many more.
std::string off_scale_names(const std::vector<const FitVerdict*>& off_scale, double W) {
  std::string names;
  std::size_t shown = 0;
  for (const auto* l : off_scale) {
    const std::string item = fmt::format("{} ({:.1f} GiB)", l->hardware->name, gib(l->usable_bytes));
    const std::size_t rest = off_scale.size() - shown - 1;
    const std::string more = rest > 0 ? fmt::format(" and {} more", rest) : "";
    if (shown > 0 && text_width("Also fits, off the scale: " + names + ", " + item + more, 12) > W - 32) break;
    names += (shown++ > 0 ? ", " : "") + item;
  }
  if (shown < off_scale.size()) names += fmt::format(" and {} more", off_scale.size() - shown);
  return names;
}

}  // namespace

std::string render_estimate_svg(const ModelSpec& model, const Estimate& est, const std::vector<FitVerdict>& fits,
                                const SvgOptions& options) {
  (void)model;
  const double W = std::max(options.width, 480);
  const std::size_t n = est.stages.size();
  std::int64_t peak = 1;
  for (const auto& s : est.stages) peak = std::max(peak, s.total_bytes);

  // Which lines are drawn: those within reach of the bars; a profile far larger than the peak
  // would squash them, so it is only named below the axis.
  const auto lines = capacity_lines(fits, options.chosen_gpu);
  std::vector<const FitVerdict*> drawn, off_scale;
  if (!lines.empty()) {
    std::int64_t smallest = std::numeric_limits<std::int64_t>::max();
    for (const auto* l : lines) smallest = std::min(smallest, l->usable_bytes);
    const double reach = std::max(static_cast<double>(peak) * 1.6, static_cast<double>(smallest));
    for (const auto* l : lines) (static_cast<double>(l->usable_bytes) <= reach ? drawn : off_scale).push_back(l);
    std::sort(drawn.begin(), drawn.end(),
              [](const auto* a, const auto* b) { return a->usable_bytes < b->usable_bytes; });
  }
  double max_v = gib(peak);
  for (const auto* l : drawn) max_v = std::max(max_v, gib(l->usable_bytes));
  const double step = nice_step(max_v * 1.02, 6);
  const double axis_max = std::ceil(max_v * 1.02 / step) * step;

  const double L = 96, R = W - 104;
  auto x_of = [&](double g) { return L + std::clamp(g, 0.0, axis_max) / axis_max * (R - L); };

  const PlacedLabels labels = place_capacity_labels(drawn, x_of, W);
  const std::vector<PlacedLine>& placed = labels.lines;
  const std::size_t label_rows = labels.rows;

  const double row_h = n <= 16 ? 30 : n <= 48 ? 20 : 12;
  const double bar_h = std::round(row_h * 0.68);
  const double label_row_h = 16;
  const double header = 98;
  const double plot_top = header + static_cast<double>(label_rows) * label_row_h + (label_rows == 0 ? 0 : 8);
  const double plot_bottom = plot_top + static_cast<double>(n) * row_h;
  const double H = plot_bottom + 44 + (off_scale.empty() ? 0 : 18) + 8;
  const std::size_t label_every = row_h >= 14 ? 1 : static_cast<std::size_t>(std::ceil(14.0 / row_h));

  std::string o;
  if (options.standalone) o += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"{2}\" font-size=\"12\" role=\"img\" aria-labelledby=\"mme-chart-title\" class=\"mme-chart\">\n",
      W, H, kFont);
  const auto& ms = est.model;
  const auto& p = est.setup.parallel;
  o += fmt::format("<title id=\"mme-chart-title\">Memory per GPU by pipeline stage: {}</title>\n", xml_escape(ms.name));
  o += fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n", W, H);
  o += fmt::format(
      "<text x=\"16\" y=\"26\" font-size=\"16\" font-weight=\"bold\" fill=\"{}\">Memory per GPU by "
      "pipeline stage</text>\n",
      kInk);
  o += fmt::format("<text x=\"16\" y=\"46\" font-size=\"13\" fill=\"{}\">{}</text>\n", kInk,
                   xml_escape(ellipsize(ms.name, 110)));
  o += fmt::format(
      "<text x=\"16\" y=\"64\" fill=\"{}\">{}</text>\n", kMuted,
      xml_escape(fmt::format("TP {} · PP {} · VPP {} · EP {} · ETP {} · CP {} · DP {} · {} GPUs · "
                             "micro-batch {} · sequence {} · peak {:.2f} GiB (stage {})",
                             p.tp, p.pp, p.vpp, p.ep, effective_etp(p), p.cp, p.dp, p.world_size,
                             est.setup.micro_batch_size, est.setup.seq_length, gib(peak), est.peak().pp_rank)));
  // Legend.
  double lx = 16;
  o += "<g class=\"legend\">\n";
  for (const auto& st : kStyles) {
    o += fmt::format("<rect x=\"{}\" y=\"76\" width=\"12\" height=\"12\" fill=\"{}\"/>", lx, st.hex);
    o += fmt::format("<text x=\"{}\" y=\"86.5\" fill=\"{}\">{}</text>\n", lx + 16, kInk, st.label);
    lx += 16 + text_width(st.label, 12) * 0.92 + 16;
  }
  if (!drawn.empty()) {
    o += fmt::format(
        "<line x1=\"{0}\" y1=\"82\" x2=\"{1}\" y2=\"82\" stroke=\"{2}\" stroke-width=\"2\" "
        "stroke-dasharray=\"5 3\"/>",
        lx, lx + 22, drawn.front()->fits ? kFitLine : kMissLine);
    o += fmt::format("<text x=\"{}\" y=\"86.5\" fill=\"{}\">usable memory (capacity − reserved − headroom)</text>\n",
                     lx + 28, kInk);
  }
  o += "</g>\n";

  // Grid and axis.
  o += "<g class=\"axis\">\n";
  for (double v = 0; v <= axis_max + step * 1e-6; v += step) {
    const double x = x_of(v);
    o += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\"/>", num(x), plot_top - 2,
                     plot_bottom, kGrid);
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n", num(x), plot_bottom + 16,
                     kMuted, tick_label(v, step));
  }
  o += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#999999\"/>\n", L, plot_bottom, R);
  o += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">GiB per GPU (1 GiB = 2^30 bytes)</text>\n",
      (L + R) / 2, plot_bottom + 34, kMuted);
  o += "</g>\n";

  // One stacked bar per stage; the totals go on top of the capacity lines.
  std::string totals;
  o += "<g class=\"stages\">\n";
  for (std::size_t i = 0; i < n; ++i) {
    const auto& s = est.stages[i];
    const bool is_peak = i == est.peak_stage;
    const double y = plot_top + static_cast<double>(i) * row_h + (row_h - bar_h) / 2;
    const double ty = y + bar_h / 2 + 4;
    o += fmt::format("<g class=\"stage\" data-stage=\"{}\">", s.pp_rank);
    if (i % label_every == 0 || is_peak)
      o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"{}\"{}>stage {}</text>", L - 8, num(ty),
                       kInk, is_peak ? " font-weight=\"bold\"" : "", s.pp_rank);
    const auto bytes = category_bytes(s);
    std::int64_t cum = 0;
    for (std::size_t c = 0; c < kCategories; ++c) {
      if (bytes[c] <= 0) continue;
      const double x0 = x_of(gib(cum)), x1 = x_of(gib(cum + bytes[c]));
      cum += bytes[c];
      o += fmt::format(
          "<rect class=\"seg\" data-category=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\">"
          "<title>stage {} · {}: {:.2f} GiB ({:.1f}%)</title></rect>",
          kStyles[c].label, num(x0), num(y), num(std::max(x1 - x0, 0.0)), bar_h, kStyles[c].hex, s.pp_rank,
          kStyles[c].label, gib(bytes[c]),
          s.total_bytes > 0 ? 100.0 * static_cast<double>(bytes[c]) / static_cast<double>(s.total_bytes) : 0.0);
    }
    if (row_h >= 14 || is_peak)
      totals +=
          fmt::format("<text class=\"total\" data-stage=\"{}\" x=\"{}\" y=\"{}\" fill=\"{}\"{}{}>{:.2f} GiB{}{}</text>",
                      s.pp_rank, num(x_of(gib(s.total_bytes)) + 6), num(ty), kInk, kHalo,
                      is_peak ? " font-weight=\"bold\"" : "", gib(s.total_bytes), is_peak && n > 1 ? " peak" : "",
                      is_peak && s.upper_bytes > s.total_bytes ? fmt::format(" (bound {:.2f})", gib(s.upper_bytes))
                                                               : std::string());
    o += "</g>\n";
  }
  o += "</g>\n";

  // Capacity lines on top of the bars, then their labels on top of everything.
  o += "<g class=\"capacity\">\n";
  auto label_y = [&](const PlacedLine& pl) {
    return plot_top - 8 - static_cast<double>(label_rows - 1 - pl.row) * label_row_h;
  };
  for (const auto& pl : placed) {
    const FitVerdict& v = *pl.verdict;
    o += fmt::format(
        "<line class=\"capacity-line\" data-gpu=\"{0}\" data-fits=\"{1}\" x1=\"{2}\" y1=\"{3}\" x2=\"{2}\" "
        "y2=\"{4}\" stroke=\"{5}\" stroke-width=\"2\" stroke-dasharray=\"5 3\"><title>{0}: {6:.2f} GiB usable "
        "of {7:.2f} GiB; {8}</title></line>\n",
        xml_escape(v.hardware->name), v.fits ? "true" : "false", num(pl.x), num(label_y(pl) - 10), plot_bottom,
        v.fits ? kFitLine : kMissLine, gib(v.usable_bytes), gib(v.capacity_bytes),
        v.fits ? fmt::format("{:.2f} GiB to spare", gib(v.headroom_bytes))
               : fmt::format("{:.2f} GiB short", gib(-v.headroom_bytes)));
  }
  o += totals;
  for (const auto& pl : placed)
    o += fmt::format(
        "<text class=\"capacity-label\" x=\"{}\" y=\"{}\" text-anchor=\"{}\" font-size=\"11\" fill=\"{}\"{}>"
        "{}</text>\n",
        num(pl.anchor_end ? pl.x - 4 : pl.x + 4), num(label_y(pl)), pl.anchor_end ? "end" : "start",
        pl.verdict->fits ? kFitLine : kMissLine, kHalo, xml_escape(pl.text));
  o += "</g>\n";
  if (!off_scale.empty()) {
    o += fmt::format("<text x=\"16\" y=\"{}\" fill=\"{}\">Also fits, off the scale: {}</text>\n", plot_bottom + 56,
                     kMuted, xml_escape(off_scale_names(off_scale, W)));
  }
  o += "</svg>\n";
  return o;
}

const std::vector<FitBand>& fit_bands() {
  static const std::vector<FitBand> bands = {
      {0.50, "#1a9850", "≤ 50%"},
      {0.75, "#66bd63", "≤ 75%"},
      {0.90, "#a6d96a", "≤ 90%"},
      {1.00, "#d9ef8b", "≤ 100%"},
      {1.25, "#fdae61", "≤ 125%"},
      {2.00, "#f46d43", "≤ 200%"},
      {std::numeric_limits<double>::infinity(), "#d73027", "> 200%"},
  };
  return bands;
}

const char* fit_colour(double ratio) {
  for (const auto& b : fit_bands())
    if (ratio <= b.upto) return b.hex;
  return fit_bands().back().hex;
}

std::string render_fit_map_facet_svg(const FitMapFacetView& f) {
  const double cw = 56, ch = 28, left = 52, top = 40;
  const double W = left + cw * static_cast<double>(f.columns.size()) + 8;
  const double H = top + ch * static_cast<double>(f.rows.size()) + 8;
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"{2}\" font-size=\"11\" class=\"mme-facet\" role=\"img\" aria-label=\"{3}\">\n",
      W, H, kFont, xml_escape(f.title));
  o += fmt::format("<text x=\"{}\" y=\"14\" font-weight=\"bold\" font-size=\"12\" fill=\"{}\">{}</text>\n", 4, kInk,
                   xml_escape(f.title));
  for (std::size_t c = 0; c < f.columns.size(); ++c)
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{} {}</text>", left + cw * (c + 0.5),
                     top - 6, kMuted, xml_escape(f.column_name), f.columns[c]);
  o += "\n";
  for (std::size_t r = 0; r < f.rows.size(); ++r) {
    const double y = top + ch * static_cast<double>(r);
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"{}\">{} {}</text>", left - 6, y + ch / 2 + 4,
                     kMuted, xml_escape(f.row_name), f.rows[r]);
    for (std::size_t c = 0; c < f.columns.size(); ++c) {
      const auto& cell = f.cells.at(r).at(c);
      const double x = left + cw * static_cast<double>(c);
      const char* fill = cell.present ? fit_colour(cell.ratio) : kNoLayoutColour;
      const bool dark = cell.present && (cell.ratio <= 0.5 || cell.ratio > 2.0);
      const bool marked = cell.highlight || !cell.mark.empty();
      o += fmt::format("<g class=\"cell\" data-fits=\"{}\" data-key=\"{}\">",
                       cell.present && cell.ratio <= 1.0 ? "true" : "false", xml_escape(cell.key));
      o += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"{}\" "
          "stroke-width=\"{}\"/>",
          x + 1, y + 1, cw - 2, ch - 2, fill, marked ? kInk : "#ffffff", marked ? 2 : 1);
      o += fmt::format("<title>{}</title>", xml_escape(cell.tooltip));
      const std::string text = cell.present ? (cell.mark.empty() ? "" : cell.mark + " ") + cell.text : "–";
      o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\"{}>{}</text></g>", x + cw / 2,
                       y + ch / 2 + 4, dark ? "#ffffff" : (cell.present ? kInk : "#999999"),
                       marked ? " font-weight=\"bold\"" : "", xml_escape(text));
    }
    o += "\n";
  }
  o += "</svg>\n";
  return o;
}

}  // namespace mme::cli
