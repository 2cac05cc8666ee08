// The parts of spec files (mme/inputs/spec_file.hpp) that the files of this folder share:
// the line-tracking document (parser.cpp, parser_yaml.cpp), the field table and the value checks (fields.cpp),
// the did-you-mean of unknown names (matcher.cpp). Private to mme::inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mme/inputs/setup_schema.hpp"
#include "mme/sdk/text.hpp"
#include "mme/sdk/training_setup.hpp"

namespace mme::spec_detail {

using J = nlohmann::json;
using OJ = nlohmann::ordered_json;

// The marker of a spec file's model document ({"mme_source": "spec-file", ...}).
inline constexpr const char* kMarker = "spec-file";

// The parsed file: a tree with the line of every key, from YAML (yaml-cpp marks) or JSON
// (nlohmann's SAX parser over an iterator that records how far it has read).

struct Node {
  enum class Kind { kNull, kBool, kInt, kFloat, kString, kList, kMap };
  Kind kind = Kind::kNull;
  int line = 0;      // 1-based; for a map member, the line of its key
  std::string key;   // for a map member
  std::string text;  // scalars: as written (a string's content)
  bool b = false;
  std::int64_t i = 0;
  double f = 0;
  std::vector<Node> children;  // list items, or map members (each with its key)
};

// A scalar of that kind with its text as written (the typed value is set by the caller).
inline Node make_scalar(Node::Kind kind, std::string text) {
  Node n;
  n.kind = kind;
  n.text = std::move(text);
  return n;
}

// Plain YAML scalars are typed by the YAML 1.2 core schema (true/false, null/~, integers,
// floats); quoted ones are strings.
Node typed_plain_scalar(const std::string& s);
// The document of a YAML / JSON text; ConfigError naming `source` and the line.
Node parse_yaml(std::string_view text, const std::string& source);
Node parse_json(std::string_view text, const std::string& source);
J to_json(const Node& n);

enum class Ty { kInt, kNumber, kBool, kEnum, kString, kModules, kLayerFreq, kFp8, kEnvList };

// One field of the format. The model section's fields are defined here; the fields of the
// other sections are the setup schema's knobs (setup_schema.cpp), plus infrastructure.gpu
// and precision.fp8, which only spec files have.
struct FieldDef {
  const char* section;
  const char* name;
  Ty type;
  bool required = false;
  std::int64_t min = 1, max = 0;  // kInt
  double lo = 0, hi = 0;          // kNumber
  bool lo_open = false, hi_open = false;
  std::vector<std::string> values = {};  // kEnum: the canonical spellings (matched ignoring case)
  const char* default_text = "";
  const char* summary = "";
  const char* flag = "";
  J (*get)(const TrainingSetup&) = nullptr;  // spec-only setup fields: the value a setup has
  const SetupKnob* knob = nullptr;           // the setup schema's knob of the field
};

// The value of a setup field in `s` as the file writes it (null for model fields).
J setup_value(const FieldDef& f, const TrainingSetup& s);
bool has_setup_value(const FieldDef& f);

const std::vector<FieldDef>& field_defs();
const std::vector<std::string>& sections();  // in file order
const FieldDef* find_def(std::string_view section, std::string_view name);
const FieldDef& def(std::string_view key);  // "section.field"; std::logic_error if unknown

// How a value reads in a message.
std::string describe(const J& v);
std::string number_text(double d);

// Checks one value against its field; returns it normalised (canonical enum spellings, a list
// for recompute_modules, a bool for fp8). `fail` throws. Null is handled by the caller.
J check_value(const FieldDef& f, const J& v, const std::function<void(const std::string&)>& fail);

// The section a field name belongs to ("" if none).
std::string section_of_field(std::string_view name);
// "unknown field (did you mean 'num_layers'?)" and its variants.
std::string unknown_field_message(const std::string& section, const std::string& key);

}  // namespace mme::spec_detail
