// Headless Chromium opens the pictures `mme` writes and takes a screenshot of each; the
// screenshot must show them: not blank, the five category colours of the bars, the capacity
// lines, text. Chromium is required (scripts/setup-deps.sh --with chromium; .ci/run installs
// it): without it these tests fail, they do not skip. MME_CHROMIUM names another binary.
// The pages and screenshots stay in <build>/tests/pictures/screenshots/ to be looked at.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "png.hpp"
#include "test_support.hpp"
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace mme {
namespace {

namespace fs = std::filesystem;
using test::count_near;
using test::Image;
using test::parse_hex_colour;
using test::run_mme;

// The palette of framework/src/report/render_svg.cpp, as it must appear on screen.
const std::map<std::string, std::string> kCategoryHex = {{"weights", "#5f87d7"},
                                                         {"gradients", "#00afaf"},
                                                         {"optimizer", "#af5fd7"},
                                                         {"activations", "#ffaf00"},
                                                         {"other", "#8a8a8a"}};
constexpr const char* kFitLine = "#008700";
constexpr const char* kMissLine = "#d70000";
constexpr int kTolerance = 6;  // per channel: anti-aliasing aside, the colours arrive unchanged (sRGB)

fs::path find_chromium() {
  if (const char* e = std::getenv("MME_CHROMIUM"); e && *e) return e;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    for (const char* name : {"chromium", "chromium-browser"}) {
      const fs::path p = fs::path(dir.empty() ? "." : dir) / name;
      if (::access(p.c_str(), X_OK) == 0) return p;
    }
  return {};
}

fs::path shots_dir() {
  const fs::path d = fs::path(MME_PICTURES_BINARY_DIR) / "screenshots";
  fs::create_directories(d);
  return d;
}

std::string file_url(const fs::path& p) {
  std::string out = "file://";
  for (unsigned char c : fs::absolute(p).string()) {
    if (std::isalnum(c) || std::string_view("/-._~").find(static_cast<char>(c)) != std::string_view::npos)
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

std::string tail(const fs::path& log) {
  std::ifstream in(log);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return all.size() > 3000 ? all.substr(all.size() - 3000) : all;
}

// Chromium's screenshot of `page` (1200 x 900 CSS pixels), kept as screenshots/<name>.png.
// Adds a test failure and returns nothing when it cannot be taken.
std::optional<Image> screenshot(const fs::path& page, const std::string& name) {
  const fs::path chromium = find_chromium();
  if (chromium.empty()) {
    ADD_FAILURE() << "headless Chromium is needed for the render test and was not found (looked for $MME_CHROMIUM, "
                     "then chromium and chromium-browser on PATH). Install it: scripts/setup-deps.sh --with chromium "
                     "(.ci/run does), or apt-get install chromium.";
    return std::nullopt;
  }
  test::TempDir profile;  // a fresh --user-data-dir each time
  const fs::path png = shots_dir() / (name + ".png");
  const fs::path log = profile.path() / "chromium.log";
  fs::remove(png);
  std::vector<std::string> args = {chromium.string(),
                                   "--headless",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--disable-background-networking",
                                   "--user-data-dir=" + (profile.path() / "profile").string(),
                                   "--screenshot=" + png.string(),
                                   "--window-size=1200,900",
                                   "--force-color-profile=srgb",
                                   "--hide-scrollbars",
                                   "--no-first-run",
                                   file_url(page)};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::setpgid(0, 0);  // its own process group: the browser's helpers go with it
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(150);
  bool exited = false;
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(-pid, SIGKILL);  // whatever of it is left
  if (!exited) {
    ::waitpid(pid, &status, 0);
    ADD_FAILURE() << chromium << " did not finish within 150 s; its log:\n" << tail(log);
    return std::nullopt;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !fs::exists(png)) {
    ADD_FAILURE() << chromium << " failed (status " << status << ") or wrote no " << png << "; its log:\n" << tail(log);
    return std::nullopt;
  }
  return test::read_png(png);
}

// What a blank page cannot show: a background with at least `min_share` of the pixels
// something else, in many colours.
struct Coverage {
  double non_background = 0;  // share of pixels that differ from the most common colour
  std::size_t colours = 0;    // distinct colours
};

Coverage coverage(const Image& img) {
  std::map<std::uint32_t, std::size_t> hist;
  for (const auto& p : img.pixels) ++hist[(std::uint32_t{p.r} << 16) | (std::uint32_t{p.g} << 8) | p.b];
  std::size_t top = 0;
  for (const auto& [c, n] : hist) top = std::max(top, n);
  return {1.0 - static_cast<double>(top) / static_cast<double>(img.pixels.size()), hist.size()};
}

void expect_not_blank(const Image& img, const std::string& what) {
  EXPECT_EQ(img.width, 1200) << what;
  EXPECT_EQ(img.height, 900) << what;
  const Coverage c = coverage(img);
  EXPECT_GT(c.non_background, 0.03) << what << ": the screenshot is (nearly) blank";
  EXPECT_GT(c.colours, 30u) << what << ": the screenshot has almost no colours";
  // Text: dark pixels (the fonts rendered).
  EXPECT_GT(count_near(img, {0x1a, 0x1a, 0x1a}, 40), 500u) << what << ": no text";
}

void expect_colour(const Image& img, const std::string& hex, std::size_t min_pixels, const std::string& what) {
  const std::size_t n = count_near(img, parse_hex_colour(hex), kTolerance);
  EXPECT_GE(n, min_pixels) << what << ": " << hex << " covers " << n << " pixels";
}

// The categories large enough to be seen in every bar: at least 2% of the peak stage.
std::set<std::string> visible_categories(const nlohmann::json& j) {
  std::set<std::string> out;
  const double peak = static_cast<double>(j["peak"]["total_bytes"].get<std::int64_t>());
  for (const auto& [cat, key] : std::map<std::string, std::string>{{"weights", "weight_bytes"},
                                                                   {"gradients", "gradient_bytes"},
                                                                   {"optimizer", "optimizer_bytes"},
                                                                   {"activations", "activation_bytes"},
                                                                   {"other", "other_bytes"}}) {
    bool all = true;
    for (const auto& st : j["stages"]) all = all && static_cast<double>(st[key].get<std::int64_t>()) >= 0.02 * peak;
    if (all) out.insert(cat);
  }
  return out;
}

const std::vector<std::string> kDeepSeek = {"estimate",
                                            "deepseek-ai/DeepSeek-V3",
                                            "--tp",
                                            "4",
                                            "--pp",
                                            "4",
                                            "--etp",
                                            "4",
                                            "--ep",
                                            "8",
                                            "--num-gpus",
                                            "128",
                                            "--num-layers-in-last-pipeline-stage",
                                            "16"};

std::vector<std::string> with(std::vector<std::string> a, std::initializer_list<std::string> more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

TEST(Chromium, EstimateReportShowsTheBarsTheCapacityLinesAndText) {
  const fs::path page = shots_dir() / "estimate.html";
  const auto r = run_mme(with(kDeepSeek, {"--html", page.string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(run_mme(with(kDeepSeek, {"--json"})).out);
  const auto img = screenshot(page, "estimate");
  ASSERT_TRUE(img);
  expect_not_blank(*img, "estimate.html");
  const auto visible = visible_categories(j);
  EXPECT_GE(visible.size(), 4u);  // other is a sliver here
  for (const auto& cat : visible) expect_colour(*img, kCategoryHex.at(cat), 1500, "estimate.html " + cat);
  expect_colour(*img, kFitLine, 150, "estimate.html capacity lines of the GPUs that fit");
}

TEST(Chromium, StandaloneSvgShowsTheChartAndTheMissedGpu) {
  const fs::path page = shots_dir() / "chart.svg";
  const auto r = run_mme(with(kDeepSeek, {"--svg", page.string(), "--gpu", "H100"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(run_mme(with(kDeepSeek, {"--json", "--gpu", "H100"})).out);
  ASSERT_FALSE(j["fits"][0]["fits"].get<bool>());
  const auto img = screenshot(page, "chart-svg");
  ASSERT_TRUE(img);
  expect_not_blank(*img, "chart.svg");
  for (const auto& cat : visible_categories(j)) expect_colour(*img, kCategoryHex.at(cat), 1500, "chart.svg " + cat);
  expect_colour(*img, kMissLine, 150, "chart.svg line of the GPU that does not fit");
  EXPECT_LT(count_near(*img, parse_hex_colour(kFitLine), kTolerance), 20u);
}

TEST(Chromium, SmallModelOnOneGpu) {
  const fs::path page = shots_dir() / "small.html";
  const auto r = run_mme({"estimate", "Qwen/Qwen3-8B", "--tp", "2", "--pp", "2", "--num-gpus", "8",
                          "--recompute-granularity", "full", "--html", page.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto img = screenshot(page, "small");
  ASSERT_TRUE(img);
  expect_not_blank(*img, "small.html");
  expect_colour(*img, kCategoryHex.at("weights"), 1000, "small.html weights");
  expect_colour(*img, kFitLine, 100, "small.html capacity lines");
}

TEST(Chromium, PlanFitMapShowsCellsThatFitAndCellsThatDoNot) {
  const fs::path page = shots_dir() / "plan.html";
  const auto r = run_mme({"plan", "Qwen/Qwen3-8B", "--num-gpus", "8", "--gpu", "A100-40GB", "--html", page.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto img = screenshot(page, "plan");
  ASSERT_TRUE(img);
  expect_not_blank(*img, "plan.html");
  // The bands of framework/src/report/render_svg.cpp fit_bands(): four that fit, three that do not.
  std::size_t fit = 0, miss = 0;
  for (const char* hex : {"#1a9850", "#66bd63", "#a6d96a", "#d9ef8b"})
    fit += count_near(*img, parse_hex_colour(hex), kTolerance);
  for (const char* hex : {"#fdae61", "#f46d43", "#d73027"}) miss += count_near(*img, parse_hex_colour(hex), kTolerance);
  EXPECT_GT(fit, 5000u) << "cells of layouts that fit";
  EXPECT_GT(miss, 2000u) << "cells of layouts that do not fit";
  expect_colour(*img, "#e6e6e6", 2000, "plan.html cells without a valid layout");
}

// The check itself: a page with nothing on it must be caught as blank.
TEST(Chromium, ABlankPageIsCaught) {
  const fs::path page = shots_dir() / "blank.html";
  test::write_file(page, "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body></body></html>\n");
  const auto img = screenshot(page, "blank");
  ASSERT_TRUE(img);
  EXPECT_EQ(img->width, 1200);
  const Coverage c = coverage(*img);
  EXPECT_LE(c.non_background, 0.03);
  EXPECT_LE(c.colours, 30u);
}

// ---------------------------------------------------------------------------------------------
// The PNG reader the checks rely on (libpng), on a file of known pixels.

TEST(Png, DecodesEveryFilterType) {
  // 7 x 5 RGBA, rows filtered with None, Sub, Up, Average, Paeth (zlib, fixed Huffman); the
  // pixels are the formulas below, the alpha channel is dropped.
  static const std::vector<std::uint8_t> kPng = {
      0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
      0x07, 0x00, 0x00, 0x00, 0x05, 0x08, 0x06, 0x00, 0x00, 0x00, 0x89, 0x9a, 0xf6, 0xd8, 0x00, 0x00, 0x00, 0x6c, 0x49,
      0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0x60, 0x60, 0xf8, 0xff, 0x5f, 0x95, 0xf5, 0xe1, 0x7f, 0x2f, 0x91, 0xc3, 0xff,
      0xf3, 0x75, 0x97, 0xfe, 0x9f, 0x12, 0xd0, 0xfe, 0x7f, 0x67, 0x6d, 0xe6, 0xff, 0x7b, 0x5b, 0xbc, 0xff, 0x33, 0x72,
      0xbb, 0x7d, 0x03, 0x4a, 0x3e, 0x62, 0x50, 0xe5, 0x07, 0x62, 0x49, 0x20, 0x56, 0x06, 0x62, 0x5d, 0x20, 0x36, 0x7f,
      0xc4, 0xc0, 0xc4, 0xed, 0xf6, 0x9d, 0x01, 0x17, 0x66, 0x16, 0xeb, 0xc9, 0x6b, 0x90, 0x50, 0x7b, 0xcb, 0x20, 0xa1,
      0x0d, 0xc4, 0x06, 0x40, 0x6c, 0x0a, 0xc4, 0x56, 0x40, 0x6c, 0xff, 0x96, 0x81, 0x05, 0xac, 0x8a, 0x15, 0x88, 0xf9,
      0x81, 0x58, 0x12, 0xaa, 0x4b, 0x17, 0x88, 0xcd, 0xbf, 0x33, 0x00, 0x00, 0x60, 0x39, 0x33, 0x7b, 0x65, 0x82, 0xd3,
      0x0b, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};
  test::TempDir dir;
  const fs::path file = dir.path() / "t.png";
  test::write_file(file, std::string(kPng.begin(), kPng.end()));
  const Image img = test::read_png(file);
  ASSERT_EQ(img.width, 7);
  ASSERT_EQ(img.height, 5);
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 7; ++x) {
      const test::Rgb want{static_cast<std::uint8_t>((x * 37 + y * 11) % 256),
                           static_cast<std::uint8_t>((x * x * 5 + y * 70) % 256),
                           static_cast<std::uint8_t>((255 - x * 30 - y * 9 + 256) % 256)};
      EXPECT_EQ(img.at(x, y), want) << x << "," << y;
    }
  std::vector<std::uint8_t> broken = kPng;
  broken.resize(60);
  test::write_file(file, std::string(broken.begin(), broken.end()));
  EXPECT_THROW(test::read_png(file), std::runtime_error);
}

}  // namespace
}  // namespace mme
