// Numbers under a comma-decimal locale (issue 32): a host that embeds mme (Python's
// locale.setlocale, a C program's setlocale, C++'s std::locale::global) may switch LC_NUMERIC to
// a locale whose decimal point is ','; strtod then read a spec file's `hidden_dropout: 0.25` as 0
// and a CSV's 5.315 GiB peak as 5. Each number path of the library runs here twice, under "C" and
// under such a locale, and must read the same values and write the same bytes.
//
// The locale: the system's de_DE.UTF-8 when it is installed, otherwise one built by localedef
// from a minimal source (LC_NUMERIC with ',' as the decimal point) into a private LOCPATH in the
// build tree, so no root is needed. localedef needs the `locales` package's charmaps
// (scripts/setup-deps.sh installs it). Without either the tests fail: they must never pass
// without having run under a comma-decimal locale, which each checks first (strtod reads
// "0.25" as 0 there).
#include <clocale>
#include <cstdlib>
#include <filesystem>
#include <locale>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <mme/engine/estimator.hpp>
#include <mme/engine/fit.hpp>
#include <mme/engine/registry.hpp>
#include <mme/inputs/megatron_args.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/inputs/spec_file.hpp>
#include <mme/report/render_estimate.hpp>
#include <mme/report/render_html.hpp>
#include <mme/report/render_svg.hpp>
#include <mme/sdk/number_text.hpp>
#include <mme/validate/validation.hpp>

#include "json_profiles.hpp"
#include "layer_plugins.hpp"
#include "megatron_args_adapter.hpp"
#include "spec_file_adapter.hpp"
#include "test_support.hpp"
#include <sys/wait.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace mme {
namespace {

namespace fs = std::filesystem;

// The name of a locale whose decimal point is ',' (empty, with `why`, when none can be had). The
// private one is built once per build tree (tests/comma-locale), in a folder of its own that
// is then renamed into place, so tests running at once never see half of it.
std::string comma_locale(std::string& why) {
  static std::string name, failure;
  static bool tried = false;
  if (tried) {
    why = failure;
    return name;
  }
  tried = true;
  if (std::setlocale(LC_ALL, "de_DE.UTF-8")) {
    std::setlocale(LC_ALL, "C");
    return name = "de_DE.UTF-8";
  }
  const fs::path home = test::binary_dir() / "comma-locale";
  std::error_code ec;
  if (!fs::is_regular_file(home / "mme_comma" / "LC_NUMERIC", ec)) {
    const fs::path work = test::binary_dir() / ("comma-locale.tmp-" + std::to_string(::getpid()));
    fs::create_directories(work, ec);
    test::write_file(
        work / "comma.src",
        "LC_NUMERIC\ndecimal_point \"<U002C>\"\nthousands_sep \"<U002E>\"\ngrouping 3;3\nEND LC_NUMERIC\n");
    const std::string command = "localedef -c -i '" + (work / "comma.src").string() + "' -f UTF-8 '" +
                                (work / "mme_comma").string() + "' >/dev/null 2>&1";
    const int rc = std::system(command.c_str());
    // localedef -c exits 1 for the categories the source leaves out, and still writes the locale.
    if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) > 1) {
      fs::remove_all(work, ec);
      failure = "neither de_DE.UTF-8 nor localedef (package `locales`, scripts/setup-deps.sh) is available";
      why = failure;
      return name;
    }
    fs::rename(work, home, ec);  // another test may have been first: then its copy is used
    fs::remove_all(work, ec);
  }
  ::setenv("LOCPATH", home.c_str(), 1);
  if (!std::setlocale(LC_ALL, "mme_comma")) {
    failure = "localedef ran, but setlocale refuses the locale it wrote in " + home.string();
    why = failure;
    return name;
  }
  std::setlocale(LC_ALL, "C");
  return name = "mme_comma";
}

// The C++ locale of that name. With LOCPATH set (the private locale above), glibc 2.36's
// newlocale (locale/newlocale.c), which std::locale's constructor calls, builds the search path
// with __argz_add_sep and never frees it: 57 bytes per call that LeakSanitizer reports at exit.
// The leak is the C library's, not mme's, so only this one call is kept out of the leak check;
// setlocale (which frees its copy) and everything mme does under the locale stay checked.
std::locale named_locale(const std::string& name) {
#if defined(__SANITIZE_ADDRESS__)
  const __lsan::ScopedDisabler glibc_newlocale_leak;
#endif
  return std::locale(name);
}

// Sets the C and the C++ global locale for its lifetime (C++'s std::locale::global sets both).
class GlobalLocale {
 public:
  explicit GlobalLocale(const std::string& name) : before_(std::locale::global(named_locale(name))) {}
  ~GlobalLocale() {
    std::locale::global(std::locale::classic());
    std::setlocale(LC_ALL, "C");
  }
  GlobalLocale(const GlobalLocale&) = delete;
  GlobalLocale& operator=(const GlobalLocale&) = delete;

 private:
  std::locale before_;
};

const Registry& registry() {
  static const std::unique_ptr<Registry> r = [] {
    auto reg = std::make_unique<Registry>();
    test::register_layer_plugins(*reg);
    if (!reg->register_plugin("adapter_spec_file", "test", "", plugins::register_spec_file_adapter) ||
        !reg->register_plugin("adapter_megatron_args", "test", "", plugins::register_megatron_args))
      throw std::runtime_error("cannot register the adapters");
    return reg;
  }();
  return *r;
}

class CommaLocale : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    name_ = comma_locale(why);
    ASSERT_FALSE(name_.empty()) << why;
    // The locale is in effect: the C library reads "0.25" as 0 and writes 0.5 as "0,5".
    const GlobalLocale on(name_);
    ASSERT_EQ(std::strtod("0.25", nullptr), 0.0) << name_ << " does not have ',' as its decimal point";
    std::ostringstream cxx;
    cxx << 0.5;
    ASSERT_EQ(cxx.str(), "0,5") << "std::locale::global(" << name_ << ") did not reach iostreams";
  }
  // `f()` under "C", then under the comma locale: both results.
  template <class F>
  auto both(F f) {
    auto in_c = f();
    const GlobalLocale on(name_);
    return std::make_pair(std::move(in_c), f());
  }
  std::string name_;
};

const std::string kSpec = R"(model:
  num_layers: 4
  hidden_size: 256
  num_attention_heads: 8
  ffn_hidden_size: 1024
  vocab_size: 1000
  max_position_embeddings: 4096
  hidden_dropout: 0.25
  attention_dropout: 0.125
parallelism:
  tensor_model_parallel_size: 1
  pipeline_model_parallel_size: 1
training:
  micro_batch_size: 1
  seq_length: 1024
  moe_expert_capacity_factor: 1.5
infrastructure:
  world_size: 8
)";

TEST_F(CommaLocale, NumberTextReadsDecimalPoints) {
  const auto [c, comma] = both([] { return std::make_pair(parse_decimal("0.25"), parse_decimal("1e-3")); });
  EXPECT_EQ(c.first, 0.25);
  EXPECT_EQ(comma.first, 0.25);
  EXPECT_EQ(comma.second, 1e-3);
  const auto [c2, comma2] = both([] { return parse_decimal("0,25"); });
  EXPECT_FALSE(c2.has_value());
  EXPECT_FALSE(comma2.has_value()) << "',' is never a decimal point, whatever the locale";
}

// A spec file's floats, and the spec file written back (--dump-config) and read again.
TEST_F(CommaLocale, SpecFileFloatsAndTheirRoundTrip) {
  struct Read {
    double hidden = -1, attention = -1, capacity = -1;
    std::string dumped;
    double hidden_again = -1;
  };
  const auto [c, comma] = both([] {
    Read r;
    const SpecFile spec = parse_spec_text(kSpec, "spec.yaml", SpecFormat::kYaml);
    const ModelSpec model = load_spec_model(spec, registry());
    r.hidden = model.hidden_dropout;
    r.attention = model.attention_dropout;
    r.capacity = spec.setup.moe_capacity_factor.value_or(-1);
    r.dumped = write_spec_yaml(model, spec.setup, registry());
    r.hidden_again =
        load_spec_model(parse_spec_text(r.dumped, "dumped.yaml", SpecFormat::kYaml), registry()).hidden_dropout;
    return r;
  });
  for (const Read* r : {&c, &comma}) {
    EXPECT_EQ(r->hidden, 0.25);
    EXPECT_EQ(r->attention, 0.125);
    EXPECT_EQ(r->capacity, 1.5);
    EXPECT_EQ(r->hidden_again, 0.25);
  }
  EXPECT_EQ(comma.dumped, c.dumped);
  EXPECT_NE(c.dumped.find("hidden_dropout: 0.25"), std::string::npos) << c.dumped;
}

// A functional-test CSV's measured peak and static memory (5.315 was once read as 5).
TEST_F(CommaLocale, ValidateCsvPeaks) {
  const std::string csv =
      "model,test_case,golden,max_alloc_GiB_max,alloc_GiB_median,nodes_gpus,num-layers,hidden-size,"
      "num-attention-heads,seq-length,max-position-embeddings,micro-batch-size,vocab-size,tokenizer-type\n"
      "gpt,tiny,dgx_h100,5.315,1.25,dgx_h100:1x8,4,256,8,1024,4096,1,1000,NullTokenizer\n";
  const auto [c, comma] = both([&] {
    const CsvTable t = parse_csv_table(csv, "cases.csv");
    return validate_row(t.rows.at(0), registry(), t.lines.at(0));
  });
  for (const ValidationCase* v : {&c, &comma}) {
    EXPECT_EQ(v->status, "ok") << v->reason;
    EXPECT_EQ(v->measured_peak_gib, 5.315);
    EXPECT_EQ(v->measured_static_gib, 1.25);
  }
  EXPECT_EQ(comma.estimated_peak_gib, c.estimated_peak_gib);
}

// A hardware file's figures (nlohmann's reader: it swaps in the locale's decimal point itself).
TEST_F(CommaLocale, HardwareJsonFigures) {
  const std::string text = R"({"name": "Comma-GPU", "memory_gib": 79.5, "reserved_gib": 1.25,
      "hbm_bandwidth_gbps": 3350.5, "bf16_tflops": 989.5, "fp8_tflops": 1978.9, "link_bandwidth_gbps": 450.25,
      "compute_capability": 9.0})";
  const auto [c, comma] =
      both([&] { return plugins::parse_hardware_profiles(nlohmann::json::parse(text), "gpu.json").at(0); });
  for (const HardwareProfile* h : {&c, &comma}) {
    EXPECT_EQ(h->memory_bytes, std::int64_t{795} * (std::int64_t{1} << 30) / 10);  // 79.5 GiB, exact
    EXPECT_EQ(h->reserved_bytes, std::int64_t{5} << 28);                           // 1.25 GiB
    EXPECT_EQ(h->hbm_bandwidth_gbps, 3350.5);
    EXPECT_EQ(h->bf16_tflops, 989.5);
    EXPECT_EQ(h->fp8_tflops, 1978.9);
    EXPECT_EQ(h->link_bandwidth_gbps, 450.25);
    EXPECT_EQ(h->compute_capability, 90);
  }
}

// Megatron-LM float flags: the setup's (--moe-expert-capacity-factor) and the model adapter's
// (--hidden-dropout, --attention-dropout).
TEST_F(CommaLocale, MegatronArgsFloatFlags) {
  const std::string line =
      "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 1024 --max-position-embeddings 4096 "
      "--micro-batch-size 1 --vocab-size 1000 --tokenizer-type NullTokenizer --hidden-dropout 0.25 "
      "--attention-dropout 0.125 --moe-expert-capacity-factor 1.5";
  struct Read {
    double capacity = -1, model_hidden = -1, model_attention = -1;
  };
  const auto [c, comma] = both([&] {
    const MegatronArgs args = parse_megatron_args(line, "--megatron-args");
    const TrainingSetup s = setup_from_megatron_args(args, TrainingSetup{});
    const ModelSpec m = adapt_config(args.to_config(), "tiny", "--megatron-args", registry());
    return Read{s.moe_capacity_factor.value_or(-1), m.hidden_dropout, m.attention_dropout};
  });
  for (const Read* r : {&c, &comma}) {
    EXPECT_EQ(r->capacity, 1.5);
    EXPECT_EQ(r->model_hidden, 0.25);
    EXPECT_EQ(r->model_attention, 0.125);
  }
}

// The reports of one estimate: text, JSON, SVG and HTML, byte for byte.
TEST_F(CommaLocale, PrintedReports) {
  HardwareProfile gpu;
  gpu.name = "Comma-GPU";
  gpu.memory_bytes = std::int64_t{795} * (std::int64_t{1} << 30) / 10;
  gpu.reserved_bytes = std::int64_t{1} << 30;
  struct Printed {
    std::string text, json, svg, html;
  };
  const auto [c, comma] = both([&] {
    const SpecFile spec = parse_spec_text(kSpec, "spec.yaml", SpecFormat::kYaml);
    const ModelSpec model = load_spec_model(spec, registry());
    const Estimate est = Estimator(model, registry()).run(spec.setup);
    const std::vector<FitVerdict> fits = {judge_fit(est, gpu, 0.05)};
    Printed p;
    std::ostringstream out;  // made under the locale in force, as a host's stream would be
    cli::RenderOptions ro;
    ro.verbose = true;
    ro.chosen_gpu = &gpu;
    cli::render_text(out, model, est, fits, ro);
    p.text = out.str();
    p.json = cli::estimate_to_json(model, est, fits).dump(2);
    p.svg = cli::render_estimate_svg(model, est, fits, cli::SvgOptions{&gpu});
    p.html = cli::render_estimate_html(model, est, fits, cli::HtmlOptions{&gpu, 0.05});
    return p;
  });
  EXPECT_EQ(comma.text, c.text);
  EXPECT_EQ(comma.json, c.json);
  EXPECT_EQ(comma.svg, c.svg);
  EXPECT_EQ(comma.html, c.html);
  EXPECT_NE(c.text.find("Comma-GPU"), std::string::npos);
}

}  // namespace
}  // namespace mme
