// The setup schema (mme/inputs/setup_schema.hpp) as data, so a host (the Python module's keyword
// arguments, from_megatron_args; the page's form) derives its names from the one table instead
// of keeping a copy.
#include <string_view>

#include "mme/commands/documents.hpp"
#include <mme/inputs/setup_schema.hpp>
#include <mme/sdk/version.hpp>

namespace mme::commands {

namespace {

using J = nlohmann::ordered_json;

const char* kind_name(KnobKind k) {
  switch (k) {
    case KnobKind::kInt: return "int";
    case KnobKind::kNumber: return "number";
    case KnobKind::kBool: return "bool";
    case KnobKind::kEnum: return "enum";
    case KnobKind::kString: return "string";
    case KnobKind::kModules: return "modules";
    case KnobKind::kEnv: return "env";
  }
  return "unknown";
}

J names(const std::vector<const char*>& v) {
  J out = J::array();
  for (const char* s : v) out.push_back(s);
  return out;
}

J text_or_null(const char* s) { return s ? J(s) : J(nullptr); }

J knob_json(const SetupKnob& k) {
  J j;
  j["id"] = k.id;
  j["kind"] = kind_name(k.kind);
  j["flag"] = text_or_null(k.flag);
  j["aliases"] = names(k.aliases);
  j["off_flag"] = text_or_null(k.off_flag);
  J switches = J::array();
  for (const auto& s : k.switches) switches.push_back({{"flag", s.flag}, {"value", s.value}});
  j["switches"] = switches;
  j["help"] = k.help;
  j["off_help"] = k.off_help;
  j["doc_value"] = k.doc_value;
  j["doc_default"] = k.doc_default;
  if (k.kind == KnobKind::kInt) {
    j["min"] = k.min;
    j["max"] = k.max;
  }
  if (k.kind == KnobKind::kNumber) {
    j["lo"] = k.lo;
    j["hi"] = k.hi;
  }
  if (k.kind == KnobKind::kEnum) {
    j["values"] = names(k.values);
    j["null_name"] = text_or_null(k.null_name);
  }
  j["megatron"] = names(k.megatron);
  j["megatron_off"] = names(k.megatron_off);
  j["megatron_extra"] = names(k.megatron_extra);
  j["json_key"] = text_or_null(k.json_key);
  j["spec_section"] = text_or_null(k.spec_section);
  j["spec_name"] = text_or_null(k.spec_name);
  return j;
}

J views(const std::vector<std::string_view>& v) {
  J out = J::array();
  for (const auto s : v) out.push_back(std::string(s));
  return out;
}

}  // namespace

nlohmann::ordered_json schema_document() {
  J knobs = J::array();
  for (const SetupKnob* k : setup_knobs_in_flag_order()) knobs.push_back(knob_json(*k));
  J doc;
  doc["version"] = MME_VERSION_STRING;
  doc["knobs"] = knobs;
  doc["megatron_model_flags"] = views(megatron_model_flags());
  doc["megatron_not_modelled_flags"] = views(megatron_not_modelled_flags());
  return doc;
}

}  // namespace mme::commands
