// Spec files: a model and its training setup in one YAML or JSON file, in the layout of the
// configuration guide (sections model, parallelism, training, infrastructure, precision) with
// Megatron-LM's TransformerConfig names. docs/spec-files.md describes every field.
//
//   read_spec_file()      parses the file, checks every field name (did-you-mean) and type,
//                         and gives the model section as a config document for the spec_file
//                         adapter plus a TrainingSetup of the other sections (guide defaults);
//   load_spec_model()     turns the model section into a ModelSpec: through the registry (the
//                         spec_file adapter) or, with `hf: MODEL`, by loading MODEL and
//                         applying the section's fields as overrides (the adapter's
//                         SpecModelMapping);
//   check_spec_layout()   the guide's constraints on the final model and setup;
//   write_spec_yaml/json  a resolved model and setup as a spec file (`mme init`, --dump-config);
//                         the model section comes from the adapter's SpecModelMapping.
//
// The host side (framework/src/inputs/spec/) knows the fields and sections; which block kinds
// the model section stands for is the spec_file adapter's (plugins/adapters/spec_file/).
//
// Every error names the file, the line and the field: `spec.yaml:7: model.num_layer: unknown
// field (did you mean 'num_layers'?)`. Format errors are ConfigError (exit 3), violated layout
// constraints LayoutError (exit 4), a missing file NotFoundError (exit 6).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mme/engine/registry.hpp"
#include "mme/inputs/model_source.hpp"
#include "mme/sdk/config_adapter.hpp"
#include "mme/sdk/model_spec.hpp"
#include "mme/sdk/training_setup.hpp"

namespace mme {

enum class SpecFormat { kYaml, kJson };

// One field of the format: the table docs/spec-files.md, the template comments and the
// checks are built from.
struct SpecFieldInfo {
  std::string section;       // model, parallelism, training, infrastructure, precision
  std::string name;          // e.g. num_layers
  std::string type;          // e.g. "positive integer", "true/false", "rope | learned_absolute | none"
  std::string default_text;  // "required", "null", "4096", "num_attention_heads", ...
  std::string summary;       // one line
  std::string flag;          // the `mme estimate` flag that overrides it, without "--" ("" if none)
};
const std::vector<SpecFieldInfo>& spec_fields();
// The sections, in file order.
const std::vector<std::string>& spec_sections();

struct SpecFile {
  std::string path;  // as given; errors start with it
  SpecFormat format = SpecFormat::kYaml;

  bool has_model = false;         // the file has a model section
  std::optional<std::string> hf;  // model.hf: the base model (a MODEL argument)
  // The model section as a config document: {"mme_source": "spec-file", "file": path,
  // "model": {field: value, ...}, "lines": {field: line, ...}, "section_line": line}. Values
  // are typed and checked; the spec_file adapter (or the hf overrides) maps them.
  nlohmann::json model_document;

  // The parallelism, training, infrastructure and precision sections over the guide's
  // defaults (ETP 1, no sequence parallelism, distributed optimizer, bf16, ...).
  TrainingSetup setup;
  std::optional<std::string> gpu;  // infrastructure.gpu

  // Lines (1-based) of "section" and "section.field" keys as written.
  std::map<std::string, int> lines;
  int line_of(const std::string& key) const;  // 0 when absent

  // Required fields of the non-model sections the file does not give. The command line may
  // supply them (`flag`); otherwise `message` is the error to report. `setup` holds the
  // command line's defaults for them meanwhile.
  struct Missing {
    std::string field;  // "parallelism.tensor_model_parallel_size"
    std::string flag;   // "tp"
    std::string message;
  };
  std::vector<Missing> missing;
};

// By extension (.json; .yaml / .yml), else JSON when the first non-blank character is '{'.
SpecFormat spec_format_for(const std::filesystem::path& path, std::string_view text);
// Reads and checks a spec file. NotFoundError if it cannot be read, ConfigError for bad content.
SpecFile read_spec_file(const std::filesystem::path& path);
SpecFile parse_spec_text(std::string_view text, const std::string& source, SpecFormat format);

// True for the model document of a spec file (what the spec_file adapter claims).
bool is_spec_file_config(const nlohmann::json& config);

// Typed access to a spec file's model document, for the spec_file adapter. Every getter checks
// the field's type and range again (the document may come from elsewhere) and every error is a
// ConfigError `<file>:<line>: model.<field>: <what>`.
class SpecModelReader {
 public:
  explicit SpecModelReader(const nlohmann::json& document);

  const std::string& file() const { return file_; }
  bool given(std::string_view field) const;  // written in the file (null included)
  bool has(std::string_view field) const;    // written and not null
  int line(std::string_view field) const;    // its line, else the section's line

  std::int64_t require_int(std::string_view field);  // a required integer field
  std::int64_t int_or(std::string_view field, std::int64_t fallback);
  std::optional<std::int64_t> optional_int(std::string_view field);  // null / absent = nullopt
  bool bool_or(std::string_view field, bool fallback);
  double number_or(std::string_view field, double fallback);
  std::string string_or(std::string_view field, std::string fallback);
  const nlohmann::json* raw(std::string_view field) const;  // checked value, or nullptr if absent

  [[noreturn]] void fail(std::string_view field, const std::string& what) const;
  // The fields written, in file order ("hf" and "name" included).
  std::vector<std::string> fields() const;

 private:
  const nlohmann::json* checked(std::string_view field);
  const nlohmann::json& doc_;
  std::string file_;
};

// The layer pattern of model.moe_layer_freq (an integer N: every N-th layer; a list of 0/1; or
// Megatron's string such as "([0]*3+[1]*58)"): one 0/1 per layer. Errors name the field.
std::vector<int> spec_moe_layer_pattern(SpecModelReader& reader, std::int64_t num_layers);

// One field of a written model section: its value, or a commented-out line (a field that does
// not apply, shown with its default).
struct SpecModelField {
  std::string name;
  nlohmann::ordered_json value;
  bool commented = false;
};

// The mapping between a spec file's model section and a ModelSpec beyond what adapt() reads:
// the spec_file adapter implements it (plugins/adapters/spec_file/), the one place that names
// the block kinds the section's fields stand for. The host reaches it through the registry
// (spec_model_mapping()).
class SpecModelMapping : public ConfigAdapter {
 public:
  // The section's fields over a model loaded from `hf: MODEL` (docs/spec-files.md lists which
  // apply); errors name the field through `reader`.
  virtual void apply_overrides(ModelSpec& model, SpecModelReader& reader, const std::string& hf) const = 0;
  // Why `model` cannot be written field by field ("" when it can).
  virtual std::string inexpressible(const ModelSpec& model) const = 0;
  // The model section of a model that can be written field by field, in file order; `setup`
  // gives the dropout it overrides.
  virtual std::vector<SpecModelField> model_section(const ModelSpec& model, const TrainingSetup& setup) const = 0;
};

// The registry's adapter "spec_file" as a SpecModelMapping; nullptr if none is loaded.
const SpecModelMapping* spec_model_mapping(const Registry& registry);

// The model of a spec file: without `hf`, the model document through the registry's best
// adapter (the spec_file plugin); with `hf: MODEL`, MODEL loaded like a MODEL argument (a
// relative path is looked up next to the spec file first) and the section's other fields
// applied as overrides (docs/spec-files.md lists which). ConfigError if there is no model section.
ModelSpec load_spec_model(const SpecFile& spec, const Registry& registry, const SourceOptions& options = {});

// The guide's constraints on the final model and setup (the file's values after command-line
// flags): world_size = pp x tp x cp x dp = pp x ep x etp x edp, num_experts divisible by
// expert_model_parallel_size, seq_length <= max_position_embeddings, heads by TP, uneven
// pipelines, sequence parallelism. Errors name the file, line and field; a value that came
// from the command line is named as such. `spec` may be null (a spec about to be written):
// the errors then name the field only. Throws LayoutError.
void check_spec_layout(const SpecFile* spec, const ModelSpec& model, const TrainingSetup& setup);

struct SpecWriteOptions {
  std::vector<std::string> header;   // comment lines at the top of the YAML (without "# ")
  std::optional<std::string> gpu;    // infrastructure.gpu
  const SpecFile* origin = nullptr;  // the spec the model came from, if any
};

// Why `model` cannot be written field by field ("" when it can): layers that differ in their
// attention, sandwich norms, layer kinds of other plugins, no spec_file adapter in `registry`,
// ... Such a model is written as `hf: <model.name>` (plus the origin spec's overrides).
std::string spec_model_inexpressible(const ModelSpec& model, const Registry& registry);

// A model and a setup (as Estimator::run resolved it, or before) as a commented YAML spec file /
// a JSON document with the same fields. Reading the result gives the same estimate. The model
// section comes from the registry's SpecModelMapping.
std::string write_spec_yaml(const ModelSpec& model, const TrainingSetup& setup, const Registry& registry,
                            const SpecWriteOptions& options = {});
std::string write_spec_json(const ModelSpec& model, const TrainingSetup& setup, const Registry& registry,
                            const SpecWriteOptions& options = {});

// The closest of `candidates` to `word` (ignoring case), or "" when none is close.
std::string closest_name(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace mme
