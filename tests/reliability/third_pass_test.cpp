// Issue 32, the third reliability pass: each finding of the adversarial test, reproduced
// (docs/reliability.md, "Third pass"). The helpers in process, the rest through the real `mme`.
// The locale findings are in locale_test.cpp, the model-source ones (HF_ENDPOINT, --revision,
// bounded messages) in tests/sources, the hardware-file throughput bounds in the json_profiles
// plugin's tests, the C API / Python messages in tests/python.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <mme/sdk/error.hpp>
#include <mme/sdk/hardware_profile.hpp>
#include <mme/sdk/input_text.hpp>
#include <mme/sdk/number_text.hpp>
#include <mme/validate/validation.hpp>

#include "test_support.hpp"
#include <sys/stat.h>
#include <unistd.h>

namespace mme {
namespace {

namespace fs = std::filesystem;
using test::run_mme;

const std::string kTiny =
    "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 1024 --max-position-embeddings 4096 "
    "--micro-batch-size 1 --vocab-size 1000 --tokenizer-type NullTokenizer";

// ---------------------------------------------------------------------------------------------
// The helpers.

TEST(NumberText, WholeDecimalNumbersOnly) {
  EXPECT_EQ(parse_decimal("0.25"), 0.25);
  EXPECT_EQ(parse_decimal("+.5"), 0.5);
  EXPECT_EQ(parse_decimal("-1e-3"), -1e-3);
  EXPECT_EQ(parse_decimal("5."), 5.0);
  // strtod read these as 56, 56.335, 16 and 1 (or took the space).
  for (const char* bad : {"56,335", "56.335abc", "0x10", " 1", "1 ", "", "+", "-", "+-1", "e5", "1e"})
    EXPECT_FALSE(parse_decimal(bad).has_value()) << "'" << bad << "'";
  // Beyond double's range as strtod has it: infinity, or 0 below the smallest denormal.
  EXPECT_EQ(parse_decimal("1e400"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(parse_decimal("-1e400"), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(parse_decimal("1e-400"), 0.0);
  EXPECT_EQ(parse_decimal("0.0001e-320"), 0.0);
  EXPECT_EQ(parse_decimal("1000000000000000000000e300"), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(*parse_decimal("nan")));

  bool too_large = false;
  EXPECT_EQ(parse_integer("+42"), 42);
  EXPECT_EQ(parse_integer("-7"), -7);
  for (const char* bad : {"4.0", "4x", "+-4", "--4", " 4", ""}) EXPECT_FALSE(parse_integer(bad).has_value()) << bad;
  EXPECT_FALSE(parse_integer("1180591620717411303424", &too_large).has_value());
  EXPECT_TRUE(too_large);
  EXPECT_FALSE(parse_integer("12x", &too_large).has_value());
  EXPECT_FALSE(too_large);
}

TEST(ErrorMessages, NoNulEndsThemAndLongOnesKeepBothEnds) {
  const Error nul(ExitCode::kUsage, std::string("model 'a") + '\0' + "b' not found");
  EXPECT_STREQ(nul.what(), "model 'a\\0b' not found");
  // 100 000 bytes of input between the start and the end of a message.
  const ConfigError long_one("start " + std::string(100000, 'x') + " the real problem");
  const std::string what = long_one.what();
  EXPECT_LE(what.size(), kMaxErrorMessageBytes);
  EXPECT_EQ(what.rfind("start xxx", 0), 0u);
  EXPECT_EQ(what.substr(what.size() - 17), " the real problem");
  EXPECT_NE(what.find("bytes left out ...]"), std::string::npos);
  // A cut never splits a UTF-8 sequence: 'é' is two bytes, and an odd cut point would split one.
  std::string accents;
  for (int i = 0; i < 5000; ++i) accents += "\xc3\xa9";
  const std::string cut = ConfigError("x" + accents).what();
  EXPECT_LE(cut.size(), kMaxErrorMessageBytes);
  EXPECT_NO_THROW((void)nlohmann::json(cut).dump()) << "the cut left a broken UTF-8 sequence";
}

TEST(Printable, BidiControlsAreNeutralised) {
  // U+202A..U+202E and U+2066..U+2069 reorder the rest of a terminal line ("Trojan Source").
  for (const char* bidi : {"\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"})
    EXPECT_EQ(printable(std::string("evil") + bidi + "gpj.exe"), "evil?gpj.exe") << bidi;
  // Their neighbours are text: U+201C, U+201D, U+206A.
  EXPECT_EQ(printable("\u201cquoted\u201d \u206a"), "\u201cquoted\u201d \u206a");
}

// What a POSIX shell makes of `line` when it is pasted: its words, run in `dir` (so a command
// substitution that escaped quoting would leave a file there).
std::vector<std::string> pasted_words(const std::string& line, const fs::path& dir) {
  const std::string script = "cd '" + dir.string() + "' && set -- " + line + " && printf '%s\\n' \"$@\"";
  FILE* p = ::popen(("/bin/sh -c " + shell_quote(script)).c_str(), "r");
  if (!p) return {};
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ::pclose(p);
  std::vector<std::string> words;
  for (std::size_t start = 0, nl; (nl = out.find('\n', start)) != std::string::npos; start = nl + 1)
    words.push_back(out.substr(start, nl - start));
  return words;
}

TEST(ShellQuote, EveryWordPastesAsItself) {
  test::TempDir dir;
  const std::vector<std::string> words = {"mme", "estimate", "Acme $(touch x)", "it's", "`touch y`", "a;b", "", "=cmd",
                                          "~",   "--gpu",    "H100-SXM-80GB",   "*",    "a\"b\\c"};
  EXPECT_EQ(shell_quote("--recompute-modules=core_attn,mlp"), "--recompute-modules=core_attn,mlp");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(pasted_words(shell_command(words), dir.path()), words);
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(Throughput, ABoundBelowAsAbove) {
  const auto& bf16 = kThroughputFigures[1];
  const auto& fp8 = kThroughputFigures[2];
  ASSERT_STREQ(bf16.key, "bf16_tflops");
  ASSERT_STREQ(fp8.key, "fp8_tflops");
  EXPECT_EQ(throughput_problem(bf16, 989, true), "");
  EXPECT_EQ(throughput_problem(bf16, 0, false), "");  // not given: unknown
  EXPECT_EQ(throughput_problem(bf16, 0, true),
            "'bf16_tflops' 0 is less than 1 TFLOP/s, below any device; leave it out when it is unknown");
  EXPECT_NE(throughput_problem(bf16, 1e-300, false), "");
  EXPECT_NE(throughput_problem(bf16, 2e6, true), "");
  EXPECT_EQ(throughput_problem(fp8, 0, true), "");  // an explicit 0: not supported
  EXPECT_NE(throughput_problem(fp8, 0.5, true), "");
}

// ---------------------------------------------------------------------------------------------
// validate: invalid measurements are refused, with the line and the reason, and counted.

const std::string kCasesHeader =
    "model,test_case,golden,max_alloc_GiB_max,alloc_GiB_median,nodes_gpus,num-layers,hidden-size,"
    "num-attention-heads,seq-length,max-position-embeddings,micro-batch-size,vocab-size,tokenizer-type\n";
std::string case_row(const std::string& name, const std::string& peak, const std::string& median = "1.5",
                     const std::string& nodes_gpus = "dgx_h100:1x8") {
  return "gpt," + name + ",dgx_h100," + peak + "," + median + "," + nodes_gpus +
         ",4,256,8,1024,4096,1,1000,NullTokenizer\n";
}

TEST(ValidateRefusals, InvalidMeasurementsAreRefusedWithTheirLine) {
  test::TempDir dir;
  const fs::path csv = dir.path() / "cases.csv";
  // Lines 2..11; the expected reason of each refused row.
  const std::vector<std::pair<std::string, std::string>> rows = {
      {case_row("good", "5.315"), ""},
      {case_row("comma", "\"56,335\""),
       "line 3: max_alloc_GiB_max '56,335' is not a number (a ',' is no decimal point"},
      {case_row("suffix", "56.335abc"), "line 4: max_alloc_GiB_max '56.335abc' is not a number"},
      {case_row("denormal", "1e-310"), "line 5: max_alloc_GiB_max '1e-310' is less than 1 MiB"},
      {case_row("zero", "0"), "line 6: max_alloc_GiB_max '0' is not a positive number of GiB"},
      {case_row("negative", "-1"), "line 7: max_alloc_GiB_max '-1' is not a positive number of GiB"},
      {case_row("inf", "inf"), "line 8: max_alloc_GiB_max 'inf' is not a finite number of GiB"},
      {case_row("nan", "nan"), "line 9: max_alloc_GiB_max 'nan' is not a finite number of GiB"},
      {case_row("static", "2.5", "1e-300"), "line 10: alloc_GiB_median '1e-300' is less than 1 MiB"},
      {case_row("nodes", "2.5", "1.5", "dgx_h100:1x8abc"), "line 11: nodes_gpus 'dgx_h100:1x8abc' is not"}};
  std::string text = kCasesHeader;
  for (const auto& [row, why] : rows) text += row;
  test::write_file(csv, text);
  const auto r = run_mme({"validate", csv.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["cases"].size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& c = j["cases"][i];
    if (rows[i].second.empty()) {
      EXPECT_EQ(c["status"], "ok") << c.dump();
      EXPECT_EQ(c["measured_peak_gib"], 5.315);
      continue;
    }
    EXPECT_EQ(c["status"], "refused") << c.dump();
    EXPECT_EQ(c["reason"].get<std::string>().rfind(rows[i].second, 0), 0u) << c["reason"];
  }
  const auto& s = j["summary"];
  EXPECT_EQ(s["total"], rows.size());
  EXPECT_EQ(s["refused"], rows.size() - 1);
  EXPECT_EQ(s["errors"], 0);
  EXPECT_EQ(s["evaluated"], 1);
  // Every statistic is a number: a denormal peak once made max and p90 null.
  for (const char* k : {"peak", "static", "peak_ge_5gib", "megatron_theoretical_peak", "seed_tool_peak"})
    for (const char* f : {"median_abs_pct", "p90_abs_pct", "max_abs_pct"})
      EXPECT_TRUE(s[k][f].is_number()) << k << "." << f << ": " << s[k][f];
  // The text report lists them and counts them.
  const auto t = run_mme({"validate", csv.string()});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("refused: line 3: max_alloc_GiB_max '56,335'"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("10 rows: 1 evaluated, 0 skipped, 9 refused, 0 failed to estimate"), std::string::npos) << t.out;
}

TEST(ValidateRefusals, RealRunsRowsAreRefusedToo) {
  test::TempDir dir;
  const fs::path csv = dir.path() / "runs.csv";
  const std::string args = "--megatron-args '" + kTiny + "' --num-gpus 8";
  test::write_file(csv,
                   "id,source,model,metric,measured_gib,rank_note,mme_args,notes\n"
                   "good,s,m,max_allocated,7.5,,\"" +
                       args +
                       "\",\n"
                       "comma,s,m,max_allocated,\"7,5\",,\"" +
                       args +
                       "\",\n"
                       "denormal,s,m,max_allocated,4e-320,,\"" +
                       args + "\",\n");
  const auto r = run_mme({"validate", csv.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::map<std::string, nlohmann::json> by_id;
  for (const auto& c : j["cases"]) by_id[c["id"]] = c;
  EXPECT_EQ(by_id["good"]["status"], "ok") << by_id["good"].dump();
  EXPECT_EQ(by_id["comma"]["status"], "refused");
  EXPECT_EQ(by_id["comma"]["reason"].get<std::string>().rfind("line 3: measured_gib '7,5' is not a number", 0), 0u)
      << by_id["comma"]["reason"];
  EXPECT_EQ(by_id["denormal"]["reason"].get<std::string>().rfind("line 4: measured_gib '4e-320' is less than 1 MiB", 0),
            0u)
      << by_id["denormal"]["reason"];
  EXPECT_EQ(j["summary"]["refused"], 2);
  EXPECT_EQ(j["summary"]["peak"]["count"], 1);
}

// ---------------------------------------------------------------------------------------------
// NaN where a float is read; the --dump-config / --config round trip.

TEST(NanFloats, ARateThatIsNotANumberIsRefused) {
  // Megatron-LM's dropout flags once passed `d < 0 || d >= 1` as NaN, were estimated as no
  // dropout and dumped as `nan`, which --config then refused.
  for (const char* flag : {"--hidden-dropout", "--attention-dropout"}) {
    const auto r = run_mme({"estimate", "--megatron-args", kTiny + " " + flag + " nan", "--dump-config"});
    EXPECT_TRUE(r.exit_code == 2 || r.exit_code == 3) << flag << ": " << r.exit_code << " " << r.out;
    EXPECT_NE(r.err.find(std::string(flag) + ": expected a "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("got 'nan'"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  for (const char* flag : {"--lora-alpha", "--moe-expert-capacity-factor", "--lora-dropout"}) {
    const auto r = run_mme({"estimate", "--megatron-args", kTiny, flag, "nan"});
    EXPECT_EQ(r.exit_code, 2) << flag << ": " << r.out;
    EXPECT_NE(r.err.find("expected a number, got 'nan'"), std::string::npos) << r.err;
  }
}

TEST(NanFloats, FloatKnobsSurviveTheDumpedConfig) {
  test::TempDir dir;
  const std::vector<std::string> base = {"estimate", "--megatron-args",
                                         kTiny + " --hidden-dropout 0.1 --attention-dropout 0.05", "--num-gpus", "8"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return run_mme(a);
  };
  const auto expected = with({"--json"});
  ASSERT_EQ(expected.exit_code, 0) << expected.err;
  const auto dumped = with({"--dump-config"});
  ASSERT_EQ(dumped.exit_code, 0) << dumped.err;
  EXPECT_NE(dumped.out.find("hidden_dropout: 0.1"), std::string::npos) << dumped.out;
  EXPECT_EQ(dumped.out.find("nan"), std::string::npos) << dumped.out;
  test::write_file(dir.path() / "dumped.yaml", dumped.out);
  const auto again = run_mme({"estimate", "--config", (dir.path() / "dumped.yaml").string(), "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const auto a = nlohmann::json::parse(expected.out), b = nlohmann::json::parse(again.out);
  EXPECT_EQ(b["peak"], a["peak"]);
  EXPECT_EQ(b["stages"], a["stages"]);
}

// ---------------------------------------------------------------------------------------------
// Printed command lines: a GPU name from a hardware file is one inert word when pasted.

TEST(PrintedCommands, AGpuNameFromAHardwareFileIsInertWhenPasted) {
  test::TempDir dir, paste;
  const std::string gpu = "Acme $(touch x)";
  test::write_file(dir.path() / "acme.json", R"J({"name": "Acme $(touch x)", "memory_gib": 80,
      "hbm_bandwidth_gbps": 3350, "bf16_tflops": 989, "link_bandwidth_gbps": 450})J");
  const std::vector<std::string> plan = {"plan",
                                         "Qwen/Qwen3-0.6B",
                                         "--num-gpus",
                                         "8",
                                         "--gpu",
                                         gpu,
                                         "--hardware-file",
                                         (dir.path() / "acme.json").string(),
                                         "--top",
                                         "1"};
  // The text report: the best layout's command.
  const auto text = run_mme(plan);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const auto at = text.out.find("  mme estimate ");
  ASSERT_NE(at, std::string::npos) << text.out;
  const std::string line = text.out.substr(at + 2, text.out.find('\n', at) - at - 2);
  const auto words = pasted_words(line, paste.path());
  ASSERT_GE(words.size(), 4u) << line;
  EXPECT_EQ(words[2], "Qwen/Qwen3-0.6B");
  EXPECT_NE(std::find(words.begin(), words.end(), gpu), words.end()) << line;
  EXPECT_TRUE(fs::is_empty(paste.path())) << "pasting ran a command: " << line;
  // --csv: the args column (the last), as a shell would read it.
  std::vector<std::string> with_csv = plan;
  with_csv.emplace_back("--csv");
  const auto csv = run_mme(with_csv);
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  const std::string row =
      csv.out.substr(csv.out.find('\n') + 1, csv.out.find('\n', csv.out.find('\n') + 1) - csv.out.find('\n') - 1);
  const std::size_t columns = std::count(csv.out.begin(), csv.out.begin() + csv.out.find('\n'), ',');
  std::size_t pos = 0;
  for (std::size_t i = 0; i < columns; ++i) pos = row.find(',', pos) + 1;
  std::string args = row.substr(pos);
  if (!args.empty() && args.front() == '"') {  // a quoted CSV field: "" is one "
    std::string plain;
    for (std::size_t i = 1; i + 1 < args.size(); ++i) plain += args[i] == '"' ? args[++i] : args[i];
    args = plain;
  }
  const auto csv_words = pasted_words(args, paste.path());
  EXPECT_NE(std::find(csv_words.begin(), csv_words.end(), gpu), csv_words.end()) << args;
  EXPECT_TRUE(fs::is_empty(paste.path())) << "pasting ran a command: " << args;
  // --html: the page's commands copy as the same quoted text.
  std::vector<std::string> with_html = plan;
  with_html.insert(with_html.end(), {"--html", (dir.path() / "plan.html").string()});
  ASSERT_EQ(run_mme(with_html).exit_code, 0);
  const std::string html = test::read_file(dir.path() / "plan.html");
  EXPECT_NE(html.find("--gpu &#39;Acme $(touch x)&#39;"), std::string::npos);
  EXPECT_EQ(html.find("--gpu Acme $(touch x)"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Bidi controls in names from configs, spec files and hardware files never reach the terminal.

bool has_bidi(const std::string& s) {
  for (const char* b : {"\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"})
    if (s.find(b) != std::string::npos) return true;
  return false;
}

TEST(Bidi, NamesFromConfigsSpecFilesAndHardwareFiles) {
  test::TempDir dir;
  // A config whose model_type holds an override (the Llama adapter does not need it).
  test::write_file(dir.path() / "cfg" / "config.json",
                   R"({"model_type": "llama\u202egpj", "hidden_size": 256, "intermediate_size": 1024,
                       "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 1000,
                       "max_position_embeddings": 4096})");
  const auto cfg = run_mme({"estimate", (dir.path() / "cfg").string(), "--num-gpus", "1"});
  ASSERT_EQ(cfg.exit_code, 0) << cfg.err;
  EXPECT_FALSE(has_bidi(cfg.out + cfg.err)) << cfg.out;
  EXPECT_NE(cfg.out.find("llama?gpj"), std::string::npos) << cfg.out;
  // A spec file's model name.
  test::write_file(dir.path() / "s.yaml",
                   "model:\n  name: \"evil\\u2066name\\u2069\"\n  num_layers: 2\n  hidden_size: 256\n"
                   "  num_attention_heads: 8\n  ffn_hidden_size: 1024\n  vocab_size: 1000\n"
                   "  max_position_embeddings: 4096\nparallelism:\n  tensor_model_parallel_size: 1\n"
                   "  pipeline_model_parallel_size: 1\ntraining:\n  micro_batch_size: 1\n  seq_length: 1024\n"
                   "infrastructure:\n  world_size: 1\n");
  const auto spec = run_mme({"estimate", "--config", (dir.path() / "s.yaml").string()});
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  EXPECT_FALSE(has_bidi(spec.out)) << spec.out;
  EXPECT_NE(spec.out.find("Model: evil?name?"), std::string::npos) << spec.out;
  // A hardware file: a name with one is refused (one warning), a vendor is neutralised.
  test::write_file(dir.path() / "hw.json", R"([{"name": "Fine-80GB", "memory_gib": 80, "vendor": "V\u202eX"},
                                               {"name": "Evil\u202d-80GB", "memory_gib": 80}])");
  const auto hw = run_mme({"hardware", "--hardware-file", (dir.path() / "hw.json").string()});
  EXPECT_EQ(hw.exit_code, 0) << hw.err;
  EXPECT_FALSE(has_bidi(hw.out + hw.err)) << hw.out << hw.err;
  EXPECT_NE(hw.err.find("must not contain control characters (C0, C1 or bidi controls)"), std::string::npos) << hw.err;
}

// ---------------------------------------------------------------------------------------------
// A replaced report file keeps its mode (and, as root, its owner).

TEST(ReportFiles, AReplacedFileKeepsItsModeAndOwner) {
  test::TempDir dir;
  const fs::path html = dir.path() / "report.html";
  test::write_file(html, "old");
  ASSERT_EQ(::chmod(html.c_str(), 0640), 0);
  const bool root = ::geteuid() == 0;
  if (root) {
    ASSERT_EQ(::chown(html.c_str(), 4242, 4343), 0);
  }
  const auto r = run_mme({"estimate", "--megatron-args", kTiny, "--html", html.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(::stat(html.c_str(), &st), 0);
  EXPECT_NE(test::read_file(html), "old");
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  if (root) {
    EXPECT_EQ(st.st_uid, 4242u);
    EXPECT_EQ(st.st_gid, 4343u);
  }
  // A new file: the usual 0666 & ~umask.
  const fs::path fresh = dir.path() / "new.svg";
  ASSERT_EQ(run_mme({"estimate", "--megatron-args", kTiny, "--svg", fresh.string()}).exit_code, 0);
  ASSERT_EQ(::stat(fresh.c_str(), &st), 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(st.st_mode & 07777, 0666u & ~mask);
}

}  // namespace
}  // namespace mme
