// The pictures without a browser: the SVG chart and the HTML report (well formed, self
// contained, escaped, the bars proportional to the bytes, the capacity lines of the right
// GPUs, the palette shared with the terminal), the terminal bars with the options forced, and
// end-to-end runs of `mme` (the files written whole or not at all, stdout unchanged, errors,
// a real pseudo-terminal for the colour rules).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string_view>

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <mme/engine/fit.hpp>
#include <mme/engine/plugin_loader.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/model_source.hpp>
#include <mme/planner/planner.hpp>
#include <mme/report/render_estimate.hpp>
#include <mme/report/render_html.hpp>
#include <mme/report/render_svg.hpp>
#include <mme/sdk/text.hpp>
#include <mme/sdk/units.hpp>

#include "test_support.hpp"
#include <fcntl.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace mme {
namespace {

namespace fs = std::filesystem;
using test::run_mme;

constexpr std::int64_t kGiB64 = std::int64_t{1} << 30;

// ---------------------------------------------------------------------------------------------
// A small well-formedness check: balanced tags, quoted and unique attributes, known entities,
// no stray '<' or '&', one root element (XML); with `html`, void elements, <!DOCTYPE> and the
// raw text of <style> are allowed. Returns "" or what is wrong, and where.
std::string markup_problem(std::string_view d, bool html) {
  static const std::set<std::string> kVoid = {"meta", "br", "hr", "img", "input", "link", "wbr", "col"};
  std::vector<std::string> stack;
  int roots = 0;
  auto where = [&](std::size_t i) { return fmt::format(" at {}: '{}'", i, std::string(d.substr(i, 40))); };
  auto entity_ok = [&](std::size_t i) {  // d[i] == '&'
    const std::size_t semi = d.find(';', i);
    if (semi == std::string_view::npos || semi - i > 10) return false;
    const std::string_view name = d.substr(i + 1, semi - i - 1);
    if (name == "amp" || name == "lt" || name == "gt" || name == "quot" || name == "apos") return true;
    if (name.size() >= 2 && name[0] == '#') {
      const bool hex = name[1] == 'x';
      const std::string_view digits = name.substr(hex ? 2 : 1);
      if (digits.empty()) return false;
      for (char c : digits)
        if (!(std::isdigit(static_cast<unsigned char>(c)) || (hex && std::isxdigit(static_cast<unsigned char>(c)))))
          return false;
      return true;
    }
    return false;
  };
  auto is_name = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':'; };
  std::size_t i = 0;
  while (i < d.size()) {
    const char c = d[i];
    if (c == '&') {
      if (!entity_ok(i)) return "bad entity" + where(i);
      ++i;
      continue;
    }
    if (c != '<') {
      if (stack.empty() && !std::isspace(static_cast<unsigned char>(c))) return "text outside the root" + where(i);
      if (c == '>') return "stray '>'" + where(i);
      ++i;
      continue;
    }
    if (d.substr(i, 4) == "<!--") {
      const auto e = d.find("-->", i);
      if (e == std::string_view::npos) return "unterminated comment" + where(i);
      i = e + 3;
      continue;
    }
    if (d.substr(i, 2) == "<?") {
      if (i != 0) return "processing instruction not at the start" + where(i);
      const auto e = d.find("?>", i);
      if (e == std::string_view::npos) return "unterminated declaration" + where(i);
      i = e + 2;
      continue;
    }
    if (html && d.substr(i, 9) == "<!DOCTYPE") {
      i = d.find('>', i) + 1;
      continue;
    }
    if (d.substr(i, 2) == "</") {
      std::size_t j = i + 2;
      while (j < d.size() && is_name(d[j])) ++j;
      const std::string name(d.substr(i + 2, j - i - 2));
      if (j >= d.size() || d[j] != '>') return "bad end tag" + where(i);
      if (stack.empty() || stack.back() != name)
        return fmt::format("end tag </{}> does not close <{}>", name, stack.empty() ? "" : stack.back()) + where(i);
      stack.pop_back();
      i = j + 1;
      continue;
    }
    std::size_t j = i + 1;
    while (j < d.size() && is_name(d[j])) ++j;
    const std::string name(d.substr(i + 1, j - i - 1));
    if (name.empty()) return "stray '<'" + where(i);
    std::set<std::string> attrs;
    bool self_closing = false;
    for (;;) {
      while (j < d.size() && std::isspace(static_cast<unsigned char>(d[j]))) ++j;
      if (j >= d.size()) return "unterminated tag" + where(i);
      if (d[j] == '>') break;
      if (d.substr(j, 2) == "/>") {
        self_closing = true;
        ++j;
        break;
      }
      const std::size_t a = j;
      while (j < d.size() && is_name(d[j])) ++j;
      const std::string attr(d.substr(a, j - a));
      if (attr.empty()) return "bad attribute" + where(j);
      if (!attrs.insert(attr).second) return "duplicate attribute " + attr + where(a);
      if (j >= d.size() || d[j] != '=') return "attribute without a value" + where(a);
      ++j;
      const char q = d[j];
      if (q != '"' && q != '\'') return "unquoted attribute value" + where(a);
      const std::size_t e = d.find(q, j + 1);
      if (e == std::string_view::npos) return "unterminated attribute value" + where(a);
      for (std::size_t k = j + 1; k < e; ++k) {
        if (d[k] == '<') return "'<' in an attribute value" + where(a);
        if (d[k] == '&' && !entity_ok(k)) return "bad entity in an attribute value" + where(k);
      }
      j = e + 1;
    }
    i = j + 1;
    if (stack.empty() && ++roots > 1) return "more than one root element" + where(i);
    if (self_closing || (html && kVoid.count(name))) continue;
    if (html && name == "style") {  // raw text
      const auto e = d.find("</style>", i);
      if (e == std::string_view::npos) return "unterminated <style>";
      if (d.substr(i, e - i).find('<') != std::string_view::npos) return "'<' in <style>";
      i = e + 8;
      continue;
    }
    stack.push_back(name);
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + ">";
  if (roots != 1) return "no root element";
  return "";
}

std::size_t count(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + needle.size())) ++n;
  return n;
}

// The value of attribute `name` in the tag that starts at `tag_start`.
std::string attr(const std::string& doc, std::size_t tag_start, const std::string& name) {
  const std::size_t end = doc.find('>', tag_start);
  const std::string tag = doc.substr(tag_start, end - tag_start);
  const std::regex re("\\s" + name + "=\"([^\"]*)\"");
  std::smatch m;
  if (!std::regex_search(tag, m, re)) return "";
  return m[1];
}

std::vector<std::size_t> tags(const std::string& doc, const std::string& prefix) {
  std::vector<std::size_t> out;
  for (auto p = doc.find(prefix); p != std::string::npos; p = doc.find(prefix, p + 1)) out.push_back(p);
  return out;
}

// ---------------------------------------------------------------------------------------------
// An estimate made by hand: three stages, in GiB; three GPUs.

struct Case {
  ModelSpec model;
  Estimate est;
  HardwareProfile small, medium, large;  // usable 59.8, 103.5, 189 GiB (5% headroom)

  Case() {
    model.name = "acme/Model-1";
    model.source = "/models/acme/config.json";
    est.model.name = model.name;
    est.model.family = "acme";
    est.model.adapter = "generic_hf";
    est.model.num_layers = 24;
    est.model.hidden_size = 4096;
    est.setup.parallel.pp = 3;
    est.setup.parallel.world_size = 24;
    est.setup.parallel.dp = 8;
    add_stage({10, 20, 40, 25, 1});  // 96 GiB
    add_stage({12, 24, 48, 10, 1});  // 95
    add_stage({14, 28, 56, 0, 2});   // 100: the peak, no activations
    est.peak_stage = 2;
    est.assumptions = {"pipeline assumed full"};
    small = profile("GPU-S", 64);
    medium = profile("GPU-M", 110);
    large = profile("GPU-L", 200);
  }
  void add_stage(std::array<std::int64_t, 5> gib) {
    StageEstimate s;
    s.pp_rank = static_cast<std::int64_t>(est.stages.size());
    s.layers = 8;
    s.weight_bytes = gib[0] * kGiB64;
    s.gradient_bytes = gib[1] * kGiB64;
    s.optimizer_bytes = gib[2] * kGiB64;
    s.activation_bytes = gib[3] * kGiB64;
    s.other_bytes = gib[4] * kGiB64;
    s.static_bytes = s.weight_bytes + s.gradient_bytes + s.optimizer_bytes + s.other_bytes;
    s.total_bytes = s.static_bytes + s.activation_bytes;
    s.components = {{"weights/decoder/linear", MemoryCategory::kWeights, s.weight_bytes},
                    {"gradients/decoder/main_grad", MemoryCategory::kGradients, s.gradient_bytes},
                    {"optimizer/adam_moments", MemoryCategory::kOptimizer, s.optimizer_bytes},
                    {"other/workspace", MemoryCategory::kOther, s.other_bytes}};
    if (s.activation_bytes > 0)
      s.components.push_back({"activations/attention/qkv", MemoryCategory::kActivations, s.activation_bytes});
    est.stages.push_back(s);
  }
  static HardwareProfile profile(const std::string& name, std::int64_t gib) {
    HardwareProfile h;
    h.name = name;
    h.memory_bytes = gib * kGiB64;
    h.reserved_bytes = kGiB64;
    return h;
  }
  std::vector<FitVerdict> fits(std::initializer_list<const HardwareProfile*> gpus) const {
    std::vector<FitVerdict> out;
    for (const auto* h : gpus) out.push_back(judge_fit(est, *h, kDefaultHeadroom));
    return out;
  }
  std::vector<FitVerdict> all_fits() const { return fits({&small, &medium, &large}); }
};

std::string svg_of(const Case& c, const std::vector<FitVerdict>& fits, const HardwareProfile* chosen = nullptr) {
  cli::SvgOptions o;
  o.chosen_gpu = chosen;
  return cli::render_estimate_svg(c.model, c.est, fits, o);
}

// ---------------------------------------------------------------------------------------------
// SVG

TEST(Svg, IsWellFormedWithOneSegmentPerNonZeroCategoryPerStage) {
  const Case c;
  const std::string svg = svg_of(c, c.all_fits());
  EXPECT_EQ(markup_problem(svg, false), "");
  EXPECT_EQ(svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(count(svg, "<g class=\"stage\""), 3u);
  const auto segs = tags(svg, "<rect class=\"seg\"");
  EXPECT_EQ(segs.size(), 5u + 5u + 4u);  // stage 2 has no activations
  // In stacking order within each stage.
  std::vector<std::string> cats;
  for (auto p : segs) cats.push_back(attr(svg, p, "data-category"));
  const std::vector<std::string> expected = {"weights", "gradients", "optimizer", "activations", "other",
                                             "weights", "gradients", "optimizer", "activations", "other",
                                             "weights", "gradients", "optimizer", "other"};
  EXPECT_EQ(cats, expected);
  for (const char* s : {"stage 0", "stage 1", "stage 2", "100.00 GiB peak", "96.00 GiB", "95.00 GiB"})
    EXPECT_NE(svg.find(s), std::string::npos) << s;
  for (const auto& st : cli::category_styles())
    EXPECT_NE(svg.find(std::string(">") + st.label + "<"), std::string::npos);
}

TEST(Svg, SegmentsAreProportionalToTheBytesOnOneScaleAndStackWithoutGaps) {
  const Case c;
  const std::string svg = svg_of(c, c.all_fits());
  const auto segs = tags(svg, "<rect class=\"seg\"");
  // The scale, by hand: the peak is 100 GiB and the one line drawn is GPU-M's 103.5 GiB usable
  // (GPU-L's 189 is beyond 1.6 x the peak), so the axis covers 103.5 x 1.02 = 105.57 GiB in
  // "nice" steps of 20 (105.57 / 6 = 17.6 -> 20): 0 to 120 GiB. The plot runs from x = 96 to
  // 960 - 104 = 856, 760 px for 120 GiB: 19/3 px per GiB. A segment starts at
  // 96 + 19/3 x (the GiB below it) and is 19/3 x its GiB wide, printed with two decimals.
  struct Seg {
    const char* x;
    const char* width;
  };
  const std::vector<Seg> expected = {
      // stage 0: 10, 20, 40, 25, 1 GiB; starts at 0, 10, 30, 70, 95 GiB
      {"96.00", "63.33"},    // 10 x 19/3 = 63.333
      {"159.33", "126.67"},  // 96 + 63.333; 20 x 19/3 = 126.667
      {"286.00", "253.33"},  // 96 + 30 x 19/3 = 96 + 190; 40 x 19/3 = 253.333
      {"539.33", "158.33"},  // 96 + 70 x 19/3 = 96 + 443.333; 25 x 19/3 = 158.333
      {"697.67", "6.33"},    // 96 + 95 x 19/3 = 96 + 601.667; 1 x 19/3
      // stage 1: 12, 24, 48, 10, 1 GiB; starts at 0, 12, 36, 84, 94 GiB
      {"96.00", "76.00"},    // 12 x 19/3 = 76
      {"172.00", "152.00"},  // 96 + 76; 24 x 19/3 = 152
      {"324.00", "304.00"},  // 96 + 36 x 19/3 = 96 + 228; 48 x 19/3 = 304
      {"628.00", "63.33"},   // 96 + 84 x 19/3 = 96 + 532; 10 x 19/3
      {"691.33", "6.33"},    // 96 + 94 x 19/3 = 96 + 595.333
      // stage 2: 14, 28, 56, (no activations), 2 GiB; starts at 0, 14, 42, 98 GiB
      {"96.00", "88.67"},    // 14 x 19/3 = 88.667
      {"184.67", "177.33"},  // 96 + 88.667; 28 x 19/3 = 177.333
      {"362.00", "354.67"},  // 96 + 42 x 19/3 = 96 + 266; 56 x 19/3 = 354.667
      {"716.67", "12.67"},   // 96 + 98 x 19/3 = 96 + 620.667; 2 x 19/3 = 12.667
  };
  ASSERT_EQ(segs.size(), expected.size());
  for (std::size_t i = 0; i < segs.size(); ++i) {
    EXPECT_EQ(attr(svg, segs[i], "x"), expected[i].x) << "segment " << i;
    EXPECT_EQ(attr(svg, segs[i], "width"), expected[i].width) << "segment " << i;
  }
  // The axis ticks of that scale: 0, 20, ..., 120 GiB.
  for (const char* tick : {">0</text>", ">20</text>", ">60</text>", ">120</text>"})
    EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  EXPECT_EQ(svg.find(">140</text>"), std::string::npos);
}

TEST(Svg, ChosenGpuGetsTheOnlyLine) {
  const Case c;
  const auto fits = c.fits({&c.small});
  const std::string svg = svg_of(c, fits, &c.small);
  const auto lines = tags(svg, "<line class=\"capacity-line\"");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(attr(svg, lines[0], "data-gpu"), "GPU-S");
  EXPECT_EQ(attr(svg, lines[0], "data-fits"), "false");
  EXPECT_EQ(attr(svg, lines[0], "stroke"), "#d70000");
  EXPECT_NE(svg.find("GPU-S 59.8 GiB"), std::string::npos);
  // The line sits at the usable memory on the bars' scale. By hand: GPU-S keeps 64 x 5% = 3.2
  // GiB free and reserves 1 GiB, so 59.8 GiB are usable; the axis is the peak's, 100 x 1.02 =
  // 102 GiB in steps of 20 (102 / 6 = 17 -> 20), so 0 to 120 GiB over the 760 px from x = 96:
  // 96 + 59.8 x 760 / 120 = 96 + 378.733 = 474.73.
  EXPECT_EQ(attr(svg, lines[0], "x1"), "474.73");
  EXPECT_EQ(attr(svg, lines[0], "x2"), "474.73");
  const auto segs = tags(svg, "<rect class=\"seg\"");
  ASSERT_FALSE(segs.empty());
  EXPECT_EQ(attr(svg, segs[0], "width"), "63.33");  // the same scale: 10 GiB x 760 / 120
}

TEST(Svg, EveryFittingProfileGetsALineAndFarLargerOnesAreNamedOffTheScale) {
  const Case c;
  const std::string svg = svg_of(c, c.all_fits());
  const auto lines = tags(svg, "<line class=\"capacity-line\"");
  // GPU-S does not fit; GPU-M fits; GPU-L fits but is beyond 1.6 x the peak: named below.
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(attr(svg, lines[0], "data-gpu"), "GPU-M");
  EXPECT_EQ(attr(svg, lines[0], "data-fits"), "true");
  EXPECT_EQ(attr(svg, lines[0], "stroke"), "#008700");
  EXPECT_NE(svg.find("Also fits, off the scale: GPU-L (189.0 GiB)"), std::string::npos);
  EXPECT_EQ(svg.find("data-gpu=\"GPU-S\""), std::string::npos);

  // Two close profiles that both fit: two lines, two labels that do not overlap.
  Case d;
  d.large = Case::profile("GPU-L", 115);
  const std::string two = svg_of(d, d.all_fits());
  EXPECT_EQ(tags(two, "<line class=\"capacity-line\"").size(), 2u);
  const auto labels = tags(two, "<text class=\"capacity-label\"");
  ASSERT_EQ(labels.size(), 2u);
  EXPECT_NE(attr(two, labels[0], "y"), attr(two, labels[1], "y"));  // different rows when they would collide
}

TEST(Svg, WhenNothingFitsTheLargestGpuShowsHowFarOffThePeakIs) {
  Case c;
  c.medium = Case::profile("GPU-M", 70);
  c.large = Case::profile("GPU-L", 90);
  const std::string svg = svg_of(c, c.all_fits());
  const auto lines = tags(svg, "<line class=\"capacity-line\"");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(attr(svg, lines[0], "data-gpu"), "GPU-L");
  EXPECT_EQ(attr(svg, lines[0], "data-fits"), "false");
}

TEST(Svg, ManyStagesStayReadable) {
  Case c;
  for (int i = 0; i < 61; ++i) c.add_stage({1, 2, 4, i % 7, 0});
  const std::string svg = svg_of(c, c.all_fits());
  EXPECT_EQ(markup_problem(svg, false), "");
  EXPECT_EQ(count(svg, "<g class=\"stage\""), 64u);
  const int h = std::stoi(attr(svg, svg.find("<svg"), "height"));
  EXPECT_LT(h, 1200);  // rows shrink
  EXPECT_GT(h, 64 * 8);
}

TEST(Svg, EscapesEverythingFromTheUser) {
  Case c;
  const std::string evil = "<script>alert(\"x\")</script> & 'q' \x01\xff\xc3(";
  c.est.model.name = evil;
  c.model.name = evil;
  c.small.name = "GPU<&>\"S\"";
  const std::string svg = svg_of(c, c.fits({&c.small}), &c.small);
  EXPECT_EQ(markup_problem(svg, false), "");
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_NE(svg.find("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39;"), std::string::npos);
  EXPECT_NE(svg.find("GPU&lt;&amp;&gt;&quot;S&quot;"), std::string::npos);
}

TEST(XmlEscape, EscapesMarkupAndRepairsWhatXmlCannotCarry) {
  using cli::xml_escape;
  EXPECT_EQ(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(xml_escape("tab\tnl\n"), "tab\tnl\n");
  EXPECT_EQ(xml_escape("bell\x07"), "bell\xEF\xBF\xBD");
  EXPECT_EQ(xml_escape("ü → 🚀"), "ü → 🚀");                                        // valid UTF-8 kept
  EXPECT_EQ(xml_escape("\xff"), "\xEF\xBF\xBD");                                  // not UTF-8
  EXPECT_EQ(xml_escape("\xc3"), "\xEF\xBF\xBD");                                  // truncated
  EXPECT_EQ(xml_escape("\xc0\xaf"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong '/'
  EXPECT_EQ(xml_escape("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(xml_escape("\xef\xbf\xbf"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // U+FFFF
}

// ---------------------------------------------------------------------------------------------
// Palette: one set of colours for the terminal, the SVG and the HTML.

std::string xterm256_hex(int index) {
  if (index >= 232) {
    const int v = 8 + 10 * (index - 232);
    return fmt::format("#{:02x}{:02x}{:02x}", v, v, v);
  }
  if (index >= 16) {
    static constexpr int kLevels[6] = {0, 95, 135, 175, 215, 255};
    const int i = index - 16;
    return fmt::format("#{:02x}{:02x}{:02x}", kLevels[i / 36], kLevels[(i / 6) % 6], kLevels[i % 6]);
  }
  return "";
}

TEST(Palette, TerminalColoursAreExactlyTheSvgColoursAndAllDiffer) {
  std::set<std::string> hexes, glyphs;
  for (const auto& st : cli::category_styles()) {
    EXPECT_EQ(xterm256_hex(st.ansi256), st.hex) << st.label;
    hexes.insert(st.hex);
    glyphs.insert(st.glyph);
  }
  EXPECT_EQ(hexes.size(), cli::kCategories);
  EXPECT_EQ(glyphs.size(), cli::kCategories);
  EXPECT_EQ(xterm256_hex(28), "#008700");   // the terminal's "fits" marker = the SVG's line
  EXPECT_EQ(xterm256_hex(160), "#d70000");  // and "does not fit"
}

TEST(Palette, SvgAndHtmlPaintEachCategoryInItsColour) {
  const Case c;
  const std::string svg = svg_of(c, c.all_fits());
  const std::string html = cli::render_estimate_html(c.model, c.est, c.all_fits(), {});
  for (const auto& st : cli::category_styles()) {
    for (auto p : tags(svg, fmt::format("<rect class=\"seg\" data-category=\"{}\"", st.label)))
      EXPECT_EQ(attr(svg, p, "fill"), st.hex) << st.label;
    // the table header swatch
    EXPECT_NE(html.find(fmt::format("<span class=\"sw\" style=\"background:{}\"></span>{}", st.hex, st.label)),
              std::string::npos)
        << st.label;
  }
}

// ---------------------------------------------------------------------------------------------
// HTML

TEST(Html, IsOneSelfContainedDocument) {
  const Case c;
  const std::string html = cli::render_estimate_html(c.model, c.est, c.all_fits(), {});
  EXPECT_EQ(markup_problem(html, true), "");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>\n<html lang=\"en\">", 0), 0u);
  EXPECT_NE(html.find("<meta charset=\"utf-8\">"), std::string::npos);
  EXPECT_NE(html.find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  for (const char* ref : {"src=", "href=", "@import", "url(", "<link", "<iframe", "<object", "<embed", "@font-face"})
    EXPECT_EQ(html.find(ref), std::string::npos) << ref;
  // The only URL is the SVG namespace name, which is never fetched.
  std::string rest = html;
  for (auto p = rest.find("http://www.w3.org/2000/svg"); p != std::string::npos;
       p = rest.find("http://www.w3.org/2000/svg"))
    rest.erase(p, 26);
  EXPECT_EQ(rest.find("http:"), std::string::npos);
  EXPECT_EQ(rest.find("https:"), std::string::npos);
  EXPECT_EQ(count(html, "<svg"), 1u);
  EXPECT_EQ(html.find("<?xml"), std::string::npos);  // inline, not a file
}

TEST(Html, CarriesTheVerdictTheSummaryTheStagesAndEveryComponent) {
  const Case c;
  cli::HtmlOptions o;
  const std::string html = cli::render_estimate_html(c.model, c.est, c.all_fits(), o);
  EXPECT_NE(html.find("Peak <b>100.00 GiB</b> per GPU (pipeline stage 2)"), std::string::npos);
  EXPECT_NE(html.find("✓ Fits in</span> GPU-M, GPU-L"), std::string::npos);
  EXPECT_NE(html.find("/models/acme/config.json"), std::string::npos);
  EXPECT_NE(html.find("TP=1, PP=3"), std::string::npos);
  // Stage table: one row per stage, the peak marked; totals in GiB.
  EXPECT_EQ(count(html, "<tr class=\"peak\">"), 1u);
  EXPECT_NE(html.find("<td title=\"103079215104 bytes\">96.00</td>"), std::string::npos);
  // Component table: each name once, one column per stage, '—' where a stage lacks it.
  for (const char* name : {"weights/decoder/linear", "gradients/decoder/main_grad", "optimizer/adam_moments",
                           "activations/attention/qkv", "other/workspace"})
    EXPECT_EQ(count(html, std::string("<code>") + name + "</code>"), 1u) << name;
  const auto comp = html.find("<table class=\"components\">");
  ASSERT_NE(comp, std::string::npos);
  const std::string table = html.substr(comp, html.find("</table>", comp) - comp);
  EXPECT_EQ(count(table, "<th>stage "), 3u);
  EXPECT_EQ(count(table, "<td>—</td>"), 1u);  // stage 2 has no activations
  // Fit table: every judged GPU.
  for (const char* g : {"GPU-S", "GPU-M", "GPU-L"})
    EXPECT_NE(html.find(std::string("<td class=\"l\">") + g), std::string::npos);
  EXPECT_NE(html.find("✗ 40.20 GiB short"), std::string::npos);  // GPU-S: 59.80 usable
  EXPECT_NE(html.find("pipeline assumed full"), std::string::npos);
}

TEST(Html, WithoutGpuProfilesThereIsNoVerdictAndNoLine) {
  const Case c;
  const std::string html = cli::render_estimate_html(c.model, c.est, {}, {});
  EXPECT_EQ(markup_problem(html, true), "");
  EXPECT_NE(html.find("<p class=\"verdict none\">Peak <b>100.00 GiB</b>"), std::string::npos);
  EXPECT_EQ(html.find("capacity-line"), std::string::npos);
  EXPECT_EQ(html.find("<h2 id=\"fit\">"), std::string::npos);
  EXPECT_EQ(count(html, "<rect class=\"seg\""), 14u);
}

TEST(Html, EscapesEverythingFromTheUser) {
  Case c;
  c.model.name = c.est.model.name = "<img src=x onerror=alert(1)>";
  c.model.source = "/tmp/\"><script>x</script>/config.json";
  c.est.stages[0].components.push_back({"activations/<b>odd</b>", MemoryCategory::kActivations, 1});
  c.est.assumptions.push_back("<i>assumed</i>");
  c.model.warnings.push_back("a & b");
  const std::string html = cli::render_estimate_html(c.model, c.est, c.all_fits(), {});
  EXPECT_EQ(markup_problem(html, true), "");
  for (const char* raw : {"<img", "<script", "<b>odd", "<i>assumed"})
    EXPECT_EQ(html.find(raw), std::string::npos) << raw;
  EXPECT_NE(html.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  EXPECT_NE(html.find("a &amp; b"), std::string::npos);
  EXPECT_NE(html.find("&lt;0.001"), std::string::npos);  // one byte
}

// ---------------------------------------------------------------------------------------------
// Terminal bars, with the options forced

std::string strip_ansi(const std::string& s) { return std::regex_replace(s, std::regex("\033\\[[0-9;]*m"), ""); }

// The bar lines of a text report (with their escape codes): "    <cells> <total> GiB".
std::vector<std::string> bar_lines(const std::string& report) {
  static const std::regex kBar("    [^a-zA-Z0-9]+ [0-9]+\\.[0-9]{2} GiB");
  std::vector<std::string> out;
  std::istringstream in(report);
  std::string line;
  while (std::getline(in, line))
    if (std::regex_match(strip_ansi(line), kBar)) out.push_back(line.substr(4));
  return out;
}

// The cells of a bar line without colour: one string per terminal column.
std::vector<std::string> columns(const std::string& bar) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < bar.size();) {
    std::size_t len = 1;
    const auto c = static_cast<unsigned char>(bar[i]);
    if (c >= 0xF0)
      len = 4;
    else if (c >= 0xE0)
      len = 3;
    else if (c >= 0xC0)
      len = 2;
    out.push_back(bar.substr(i, len));
    i += len;
  }
  return out;
}

std::string text_report(const Case& c, const std::vector<FitVerdict>& fits, bool bars, bool colour,
                        const HardwareProfile* chosen = nullptr) {
  cli::RenderOptions o;
  o.bars = bars;
  o.colour = colour;
  o.chosen_gpu = chosen;
  std::ostringstream out;
  cli::render_text(out, c.model, c.est, fits, o);
  return out.str();
}

TEST(TerminalBars, ShadesAddUpToEachStageOnOneScaleWithTheUsableMemoryMarked) {
  const Case c;
  const auto fits = c.all_fits();  // marker: GPU-M, the smallest that fits (103.5 GiB usable)
  const std::string report = text_report(c, fits, true, false);
  EXPECT_EQ(report.find('\033'), std::string::npos);
  const auto lines = bar_lines(report);
  ASSERT_EQ(lines.size(), 3u) << report;
  // By hand: GPU-M's 103.5 GiB usable (110 - 5.5 headroom - 1 reserved) is more than the
  // 100 GiB peak and less than twice it, so 50 cells stand for 103.5 GiB (2.07 GiB a cell) and
  // the marker sits after round(103.5 / 103.5 x 50) = 50 cells. A segment ends where its
  // running sum rounds to: cells(g) = round(g x 50 / 103.5) = round(g x 0.48309).
  //   stage 0, sums 10 30 70 95 96 GiB -> 4.83 14.49 33.82 45.89 46.38 -> edges 5 14 34 46 46
  //   stage 1, sums 12 36 84 94 95     -> 5.80 17.39 40.58 45.41 45.89 -> edges 6 17 41 45 46
  //   stage 2, sums 14 42 98 98 100    -> 6.76 20.29 47.34 47.34 48.31 -> edges 7 20 47 47 48
  // Rounding each segment alone would give other counts (stage 1: 6 12 23 5 0).
  struct Expected {
    long weights, gradients, optimizer, activations, other, blank;
    const char* total;
  };
  const std::vector<Expected> expected = {
      {5, 9, 20, 12, 0, 4, " 96.00 GiB"},
      {6, 11, 24, 4, 1, 4, " 95.00 GiB"},
      {7, 13, 27, 0, 1, 2, " 100.00 GiB"},
  };
  for (std::size_t i = 0; i < 3; ++i) {
    const auto cols = columns(lines[i]);
    // 50 cells, the marker after the 50th, then " <total> GiB".
    ASSERT_GE(cols.size(), 51u);
    EXPECT_EQ(cols[50], "│") << lines[i];
    EXPECT_NE(lines[i].find(expected[i].total), std::string::npos) << lines[i];
    std::map<std::string, long> n;
    for (std::size_t k = 0; k < 50; ++k) ++n[cols[k]];
    EXPECT_EQ(n["█"], expected[i].weights) << "stage " << i << ": " << lines[i];
    EXPECT_EQ(n["▓"], expected[i].gradients) << "stage " << i << ": " << lines[i];
    EXPECT_EQ(n["▒"], expected[i].optimizer) << "stage " << i << ": " << lines[i];
    EXPECT_EQ(n["░"], expected[i].activations) << "stage " << i << ": " << lines[i];
    EXPECT_EQ(n["·"], expected[i].other) << "stage " << i << ": " << lines[i];
    EXPECT_EQ(n[" "], expected[i].blank) << "stage " << i << ": " << lines[i];
  }
  // Stacking order: stage 1 reads 6 weights, 11 gradients, 24 optimizer, 4 activations, 1 other.
  EXPECT_EQ(lines[1].substr(0, lines[1].find("│")),
            std::string() + "██████" + "▓▓▓▓▓▓▓▓▓▓▓" + "▒▒▒▒▒▒▒▒▒▒▒▒▒▒▒▒▒▒▒▒▒▒▒▒" + "░░░░" + "·" + "    ");
  EXPECT_NE(report.find("█ weights  ▓ gradients  ▒ optimizer  ░ activations  · other  (1 cell = 2.07 GiB)"),
            std::string::npos);
  EXPECT_NE(report.find("│ usable memory of GPU-M: 103.50 GiB"), std::string::npos);
}

TEST(TerminalBars, AStageOverTheChosenGpuGetsAHeavyRedMarker) {
  const Case c;
  const auto fits = c.fits({&c.small});
  const std::string plain = text_report(c, fits, true, false, &c.small);
  for (const auto& l : bar_lines(plain)) {
    EXPECT_NE(l.find("┃"), std::string::npos) << l;  // every stage is over 59.8 GiB
    EXPECT_EQ(l.find("│"), std::string::npos) << l;
  }
  EXPECT_NE(plain.find("usable memory of GPU-S: 59.80 GiB; ┃ marks the stages that do not fit"), std::string::npos);
  const std::string coloured = text_report(c, fits, true, true, &c.small);
  EXPECT_NE(coloured.find("\033[1m\033[38;5;160m┃\033[0m"), std::string::npos);
}

TEST(TerminalBars, ColourPaintsFullBlocksInThePaletteAndAlwaysResets) {
  const Case c;
  const auto fits = c.all_fits();
  const std::string coloured = text_report(c, fits, true, true);
  for (const auto& st : cli::category_styles())
    EXPECT_NE(coloured.find(fmt::format("\033[38;5;{}m█", st.ansi256)), std::string::npos) << st.label;
  EXPECT_NE(coloured.find("\033[38;5;28m│\033[0m"), std::string::npos);
  const auto lines = bar_lines(coloured);
  ASSERT_EQ(lines.size(), 3u);
  const auto plain_lines = bar_lines(text_report(c, fits, true, false));
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(count(lines[i], "\033[38;5;"), count(lines[i], "\033[0m")) << "every colour is reset";
    // Same cells as without colour, every shade a full block.
    std::string shades = plain_lines[i];
    for (const auto& st : cli::category_styles())
      for (auto p = shades.find(st.glyph); p != std::string::npos; p = shades.find(st.glyph, p + 1))
        shades.replace(p, std::string(st.glyph).size(), "█");
    EXPECT_EQ(strip_ansi(lines[i]), shades);
  }
}

TEST(TerminalBars, OnlyWhenAsked) {
  const Case c;
  const std::string report = text_report(c, c.all_fits(), false, false);
  for (const char* g : {"█", "▓", "▒", "░", "│", "┃", "1 cell ="}) EXPECT_EQ(report.find(g), std::string::npos) << g;
  EXPECT_EQ(report.find('\033'), std::string::npos);
}

TEST(TerminalBars, AGpuFarLargerThanTheStagesIsNotDrawn) {
  const Case c;
  const auto fits = c.fits({&c.large});  // 189 GiB usable, almost twice the 100 GiB peak
  const std::string report = text_report(c, fits, true, false, &c.large);
  const auto lines = bar_lines(report);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[2].find("│"), std::string::npos);  // within 2x: drawn
  Case small_model;
  small_model.est.stages.clear();
  small_model.add_stage({2, 4, 8, 5, 1});
  small_model.add_stage({2, 4, 8, 6, 1});
  small_model.add_stage({3, 6, 12, 0, 1});
  small_model.est.peak_stage = 2;
  const std::string far =
      text_report(small_model, small_model.fits({&small_model.large}), true, false, &small_model.large);
  for (const auto& l : bar_lines(far)) EXPECT_EQ(l.find("│"), std::string::npos) << l;
  EXPECT_NE(far.find("usable memory of GPU-L: 189.00 GiB (off the scale"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// `mme estimate --html/--svg` end to end

const std::vector<std::string> kQwen = {"estimate", "Qwen/Qwen3-8B", "--tp", "2", "--pp", "2", "--num-gpus", "8"};

std::vector<std::string> with(std::vector<std::string> a, std::initializer_list<std::string> more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CliPictures, HtmlAndSvgFilesNextToTheUsualReport) {
  test::TempDir dir;
  const auto html = dir.path() / "report.html", svg = dir.path() / "chart.svg";
  const auto plain = run_mme(kQwen);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto r = run_mme(with(kQwen, {"--html", html.string(), "--svg=" + svg.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, plain.out);  // stdout unchanged
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(listing(dir.path()), (std::vector<std::string>{"chart.svg", "report.html"}));
  const std::string h = test::read_file(html), s = test::read_file(svg);
  EXPECT_EQ(markup_problem(h, true), "");
  EXPECT_EQ(markup_problem(s, false), "");
  EXPECT_NE(h.find("Qwen/Qwen3-8B"), std::string::npos);
  EXPECT_EQ(count(s, "<g class=\"stage\""), 2u);
  // The numbers agree with the text report's stage totals ("    - Total: 25.62 GiB") and the
  // JSON document's bytes.
  std::vector<std::string> totals;
  const std::regex total_re("\n    - Total: ([0-9]+\\.[0-9]{2} GiB)\n");
  for (auto it = std::sregex_iterator(plain.out.begin(), plain.out.end(), total_re); it != std::sregex_iterator(); ++it)
    totals.push_back((*it)[1]);
  ASSERT_EQ(totals.size(), 2u) << plain.out;
  for (const auto& total : totals) EXPECT_NE(s.find(">" + total), std::string::npos) << total;
  const auto j = nlohmann::json::parse(run_mme(with(kQwen, {"--json"})).out);
  for (const auto& st : j["stages"])
    EXPECT_NE(h.find(fmt::format("<td title=\"{} bytes\">", st["total_bytes"].get<std::int64_t>())), std::string::npos);
  // The file permissions follow the umask like any other file (not mkstemp's 0600).
  EXPECT_NE(fs::status(html).permissions() & fs::perms::others_read, fs::perms::none);
}

TEST(CliPictures, JsonStaysTheOnlyThingOnStdout) {
  test::TempDir dir;
  const auto html = dir.path() / "r.html";
  const auto r = run_mme(with(kQwen, {"--json", "--html", html.string(), "--gpu", "H100"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["fits"].size(), 1u);
  const std::string h = test::read_file(html);
  EXPECT_EQ(count(h, "<line class=\"capacity-line\""), 1u);
  EXPECT_NE(h.find("data-gpu=\"H100-SXM-80GB\""), std::string::npos);
}

TEST(CliPictures, AnUnwritablePathIsOneErrorLineAndNothingIsWritten) {
  test::TempDir dir;
  struct Bad {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {{"--html", (dir.path() / "missing" / "r.html").string()}, "--html: cannot write '"},
      {{"--svg", dir.path().string()}, "--svg: cannot write '"},
      {{"--html", ""}, "--html: needs a file name"},
      {{"--html", (dir.path() / "same").string(), "--svg", (dir.path() / "same").string()}, "name the same file"},
  };
  for (const auto& b : bad) {
    auto args = kQwen;
    args.insert(args.end(), b.flags.begin(), b.flags.end());
    const auto r = run_mme(args);
    EXPECT_EQ(r.exit_code, 2) << b.flags[0];
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(count(r.err, "\n"), 1u) << r.err;
    EXPECT_EQ(r.err.rfind("mme: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(b.message), std::string::npos) << r.err;
    EXPECT_TRUE(listing(dir.path()).empty()) << "left behind: " << listing(dir.path()).front();
  }
}

TEST(CliPictures, AFailedEstimateLeavesTheOldFileAndNoTemporaryFile) {
  test::TempDir dir;
  const auto html = dir.path() / "r.html";
  test::write_file(html, "old");
  const auto r = run_mme({"estimate", "Qwen/Qwen3-8B", "--tp", "3", "--num-gpus", "3", "--html", html.string()});
  EXPECT_EQ(r.exit_code, 4) << r.err;  // 32 heads are not divisible by TP 3
  EXPECT_EQ(test::read_file(html), "old");
  EXPECT_EQ(listing(dir.path()), std::vector<std::string>{"r.html"});
  // A successful run replaces it whole.
  const auto ok = run_mme(with(kQwen, {"--html", html.string()}));
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(test::read_file(html).rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(listing(dir.path()), std::vector<std::string>{"r.html"});
}

TEST(CliPictures, HelpNamesTheOptions) {
  const auto e = run_mme({"help", "estimate"});
  EXPECT_NE(e.out.find("--html"), std::string::npos);
  EXPECT_NE(e.out.find("--svg"), std::string::npos);
  EXPECT_NE(run_mme({"help", "plan"}).out.find("--html"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// `mme plan --html`: the fit map agrees with every valid layout the planner streams.

// TP up to 2: the best plan's cell (TP 2, PP 2) then holds a layout with a smaller peak than the
// best plan's (another VPP or stage split, which the step-time model ranks lower), which
// the starred label must not show. Up to TP 4 the best plan is TP 4 with CP 2: the step-time
// model ties it with its DP 2 twin and the smaller peak wins the tie, so it is its cell's smallest.
const std::vector<std::string> kPlan = {"plan",  "Qwen/Qwen3-8B", "--num-gpus", "8",
                                        "--gpu", "A100-40GB",     "--max-tp",   "2"};

struct CellTruth {
  std::int64_t min_peak = std::numeric_limits<std::int64_t>::max();
  std::uint64_t valid = 0, fitting = 0;
};

TEST(CliPictures, PlanFitMapAgreesWithEveryValidLayout) {
  test::TempDir dir;
  const auto html = dir.path() / "plan.html";
  const auto csv = run_mme(with(kPlan, {"--csv"}));
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  const auto both = run_mme(with(kPlan, {"--csv", "--html", html.string()}));
  ASSERT_EQ(both.exit_code, 0) << both.err;
  EXPECT_EQ(both.out, csv.out);  // the CSV stream is unchanged
  const auto json = run_mme(with(kPlan, {"--json"}));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  const std::int64_t usable = j["usable_bytes"];

  // Truth from the CSV: per (ep, recompute, tp, pp), the smallest peak and the counts.
  std::map<std::string, CellTruth> truth;
  std::set<std::string> tps, pps, facets;
  auto lines = split(csv.out, '\n');
  ASSERT_GT(lines.size(), 10u);
  const auto header = split(lines[0], ',');
  auto col = [&](const char* name) {
    return static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const auto f = split(lines[i], ',');
    const std::string key =
        fmt::format("ep={} recompute={} tp={} pp={}", f[col("ep")], f[col("recompute")], f[col("tp")], f[col("pp")]);
    auto& t = truth[key];
    t.min_peak = std::min<std::int64_t>(t.min_peak, std::stoll(f[col("peak_bytes")]));
    ++t.valid;
    t.fitting += f[col("fits")] == "true";
    tps.insert(f[col("tp")]);
    pps.insert(f[col("pp")]);
    facets.insert(f[col("ep")] + "/" + f[col("recompute")]);
  }

  const std::string h = test::read_file(html);
  EXPECT_EQ(markup_problem(h, true), "");
  EXPECT_EQ(h.find("<script"), std::string::npos);
  EXPECT_EQ(count(h, "<svg"), facets.size());
  const std::regex cell_re(
      "data-fits=\"(true|false)\" data-key=\"(ep=\\S+ recompute=\\S+ tp=\\S+ pp=\\S+)"
      "(?: peak=(\\d+) valid=(\\d+) fitting=(\\d+)(?: best_peak=(\\d+))?)?\"");
  std::size_t cells = 0, present = 0, starred = 0;
  std::set<std::string> seen;
  const std::int64_t best_peak = j["plans"][0]["peak_bytes"];
  for (auto it = std::sregex_iterator(h.begin(), h.end(), cell_re); it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    ++cells;
    const std::string key = m[2];
    if (!m[3].matched) {
      EXPECT_EQ(truth.count(key), 0u) << key << " has valid layouts but is drawn empty";
      EXPECT_EQ(m[1], "false");
      continue;
    }
    ++present;
    seen.insert(key);
    ASSERT_EQ(truth.count(key), 1u) << key;
    const auto& t = truth.at(key);
    EXPECT_EQ(std::stoll(m[3]), t.min_peak) << key;
    EXPECT_EQ(std::stoull(m[4]), t.valid) << key;
    EXPECT_EQ(std::stoull(m[5]), t.fitting) << key;
    EXPECT_EQ(m[1] == "true", t.min_peak <= usable) << key;
    if (m[6].matched) {
      // The best plan's cell shows that plan's own peak, which here is not the cell's smallest.
      ++starred;
      EXPECT_EQ(std::stoll(m[6]), best_peak) << key;
      EXPECT_LT(t.min_peak, best_peak) << key << ": the check below could not tell the two apart";
      // The number it shows (its precision is PlanHtml.FitMapCellsShowTheirPeak...'s to check)
      // is the best plan's peak, nearer to it than to the cell's smallest.
      const std::size_t at = static_cast<std::size_t>(m.position(0));
      const std::string cell = h.substr(at, h.find("</g>", at) - at);
      std::smatch shown;
      ASSERT_TRUE(std::regex_search(cell, shown, std::regex(">★ ([0-9]+(?:\\.[0-9]+)?)</text>"))) << cell;
      const double g = std::stod(shown[1]), best_gib = to_gib(best_peak), min_gib = to_gib(t.min_peak);
      EXPECT_LT(std::abs(g - best_gib), std::abs(g - min_gib)) << key << " shows " << shown[1];
      EXPECT_LE(std::abs(g - best_gib), 0.5) << key << " shows " << shown[1];
    }
  }
  EXPECT_EQ(starred, 1u);
  EXPECT_EQ(cells, facets.size() * tps.size() * pps.size());
  EXPECT_EQ(present, truth.size());
  EXPECT_EQ(seen.size(), truth.size());

  // The top plans: as many rows as --json has plans, the best first, starred on the map.
  const auto plans = h.find("<table class=\"plans\">");
  ASSERT_NE(plans, std::string::npos);
  const std::string table = h.substr(plans, h.find("</table>", plans) - plans);
  EXPECT_EQ(count(table, "<tr class=\"plan\">"), j["plans"].size());
  EXPECT_EQ(count(table, "<tr class=\"cmd\">"), j["plans"].size());
  std::string best = "mme estimate Qwen/Qwen3-8B";
  for (const auto& a : j["plans"][0]["args"]) best += " " + test::shell_word(a.get<std::string>());
  best = std::regex_replace(best, std::regex("'"), "&#39;");  // as the page escapes it
  const std::string plain = std::regex_replace(table, std::regex("</?span[^>]*>"), "");
  EXPECT_NE(plain.find("<code>" + best + "</code>"), std::string::npos) << best;
  EXPECT_EQ(count(h, "★ "), 1u + 2u);  // the caption's explanation, and the one cell and its tooltip
}

// The fit map of a plan made by hand: four cells of known peaks on a GPU of 103.5 GiB usable,
// each showing its peak in GiB with two decimals below 10 GiB, one below 100 and none above,
// rounded (not cut); the best plan's cell shows that plan's peak with a star.
TEST(PlanHtml, FitMapCellsShowTheirPeakInGibWithThePrecisionOfItsSize) {
  Registry registry;
  load_plugins(registry, {test::plugin_dir()});
  SourceOptions offline;
  offline.allow_network = false;
  const ModelSpec model = load_model((test::models_dir() / "Qwen--Qwen3-8B").string(), registry, offline);
  const Planner planner(model, registry);
  const HardwareProfile gpu = Case::profile("GPU-M", 110);  // 110 - 5.5 - 1 = 103.5 GiB usable
  PlanOptions o;
  o.num_gpus = 8;
  o.gpu = &gpu;
  constexpr std::int64_t kMiB = std::int64_t{1} << 20;
  auto plan = [&](std::int64_t tp, std::int64_t pp, std::int64_t peak) {
    Plan p;
    p.layout.tp = tp;
    p.layout.pp = pp;
    p.layout.dp = 8 / (tp * pp);
    p.layout.last_stage_layers = p.layout.first_stage_layers = p.layout.middle_stage_layers = 36 / pp;
    p.peak_bytes = p.upper_bytes = peak;
    p.headroom_bytes = usable_memory_bytes(gpu, kDefaultHeadroom) - peak;
    p.fits = p.headroom_bytes >= 0;
    return p;
  };
  const Plan a = plan(1, 1, 7 * kGiB64 + 1000 * kMiB);        // 7 + 1000/1024 = 7.9766 GiB -> "7.98"
  const Plan b = plan(2, 1, 45 * kGiB64 + 980 * kMiB);        // 45 + 980/1024 = 45.957 GiB -> "46.0"
  const Plan c = plan(1, 2, 123 * kGiB64 + 600 * kMiB);       // 123 + 600/1024 = 123.586 GiB -> "124", > 103.5
  const Plan d_small = plan(2, 2, 20 * kGiB64 + 100 * kMiB);  // 20 + 100/1024 = 20.098 GiB -> "20.1"
  const Plan d_best = plan(2, 2, 30 * kGiB64 + 300 * kMiB);   // 30 + 300/1024 = 30.293 GiB -> "30.3"
  cli::FitMap map;
  for (const Plan* p : {&a, &b, &c, &d_small, &d_best}) map.add(*p);
  PlanResult r;
  r.usable_bytes = usable_memory_bytes(gpu, kDefaultHeadroom);
  r.evaluated = r.estimated = r.valid = 5;
  r.fitting = 4;
  r.plans = {d_best};
  const std::string h = cli::render_plan_html(model, planner, o, r, {}, map);
  EXPECT_EQ(markup_problem(h, true), "");
  // The cell of each (TP, PP): its data-key, then its text.
  auto cell_text = [&](std::int64_t tp, std::int64_t pp) {
    const std::string key = fmt::format("data-key=\"ep=1 recompute=none tp={} pp={} ", tp, pp);
    const std::size_t at = h.find(key);
    if (at == std::string::npos) return std::string("(no cell " + key + ")");
    const std::size_t end = h.find("</text></g>", at);
    return h.substr(h.rfind('>', end) + 1, end - h.rfind('>', end) - 1);
  };
  EXPECT_EQ(cell_text(1, 1), "7.98");
  EXPECT_EQ(cell_text(2, 1), "46.0");
  EXPECT_EQ(cell_text(1, 2), "124");
  EXPECT_EQ(cell_text(2, 2), "★ 30.3");
  // The key keeps the cell's smallest peak in bytes: 20 x 2^30 + 100 x 2^20 = 21579694080; the best plan 30 x 2^30 +
  // 300 x 2^20 = 32526827520.
  EXPECT_NE(h.find("tp=2 pp=2 peak=21579694080 valid=2 fitting=2 best_peak=32526827520\""), std::string::npos);
  // Fits and misses against the 103.5 GiB: only the 124 GiB cell does not fit.
  EXPECT_NE(h.find("data-fits=\"false\" data-key=\"ep=1 recompute=none tp=1 pp=2 "), std::string::npos);
  EXPECT_NE(h.find("data-fits=\"true\" data-key=\"ep=1 recompute=none tp=1 pp=1 "), std::string::npos);
}

TEST(CliPictures, PlanHtmlEscapesAModelPathAndRefusesAnUnwritablePath) {
  test::TempDir dir;
  const fs::path model = dir.path() / "a<b&\"c'" / "config.json";
  fs::create_directories(model.parent_path());
  fs::copy_file(test::models_dir() / "Qwen--Qwen3-8B" / "config.json", model);
  const auto html = dir.path() / "p.html";
  const auto r =
      run_mme({"plan", model.parent_path().string(), "--num-gpus", "8", "--gpu", "H100", "--html", html.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string h = test::read_file(html);
  EXPECT_EQ(markup_problem(h, true), "");
  EXPECT_EQ(h.find("a<b"), std::string::npos);
  EXPECT_NE(h.find("a&lt;b&amp;&quot;c&#39;"), std::string::npos);

  const auto bad =
      run_mme({"plan", "Qwen/Qwen3-8B", "--num-gpus", "8", "--html", (dir.path() / "no" / "p.html").string()});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.out, "");
  EXPECT_EQ(count(bad.err, "\n"), 1u) << bad.err;
  EXPECT_NE(bad.err.find("mme: error: --html: cannot write"), std::string::npos) << bad.err;
}

// ---------------------------------------------------------------------------------------------
// A real terminal: mme's stdout on a pseudo-terminal.

struct PtyRun {
  int exit_code = -1;
  std::string out;  // with "\r\n" turned into "\n"
};

PtyRun run_mme_on_a_terminal(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (!env.count(kv.substr(0, kv.find('=')))) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : env)
    if (!v.empty()) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings{test::mme_exe().string()};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  int master = -1, slave = -1;
  winsize ws{};
  ws.ws_row = 50;
  ws.ws_col = 120;
  if (::openpty(&master, &slave, nullptr, nullptr, &ws) != 0) throw std::runtime_error("openpty failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::setsid();
    ::ioctl(slave, TIOCSCTTY, 0);
    ::dup2(slave, STDIN_FILENO);
    ::dup2(slave, STDOUT_FILENO);
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, STDERR_FILENO);
    ::close(master);
    ::close(slave);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(slave);
  PtyRun r;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(master, buf, sizeof buf);
    if (n > 0) {
      r.out.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // EIO: the terminal's other side is closed
  }
  ::close(master);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  for (auto p = r.out.find("\r\n"); p != std::string::npos; p = r.out.find("\r\n", p)) r.out.erase(p, 1);
  return r;
}

TEST(TerminalPty, ColouredBarsOnATerminal) {
  const auto r = run_mme_on_a_terminal(kQwen, {{"NO_COLOR", ""}});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto lines = bar_lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  for (const auto& l : lines) {
    EXPECT_NE(l.find("\033[38;5;68m█"), std::string::npos) << l;  // weights
    EXPECT_EQ(l.find("▓"), std::string::npos);                    // colour, not shades
  }
  EXPECT_NE(r.out.find("\033[38;5;28m│ \033[0musable memory of"), std::string::npos) << r.out;
}

TEST(TerminalPty, NoColorKeepsTheShadedBarsWithoutEscapes) {
  const auto r = run_mme_on_a_terminal(kQwen, {{"NO_COLOR", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.find('\033'), std::string::npos);
  const auto lines = bar_lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  for (const auto& l : lines) {
    EXPECT_NE(l.find("█"), std::string::npos) << l;
    EXPECT_NE(l.find("▓"), std::string::npos) << l;
  }
}

TEST(TerminalPty, PipedOutputHasNoBarsAndNoColour) {
  const auto r = run_mme(kQwen, {{"NO_COLOR", ""}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find('\033'), std::string::npos);
  EXPECT_TRUE(bar_lines(r.out).empty());
  EXPECT_EQ(r.out.find("█"), std::string::npos);
}

}  // namespace
}  // namespace mme
