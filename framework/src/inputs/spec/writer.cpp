// Writing spec files (`mme init`, --dump-config): a resolved model and setup as a commented
// YAML spec file or a JSON document with the same fields.
#include <algorithm>
#include <cctype>

#include <fmt/core.h>

#include "mme/inputs/spec_file.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/input_text.hpp"
#include "mme/sdk/json_text.hpp"

#include "spec_internal.hpp"

namespace mme {

using namespace spec_detail;

namespace {

using OutField = SpecModelField;

// The model section of a model that cannot be written field by field: its name as `hf`, plus
// the origin spec's own overrides.
std::vector<OutField> hf_model_fields(const ModelSpec& m, const TrainingSetup& s, const SpecWriteOptions& o) {
  std::vector<OutField> out;
  if (o.origin && o.origin->hf) {
    const auto& fields = o.origin->model_document.at("model");
    std::vector<std::pair<int, std::string>> ordered;
    for (const auto& [k, v] : fields.items()) ordered.emplace_back(o.origin->line_of("model." + k), k);
    std::sort(ordered.begin(), ordered.end());
    for (const auto& [line, k] : ordered) out.push_back({k, OJ::parse(json_text(fields.at(k)))});
  } else {
    out.push_back({"hf", OJ(m.name)});
  }
  auto set = [&](const char* name, OJ v) {
    for (auto& f : out)
      if (f.name == name) {
        f.value = std::move(v);
        return;
      }
    out.push_back({name, std::move(v)});
  };
  if (s.hidden_dropout) set("hidden_dropout", *s.hidden_dropout);
  if (s.attention_dropout) set("attention_dropout", *s.attention_dropout);
  return out;
}

std::vector<OutField> section_fields(const std::string& section, const TrainingSetup& s, const SpecWriteOptions& o) {
  std::vector<OutField> out;
  for (const auto& f : field_defs()) {
    if (section != f.section) continue;
    if (std::string_view(f.name) == "gpu") {
      out.push_back({f.name, o.gpu ? OJ(*o.gpu) : OJ()});
      continue;
    }
    out.push_back({f.name, OJ::parse(json_text(setup_value(f, s)))});
  }
  return out;
}

bool plain_yaml_string(const std::string& s) {
  if (s.empty()) return false;
  // ^[A-Za-z_][A-Za-z0-9_./@+-]*$, by hand (std::regex recurses once per character).
  if (!std::isalpha(static_cast<unsigned char>(s[0])) && s[0] != '_') return false;
  for (const char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string_view("_./@+-").find(c) == std::string_view::npos)
      return false;
  return typed_plain_scalar(s).kind == Node::Kind::kString;
}

std::string yaml_scalar(const OJ& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  if (v.is_number_float()) return number_text(v.get<double>());
  if (v.is_string()) return plain_yaml_string(v.get<std::string>()) ? v.get<std::string>() : json_text(v);
  if (v.is_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + yaml_scalar(v[i]);
    return out + "]";
  }
  return json_text(v);
}

std::string field_comment(const std::string& section, const std::string& name) {
  const FieldDef* f = find_def(section, name);
  if (!f) return "";
  const std::string d = f->default_text;
  return fmt::format("{} ({})", f->summary, d == "required" ? "required" : "default: " + d);
}

struct WrittenSpec {
  std::vector<std::pair<std::string, std::vector<OutField>>> sections;
  std::string hf_reason;  // why the model is written as `hf:`
};

std::string inexpressible(const ModelSpec& m, const SpecModelMapping* mapping) {
  if (!mapping) return "no loaded config adapter writes spec files (the spec_file plugin; see `mme plugins`)";
  return mapping->inexpressible(m);
}

WrittenSpec build_written(const ModelSpec& m, const TrainingSetup& setup, const Registry& registry,
                          const SpecWriteOptions& o) {
  const SpecModelMapping* mapping = spec_model_mapping(registry);
  // The interleaved schedule is written the way it was asked for: a layout string or layers per
  // chunk fix the chunks themselves, so the resolved count stays out.
  TrainingSetup s = setup;
  if (s.pipeline.layers_per_virtual_stage || !s.pipeline.layout.empty()) s.parallel.vpp = 1;
  WrittenSpec w;
  w.hf_reason = inexpressible(m, mapping);
  // A model with no Hugging Face config behind it (a launch line, a spec file's own fields) has no
  // `hf:` base to fall back on: what the fields cannot say would be lost.
  const bool from_hf = (o.origin && o.origin->hf) || (m.model_type != "megatron-args" && m.adapter != "spec_file");
  if (!w.hf_reason.empty() && mapping && !from_hf)
    throw UsageError(
        fmt::format("{} cannot be written as a spec file: {}, which no spec field says, and it has no "
                    "Hugging Face config to write as its base",
                    m.name, w.hf_reason));
  w.sections.emplace_back("model", w.hf_reason.empty() ? mapping->model_section(m, s) : hf_model_fields(m, s, o));
  for (const auto& sec : sections())
    if (sec != "model") w.sections.emplace_back(sec, section_fields(sec, s, o));
  return w;
}

}  // namespace

std::string spec_model_inexpressible(const ModelSpec& model, const Registry& registry) {
  return inexpressible(model, spec_model_mapping(registry));
}

std::string write_spec_yaml(const ModelSpec& model, const TrainingSetup& setup, const Registry& registry,
                            const SpecWriteOptions& options) {
  const WrittenSpec w = build_written(model, setup, registry, options);
  std::string out;
  // A header line may hold input (`mme init MODEL`): a newline in it would end the comment.
  for (const auto& h : options.header) out += h.empty() ? "#\n" : "# " + printable(h) + "\n";
  if (!w.hf_reason.empty())
    out += fmt::format(
        "# The model is written as `hf:` (its own config) because {};\n"
        "# docs/spec-files.md lists the fields that may override such a base.\n",
        w.hf_reason);
  for (const auto& [section, fields] : w.sections) {
    if (!out.empty()) out += "\n";
    out += section + ":\n";
    for (const auto& f : fields) {
      std::string line = (f.commented ? "  # " : "  ") + f.name + ": " + yaml_scalar(f.value);
      const std::string comment = field_comment(section, f.name);
      if (!comment.empty()) {
        const std::size_t column = 44;
        line += line.size() + 1 < column ? std::string(column - line.size(), ' ') : std::string("  ");
        line += "# " + comment;
      }
      out += line + "\n";
    }
  }
  return out;
}

std::string write_spec_json(const ModelSpec& model, const TrainingSetup& setup, const Registry& registry,
                            const SpecWriteOptions& options) {
  const WrittenSpec w = build_written(model, setup, registry, options);
  OJ doc = OJ::object();
  for (const auto& [section, fields] : w.sections) {
    OJ sec = OJ::object();
    for (const auto& f : fields)
      if (!f.commented) sec[f.name] = f.value;
    doc[section] = sec;
  }
  return json_text(doc, 2) + "\n";
}

}  // namespace mme
