// The estimate use case and what the use cases that take a model share (resolve.hpp).
#include "mme/commands/estimate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <mme/engine/setup_checks.hpp>
#include <mme/inputs/gpu_lookup.hpp>
#include <mme/inputs/launch_script.hpp>
#include <mme/inputs/model_loader.hpp>
#include <mme/report/render_html.hpp>
#include <mme/report/render_svg.hpp>
#include <mme/sdk/error.hpp>
#include <mme/sdk/input_text.hpp>
#include <mme/sdk/text.hpp>
#include <mme/sdk/units.hpp>

#include "resolve.hpp"

namespace mme::commands {

// ---- SetupFlags -----------------------------------------------------------------------------

void SetupFlags::set(std::string name, std::string value) { values_[std::move(name)] = std::move(value); }
void SetupFlags::set_switch(std::string name) { switches_.insert(std::move(name)); }
void SetupFlags::add(std::string name, std::string value) { lists_[std::move(name)].push_back(std::move(value)); }

void SetupFlags::erase(std::string_view name) {
  if (auto it = values_.find(name); it != values_.end()) values_.erase(it);
  if (auto it = switches_.find(name); it != switches_.end()) switches_.erase(it);
  if (auto it = lists_.find(name); it != lists_.end()) lists_.erase(it);
}

bool SetupFlags::has(std::string_view name) const {
  return values_.count(name) > 0 || switches_.count(name) > 0 || lists_.count(name) > 0;
}

bool SetupFlags::given(std::string_view name) const {
  for (const auto& k : setup_knobs()) {
    if (k.kind == KnobKind::kBool || k.kind == KnobKind::kEnv || !k.flag || name != k.flag) continue;
    if (has(k.flag)) return true;
    for (const char* a : k.aliases)
      if (has(a)) return true;
    return false;
  }
  return has(name);
}

std::vector<std::string> SetupFlags::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : values_) out.push_back(k);
  for (const auto& k : switches_) out.push_back(k);
  for (const auto& [k, v] : lists_) out.push_back(k);
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::string> SetupFlags::value(std::string_view name) const {
  const auto it = values_.find(name);
  return it == values_.end() ? std::nullopt : std::optional<std::string>(it->second);
}

bool SetupFlags::on(std::string_view name) const { return switches_.count(name) > 0; }

std::vector<std::string> SetupFlags::values(std::string_view name) const {
  const auto it = lists_.find(name);
  return it == lists_.end() ? std::vector<std::string>{} : it->second;
}

// ---- the fit rule's flags -------------------------------------------------------------------

double parse_headroom(const std::string& text) {
  std::string t = text;
  double scale = 1.0;
  if (!t.empty() && t.back() == '%') {
    t.pop_back();
    scale = 0.01;
  }
  return parse_number("--headroom", t, 0.0, scale == 1.0 ? 0.9 : 90.0) * scale;
}

bool parse_fit_on(const std::string& text) {
  if (text != "bound" && text != "estimate")
    throw UsageError(fmt::format("--fit-on: unknown value '{}' (bound, estimate)", text));
  return text == "bound";
}

std::int64_t parse_overhead_per_gpu(const std::string& text) {
  return static_cast<std::int64_t>(
      std::llround(parse_number("--overhead-per-gpu", text, 0.0, 1024.0) * static_cast<double>(kGiB)));
}

namespace detail {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::stringstream ss(text);
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    out.push_back(item);
  }
  return out;
}

namespace {

// Megatron-LM's GPT2BPETokenizer (tokenizers/text/libraries/megatron_hf_tokenizer.py) counts the
// entries of --vocab-file, GPT-2's vocab.json (50257) when none is given, plus the special tokens
// the file lacks (huggingface_tokenizer.py vocab_size: len(tokenizer)); build_tokenizer.py
// _set_padded_vocab_size pads that count, and --vocab-size is not read. A readable local file is
// counted, and its count replaces a different --vocab-size; a file that cannot be read here leaves
// --vocab-size, else GPT-2's 50257. The assumptions say which.
constexpr std::uintmax_t kMaxVocabFileBytes = std::uintmax_t{64} << 20;  // GPT-2's is 1 MB

// Why a launch script left the value of flag `name` unknown; "" when it is known or absent.
std::string unknown_value(const MegatronArgs& args, std::string_view name) {
  for (const auto& f : args.flags())
    if (f.name == name) return f.unknown;
  return {};
}

MegatronArgs with_gpt2_vocabulary(const MegatronArgs& args, std::vector<std::string>& assumptions) {
  const auto type = args.value("tokenizer-type");
  const auto file = args.value("vocab-file");
  if ((type && *type != "GPT2BPETokenizer") || !file || file->empty()) return args;
  const auto given = args.value("vocab-size");
  // Without a count from the file: what stands, said.
  auto unread = [&](const std::string& why) {
    assumptions.push_back(
        printable(fmt::format("GPT2BPETokenizer: {}; {}", why,
                              given ? fmt::format("--vocab-size {} taken as the tokenizer's count", *given)
                                    : std::string("GPT-2's 50257 entries assumed (--vocab-size sets another)"))));
    return args;
  };
  if (const std::string why = unknown_value(args, "vocab-file"); !why.empty())
    return unread(fmt::format("the value of --vocab-file is not known ({})", why));
  std::int64_t entries = 0;
  try {
    const std::string text = read_text_file(*file, kMaxVocabFileBytes, "a GPT-2 vocabulary file");
    check_json_nesting(text, *file, "a vocab.json");
    const auto vocab = nlohmann::json::parse(text);
    if (!vocab.is_object() || vocab.empty())
      throw ConfigError(fmt::format("{}: not a JSON object of tokens and their ids", *file));
    entries = static_cast<std::int64_t>(vocab.size());
    for (const char* flag : {"tokenizer-special-tokens", "special-tokens"})
      if (const auto special = args.value(flag))
        for (const auto& token : split(*special, ' ', EmptyItems::kSkip))
          if (!vocab.contains(token)) ++entries;
  } catch (const nlohmann::json::exception& e) {
    return unread(fmt::format("--vocab-file {} is not a JSON vocabulary ({})", *file, e.what()));
  } catch (const Error& e) {
    return unread(fmt::format("--vocab-file {} cannot be read here ({})", *file, e.what()));
  }
  const std::string count = std::to_string(entries);
  if (given && *given == count) return args;
  MegatronArgs out = args;
  out.set("vocab-size", {count});
  assumptions.push_back(printable(
      fmt::format("vocabulary {}: the entries of --vocab-file {}, as Megatron-LM's GPT2BPETokenizer counts them{}",
                  entries, *file, given ? fmt::format(" (it does not read --vocab-size {})", *given) : std::string())));
  return out;
}

// Megatron-LM's HuggingFaceTokenizer takes the vocabulary from the tokenizer that
// --tokenizer-model names (huggingface_tokenizer.py vocab_size: len(tokenizer)) and does not read
// --vocab-size (build_tokenizer.py pads the tokenizer's count). When that model is a bundled one,
// a hub id in the Hugging Face cache or a local folder with a config.json (never a download),
// its vocab_size stands in for the count, whatever --vocab-size says, and the assumption says so;
// otherwise --vocab-size if given (said), else the adapter's warning and GPT-2's size.
// GPT2BPETokenizer's --vocab-file is read first (with_gpt2_vocabulary).
MegatronArgs with_tokenizer_vocabulary(const MegatronArgs& given, const SourceOptions& sources,
                                       std::vector<std::string>& assumptions) {
  // --padded-vocab-size sets the rows whatever the tokenizer counts (the megatron_args adapter).
  if (given.has("padded-vocab-size")) return given;
  const MegatronArgs args = with_gpt2_vocabulary(given, assumptions);
  const auto tokenizer = args.value("tokenizer-model");
  if (args.value("tokenizer-type") != "HuggingFaceTokenizer" || !tokenizer || tokenizer->empty()) return args;
  const auto vocab_size = args.value("vocab-size");
  auto keep_given = [&](const std::string& why) {
    if (vocab_size)
      assumptions.push_back(printable(fmt::format(
          "HuggingFaceTokenizer: --tokenizer-model {} {}; --vocab-size {} taken as the tokenizer's count (Megatron-LM "
          "counts the tokenizer's entries)",
          *tokenizer, why, *vocab_size)));
    return args;
  };
  if (const std::string why = unknown_value(args, "tokenizer-model"); !why.empty())
    return keep_given(fmt::format("is not known ({})", why));
  SourceOptions offline = sources;
  offline.allow_network = false;
  ResolvedModel resolved;
  try {
    resolved = resolve_model(*tokenizer, offline);
  } catch (const Error& e) {
    spdlog::debug("--tokenizer-model {}: no config.json to take the vocabulary from ({})", *tokenizer, e.what());
    return keep_given("has no config.json here");
  }
  const auto it = resolved.config.is_object() ? resolved.config.find("vocab_size") : resolved.config.end();
  if (it == resolved.config.end() || !it->is_number_integer() || it->get<std::int64_t>() <= 0 ||
      it->get<std::int64_t>() > (std::int64_t{1} << 32))
    return keep_given("has a config.json without a usable vocab_size");
  const std::int64_t vocab = it->get<std::int64_t>();
  if (vocab_size && *vocab_size == std::to_string(vocab)) return args;
  MegatronArgs out = args;
  out.set("vocab-size", {std::to_string(vocab)});
  assumptions.push_back(printable(
      fmt::format("vocabulary {} from the config.json of --tokenizer-model {} ({}), not {}: Megatron-LM's "
                  "HuggingFaceTokenizer counts the tokenizer's entries, which can be fewer than the config's padded "
                  "vocab_size",
                  vocab, *tokenizer, resolved.path.string(),
                  vocab_size ? fmt::format("--vocab-size {}, which it does not read", *vocab_size)
                             : std::string("GPT-2's 50257"))));
  return out;
}

}  // namespace

// The launch-script options (--set, --script-arg, --script-source, --extra-megatron-flag,
// --assume-gpt-entry) as the reader takes them.
LaunchScriptOptions launch_script_options(const ScriptInput& in) {
  LaunchScriptOptions o;
  for (const auto& v : in.set) {
    const auto eq = v.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError(printable(fmt::format("--set '{}': expected NAME=VALUE", v)));
    o.variables.emplace_back(v.substr(0, eq), v.substr(eq + 1));
  }
  o.script_args = in.args;
  for (const auto& f : in.sources) o.sources.emplace_back(f);
  for (const auto& f : in.extra_flags) o.extra_flags.push_back(f.rfind("--", 0) == 0 ? f.substr(2) : f);
  o.assume_gpt_entry = in.assume_gpt_entry;
  return o;
}

ReadInputs read_model_source(const ModelInput& input, const SetupFlags& flags, const InputRules& rules) {
  ReadInputs r;
  r.model_name = input.model;
  const auto& model = input.model;
  auto& megatron = r.megatron;
  if (input.megatron_args && input.megatron_args_file)
    throw UsageError("give --megatron-args or --megatron-args-file, not both");
  const LaunchScriptOptions script = launch_script_options(input.script);
  std::optional<std::string> text;
  if (input.megatron_args) {
    r.megatron_source = "--megatron-args";
    text = *input.megatron_args;
  } else if (input.megatron_args_file) {
    r.megatron_source = *input.megatron_args_file;
    // Regular files only, with a size cap, like config.json: a launch script is a few KiB.
    text = read_text_file(r.megatron_source, 1u << 20, "a Megatron-LM argument file");
  } else {
    const ScriptInput& s = input.script;
    for (const auto& [flag, given] :
         {std::pair{"set", !s.set.empty()}, std::pair{"script-arg", !s.args.empty()},
          std::pair{"script-source", !s.sources.empty()}, std::pair{"extra-megatron-flag", !s.extra_flags.empty()},
          std::pair{"assume-gpt-entry", s.assume_gpt_entry}})
      if (given)
        throw UsageError(fmt::format("--{} applies to a launch script (--megatron-args-file, --megatron-args)", flag));
  }
  if (text && model) throw UsageError("give either a MODEL or Megatron-LM flags (--megatron-args), not both");
  if (text) {
    // The static reader of the script, then its checks: the entry script, Megatron-LM's flags,
    // the values mme reads; the other flags sorted into silent, not modelled (assumptions) and
    // unknown (a warning).
    LaunchScript launch = read_launch_script(*text, r.megatron_source, script);
    check_launch_script(launch, r.megatron_source, script);
    r.assumptions = launch.assumptions;
    r.warnings = launch.warnings;
    r.launch_gpus_unknown = launch.world_size_unknown;
    r.launch_gpus_from = launch.world_size_from;
    if (!launch.entry.empty() && !launch.args.world_size && launch.world_size_unknown.empty())
      r.launch_gpus_unsaid = launch.where;
    megatron = std::move(launch.args);
  }
  // A spec file: the model (unless MODEL is given) and the setup, which the flags override.
  auto& spec = r.spec;
  if (input.spec_file) {
    if (megatron) throw UsageError("give --config or Megatron-LM flags (--megatron-args), not both");
    spec = read_spec_file(*input.spec_file);
    if (model && spec->has_model)
      throw UsageError(
          fmt::format("the model is given twice: MODEL '{}' and the model section of {} (line {}); drop "
                      "one",
                      *model, spec->path, spec->line_of("model")));
    if (!model && !spec->has_model)
      throw ConfigError(
          fmt::format("{}: the file has no model section, and no MODEL is given on the command line", spec->path));
    for (const auto& missing : spec->missing)
      if (!flags.given(missing.flag)) throw ConfigError(missing.message);
  }
  if (!megatron && !spec && !model && !rules.model_optional)
    throw UsageError(fmt::format("{} needs a MODEL (a hub id, a config.json or a folder){}", rules.command,
                                 rules.launch_flags_and_spec ? ", --megatron-args or --config" : ""));
  return r;
}

namespace {

// The setup a launch file's flags give; an error of their checks (Megatron-LM's own refusals,
// a value out of range) names the file, as the script reader's errors do.
TrainingSetup setup_from_launch(const MegatronArgs& args, const std::string& source) {
  const bool file = source != "--megatron-args";
  auto named = [&](const Error& e) {
    const std::string what = e.what();
    return !file || what.rfind(source + ":", 0) == 0 ? what : fmt::format("{}: {}", printable(source), what);
  };
  try {
    return setup_from_megatron_args(args, TrainingSetup{});
  } catch (const UsageError& e) {
    throw UsageError(named(e));
  } catch (const LayoutError& e) {
    throw LayoutError(named(e));
  } catch (const ConfigError& e) {
    throw ConfigError(named(e));
  }
}

}  // namespace

void read_request_setup(const SetupFlags& flags, ReadInputs& r) {
  const auto& megatron = r.megatron;
  const auto& spec = r.spec;
  // Megatron flags and spec files describe the layout too; explicit mme flags override them.
  r.setup = setup_from_mme_flags(flags, megatron ? setup_from_launch(*megatron, r.megatron_source)
                                        : spec   ? spec->setup
                                                 : TrainingSetup{});
  // The seed tool's defaults for its own flags (seed-configuration-guide.txt: ETP 1, 8 GPUs),
  // as spec files already have them; a Megatron-LM launch line keeps Megatron's ETP = TP.
  if (!megatron && !spec && !flags.given("etp")) {
    r.setup.parallel.etp = 1;
    r.etp_defaulted = true;
  }
  const bool gpus_flag = flags.given("num-gpus");
  if (megatron && !gpus_flag && !r.launch_gpus_unknown.empty())
    throw UsageError(printable(
        fmt::format("{}: the GPU count: {}; give it with --num-gpus N", r.megatron_source, r.launch_gpus_unknown)));
  if (megatron && !gpus_flag && !r.launch_gpus_unsaid.empty())
    r.warnings.push_back(fmt::format("{}: the launch does not say how many GPUs it runs on (--num-gpus N gives it)",
                                     r.launch_gpus_unsaid));
  // The launch's GPU count that its own layout does not divide: Megatron-LM would stop at
  // initialize_model_parallel too; say where the count came from and how to give another.
  if (megatron && !gpus_flag && megatron->world_size) {
    const std::int64_t multiple = cli::layout_gpu_multiple(r.setup.parallel);
    if (multiple > 0 && *megatron->world_size % multiple != 0)
      throw LayoutError(printable(fmt::format(
          "{}: the launch runs {} GPUs{}, which its layout does not divide (TP x PP x CP and ETP x EP x PP need a "
          "multiple of {}); Megatron-LM would stop there too. Give the count with --num-gpus N, or the script's "
          "variables with --set NAME=VALUE",
          r.megatron_source, *megatron->world_size,
          r.launch_gpus_from.empty() ? "" : fmt::format(" ({})", r.launch_gpus_from), multiple)));
  }
  const bool world_given = gpus_flag || spec || (megatron && megatron->world_size);
  if (!world_given) {
    r.setup.parallel.world_size = default_world_size(r.setup.parallel);
    r.gpus_defaulted = true;
  }
}

ReadInputs read_inputs(const ModelInput& input, const SetupFlags& flags, const InputRules& rules) {
  ReadInputs r = read_model_source(input, flags, rules);
  read_request_setup(flags, r);
  return r;
}

std::int64_t default_world_size(const ParallelLayout& p) {
  constexpr std::int64_t kSeedDefault = 8;
  // Sizes out of range keep the seed's 8, and resolve_setup names them.
  const std::int64_t multiple = cli::layout_gpu_multiple(p);
  return multiple == 0 || kSeedDefault % multiple == 0 ? kSeedDefault : multiple;
}

void default_notes(const ReadInputs& read, const ModelSpec& model, const TrainingSetup& setup, EstimateResult& out) {
  const auto& p = setup.parallel;
  const bool moe =
      std::any_of(model.layers.begin(), model.layers.end(), [](const LayerSpec& l) { return l.mlp.num_experts > 0; });
  if (read.etp_defaulted && moe && p.tp > 1)
    out.etp_note = fmt::format(
        "ETP=1 (default; a Megatron-LM launch that leaves it unset uses ETP=TP={}: pass --etp {} "
        "to match)",
        p.tp, p.tp);
  if (read.gpus_defaulted) {
    const std::int64_t dense = p.tp * p.pp * p.cp, expert = effective_etp(p) * p.ep * p.pp;
    if (p.world_size == 8)
      out.gpus_note = "(default, as the seed tool; --num-gpus N to change)";
    else
      out.gpus_note = fmt::format(
          "(default: the seed's 8 is not divisible by TP x PP x CP = {} and ETP x EP x PP = {}; "
          "{} is the smallest count that is; --num-gpus N to change)",
          dense, expert, p.world_size);
  }
}

ModelSpec load_request_model(const ReadInputs& read, const Registry& registry, const SourceOptions& sources,
                             std::vector<std::string>& assumptions) {
  if (read.megatron)
    return adapt_config(with_tokenizer_vocabulary(*read.megatron, sources, assumptions).to_config(),
                        "Megatron-LM flags", read.megatron_source, registry);
  if (read.model_name) return load_model(*read.model_name, registry, sources);
  if (read.spec) return load_spec_model(*read.spec, registry, sources);
  throw std::logic_error("load_request_model: the request names no model");
}

const HardwareProfile* request_gpu(const ReadInputs& read, const std::optional<std::string>& gpu,
                                   const Registry& registry) {
  return find_gpu(registry, gpu, read.spec ? &*read.spec : nullptr);
}

ResolvedInputs resolve_inputs(const ReadInputs& read, const std::optional<std::string>& gpu, const Registry& registry,
                              const SourceOptions& sources) {
  ResolvedInputs in;
  in.setup = read.setup;
  in.assumptions = read.assumptions;
  // Once per request: compare passes only its first layout's lines on.
  for (const auto& w : read.warnings) spdlog::warn("{}", w);
  in.gpu = request_gpu(read, gpu, registry);
  in.model = load_request_model(read, registry, sources, in.assumptions);
  // The launch's warnings are the estimate's too (the JSON document's `warnings`).
  in.model.warnings.insert(in.model.warnings.end(), read.warnings.begin(), read.warnings.end());
  if (read.spec) check_spec_layout(&*read.spec, in.model, in.setup);
  return in;
}

Estimate run_estimator(const ReadInputs& read, const ResolvedInputs& inputs, const Registry& registry,
                       EstimateOptions options) {
  const Estimator estimator(inputs.model, registry);
  if (inputs.gpu) options.compute_capability = inputs.gpu->compute_capability;
  try {
    Estimate est = estimator.run(inputs.setup, options);
    if (options.components)
      est.assumptions.insert(est.assumptions.end(), inputs.assumptions.begin(), inputs.assumptions.end());
    return est;
  } catch (const LayoutError& e) {
    if (!read.spec) throw;
    throw LayoutError(fmt::format("{}: {}", read.spec->path, e.what()));
  }
}

std::vector<const HardwareProfile*> profiles_by_memory(const Registry& registry) {
  std::vector<const HardwareProfile*> out;
  for (const auto& h : registry.hardware()) out.push_back(h.object.get());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto* a, const auto* b) { return a->memory_bytes < b->memory_bytes; });
  return out;
}

}  // namespace detail

// ---- the use case ---------------------------------------------------------------------------

EstimateResult estimate(const EstimateRequest& request, const Context& context) {
  using namespace detail;
  const RequestLog log(context);
  const ReadInputs read = read_inputs(request.input, request.setup, InputRules{"estimate"});
  // The pictures: an unwritable path fails now, before any work; the files appear whole at the end.
  std::optional<cli::OutputFile> html_file, svg_file;
  if (request.html) html_file.emplace(*request.html, "--html");
  if (request.svg) svg_file.emplace(*request.svg, "--svg");
  // By identity, not by spelling: './x.html' and 'x.html' (or a symlink to it) are one file.
  if (html_file && svg_file && html_file->same_file(*svg_file)) throw UsageError("--html and --svg name the same file");

  EstimateResult out;
  out.registry = load_registry(context);
  const Registry& registry = *out.registry;
  const ResolvedInputs inputs =
      resolve_inputs(read, request.gpu, registry, source_options(context, request.input.revision));
  out.model = inputs.model;
  out.gpu = inputs.gpu;
  out.fit = request.fit;
  out.model_name = read.model_name;
  out.spec = read.spec;

  EstimateOptions eo;
  eo.components = request.components || request.layer_breakdown;
  eo.layer_breakdown = request.layer_breakdown;
  try {
    out.estimate = run_estimator(read, inputs, registry, eo);
  } catch (const LayoutError& e) {
    // A layout Megatron refuses: the message names the values that work; `mme plan` finds the rest.
    if (!request.advice || !read.model_name) throw;
    throw LayoutError(fmt::format("{} (`mme plan {} --num-gpus {}` lists every layout that works)", e.what(),
                                  shell_quote(*read.model_name), inputs.setup.parallel.world_size));
  }
  const Estimate& est = out.estimate;
  if (request.advice) {
    // Warnings only for a layout that is valid: bad input stays one error line.
    if (request.setup.given("recompute-num-layers") && est.setup.recompute.granularity != RecomputeGranularity::kFull)
      spdlog::warn("--recompute-num-layers {} changes nothing without --recompute-granularity full",
                   est.setup.recompute.num_layers);
    // A learned position table refuses longer sequences (validate_setup); rotary models run, but
    // beyond the positions the model was trained on.
    const ModelSpec& model = out.model;
    if (model.position_embedding != PositionEmbedding::kLearnedAbsolute && model.max_position_embeddings > 0 &&
        est.setup.seq_length > model.max_position_embeddings)
      spdlog::warn(
          "--seq-length {} is beyond the model's max_position_embeddings {}: the memory is estimated, but the "
          "model was not trained on such sequences",
          est.setup.seq_length, model.max_position_embeddings);
  }
  // In the text report only: the JSON document's setup holds the values, and a spec file that
  // spells them out gives the same document.
  default_notes(read, out.model, est.setup, out);

  if (request.judge) {
    if (out.gpu)
      out.judged.push_back(out.gpu);
    else
      out.judged = profiles_by_memory(registry);
    const FitRule& f = request.fit;
    for (const auto* h : out.judged) out.fits.push_back(judge_fit(est, *h, f.headroom, f.on_bound, f.reserved));
    if (request.next_steps && !out.fits.empty() &&
        std::none_of(out.fits.begin(), out.fits.end(), [](const FitVerdict& v) { return v.fits; }))
      out.next_steps =
          cli::next_steps(out.model, inputs.setup, out.gpu, read.model_name.value_or(out.model.name), registry,
                          out.judged, f.headroom, f.on_bound, f.reserved, out.fits.front().needed_bytes);
  }
  if (html_file) {
    cli::HtmlOptions ho;
    ho.chosen_gpu = out.gpu;
    ho.headroom_fraction = request.fit.headroom < 0 ? kDefaultHeadroom : request.fit.headroom;
    html_file->commit(cli::render_estimate_html(out.model, est, out.fits, ho));
  }
  if (svg_file) {
    cli::SvgOptions so;
    so.chosen_gpu = out.gpu;
    svg_file->commit(cli::render_estimate_svg(out.model, est, out.fits, so));
  }
  return out;
}

std::string resolved_spec_text(const EstimateResult& result, bool json) {
  // The spec as estimated: written only if it reads back (the guide's constraints hold).
  try {
    check_spec_layout(nullptr, result.model, result.estimate.setup);
  } catch (const LayoutError& e) {
    throw LayoutError(fmt::format("--dump-config: the resolved spec breaks a rule of spec files: {}", e.what()));
  }
  SpecWriteOptions wo;
  wo.header = {"mme spec file (docs/spec-files.md), resolved by `mme estimate --dump-config`: every field after",
               "defaults and command-line flags. `mme estimate --config FILE` gives the same estimate."};
  if (result.gpu) wo.gpu = result.gpu->name;
  wo.origin = result.spec ? &*result.spec : nullptr;
  return json ? write_spec_json(result.model, result.estimate.setup, *result.registry, wo)
              : write_spec_yaml(result.model, result.estimate.setup, *result.registry, wo);
}

}  // namespace mme::commands
