// Reading spec files: the sections of the document into a SpecFile (the model section as a
// config document, the others as a TrainingSetup), the typed access of the spec_file adapter to
// that document, and the model of a spec (through the adapter, or a Hugging Face base).
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include "mme/engine/pipeline.hpp"
#include "mme/inputs/megatron_args.hpp"
#include "mme/inputs/model_loader.hpp"
#include "mme/inputs/spec_file.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/input_text.hpp"

#include "spec_internal.hpp"

namespace mme {

namespace fs = std::filesystem;
using namespace spec_detail;

namespace {

constexpr std::uintmax_t kMaxFileBytes = 1 << 20;

std::string file_stem(const std::string& path) {
  const std::string stem = fs::path(path).stem().string();
  return stem.empty() ? path : stem;
}

// Reading the sections.

class SpecParser {
 public:
  SpecParser(SpecFile& out) : out_(out) {}

  [[noreturn]] void fail_at(int line, const std::string& what) const {
    if (line > 0) throw ConfigError(fmt::format("{}:{}: {}", out_.path, line, what));
    throw ConfigError(fmt::format("{}: {}", out_.path, what));
  }
  [[noreturn]] void fail_field(const std::string& key, const std::string& what) const {
    fail_at(out_.line_of(key), key + ": " + what);
  }

  void run(const Node& root) {
    if (root.kind == Node::Kind::kNull)
      fail_at(0,
              "the file is empty (expected the sections model, parallelism, training, infrastructure and "
              "precision)");
    if (root.kind != Node::Kind::kMap)
      fail_at(root.line, fmt::format("expected the sections model, parallelism, training, infrastructure and "
                                     "precision, got {}",
                                     describe(to_json(root))));
    std::map<std::string, const Node*> section_nodes;
    for (const auto& s : root.children) {
      if (s.key.empty()) fail_at(s.line, "expected a section name");
      if (std::find(sections().begin(), sections().end(), s.key) == sections().end()) {
        std::string hint;
        if (const std::string home = section_of_field(s.key); !home.empty())
          hint = fmt::format("; {} is a field of the {} section", s.key, home);
        else if (auto c = closest_name(s.key, sections()); !c.empty())
          hint = fmt::format(" (did you mean '{}'?)", c);
        else
          hint = " (the sections are model, parallelism, training, infrastructure and precision)";
        fail_at(s.line, fmt::format("{}: unknown section{}", s.key, hint));
      }
      if (auto it = out_.lines.find(s.key); it != out_.lines.end())
        fail_at(s.line, fmt::format("{}: the section is given twice (first on line {})", s.key, it->second));
      out_.lines[s.key] = s.line;
      if (s.kind == Node::Kind::kNull) {
        section_nodes[s.key] = &s;
        continue;
      }
      if (s.kind != Node::Kind::kMap) {
        std::string hint;
        if (s.key == "model" && s.kind == Node::Kind::kString)
          hint = fmt::format(" (write `model: {{hf: {}}}` to use a Hugging Face model)", s.text);
        fail_at(s.line, fmt::format("{}: expected a mapping of fields, got {}{}", s.key, describe(to_json(s)), hint));
      }
      section_nodes[s.key] = &s;
      read_fields(s);
    }
    out_.has_model = section_nodes.count("model") > 0;
    build_model_document();
    build_setup();
  }

 private:
  void read_fields(const Node& section) {
    for (const auto& field : section.children) {
      const std::string key = section.key + "." + field.key;
      if (field.key.empty()) fail_at(field.line, section.key + ": expected a field name");
      const FieldDef* f = find_def(section.key, field.key);
      if (!f) fail_at(field.line, fmt::format("{}: {}", key, unknown_field_message(section.key, field.key)));
      if (auto it = out_.lines.find(key); it != out_.lines.end())
        fail_at(field.line, fmt::format("{}: given twice (first on line {})", key, it->second));
      out_.lines[key] = field.line;
      J value = to_json(field);
      if (!value.is_null()) value = check_value(*f, value, [&](const std::string& what) { fail_field(key, what); });
      values_[key] = value;
      order_.push_back(key);
    }
  }

  const J* value(const std::string& key) const {
    auto it = values_.find(key);
    return it == values_.end() || it->second.is_null() ? nullptr : &it->second;
  }
  bool given(const std::string& key) const { return values_.count(key) > 0; }

  void build_model_document() {
    if (!out_.has_model) return;
    J fields = J::object(), lines = J::object();
    for (const auto& key : order_) {
      if (key.rfind("model.", 0) != 0) continue;
      const std::string name = key.substr(6);
      fields[name] = values_.at(key);
      lines[name] = out_.lines.at(key);
    }
    if (const J* hf = value("model.hf"))
      out_.hf = hf->get<std::string>();
    else if (given("model.hf"))
      fail_field("model.hf", "expected a model name, got null");
    out_.model_document = {{"mme_source", kMarker},
                           {"file", out_.path},
                           {"name", file_stem(out_.path)},
                           {"section_line", out_.line_of("model")},
                           {"model", fields},
                           {"lines", lines}};
  }

  void build_setup() {
    TrainingSetup& s = out_.setup;
    s = TrainingSetup{};
    // The guide's defaults where they differ from the command line's.
    s.parallel.etp = 1;
    s.parallel.sequence_parallel = false;
    for (const auto& f : field_defs()) {
      if (std::string_view(f.section) == "model") continue;
      const std::string key = std::string(f.section) + "." + f.name;
      const J* v = value(key);
      if (!v) {
        if (f.required) {
          const int section_line = out_.line_of(f.section);
          std::string where = section_line > 0 ? fmt::format("{}:{}", out_.path, section_line) : out_.path;
          std::string no_section = section_line > 0 ? "" : fmt::format("the file has no {} section; ", f.section);
          out_.missing.push_back({key, f.flag,
                                  fmt::format("{}: {}: required field is missing ({}give it in the file or --{} "
                                              "on the command line)",
                                              where, key, no_section, f.flag)});
        }
        continue;
      }
      if (f.knob) (f.knob->spec_set ? f.knob->spec_set : f.knob->set)(s, *v);
    }
    if (const J* g = value("infrastructure.gpu")) out_.gpu = g->get<std::string>();

    // precision: params_dtype and fp8 together.
    const J* dtype_value = value("precision.params_dtype");
    const std::string dtype = dtype_value ? dtype_value->get<std::string>() : "bf16";
    const bool fp8 = value("precision.fp8") && value("precision.fp8")->get<bool>();
    if (fp8 && dtype != "bf16")
      fail_field("precision.fp8",
                 fmt::format("FP8 training is estimated with bf16 parameters; params_dtype is {}", dtype));
    s.precision = fp8               ? Precision::kFP8
                  : dtype == "fp16" ? Precision::kFP16
                  : dtype == "fp32" ? Precision::kFP32
                                    : Precision::kBF16;
    // fp8_format: FP8 GEMMs in that format, as Megatron-LM's --fp8-format.
    if (value("precision.fp8_format")) {
      if (value("precision.fp8") && !fp8) fail_field("precision.fp8_format", "needs fp8: true (or no fp8 field)");
      if (dtype != "bf16")
        fail_field("precision.fp8_format",
                   fmt::format("FP8 training is estimated with bf16 parameters; params_dtype is {}", dtype));
      s.precision = Precision::kFP8;
    }
    check_file_rules();
  }

  // Rules between fields of the file itself (the guide's and Megatron-LM's).
  void check_file_rules() {
    const TrainingSetup& s = out_.setup;
    const auto granularity = s.recompute.granularity;
    if (value("training.recompute_method") && granularity != RecomputeGranularity::kFull)
      fail_field("training.recompute_method",
                 fmt::format("only used with recompute_granularity: full (it is {})", granularity_text(granularity)));
    if (const J* n = value("training.recompute_num_layers"); n && granularity == RecomputeGranularity::kFull &&
                                                             n->get<std::int64_t>() == 0 &&
                                                             s.recompute.method != RecomputeMethod::kBlock)
      fail_field("training.recompute_num_layers",
                 "0 with recompute_granularity: full needs recompute_method: block (no layer recomputed); "
                 "Megatron-LM's uniform recompute never advances with 0");
    if (!value("training.recompute_num_layers") || granularity != RecomputeGranularity::kFull)
      out_.setup.recompute.num_layers = 1;
    if (value("training.recompute_modules") && granularity != RecomputeGranularity::kSelective)
      fail_field("training.recompute_modules", fmt::format("only used with recompute_granularity: selective (it is "
                                                           "{})",
                                                           granularity_text(granularity)));
    if (value("parallelism.virtual_pipeline_model_parallel_size") &&
        value("parallelism.num_layers_per_virtual_pipeline_stage"))
      fail_field("parallelism.num_layers_per_virtual_pipeline_stage",
                 "give virtual_pipeline_model_parallel_size or num_layers_per_virtual_pipeline_stage, not both");
    if (const J* layout = value("parallelism.pipeline_model_parallel_layout")) {
      try {
        (void)parse_pipeline_layout(layout->get<std::string>());
      } catch (const LayoutError& e) {
        std::string what = e.what();
        if (what.rfind("--pipeline-layout: ", 0) == 0) what = what.substr(19);
        fail_field("parallelism.pipeline_model_parallel_layout", what);
      }
    }
    if (const J* c = value("infrastructure.cublas_workspace_config")) {
      try {
        (void)parse_cublas_workspace_config(c->get<std::string>());
      } catch (const UsageError&) {
        fail_field("infrastructure.cublas_workspace_config",
                   fmt::format("expected ':SIZE_KiB:COUNT' pairs, got {}", describe(*c)));
      }
    }
    const auto& o = s.optimizer;
    if (s.fp8_param_gather && s.precision != Precision::kFP8)
      fail_field("precision.fp8_param_gather", "needs fp8: true");
    if (s.low_precision.fp4_param_gather && !s.low_precision.fp4)
      fail_field("precision.fp4_param_gather", "needs fp4_format: e2m1");
    if (s.fp8_param_gather && !o.distributed)
      fail_field("precision.fp8_param_gather", "needs training.use_distributed_optimizer: true");
    for (const char* key : {"precision.main_params_dtype", "precision.exp_avg_dtype", "precision.exp_avg_sq_dtype"})
      if (const J* v = value(key); v && v->get<std::string>() != "fp32" && !o.precision_aware)
        fail_field(key, "needs training.use_precision_aware_optimizer: true");
    if (o.cpu_offload_fraction > 0 && !o.distributed)
      fail_field("training.optimizer_cpu_offload_fraction", "needs training.use_distributed_optimizer: true");
    if (o.precision_aware && !o.distributed)
      fail_field("training.use_precision_aware_optimizer", "needs training.use_distributed_optimizer: true");
    if (s.moe_pad_to_capacity && !s.moe_capacity_factor)
      fail_field("training.moe_pad_expert_input_to_capacity", "needs training.moe_expert_capacity_factor");
    check_offload_fields(s);
    check_lora_fields(s);
  }

  // LoRA's details apply with its rank (peft.dim turns LoRA on).
  void check_lora_fields(const TrainingSetup& s) {
    if (s.lora.on()) return;
    const LoraSettings d;
    const auto& l = s.lora;
    const char* needs = "needs peft.dim (LoRA's rank)";
    if (l.alpha != d.alpha) fail_field("peft.alpha", needs);
    if (l.targets != d.targets) fail_field("peft.target_modules", needs);
    if (l.dropout != d.dropout) fail_field("peft.dropout", needs);
    if (l.dropout_position != d.dropout_position) fail_field("peft.dropout_position", needs);
    if (l.dtype) fail_field("peft.lora_dtype", needs);
    if (l.a_init != d.a_init) fail_field("peft.lora_A_init_method", needs);
    if (l.b_init != d.b_init) fail_field("peft.lora_B_init_method", needs);
    if (l.a2a_experimental) fail_field("peft.a2a_experimental", needs);
  }

  // The offload settings apply with their mechanism (Megatron-LM ignores them otherwise).
  void check_offload_fields(const TrainingSetup& s) {
    const ActivationOffloadSettings d;
    const auto& a = s.activation_offload;
    if (s.optimizer.overlap_cpu_d2h_h2d && s.optimizer.cpu_offload_fraction == 0)
      fail_field("training.overlap_cpu_optimizer_d2h_h2d", "needs training.optimizer_cpu_offload_fraction > 0");
    const bool layer_offload = a.cpu_offloading || a.cpu_offloading_num_layers > 0;
    if (!layer_offload && !a.cpu_offloading_activations)
      fail_field("training.cpu_offloading_activations", "needs training.cpu_offloading_num_layers > 0");
    if (!layer_offload && a.cpu_offloading_weights)
      fail_field("training.cpu_offloading_weights", "needs training.cpu_offloading_num_layers > 0");
    if (a.fine_grained) return;
    const char* needs = "needs training.fine_grained_activation_offloading: true";
    if (a.modules != 0) fail_field("training.offload_modules", needs);
    if (a.min_tensor_size != d.min_tensor_size) fail_field("training.min_offloaded_tensor_size", needs);
    if (a.fraction != d.fraction) fail_field("training.activation_offload_fraction", needs);
    if (a.delta_bytes_across_pp_ranks != d.delta_bytes_across_pp_ranks)
      fail_field("training.delta_offload_bytes_across_pp_ranks", needs);
  }

  static std::string granularity_text(RecomputeGranularity g) {
    return g == RecomputeGranularity::kNone ? "null" : to_string(g);
  }

  SpecFile& out_;
  std::map<std::string, J> values_;
  std::vector<std::string> order_;
};

}  // namespace

int SpecFile::line_of(const std::string& key) const {
  auto it = lines.find(key);
  return it == lines.end() ? 0 : it->second;
}

SpecFormat spec_format_for(const fs::path& path, std::string_view text) {
  const std::string ext = lower(path.extension().string());
  if (ext == ".json") return SpecFormat::kJson;
  if (ext == ".yaml" || ext == ".yml") return SpecFormat::kYaml;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    return c == '{' ? SpecFormat::kJson : SpecFormat::kYaml;
  }
  return SpecFormat::kYaml;
}

SpecFile parse_spec_text(std::string_view text, const std::string& source, SpecFormat format) {
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 BOM
  SpecFile out;
  out.path = source;
  out.format = format;
  const Node root = format == SpecFormat::kJson ? parse_json(text, source) : parse_yaml(text, source);
  SpecParser(out).run(root);
  return out;
}

SpecFile read_spec_file(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw ConfigError(fmt::format("{}: is a folder, not a spec file", path.string()));
  const std::string text = read_text_file(path, kMaxFileBytes, "a spec file");
  return parse_spec_text(text, path.string(), spec_format_for(path, text));
}

bool is_spec_file_config(const J& config) {
  if (!config.is_object()) return false;
  const auto it = config.find("mme_source");
  return it != config.end() && it->is_string() && it->get<std::string>() == kMarker;
}

// -------------------------------------------------------------------------------------------------
// SpecModelReader.

SpecModelReader::SpecModelReader(const J& document) : doc_(document) {
  if (!is_spec_file_config(document)) throw ConfigError("not the model document of a spec file");
  if (auto it = doc_.find("file"); it != doc_.end() && it->is_string())
    file_ = it->get<std::string>();
  else
    file_ = "spec file";
  const auto m = doc_.find("model");
  if (m == doc_.end() || !m->is_object()) throw ConfigError(fmt::format("{}: the model document has no fields", file_));
  for (const auto& item : m->items()) {
    // Not a structured binding: clang before 16 cannot capture one in the lambda below.
    const std::string& name = item.key();
    const FieldDef* f = find_def("model", name);
    if (!f) fail(name, unknown_field_message("model", name));
    if (!item.value().is_null())
      (void)check_value(*f, item.value(), [&](const std::string& what) { fail(name, what); });
  }
}

bool SpecModelReader::given(std::string_view field) const {
  const auto& m = doc_.at("model");
  return m.find(field) != m.end();
}

bool SpecModelReader::has(std::string_view field) const { return raw(field) != nullptr; }

int SpecModelReader::line(std::string_view field) const {
  if (auto l = doc_.find("lines"); l != doc_.end() && l->is_object())
    if (auto it = l->find(field); it != l->end() && it->is_number_integer()) return it->get<int>();
  if (auto s = doc_.find("section_line"); s != doc_.end() && s->is_number_integer()) return s->get<int>();
  return 0;
}

void SpecModelReader::fail(std::string_view field, const std::string& what) const {
  const int l = line(field);
  if (l > 0) throw ConfigError(fmt::format("{}:{}: model.{}: {}", file_, l, field, what));
  throw ConfigError(fmt::format("{}: model.{}: {}", file_, field, what));
}

const J* SpecModelReader::raw(std::string_view field) const {
  const auto& m = doc_.at("model");
  auto it = m.find(field);
  if (it == m.end() || it->is_null()) return nullptr;
  return &*it;
}

const J* SpecModelReader::checked(std::string_view field) { return raw(field); }

namespace {
J normalised(const SpecModelReader& r, std::string_view field, const J& v) {
  const FieldDef* f = find_def("model", field);
  if (!f) r.fail(field, "unknown field");
  return check_value(*f, v, [&](const std::string& what) { r.fail(field, what); });
}
}  // namespace

std::int64_t SpecModelReader::require_int(std::string_view field) {
  const J* v = checked(field);
  if (!v) fail(field, "required field is missing");
  return normalised(*this, field, *v).get<std::int64_t>();
}

std::int64_t SpecModelReader::int_or(std::string_view field, std::int64_t fallback) {
  const J* v = checked(field);
  return v ? normalised(*this, field, *v).get<std::int64_t>() : fallback;
}

std::optional<std::int64_t> SpecModelReader::optional_int(std::string_view field) {
  const J* v = checked(field);
  if (!v) return std::nullopt;
  return normalised(*this, field, *v).get<std::int64_t>();
}

bool SpecModelReader::bool_or(std::string_view field, bool fallback) {
  const J* v = checked(field);
  return v ? normalised(*this, field, *v).get<bool>() : fallback;
}

double SpecModelReader::number_or(std::string_view field, double fallback) {
  const J* v = checked(field);
  return v ? normalised(*this, field, *v).get<double>() : fallback;
}

std::string SpecModelReader::string_or(std::string_view field, std::string fallback) {
  const J* v = checked(field);
  return v ? normalised(*this, field, *v).get<std::string>() : fallback;
}

std::vector<std::string> SpecModelReader::fields() const {
  std::vector<std::pair<int, std::string>> ordered;
  for (const auto& [name, value] : doc_.at("model").items()) ordered.emplace_back(line(name), name);
  std::stable_sort(ordered.begin(), ordered.end());
  std::vector<std::string> out;
  for (auto& [l, n] : ordered) out.push_back(std::move(n));
  return out;
}

std::vector<int> spec_moe_layer_pattern(SpecModelReader& r, std::int64_t num_layers) {
  const J* v = r.raw("moe_layer_freq");
  const auto L = static_cast<std::size_t>(num_layers);
  if (!v) return std::vector<int>(L, 1);
  const J n = normalised(r, "moe_layer_freq", *v);
  if (n.is_number_integer()) {
    const auto every = n.get<std::int64_t>();
    std::vector<int> out(L);
    for (std::size_t i = 0; i < L; ++i) out[i] = static_cast<std::int64_t>(i) % every == 0 ? 1 : 0;
    return out;
  }
  if (n.is_array()) {
    if (n.size() != L) r.fail("moe_layer_freq", fmt::format("gives {} entries for {} layers", n.size(), num_layers));
    std::vector<int> out;
    for (const auto& item : n) out.push_back(static_cast<int>(item.get<std::int64_t>()));
    return out;
  }
  const std::string text = n.get<std::string>();
  try {
    return parse_moe_layer_freq(text, num_layers);
  } catch (const ConfigError& e) {
    std::string what = e.what();
    if (auto pos = what.find("': "); what.rfind("--moe-layer-freq '", 0) == 0 && pos != std::string::npos)
      what = what.substr(pos + 3);
    r.fail("moe_layer_freq", what);
  }
}

// -------------------------------------------------------------------------------------------------
// The model of a spec: through the adapter, or a Hugging Face base with overrides.

namespace {

[[noreturn]] void rethrow_with_prefix(const Error& e, const std::string& prefix) {
  const std::string msg = prefix + e.what();
  switch (e.code()) {
    case ExitCode::kUsage: throw UsageError(msg);
    case ExitCode::kBadModel: throw ConfigError(msg);
    case ExitCode::kBadLayout: throw LayoutError(msg);
    case ExitCode::kPlugin: throw PluginError(msg);
    case ExitCode::kNotFound: throw NotFoundError(msg);
    default: throw Error(e.code(), msg);
  }
}

}  // namespace

const SpecModelMapping* spec_model_mapping(const Registry& registry) {
  return dynamic_cast<const SpecModelMapping*>(registry.find_adapter("spec_file"));
}

ModelSpec load_spec_model(const SpecFile& spec, const Registry& registry, const SourceOptions& options) {
  if (!spec.has_model)
    throw ConfigError(
        fmt::format("{}: the file has no model section (give one, or MODEL on the command line)", spec.path));
  const std::string stem = file_stem(spec.path);
  if (!spec.hf) {
    if (!registry.best_adapter(spec.model_document))
      throw PluginError(
          fmt::format("{}: no loaded config adapter reads spec files (the spec_file plugin; see `mme "
                      "plugins`)",
                      spec.path));
    return adapt_config(spec.model_document, stem, spec.path, registry);
  }
  const SpecModelMapping* mapping = spec_model_mapping(registry);
  if (!mapping)
    throw PluginError(
        fmt::format("{}: no loaded config adapter maps the model fields of spec files onto a Hugging "
                    "Face base (the spec_file plugin; see `mme plugins`)",
                    spec.path));
  SpecModelReader r(spec.model_document);
  std::string arg = *spec.hf;
  const fs::path next_to_spec = fs::path(spec.path).parent_path() / arg;
  std::error_code ec;
  if (!fs::path(arg).is_absolute() && fs::exists(next_to_spec, ec)) arg = next_to_spec.string();
  ModelSpec m;
  try {
    m = load_model(arg, registry, options);
  } catch (const Error& e) {
    rethrow_with_prefix(e, fmt::format("{}:{}: model.hf: ", spec.path, r.line("hf")));
  }
  const std::string base_source = m.source;
  const std::int64_t base_layers = m.num_layers;
  mapping->apply_overrides(m, r, *spec.hf);
  // A shortened or lengthened copy of a real model is worth saying: the report would otherwise
  // carry the base's name over another model's numbers.
  if (r.given("num_layers") && m.num_layers != base_layers) {
    m.warnings.push_back(printable(fmt::format("num_layers {} ({}:{}) overrides the {} layers of {}", m.num_layers,
                                               spec.path, r.line("num_layers"), base_layers, *spec.hf)));
    spdlog::warn("{}", m.warnings.back());
  }
  m.name = r.string_or("name", m.name);
  m.source = fmt::format("{} (hf: {})", spec.path, base_source);
  for (const auto& f : r.fields()) m.keys_read.push_back("model." + f);
  try {
    validate_model_spec(m);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", spec.path, e.what()));
  }
  return m;
}

}  // namespace mme
