#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <iostream>
#include <set>
#include <utility>

#include <fmt/core.h>

#include <mme/report/render_estimate.hpp>
#include <mme/report/render_html.hpp>
#include <mme/report/render_plan.hpp>
#include <mme/report/render_svg.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>
#include <mme/sdk/json_text.hpp>
#include <mme/sdk/units.hpp>
#include <mme/sdk/version.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mme::cli {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// OutputFile

namespace {

// The temporary files of the OutputFiles alive, removed by a SIGINT or SIGTERM (Ctrl-C,
// `timeout`) before the signal takes its course: an interrupted `plan --html` leaves nothing
// behind. Fixed storage, so the handler only reads memory and calls unlink, which is
// async-signal-safe.
constexpr int kMaxTemps = 4;
char g_temps[kMaxTemps][4096];
volatile std::sig_atomic_t g_temp_used[kMaxTemps];
int g_temps_live = 0;
struct sigaction g_old_int, g_old_term;
bool g_int_installed = false, g_term_installed = false;

extern "C" void remove_temps_on_signal(int sig) {
  for (int i = 0; i < kMaxTemps; ++i)
    if (g_temp_used[i]) ::unlink(g_temps[i]);
  // The disposition in force before: the default kills the process (with the signal's status)
  // once this handler returns; another handler (a fuzzer's) runs then.
  ::sigaction(sig, sig == SIGINT ? &g_old_int : &g_old_term, nullptr);
  ::raise(sig);
}

bool install(int sig, struct sigaction& old) {
  struct sigaction now {};
  if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) return false;  // ignored stays ignored
  now.sa_handler = remove_temps_on_signal;
  ::sigemptyset(&now.sa_mask);
  return ::sigaction(sig, &now, nullptr) == 0;
}

int track_temp(const std::string& path) {
  if (path.size() >= sizeof g_temps[0]) return -1;  // still removed by the destructor
  for (int i = 0; i < kMaxTemps; ++i) {
    if (g_temp_used[i]) continue;
    std::memcpy(g_temps[i], path.c_str(), path.size() + 1);
    g_temp_used[i] = 1;
    if (g_temps_live++ == 0) {
      g_int_installed = install(SIGINT, g_old_int);
      g_term_installed = install(SIGTERM, g_old_term);
    }
    return i;
  }
  return -1;
}

void untrack_temp(int slot) {
  if (slot < 0) return;
  g_temp_used[slot] = 0;
  if (--g_temps_live == 0) {
    if (g_int_installed) ::sigaction(SIGINT, &g_old_int, nullptr);
    if (g_term_installed) ::sigaction(SIGTERM, &g_old_term, nullptr);
    g_int_installed = g_term_installed = false;
  }
}

// What two outputs are compared by: the device and inode of an existing file (so './x.html',
// 'x.html' and a symlink to it are one file), otherwise the absolute, normalised path.
std::string identity_of(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return fmt::format("inode:{}:{}", st.st_dev, st.st_ino);
  std::error_code ec;
  fs::path abs = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return "path:" + (ec ? path.lexically_normal().string() : abs.string());
}

}  // namespace

OutputFile::OutputFile(fs::path target, std::string flag) : target_(std::move(target)), flag_(std::move(flag)) {
  if (target_.empty()) throw UsageError(fmt::format("{}: needs a file name", flag_));
  if (target_ == "-") {  // standard output
    mode_ = Mode::kStdout;
    identity_ = "stdout";
    return;
  }
  std::error_code ec;
  if (target_.filename().empty() || fs::is_directory(target_, ec))
    throw UsageError(fmt::format("{}: cannot write '{}': it names a folder, not a file", flag_, target_.string()));
  // Only a regular file (or a new name) is replaced atomically. A symlink is never replaced
  // (as root, `--html /dev/stdout` once turned the system's symlink into an HTML file): one to
  // a regular file has that file replaced, one to a device or FIFO is written through.
  // Character devices and FIFOs (/dev/null, a terminal, a pipe) are written directly.
  fs::path write_path = target_;
  struct stat st {};
  bool replacing = false;  // an existing regular file: its mode (and owner) carry over
  if (::lstat(target_.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      if (::stat(target_.c_str(), &st) != 0)
        throw UsageError(fmt::format("{}: cannot write '{}': a symbolic link to a missing file ({})", flag_,
                                     target_.string(), std::strerror(errno)));
      if (S_ISREG(st.st_mode)) {
        write_path = fs::canonical(target_, ec);
        if (ec) throw UsageError(fmt::format("{}: cannot write '{}': {}", flag_, target_.string(), ec.message()));
      }
    }
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
      if (::access(target_.c_str(), W_OK) != 0) fail("", errno);
      mode_ = Mode::kDirect;
      identity_ = identity_of(target_);
      return;
    }
    if (!S_ISREG(st.st_mode))
      throw UsageError(
          fmt::format("{}: cannot write '{}': not a regular file, character device or FIFO", flag_, target_.string()));
    replacing = true;
  } else if (errno != ENOENT) {
    fail("", errno);
  }
  identity_ = identity_of(write_path);
  write_path_ = write_path;
  const fs::path dir = write_path.parent_path().empty() ? fs::path(".") : write_path.parent_path();
  std::string pattern = (dir / ("." + write_path.filename().string() + ".tmp-XXXXXX")).string();
  // SIGINT and SIGTERM wait while the file is made and its removal on a signal is set up: one
  // arriving in between would otherwise end the process with the file left behind.
  sigset_t interrupts, before;
  ::sigemptyset(&interrupts);
  ::sigaddset(&interrupts, SIGINT);
  ::sigaddset(&interrupts, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &interrupts, &before);
  fd_ = ::mkostemp(pattern.data(), O_CLOEXEC);
  const int made = errno;
  if (fd_ >= 0) {
    temp_ = pattern;
    slot_ = track_temp(temp_.string());
  }
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (fd_ < 0) fail("", made);
  // mkstemp makes the file private. A replaced file keeps its mode and, where the process may
  // give it (root; a group of the user's), its owner and group: the rename puts a new inode in
  // its place, which once had 0666 & ~umask and the user's ownership. A new report gets the
  // usual permissions. The owner first: chown clears set-user-ID and set-group-ID bits.
  if (replacing) {
    const bool others = st.st_uid != ::geteuid() || st.st_gid != ::getegid();
    if (others && ::fchown(fd_, st.st_uid, st.st_gid) != 0 && ::fchown(fd_, static_cast<uid_t>(-1), st.st_gid) != 0) {
      // Neither (not root, and not a group of ours): the new file is the user's, with the mode.
    }
    if (::fchmod(fd_, st.st_mode & 07777) != 0) fail("", errno);
    return;
  }
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd_, 0666 & ~mask) != 0) fail("", errno);
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : target_(std::move(other.target_)),
      write_path_(std::move(other.write_path_)),
      temp_(std::move(other.temp_)),
      flag_(std::move(other.flag_)),
      identity_(std::move(other.identity_)),
      mode_(other.mode_),
      fd_(other.fd_),
      slot_(other.slot_) {
  other.fd_ = -1;
  other.slot_ = -1;
  other.temp_.clear();
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty()) ::unlink(temp_.c_str());
  untrack_temp(slot_);
}

void OutputFile::fail(const std::string& what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
  untrack_temp(slot_);
  slot_ = -1;
  throw UsageError(fmt::format("{}: cannot write '{}': {}{}", flag_, target_.string(), what, std::strerror(err)));
}

namespace {
// Writes all of `content` to `fd`; false with errno set on failure.
bool write_all(int fd, const std::string& content) {
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}
}  // namespace

void OutputFile::commit(const std::string& content) {
  if (committed_) throw UsageError(fmt::format("{}: '{}' was already written", flag_, target_.string()));
  committed_ = true;
  if (mode_ == Mode::kStdout) {
    std::cout << content << std::flush;
    if (!std::cout) throw UsageError(fmt::format("{}: cannot write to standard output", flag_));
    return;
  }
  if (mode_ == Mode::kDirect) {
    fd_ = ::open(target_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd_ < 0) fail("", errno);
    if (!write_all(fd_, content)) fail("", errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("", errno);
    return;
  }
  if (!write_all(fd_, content)) fail("", errno);
  if (::fsync(fd_) != 0) fail("", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("", errno);
  if (::rename(temp_.c_str(), write_path_.c_str()) != 0) fail("", errno);
  temp_.clear();
  untrack_temp(slot_);
  slot_ = -1;
}

// ---------------------------------------------------------------------------------------------
// Shared pieces

namespace {

std::string esc(std::string_view s) { return xml_escape(s); }
double gib(std::int64_t b) { return to_gib(b); }
std::string gib2(std::int64_t b) { return fmt::format("{:.2f}", gib(b)); }

constexpr const char* kCss = R"CSS(
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f4f5f7; color: #1a1a1a;
       font: 14px/1.45 system-ui, 'DejaVu Sans', 'Segoe UI', Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 18px 24px 40px; }
h1 { font-size: 21px; margin: 0 0 2px; }
h1 .what { color: #555; font-weight: normal; }
h2 { font-size: 16px; margin: 26px 0 8px; }
h3 { font-size: 14px; margin: 14px 0 6px; }
p { margin: 6px 0; }
.sub { color: #555; margin: 0 0 10px; }
.card { background: #fff; border: 1px solid #dde1e6; border-radius: 8px; padding: 12px 14px; overflow-x: auto; }
.verdict { font-size: 15px; padding: 9px 14px; border-radius: 6px; margin: 10px 0 14px; }
.verdict.fits { background: #e8f5e9; border: 1px solid #a5d6a7; }
.verdict.miss { background: #fdecea; border: 1px solid #ef9a9a; }
.verdict.none { background: #fff; border: 1px solid #dde1e6; }
.ok { color: #1b7f3b; font-weight: 600; }
.bad { color: #c62828; font-weight: 600; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 10px; border-bottom: 1px solid #eceff1; text-align: right; white-space: nowrap; }
th { background: #f0f2f5; font-weight: 600; }
th.l, td.l { text-align: left; }
tr.peak td { font-weight: 600; }
.kv th { text-align: left; background: none; color: #555; font-weight: normal; padding-right: 18px; }
.kv td { text-align: left; white-space: normal; }
.sw { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 6px; vertical-align: -1px; }
code, .mono { font-family: 'DejaVu Sans Mono', Menlo, Consolas, monospace; font-size: 12.5px; }
td code { white-space: nowrap; }
tr.plan td { border-bottom: none; padding-bottom: 0; }
td.cmd { white-space: normal; text-align: left; padding-top: 1px; }
td.cmd code, .verdict code { white-space: normal; color: #333; }
td.cmd .why { color: #555; font-size: 90%; }
code .a { white-space: nowrap; }
details { margin-top: 8px; }
summary { cursor: pointer; color: #333; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 16px; margin: 6px 0 10px; font-size: 13px; }
.facets { display: grid; gap: 8px 22px; align-items: start; margin-top: 8px; }
.facet-head { font-weight: 600; padding-left: 4px; }
.meter { display: inline-block; width: 90px; height: 10px; background: #eceff1; border-radius: 2px;
         vertical-align: -1px; overflow: hidden; }
.meter span { display: block; height: 100%; }
footer { color: #666; font-size: 12px; margin-top: 28px; }
ul { margin: 6px 0; padding-left: 22px; }
)CSS";

std::string page_head(const std::string& title) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      // Nothing is fetched and nothing runs: styles inline, images only as data.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
      "img-src data:\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<meta name=\"generator\" content=\"mme {}\">\n<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n",
      kVersion, esc(title), kCss);
}

std::string page_foot() {
  return fmt::format(
      "<footer>Made by mme {}, the Megatron-LM memory estimator. Sizes in GiB (1 GiB = 2<sup>30</sup> "
      "bytes). The estimate is what <code>torch.cuda.max_memory_allocated</code> would show; a GPU also "
      "needs the memory its CUDA context and NCCL keep, and some headroom for the allocator.</footer>\n"
      "</main>\n</body>\n</html>\n",
      kVersion);
}

std::string swatch(const char* hex) { return fmt::format("<span class=\"sw\" style=\"background:{}\"></span>", hex); }

std::string kv_row(const std::string& key, const std::string& value_html) {
  return fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", esc(key), value_html);
}

std::string json_value_text(const nlohmann::json& v) {
  if (v.is_null()) return "—";
  if (v.is_string()) return v.get<std::string>();
  return json_text(v);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// mme estimate --html

std::string render_estimate_html(const ModelSpec& model, const Estimate& est, const std::vector<FitVerdict>& fits,
                                 const HtmlOptions& options) {
  const auto& ms = est.model;
  const auto& s = est.setup;
  const auto& p = s.parallel;
  const auto& peak = est.peak();
  const auto& styles = category_styles();

  std::string o = page_head(fmt::format("mme estimate: {}", ms.name));
  o += fmt::format("<h1><span class=\"what\">Memory estimate</span> {}</h1>\n", esc(ms.name));
  o += fmt::format(
      "<p class=\"sub\">TP {} · PP {} · VPP {} · EP {} · ETP {} · CP {} · DP {} on {} GPUs · micro-batch "
      "{} · sequence {} · recompute {} · {}</p>\n",
      p.tp, p.pp, p.vpp, p.ep, effective_etp(p), p.cp, p.dp, p.world_size, s.micro_batch_size, s.seq_length,
      esc(recompute_text(s.recompute)), to_string(s.precision));

  // The verdict, as the text report words it.
  std::string verdict;
  bool good = false;
  if (options.chosen_gpu && !fits.empty()) {
    const auto& f = fits.front();
    good = f.fits;
    verdict =
        f.fits
            ? fmt::format("<span class=\"ok\">✓ Fits in {}</span>: {} GiB usable of {} GiB, {} GiB to spare",
                          esc(f.hardware->name), gib2(f.usable_bytes), gib2(f.capacity_bytes), gib2(f.headroom_bytes))
            : fmt::format("<span class=\"bad\">✗ Does not fit {}</span>: {} GiB usable of {} GiB, {} GiB short",
                          esc(f.hardware->name), gib2(f.usable_bytes), gib2(f.capacity_bytes), gib2(-f.headroom_bytes));
  } else if (!fits.empty()) {
    std::string names;
    for (const auto& f : fits)
      if (f.fits) names += (names.empty() ? "" : ", ") + esc(f.hardware->name);
    good = !names.empty();
    verdict = good ? fmt::format("<span class=\"ok\">✓ Fits in</span> {}", names)
                   : "<span class=\"bad\">✗ Exceeds every known GPU</span>: consider more parallelism, recompute or a "
                     "smaller micro-batch";
  }
  o += fmt::format(
      "<p class=\"verdict {}\">Peak <b>{} GiB</b> per GPU (pipeline stage {}), upper bound {} GiB{}{}{}</p>\n",
      fits.empty() ? "none"
      : good       ? "fits"
                   : "miss",
      gib2(peak.total_bytes), peak.pp_rank, gib2(est.upper_bytes()),
      peak.device_bytes > 0
          ? fmt::format(" · reserved {} GiB, device total {} GiB", gib2(peak.reserved_bytes), gib2(peak.device_bytes))
          : "",
      verdict.empty() ? "" : " · ", verdict);

  SvgOptions so;
  so.chosen_gpu = options.chosen_gpu;
  so.standalone = false;
  so.width = 1100;
  o += "<figure class=\"card\" style=\"margin:0\">\n" + render_estimate_svg(model, est, fits, so) + "</figure>\n";

  // Per stage, by category.
  o += "<h2 id=\"stages\">Memory per pipeline stage (GiB)</h2>\n<div class=\"card\"><table class=\"stages\">\n<tr>"
       "<th class=\"l\">stage</th><th>layers</th><th>parameters</th><th>in flight</th>";
  for (const auto& st : styles) o += fmt::format("<th>{}{}</th>", swatch(st.hex), st.label);
  o += "<th>total</th>";
  const bool device = peak.device_bytes > 0;
  if (device) o += "<th>reserved</th><th>device</th>";
  o += "</tr>\n";
  for (std::size_t i = 0; i < est.stages.size(); ++i) {
    const auto& st = est.stages[i];
    o += fmt::format("<tr{}><td class=\"l\">{}{}</td><td>{}{}</td><td>{:.2f}B</td><td>{}</td>",
                     i == est.peak_stage ? " class=\"peak\"" : "", st.pp_rank, i == est.peak_stage ? " (peak)" : "",
                     st.layers, st.mtp_layers ? fmt::format(" + {} MTP", st.mtp_layers) : "",
                     static_cast<double>(st.parameters) / 1e9, st.inflight_microbatches);
    for (const auto b : category_bytes(st)) o += fmt::format("<td title=\"{} bytes\">{}</td>", b, gib2(b));
    o += fmt::format("<td title=\"{} bytes\">{}</td>", st.total_bytes, gib2(st.total_bytes));
    if (device)
      o += fmt::format(
          "<td title=\"{} bytes: the caching allocator's segments\">{}</td><td title=\"{} bytes: reserved + CUDA "
          "context, NCCL, TE userbuffers\">{}</td>",
          st.reserved_bytes, gib2(st.reserved_bytes), st.device_bytes, gib2(st.device_bytes));
    o += "</tr>\n";
  }
  o += "</table></div>\n";

  // The fit verdict of every judged GPU.
  if (!fits.empty()) {
    // The column holds what the verdict was judged on: the upper bound (default) or the estimate.
    o += fmt::format(
        "<h2 id=\"fit\">Fit</h2>\n<div class=\"card\"><table class=\"fit\">\n<tr><th class=\"l\">GPU</th>"
        "<th>capacity</th><th>reserved</th><th>headroom</th><th>usable</th><th>{}</th>"
        "<th class=\"l\">verdict</th></tr>\n",
        fits.front().on_bound ? "bound" : "peak");
    for (const auto& f : fits) {
      const std::int64_t kept = f.on_device ? 0 : f.capacity_bytes - f.reserved_bytes - f.usable_bytes;
      o += fmt::format(
          "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
          "<td class=\"l\">{}</td></tr>\n",
          esc(f.hardware->name), gib2(f.capacity_bytes), gib2(f.reserved_bytes), gib2(kept), gib2(f.usable_bytes),
          gib2(f.needed_bytes),
          f.fits ? fmt::format("<span class=\"ok\">✓ fits</span>, {} GiB to spare", gib2(f.headroom_bytes))
                 : fmt::format("<span class=\"bad\">✗ {} GiB short</span>", gib2(-f.headroom_bytes)));
    }
    o += fits.front().on_device
             ? std::string(
                   "</table><p class=\"sub\">needed = the device total: PyTorch's reserved segments (the caching "
                   "allocator replayed) + the CUDA context, NCCL communicators and TE userbuffers; usable = the "
                   "capacity</p></div>\n")
             : fmt::format(
                   "</table><p class=\"sub\">usable = capacity − reserved (CUDA context, NCCL) − headroom ({:g}% "
                   "of capacity, for allocator fragmentation)</p></div>\n",
                   options.headroom_fraction * 100);
  }

  // Configuration summary.
  o += "<h2 id=\"configuration\">Configuration</h2>\n<div class=\"card\"><table class=\"kv\">\n";
  o += kv_row("Model", esc(ms.name));
  o += kv_row("Source", fmt::format("<code>{}</code>", esc(model.source)));
  o += kv_row("Family / type / adapter",
              esc(fmt::format("{} / {} / {}", ms.family, ms.model_type.empty() ? "—" : ms.model_type, ms.adapter)));
  o += kv_row("Architecture", esc(fmt::format("{} layers, hidden size {}, padded vocabulary {}", ms.num_layers,
                                              ms.hidden_size, ms.padded_vocab_size)));
  if (const std::string hybrid = hybrid_layers_text(model); !hybrid.empty()) o += kv_row("Hybrid layers", esc(hybrid));
  o += kv_row("Parameters",
              esc(fmt::format("{} total, {} active{}", format_count(ms.total_params), format_count(ms.active_params),
                              ms.mtp_params > 0 ? fmt::format(" (+{} MTP)", format_count(ms.mtp_params)) : "")));
  for (const auto& l : model.layers) {
    if (l.mlp.num_experts > 0) {
      std::string moe = fmt::format("{} experts, top-{}", l.mlp.num_experts, l.mlp.top_k);
      if (l.mlp.shared_expert_ffn_hidden_size > 0)
        moe += fmt::format(", shared experts of width {}", l.mlp.shared_expert_ffn_hidden_size);
      o += kv_row("MoE", esc(moe));
      break;
    }
  }
  o += kv_row("Parallelism", esc(fmt::format("TP={}, PP={}, VPP={}, EP={}, ETP={}, CP={}, DP={}, expert DP={}, SP={}",
                                             p.tp, p.pp, p.vpp, p.ep, effective_etp(p), p.cp, p.dp, p.expert_dp,
                                             sequence_parallel_on(p) ? "on" : "off")));
  o += kv_row("GPUs", fmt::format("{}", p.world_size));
  o += kv_row("Batch", esc(fmt::format("micro-batch {}, sequence {}{}", s.micro_batch_size, s.seq_length,
                                       s.global_batch_size > 0 ? fmt::format(", global batch {} ({} micro-batches)",
                                                                             s.global_batch_size, s.num_micro_batches)
                                                               : ", global batch not given (pipeline assumed full)")));
  o += kv_row("Recompute", esc(recompute_text(s.recompute)));
  o += kv_row("Precision", esc(fmt::format("{}, attention {}", to_string(s.precision), to_string(est.attention))));
  o +=
      kv_row("Optimizer",
             esc(fmt::format("{}, {}", s.optimizer.name, s.optimizer.distributed ? "distributed" : "not distributed")));
  o += "</table>\n<details><summary>Every setting</summary><table class=\"kv\">\n";
  const nlohmann::json settings = setup_to_json(s);
  for (const auto& [key, value] : settings.items()) o += kv_row(key, esc(json_value_text(value)));
  o += "</table></details></div>\n";

  // Every named component, one column per stage.
  std::vector<std::string> names;
  std::map<std::string, std::pair<MemoryCategory, std::int64_t>> order;  // name -> (category, largest bytes)
  for (const auto& st : est.stages)
    for (const auto& c : st.components) {
      auto [it, inserted] = order.try_emplace(c.name, c.category, c.bytes);
      if (!inserted) it->second.second = std::max(it->second.second, c.bytes);
    }
  for (const auto& [name, _] : order) names.push_back(name);
  std::stable_sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    const auto& x = order.at(a);
    const auto& y = order.at(b);
    return x.first != y.first ? x.first < y.first : x.second > y.second;
  });
  if (!names.empty()) {
    o += "<h2 id=\"components\">Components (GiB)</h2>\n<div class=\"card\"><table class=\"components\">\n<tr>"
         "<th class=\"l\">component</th>";
    for (const auto& st : est.stages) o += fmt::format("<th>stage {}</th>", st.pp_rank);
    o += "</tr>\n";
    for (const auto& name : names) {
      const auto cat = order.at(name).first;
      const char* hex = styles.back().hex;
      for (const auto& st : styles)
        if (st.category == cat) hex = st.hex;
      o += fmt::format("<tr><td class=\"l\">{}<code>{}</code></td>", swatch(hex), esc(name));
      for (const auto& st : est.stages) {
        std::int64_t bytes = 0;
        bool found = false;
        for (const auto& c : st.components)
          if (c.name == name) bytes += c.bytes, found = true;
        if (!found)
          o += "<td>—</td>";
        else
          o += fmt::format("<td title=\"{} bytes\">{}</td>", bytes,
                           bytes > 0 && gib(bytes) < 0.0005 ? "&lt;0.001" : fmt::format("{:.3f}", gib(bytes)));
      }
      o += "</tr>\n";
    }
    o += "</table></div>\n";
  }

  if (!est.assumptions.empty() || !model.warnings.empty()) {
    o += "<h2 id=\"assumptions\">Assumptions</h2>\n<div class=\"card\"><ul>\n";
    for (const auto& a : est.assumptions) o += fmt::format("<li>{}</li>\n", esc(a));
    for (const auto& w : model.warnings) o += fmt::format("<li>warning: {}</li>\n", esc(w));
    o += "</ul></div>\n";
  }
  o += page_foot();
  return o;
}

// ---------------------------------------------------------------------------------------------
// mme plan --html

void FitMap::add(const Plan& plan) {
  const auto& l = plan.layout;
  ++layouts_;
  Cell& c = facets_[{l.ep, l.recompute}][{l.pp, l.tp}];
  if (c.valid == 0 || plan.peak_bytes < c.min_peak) {
    c.min_peak = plan.peak_bytes;
    c.smallest = l;
  }
  ++c.valid;
  if (plan.fits) ++c.fitting;
}

namespace {

// `mme estimate MODEL ARGS` as HTML: a flag and its value never split across lines (the
// browser would break at the hyphens), the text copies as the plain command, each word
// shell-quoted (a GPU name from a hardware file is inert when pasted).
std::string command_html(const std::string& model, const std::vector<std::string>& args) {
  std::string out = "<code><span class=\"a\">mme estimate " + esc(shell_quote(model)) + "</span>";
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string group = shell_quote(args[i]);
    if (args[i].rfind("--", 0) == 0 && i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0)
      group += " " + shell_quote(args[++i]);
    out += " <span class=\"a\">" + esc(group) + "</span>";
  }
  return out + "</code>";
}

std::string cell_gib(std::int64_t bytes) {
  const double g = gib(bytes);
  if (g < 10) return fmt::format("{:.2f}", g);
  if (g < 100) return fmt::format("{:.1f}", g);
  return fmt::format("{:.0f}", g);
}

std::string meter(std::int64_t peak, std::int64_t usable) {
  const double ratio = usable > 0 ? static_cast<double>(peak) / static_cast<double>(usable) : 10.0;
  return fmt::format(
      "<span class=\"meter\" title=\"{:.0f}% of usable\"><span style=\"width:{:.1f}%;background:{}\">"
      "</span></span>",
      100 * ratio, std::min(100.0, 100 * ratio), fit_colour(ratio));
}

}  // namespace

std::string render_plan_html(const ModelSpec& model, const Planner& planner, const PlanOptions& options,
                             const PlanResult& result, const std::vector<PlanSuggestion>& suggestions,
                             const FitMap& map) {
  const std::string gpu = options.gpu ? options.gpu->name : "?";
  const std::int64_t usable = result.usable_bytes;
  std::string o = page_head(fmt::format("mme plan: {} on {} x {}", model.name, options.num_gpus, gpu));
  o += fmt::format("<h1><span class=\"what\">Layout plan</span> {}</h1>\n", esc(model.name));
  o += fmt::format(
      "<p class=\"sub\">{} GPUs × {} · {} GiB usable per GPU ({:g}% headroom) · {} layouts evaluated ({} "
      "estimated), {} valid, {} fit · {:.2f} s on {} thread{}</p>\n",
      options.num_gpus, esc(gpu), gib2(usable), options.headroom_fraction * 100, thousands(result.evaluated),
      thousands(result.estimated), thousands(result.valid), thousands(result.fitting), result.elapsed_s, result.threads,
      result.threads == 1 ? "" : "s");
  if (!result.plans.empty()) {
    const Plan& best = result.plans.front();
    o += fmt::format(
        "<p class=\"verdict fits\"><span class=\"ok\">✓ {} layout{} fit.</span> Best by {}: "
        "{} (peak {} GiB)</p>\n",
        thousands(result.fitting), result.fitting == 1 ? "" : "s", to_string(options.sort),
        command_html(model.name, planner.args_for(best.layout, options)), gib2(best.peak_bytes));
  } else {
    o += "<p class=\"verdict miss\"><span class=\"bad\">✗ No layout fits.</span>";
    if (result.smallest)
      o += fmt::format(" The smallest peak is {} GiB ({} GiB short): {}", gib2(result.smallest->peak_bytes),
                       gib2(-result.smallest->headroom_bytes),
                       command_html(model.name, planner.args_for(result.smallest->layout, options)));
    o += "</p>\n";
  }

  // The fit map.
  std::set<std::int64_t> tps, pps, eps;
  std::vector<RecomputeVariant> variants;
  for (const auto& [key, cells] : map.facets()) {
    eps.insert(key.first);
    if (std::find(variants.begin(), variants.end(), key.second) == variants.end()) variants.push_back(key.second);
    for (const auto& [ck, _] : cells) {
      pps.insert(ck.first);
      tps.insert(ck.second);
    }
  }
  std::sort(variants.begin(), variants.end());
  o += "<h2 id=\"fit-map\">Fit map</h2>\n<div class=\"card\">\n";
  o += fmt::format(
      "<p>Each cell is one TP × PP pair of a facet (expert parallel size, recompute). Its colour is the "
      "smallest peak over the other choices (VPP, ETP, CP, micro-batch size, pipeline split) against the "
      "{} GiB a {} can use; the number is that peak in GiB. Framed cells hold a top plan; ★ marks the best, "
      "and that cell shows the best plan's own peak (its colour too), not the smallest. "
      "{} valid layouts.</p>\n",
      gib2(usable), esc(gpu), thousands(map.layouts()));
  o += "<div class=\"legend\">";
  for (const auto& b : fit_bands()) o += fmt::format("<span>{}{} of usable</span>", swatch(b.hex), esc(b.label));
  o += fmt::format("<span>{}no valid layout</span></div>\n", swatch(kNoLayoutColour));

  // Where the top plans are.
  std::map<std::tuple<std::int64_t, RecomputeVariant, std::int64_t, std::int64_t>, std::size_t> top;
  for (std::size_t i = 0; i < result.plans.size(); ++i) {
    const auto& l = result.plans[i].layout;
    top.try_emplace({l.ep, l.recompute, l.pp, l.tp}, i + 1);
  }
  // One row per EP, one column per recompute variant.
  o +=
      fmt::format("<div class=\"facets\" style=\"grid-template-columns: repeat({}, max-content)\">\n", variants.size());
  for (const RecomputeVariant v : variants)
    o += fmt::format("<div class=\"facet-head\">recompute {}</div>", to_string(v));
  o += "\n";
  for (const std::int64_t ep : eps) {
    for (const RecomputeVariant v : variants) {
      const auto it = map.facets().find({ep, v});
      if (it == map.facets().end()) {
        o += "<div></div>\n";
        continue;
      }
      FitMapFacetView f;
      f.title = fmt::format("EP {} · recompute {}", ep, to_string(v));
      f.column_name = "TP";
      f.row_name = "PP";
      f.columns.assign(tps.begin(), tps.end());
      f.rows.assign(pps.begin(), pps.end());
      for (const std::int64_t pp : f.rows) {
        auto& row = f.cells.emplace_back();
        for (const std::int64_t tp : f.columns) {
          auto& cv = row.emplace_back();
          cv.key = fmt::format("ep={} recompute={} tp={} pp={}", ep, to_string(v), tp, pp);
          const auto c = it->second.find({pp, tp});
          if (c == it->second.end()) {
            cv.tooltip = fmt::format("TP {} × PP {} · EP {} · recompute {}: no valid layout", tp, pp, ep, to_string(v));
            continue;
          }
          const auto& cell = c->second;
          cv.present = true;
          cv.ratio = usable > 0 ? static_cast<double>(cell.min_peak) / static_cast<double>(usable) : 10.0;
          cv.text = cell_gib(cell.min_peak);
          cv.key += fmt::format(" peak={} valid={} fitting={}", cell.min_peak, cell.valid, cell.fitting);
          const auto t = top.find({ep, v, pp, tp});
          std::string best_line;
          if (t != top.end()) {
            cv.highlight = true;
            if (t->second == 1) {
              // The best plan's cell: its own peak, so the map and the verdict above agree.
              const Plan& best = result.plans.front();
              cv.mark = "★";
              cv.text = cell_gib(best.peak_bytes);
              cv.ratio = usable > 0 ? static_cast<double>(best.peak_bytes) / static_cast<double>(usable) : 10.0;
              cv.key += fmt::format(" best_peak={}", best.peak_bytes);
              best_line = fmt::format("\n★ the best plan: peak {} GiB\nmme estimate {} {}", gib2(best.peak_bytes),
                                      shell_quote(model.name), shell_command(planner.args_for(best.layout, options)));
            }
          }
          cv.tooltip = fmt::format(
              "TP {} × PP {} · EP {} · recompute {}\nsmallest peak {} GiB ({:.0f}% of {} GiB "
              "usable)\n{} of {} layouts fit{}\nmme estimate {} {}{}",
              tp, pp, ep, to_string(v), gib2(cell.min_peak),
              usable > 0 ? 100.0 * static_cast<double>(cell.min_peak) / static_cast<double>(usable) : 1000.0,
              gib2(usable), cell.fitting, cell.valid, t != top.end() ? fmt::format("; holds plan #{}", t->second) : "",
              shell_quote(model.name), shell_command(planner.args_for(cell.smallest, options)), best_line);
        }
      }
      o += render_fit_map_facet_svg(f);
    }
  }
  o += "</div>\n</div>\n";

  // The top plans.
  if (!result.plans.empty()) {
    o += fmt::format(
        "<h2 id=\"plans\">Top {} by {}</h2>\n<div class=\"card\"><table class=\"plans\">\n<tr>"
        "<th>#</th><th>TP</th><th>PP</th><th>VPP</th><th>EP</th><th>ETP</th><th>CP</th><th>DP</th>"
        "<th>MBS</th><th class=\"l\">recompute</th><th class=\"l\">split</th><th>peak GiB</th>"
        "<th class=\"l\">of usable</th><th>free GiB</th><th>bubble</th><th>step s</th><th>tokens/s/GPU</th>"
        "<th>TFLOP/s/GPU</th></tr>\n",
        result.plans.size(), to_string(options.sort));
    std::size_t rank = 0;
    for (const auto& pl : result.plans) {
      const auto& l = pl.layout;
      o += fmt::format(
          "<tr class=\"plan\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
          "<td>{}</td><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td>"
          "<td class=\"l\">{}</td><td>{}</td><td>{:.1f}%</td><td>{:.3g}</td><td>{:.0f}</td><td>{:.0f}</td></tr>\n"
          "<tr class=\"cmd\"><td></td><td class=\"cmd\" colspan=\"17\">{}<br><span class=\"why\">{}</span></td></tr>\n",
          ++rank, l.tp, l.pp, l.vpp, l.ep, l.etp, l.cp, l.dp, l.micro_batch_size, to_string(l.recompute),
          plan_split_text(l), gib2(pl.peak_bytes), meter(pl.peak_bytes, usable), gib2(pl.headroom_bytes),
          100 * pl.score.bubble, pl.score.step_seconds, pl.score.tokens_per_second_per_gpu,
          pl.score.model_tflops_per_gpu, command_html(model.name, planner.args_for(l, options)), esc(why_line(pl)));
    }
    o += "</table></div>\n";
  }
  if (!suggestions.empty()) {
    o += "<h2 id=\"suggestions\">Smallest changes that would make one fit</h2>\n<div class=\"card\"><table>\n<tr>"
         "<th class=\"l\">change</th><th>peak GiB</th><th class=\"l\">layout</th></tr>\n";
    for (const auto& sg : suggestions)
      o += fmt::format("<tr><td class=\"l\"><code>{}</code></td><td>{}</td><td class=\"cmd\">{}</td></tr>\n",
                       esc(sg.change), gib2(sg.plan.peak_bytes), command_html(model.name, sg.args));
    o += "</table></div>\n";
  }
  o += page_foot();
  return o;
}

}  // namespace mme::cli
