// The JSON Schemas derived from the tables (mme/inputs/json_schema.hpp): spec files from the
// spec-field table (fields.cpp, which takes the setup sections from the knobs), the JSON
// `setup` block from the knobs' JSON keys. Both follow the readers and writers themselves: an
// enum field accepts exactly the spellings check_value() accepts, the setup block's values are
// the ones the knobs' JSON getters produce.
#include "mme/inputs/json_schema.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/core.h>

#include "mme/engine/plugin_loader.hpp"
#include "mme/inputs/setup_schema.hpp"
#include "mme/inputs/spec_file.hpp"

#include "spec_internal.hpp"

namespace mme {

namespace {

using spec_detail::FieldDef;
using spec_detail::Ty;
using OJ = nlohmann::ordered_json;
using J = nlohmann::json;

constexpr const char* kDraft = "https://json-schema.org/draft/2020-12/schema";

// A regular expression (ECMA-262, as JSON Schema has them) matching `word` ignoring ASCII case.
std::string case_insensitive(const std::string& word) {
  std::string out;
  for (const char c : word) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      out += fmt::format("[{}{}]", static_cast<char>(std::tolower(u)), static_cast<char>(std::toupper(u)));
    } else if (std::isalnum(u) || c == '_' || c == ' ' || c == '-' || c == '=' || c == ':' || c == ',') {
      out += c;
    } else {
      out += '\\';
      out += c;
    }
  }
  return out;
}

std::string alternatives_pattern(const std::vector<std::string>& words) {
  std::string alts;
  for (const auto& w : words) alts += (alts.empty() ? "" : "|") + case_insensitive(w);
  return "^(?:" + alts + ")$";
}

// Every spelling of an enum field the spec reader accepts: its values, and where the field is a
// knob's, the names of the knob's enum table and its "not set" spelling, each kept only when
// check_value() takes it (so a refused spelling, e.g. cp_comm_type's "allgather", stays out).
std::vector<std::string> accepted_spellings(const FieldDef& f) {
  std::vector<std::string> candidates(f.values.begin(), f.values.end());
  if (f.knob) {
    if (f.knob->table)
      for (const auto& n : *f.knob->table) candidates.emplace_back(n.name);
    if (f.knob->null_name) candidates.emplace_back(f.knob->null_name);
  }
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& c : candidates) {
    if (!seen.insert(lower(c)).second) continue;
    try {
      (void)spec_detail::check_value(f, J(c), [](const std::string& what) { throw std::invalid_argument(what); });
      out.push_back(c);
    } catch (const std::exception&) {
    }
  }
  return out;
}

// The module names of a kModules field (the recompute modules unless its knob says otherwise).
std::vector<std::string> module_names(const SetupKnob* k) {
  const std::uint32_t all = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::string> out = split(k ? knob_modules_text(*k, all) : recompute_modules_to_string(all), ',');
  if (k && k->modules_may_be_empty) out.emplace_back("full");  // CUDA graphs: `full`, the whole layer
  return out;
}

// recompute_modules as text: names separated by commas, spaces, brackets or quotes, as
// parse_recompute_modules() reads them (names match exactly).
std::string modules_text_pattern(const SetupKnob* k, bool at_least_one) {
  std::string names;
  for (const auto& n : module_names(k)) names += (names.empty() ? "" : "|") + n;
  const std::string sep = R"([\s\[\],'"])";
  const std::string list = fmt::format("(?:{0})(?:{1}+(?:{0}))*", names, sep);
  return fmt::format("^{0}*{1}{0}*$", sep, at_least_one ? list : "(?:" + list + ")?");
}

OJ spec_value_schema(const FieldDef& f) {
  switch (f.type) {
    case Ty::kInt: return {{"type", "integer"}, {"minimum", f.min}, {"maximum", f.max}};
    case Ty::kNumber: {
      OJ s{{"type", "number"}};
      s[f.lo_open ? "exclusiveMinimum" : "minimum"] = f.lo;
      s[f.hi_open ? "exclusiveMaximum" : "maximum"] = f.hi;
      return s;
    }
    case Ty::kBool: return {{"type", "boolean"}};
    case Ty::kEnum: {
      // The canonical spellings (what editors offer), or any accepted spelling in any case.
      return {{"anyOf",
               {{{"enum", f.values}}, {{"type", "string"}, {"pattern", alternatives_pattern(accepted_spellings(f))}}}}};
    }
    case Ty::kString: return {{"type", "string"}, {"minLength", 1}};
    case Ty::kModules: {
      // An empty list is refused, unless the knob gives it a meaning (CUDA graphs: the whole layer).
      const bool may_be_empty = f.knob && f.knob->modules_may_be_empty;
      OJ list{{"type", "array"}, {"items", {{"type", "string"}, {"pattern", modules_text_pattern(f.knob, false)}}}};
      if (!may_be_empty) list["contains"] = {{"type", "string"}, {"pattern", modules_text_pattern(f.knob, true)}};
      list["examples"] = {module_names(f.knob)};
      return {{"anyOf", {list, {{"type", "string"}, {"pattern", modules_text_pattern(f.knob, !may_be_empty)}}}}};
    }
    case Ty::kLayerFreq:
      return {{"anyOf",
               {{{"type", "integer"}, {"minimum", 1}},
                {{"type", "array"}, {"items", {{"type", "integer"}, {"minimum", 0}, {"maximum", 1}}}},
                {{"type", "string"}, {"minLength", 1}}}}};
    case Ty::kFp8:
      return {{"anyOf",
               {{{"type", "boolean"}}, {{"type", "string"}, {"pattern", alternatives_pattern({"e4m3", "hybrid"})}}}}};
    case Ty::kEnvList:
      return {{"type", "array"}, {"items", {{"type", "string"}, {"pattern", "^[A-Za-z_][A-Za-z0-9_]{0,127}="}}}};
  }
  throw std::logic_error(fmt::format("spec field {}.{}: no schema for its type", f.section, f.name));
}

std::string field_description(const FieldDef& f) {
  std::string d = f.summary;
  if (*f.default_text) d += fmt::format(" (default: {})", f.default_text);
  if (*f.flag) d += fmt::format("; the command line's --{} overrides it", f.flag);
  return d;
}

// A field as written in the file: its value or, when optional, null (the default). A required
// field may be null too as far as reading goes (then it is missing): `required_fields` of the
// section refuse that.
OJ spec_property(const FieldDef& f, bool nullable) {
  OJ value = spec_value_schema(f);
  OJ p{{"description", field_description(f)}};
  if (nullable)
    p["anyOf"] = OJ::array({value, {{"type", "null"}}});
  else
    for (auto it = value.begin(); it != value.end(); ++it) p[it.key()] = it.value();
  return p;
}

// A section: its fields, nothing else. The required ones of the setup sections are refused as null
// by their property and as missing by `required`; the model section's by its `else` (no hf).
OJ spec_section_schema(const std::string& section, const std::string& title) {
  OJ props = OJ::object(), required = OJ::array();
  for (const auto& f : spec_detail::field_defs()) {
    if (section != f.section) continue;
    props[f.name] = spec_property(f, !f.required || section == "model");
    if (f.required && section != "model") required.push_back(f.name);
  }
  OJ s{{"title", title}, {"type", "object"}, {"properties", props}, {"additionalProperties", false}};
  if (!required.empty()) s["required"] = required;
  return s;
}

// The required fields of the model section without `hf`: present and not null.
OJ model_required_clause(const std::string& section) {
  OJ names = OJ::array(), props = OJ::object();
  for (const auto& f : spec_detail::field_defs()) {
    if (section != f.section || !f.required) continue;
    names.push_back(f.name);
    props[f.name] = {{"not", {{"type", "null"}}}};
  }
  if (names.empty()) return OJ::object();
  return {{"required", names}, {"properties", props}};
}

}  // namespace

std::string schema_id(std::string_view file) {
  return fmt::format("https://megatron-memory-estimator.invalid/schema/v{}/{}", kSchemaVersion, file);
}

OJ spec_file_json_schema() {
  OJ defs = OJ::object();
  OJ sections = OJ::object();
  OJ required_sections = OJ::array();
  for (const auto& section : spec_detail::sections()) {
    OJ s = spec_section_schema(section, fmt::format("the {} section", section));
    if (section == "model") {
      // The model fields are required unless the section names a Hugging Face base (`hf`).
      if (const OJ req = model_required_clause(section); !req.empty()) {
        s["if"] = {{"required", {"hf"}}};
        s["else"] = req;
      }
    }
    const bool has_required = s.contains("required") || s.contains("else");
    defs[section] = s;
    const OJ ref{{"$ref", "#/$defs/" + section}};
    // An empty section reads as null; a section with required fields cannot be empty.
    if (has_required)
      sections[section] = ref;
    else
      sections[section] = {{"anyOf", {ref, {{"type", "null"}}}}};
    if (section != "model" && has_required) required_sections.push_back(section);
  }
  return {{"$schema", kDraft},
          {"$id", schema_id("spec-file.schema.json")},
          {"schema_version", kSchemaVersion},
          {"title", "mme spec file"},
          {"description",
           "A model and its training setup (docs/spec-files.md), as `mme estimate --config FILE` reads it, in YAML or "
           "JSON. Generated from the spec-field table (framework/src/inputs/spec/fields.cpp and the setup schema's "
           "knobs). Choices ignore case; null means the default. The required setup fields may instead be given on "
           "the command line (--tp, --pp, --micro-batch-size, --seq-length, --num-gpus); the model section may be "
           "left out when MODEL is on the command line. Cross-field rules (world size = PP x TP x CP x DP, a "
           "moe_layer_freq list of num_layers items, ...) are the reader's (mme estimate --config FILE "
           "--dump-config checks them)."},
          {"x-mme-generated-by", "schema/generate_schemas.cpp from mme::spec_file_json_schema()"},
          {"type", "object"},
          {"properties", sections},
          {"required", required_sections},
          {"additionalProperties", false},
          {"$defs", defs}};
}

namespace {

J knob_json(const SetupKnob& k, const TrainingSetup& s) { return k.json_get ? k.json_get(s) : k.get(s); }

// The setups a key's values are read from: the defaults, and one setup per value of every switch
// and choice (a key may follow another knob: sharded_data_parallel names the FSDP kind either
// switch sets, main_grads_dtype follows the precision).
const std::vector<TrainingSetup>& probe_setups() {
  static const std::vector<TrainingSetup> setups = [] {
    std::vector<TrainingSetup> out{TrainingSetup{}};
    auto with = [&](const SetupKnob& k, const J& v) {
      try {
        TrainingSetup s;
        k.set(s, v);
        out.push_back(s);
      } catch (const std::exception&) {
      }
    };
    for (const auto& k : setup_knobs()) {
      if (k.kind == KnobKind::kBool) {
        with(k, J(true));
        with(k, J(false));
      }
      if (k.kind != KnobKind::kEnum) continue;
      std::vector<std::string> texts(k.values.begin(), k.values.end());
      if (k.null_name) texts.emplace_back(k.null_name);
      for (const auto& t : texts) {
        try {
          with(k, parse_knob_text(k, k.id, t));
        } catch (const std::exception&) {
        }
      }
    }
    return out;
  }();
  return setups;
}

// The values a JSON key takes over the probe setups.
std::vector<J> json_samples(const SetupKnob& k) {
  std::vector<J> out;
  for (const auto& s : probe_setups()) out.push_back(knob_json(k, s));
  return out;
}

OJ setup_value_schema(const std::vector<const SetupKnob*>& knobs) {
  const SetupKnob& k = *knobs.front();
  std::vector<J> samples;
  for (const auto* kn : knobs)
    for (auto& v : json_samples(*kn)) samples.push_back(std::move(v));
  const bool nullable = std::any_of(samples.begin(), samples.end(), [](const J& v) { return v.is_null(); });
  const bool all_bool =
      std::all_of(samples.begin(), samples.end(), [](const J& v) { return v.is_null() || v.is_boolean(); });
  OJ value;
  if (k.kind == KnobKind::kEnum || (k.kind == KnobKind::kBool && !all_bool)) {
    OJ values = OJ::array();
    std::set<std::string> seen;
    for (const auto& v : samples)
      if (v.is_string() && seen.insert(v.get<std::string>()).second) values.push_back(v.get<std::string>());
    value = {{"enum", values}};
  } else {
    switch (k.kind) {
      case KnobKind::kInt: value = {{"type", "integer"}, {"minimum", k.min}, {"maximum", k.max}}; break;
      case KnobKind::kNumber:
        value = {{"type", "number"}};
        value[k.lo_open ? "exclusiveMinimum" : "minimum"] = k.lo;
        value[k.hi_open ? "exclusiveMaximum" : "maximum"] = k.hi;
        break;
      case KnobKind::kBool: value = {{"type", "boolean"}}; break;
      case KnobKind::kString: value = {{"type", "string"}}; break;
      case KnobKind::kModules: {
        std::string names;
        for (const auto& n : module_names(&k)) names += (names.empty() ? "" : "|") + n;
        const std::string list = fmt::format("(?:{0})(?:,(?:{0}))*", names);
        value = {{"type", "string"}, {"pattern", k.modules_may_be_empty ? "^(?:" + list + ")?$" : "^" + list + "$"}};
        break;
      }
      case KnobKind::kEnv:
        value = {{"type", "array"}, {"items", {{"type", "string"}, {"pattern", "^[A-Za-z_][A-Za-z0-9_]{0,127}="}}}};
        break;
      case KnobKind::kEnum: break;
    }
  }
  std::string description = *k.doc ? k.doc : k.help;
  if (*k.spec_summary && description.empty()) description = k.spec_summary;
  OJ p = OJ::object();
  if (!description.empty()) p["description"] = description;
  if (nullable)
    p["anyOf"] = OJ::array({value, {{"type", "null"}}});
  else
    for (auto it = value.begin(); it != value.end(); ++it) p[it.key()] = it.value();
  return p;
}

}  // namespace

OJ setup_block_json_schema() {
  // The knobs by JSON key, in table order (use_megatron_fsdp and use_torch_fsdp2 share
  // sharded_data_parallel).
  std::vector<std::string> keys;
  std::map<std::string, std::vector<const SetupKnob*>> by_key;
  for (const auto& k : setup_knobs()) {
    if (!k.json_key) continue;
    auto& list = by_key[k.json_key];
    if (list.empty()) keys.emplace_back(k.json_key);
    list.push_back(&k);
  }
  OJ props = OJ::object(), required = OJ::array();
  for (const auto& key : keys) {
    const auto& knobs = by_key.at(key);
    props[key] = setup_value_schema(knobs);
    if (std::none_of(knobs.begin(), knobs.end(), [](const SetupKnob* k) { return k->json_when != nullptr; }))
      required.push_back(key);
  }
  // Derived by resolve_setup, not knobs (setup_to_json_block()).
  props["dp"] = {{"description", "data parallel size"}, {"type", "integer"}, {"minimum", 1}};
  props["expert_dp"] = {{"description", "expert data parallel size"}, {"type", "integer"}, {"minimum", 1}};
  props["num_micro_batches"] = {{"description", "micro-batches per step; null without a global batch size"},
                                {"anyOf", {{{"type", "integer"}, {"minimum", 1}}, {{"type", "null"}}}}};
  for (const char* k : {"dp", "expert_dp", "num_micro_batches"}) required.push_back(k);
  return {{"$schema", kDraft},
          {"$id", schema_id("setup.schema.json")},
          {"schema_version", kSchemaVersion},
          {"title", "the training setup block of mme's JSON documents"},
          {"description",
           "`setup` of `mme estimate --json` and of each plan of `mme plan --json`: the training setup after defaults "
           "(docs/cli.md). Generated from the setup schema's knobs (framework/src/inputs/setup_knobs_*.cpp); the "
           "keys of Megatron-FSDP and FSDP2 appear only with those."},
          {"x-mme-generated-by", "schema/generate_schemas.cpp from mme::setup_block_json_schema()"},
          {"type", "object"},
          {"properties", props},
          {"required", required},
          {"additionalProperties", false}};
}

std::string spec_file_schema_reference() {
  namespace fs = std::filesystem;
  const fs::path exe = executable_dir();
  if (!exe.empty()) {
    const fs::path file = (exe / ".." / "share" / "mme" / "schema" / "spec-file.schema.json").lexically_normal();
    std::error_code ec;
    if (fs::is_regular_file(file, ec)) {
      // A file URI: every byte but the unreserved ones and '/' percent-encoded.
      std::string uri = "file://";
      for (const char c : file.string()) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u) || c == '/' || c == '-' || c == '.' || c == '_' || c == '~')
          uri += c;
        else
          uri += fmt::format("%{:02X}", static_cast<unsigned>(u));
      }
      return uri;
    }
  }
  return schema_id("spec-file.schema.json");
}

}  // namespace mme
