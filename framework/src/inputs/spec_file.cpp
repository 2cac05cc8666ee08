#include "mme/inputs/spec_file.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/core.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "mme/sdk/config_reader.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/input_text.hpp"
#include "mme/inputs/megatron_args.hpp"
#include "mme/inputs/model_loader.hpp"
#include "mme/engine/pipeline.hpp"
#include "mme/inputs/setup_schema.hpp"
#include "mme/sdk/json_text.hpp"

namespace mme {

namespace fs = std::filesystem;
using J = nlohmann::json;
using OJ = nlohmann::ordered_json;

namespace {

constexpr const char* kMarker = "spec-file";
constexpr std::uintmax_t kMaxFileBytes = 1 << 20;
// A spec file has a few hundred values; YAML aliases can expand a few bytes into billions
// (`a: &a [*a]` is a cycle), so the expanded tree is bounded, as is its depth (input_text.hpp).
constexpr std::size_t kMaxYamlNodes = 100000;
// An alias to a long scalar repeated by other aliases copies its text each time: the expanded
// text is bounded as well (16 x the largest file).
constexpr std::size_t kMaxYamlBytes = std::size_t{16} << 20;

// ---------------------------------------------------------------------------------------------
// The parsed file: a tree with the line of every key, from YAML (yaml-cpp marks) or JSON
// (nlohmann's SAX parser over an iterator that records how far it has read).

struct Node {
  enum class Kind { kNull, kBool, kInt, kFloat, kString, kList, kMap };
  Kind kind = Kind::kNull;
  int line = 0;          // 1-based; for a map member, the line of its key
  std::string key;       // for a map member
  std::string text;      // scalars: as written (a string's content)
  bool b = false;
  std::int64_t i = 0;
  double f = 0;
  std::vector<Node> children;  // list items, or map members (each with its key)
};

Node make_scalar(Node::Kind kind, std::string text) {
  Node n;
  n.kind = kind;
  n.text = std::move(text);
  return n;
}

// Plain YAML scalars are typed by the YAML 1.2 core schema (true/false, null/~, integers,
// floats); quoted ones are strings.
Node typed_plain_scalar(const std::string& s) {
  // By hand, not std::regex: it recurses once per character, and a plain scalar may be long.
  auto digits = [&](std::size_t& i) {
    const std::size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return i > start;
  };
  auto is_int = [&] {
    std::size_t i = s.empty() || (s[0] != '-' && s[0] != '+') ? 0 : 1;
    return digits(i) && i == s.size();
  };
  // [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
  auto is_float = [&] {
    std::size_t i = s.empty() || (s[0] != '-' && s[0] != '+') ? 0 : 1;
    if (i < s.size() && s[i] == '.') {
      ++i;
      if (!digits(i)) return false;
    } else {
      if (!digits(i)) return false;
      if (i < s.size() && s[i] == '.') {
        ++i;
        digits(i);
      }
    }
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
      ++i;
      if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
      if (!digits(i)) return false;
    }
    return i == s.size();
  };
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return make_scalar(Node::Kind::kNull, s);
  if (s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE") {
    Node n = make_scalar(Node::Kind::kBool, s);
    n.b = s[0] == 't' || s[0] == 'T';
    return n;
  }
  if (is_int()) {
    Node n = make_scalar(Node::Kind::kInt, s);
    const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
    const auto [ptr, ec] = std::from_chars(begin, s.data() + s.size(), n.i);
    if (ec == std::errc() && ptr == s.data() + s.size()) return n;
    n.kind = Node::Kind::kFloat;  // out of 64-bit range: reported as a number that is too large
    n.f = std::strtod(s.c_str(), nullptr);
    return n;
  }
  if (is_float()) {
    Node n = make_scalar(Node::Kind::kFloat, s);
    n.f = std::strtod(s.c_str(), nullptr);
    return n;
  }
  return make_scalar(Node::Kind::kString, s);
}

// The walk over yaml-cpp's node graph, where an alias is the node it refers to: the graph may
// have cycles and shared subtrees. `path` holds the nodes from the root (a cycle repeats one).
struct YamlWalk {
  const std::string& source;
  std::vector<YAML::Node> path;
  std::size_t nodes = 0;
  std::size_t bytes = 0;  // of keys and scalars, as expanded
};

Node from_yaml(const YAML::Node& y, int line, YamlWalk& walk) {
  if (++walk.nodes > kMaxYamlNodes)
    throw ConfigError(fmt::format("{}: more than {} values once YAML aliases are expanded; a spec file has a few "
                                  "hundred",
                                  walk.source, kMaxYamlNodes));
  if (y.IsSequence() || y.IsMap()) {
    for (const auto& above : walk.path)
      if (above.is(y))
        throw ConfigError(fmt::format("{}:{}: a YAML alias refers to a node that contains it (a cycle)", walk.source,
                                      line));
    if (static_cast<int>(walk.path.size()) >= kMaxNestingDepth)
      throw ConfigError(fmt::format("{}:{}: YAML nested more than {} levels deep; a spec file nests a few",
                                    walk.source, line, kMaxNestingDepth));
  }
  walk.path.push_back(y);
  struct Pop {
    YamlWalk& w;
    ~Pop() { w.path.pop_back(); }
  } pop{walk};
  Node n;
  n.line = line;
  switch (y.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null: n.kind = Node::Kind::kNull; break;
    case YAML::NodeType::Scalar: {
      walk.bytes += y.Scalar().size();
      if (walk.bytes > kMaxYamlBytes)
        throw ConfigError(fmt::format("{}: more than {} bytes of text once YAML aliases are expanded; a spec file "
                                      "is small",
                                      walk.source, kMaxYamlBytes));
      const std::string& tag = y.Tag();
      if (tag == "!" || tag == "tag:yaml.org,2002:str") {
        n = make_scalar(Node::Kind::kString, y.Scalar());
      } else if (tag == "?" || tag.empty() || tag.rfind("tag:yaml.org,2002:", 0) == 0) {
        n = typed_plain_scalar(y.Scalar());
      } else {
        n = make_scalar(Node::Kind::kString, y.Scalar());
      }
      n.line = line;
      break;
    }
    case YAML::NodeType::Sequence:
      n.kind = Node::Kind::kList;
      for (const auto& item : y)
        n.children.push_back(from_yaml(item, item.Mark().line >= 0 ? item.Mark().line + 1 : line, walk));
      break;
    case YAML::NodeType::Map:
      n.kind = Node::Kind::kMap;
      for (auto it = y.begin(); it != y.end(); ++it) {
        const int key_line = it->first.Mark().line >= 0 ? it->first.Mark().line + 1 : line;
        Node member = from_yaml(it->second, key_line, walk);
        member.line = key_line;
        if (it->first.Type() != YAML::NodeType::Scalar) {
          member.key = "";  // reported by the reader as a bad key
        } else {
          member.key = it->first.Scalar();
          walk.bytes += member.key.size();
        }
        n.children.push_back(std::move(member));
      }
      break;
  }
  return n;
}

// Counts documents without building them. yaml-cpp 0.7 never stops on some texts (", " gives
// one empty document after another, so YAML::LoadAll loops until memory runs out): the count
// stops at a bound.
struct NoEvents : YAML::EventHandler {
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

Node parse_yaml(std::string_view text, const std::string& source) {
  constexpr int kMaxDocuments = 16;
  std::vector<YAML::Node> docs;
  try {
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    NoEvents none;
    int count = 0;
    while (count < kMaxDocuments && parser.HandleNextDocument(none)) ++count;
    if (count >= kMaxDocuments)
      throw ConfigError(fmt::format("{}: not valid YAML: {} or more documents (a stray ',' or other flow character?); "
                                    "a spec file is one document",
                                    source, kMaxDocuments));
    if (count > 1)
      throw ConfigError(fmt::format("{}: holds {} YAML documents; a spec file is one document", source, count));
    if (count == 1) docs.push_back(YAML::Load(std::string(text)));
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}:{}: not valid YAML: {}", source, e.mark.line + 1, e.msg));
  }
  if (docs.empty()) return Node{};
  YamlWalk walk{source, {}, 0};
  return from_yaml(docs.front(), docs.front().Mark().line >= 0 ? docs.front().Mark().line + 1 : 1, walk);
}

// An input iterator over the text that publishes how far the JSON lexer has read: at each SAX
// event the token just scanned ends right before that position (the lexer reads at most one
// character past a number), so the line of the event is exact.
struct TrackingIterator {
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;
  const char* p = nullptr;
  const char** cursor = nullptr;
  reference operator*() const { return *p; }
  TrackingIterator& operator++() {
    ++p;
    *cursor = p;
    return *this;
  }
  TrackingIterator operator++(int) {
    TrackingIterator t = *this;
    ++*this;
    return t;
  }
  friend bool operator==(const TrackingIterator& a, const TrackingIterator& b) { return a.p == b.p; }
};

class JsonTreeBuilder {
 public:
  using number_integer_t = J::number_integer_t;
  using number_unsigned_t = J::number_unsigned_t;
  using number_float_t = J::number_float_t;
  using string_t = J::string_t;
  using binary_t = J::binary_t;

  JsonTreeBuilder(std::string_view text, const char* const* cursor) : text_(text), cursor_(cursor) {}

  bool null() { return add(make_scalar(Node::Kind::kNull, "null")); }
  bool boolean(bool v) {
    Node n = make_scalar(Node::Kind::kBool, v ? "true" : "false");
    n.b = v;
    return add(std::move(n));
  }
  bool number_integer(number_integer_t v) {
    Node n = make_scalar(Node::Kind::kInt, std::to_string(v));
    n.i = v;
    return add(std::move(n));
  }
  bool number_unsigned(number_unsigned_t v) {
    if (v > static_cast<number_unsigned_t>(std::numeric_limits<std::int64_t>::max())) {
      Node n = make_scalar(Node::Kind::kFloat, std::to_string(v));
      n.f = static_cast<double>(v);
      return add(std::move(n));
    }
    Node n = make_scalar(Node::Kind::kInt, std::to_string(v));
    n.i = static_cast<std::int64_t>(v);
    return add(std::move(n));
  }
  bool number_float(number_float_t v, const string_t& s) {
    Node n = make_scalar(Node::Kind::kFloat, s);
    n.f = v;
    return add(std::move(n));
  }
  bool string(string_t& v) { return add(make_scalar(Node::Kind::kString, v)); }
  bool binary(binary_t&) { return false; }
  bool start_object(std::size_t) {
    Node n;
    n.kind = Node::Kind::kMap;
    return open(std::move(n));
  }
  bool key(string_t& k) {
    key_ = k;
    key_line_ = line();
    return true;
  }
  bool end_object() {
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) {
    Node n;
    n.kind = Node::Kind::kList;
    return open(std::move(n));
  }
  bool end_array() {
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const J::exception& ex) {
    error_ = ex.what();
    return false;
  }

  Node& root() { return root_; }
  const std::string& error() const { return error_; }

 private:
  int line() {
    const auto consumed = static_cast<std::size_t>(*cursor_ - text_.data());
    const std::size_t upto = consumed > 0 ? consumed - 1 : 0;
    for (; counted_ < upto && counted_ < text_.size(); ++counted_)
      if (text_[counted_] == '\n') ++lines_;
    return lines_;
  }
  Node* place(Node n) {
    if (stack_.empty()) {
      n.line = line();
      root_ = std::move(n);
      return &root_;
    }
    Node& parent = *stack_.back();
    if (parent.kind == Node::Kind::kMap) {
      n.key = key_;
      n.line = key_line_;
    } else {
      n.line = line();
    }
    parent.children.push_back(std::move(n));
    return &parent.children.back();
  }
  bool add(Node n) {
    place(std::move(n));
    return true;
  }
  bool open(Node n) {
    stack_.push_back(place(std::move(n)));
    return true;
  }

  std::string_view text_;
  const char* const* cursor_;
  std::size_t counted_ = 0;
  int lines_ = 1;
  Node root_;
  std::vector<Node*> stack_;
  std::string key_;
  int key_line_ = 0;
  std::string error_;
};

Node parse_json(std::string_view text, const std::string& source) {
  // The tree is built, walked and destroyed recursively: the depth is checked first.
  check_json_nesting(text, source, "a spec file");
  const char* cursor = text.data();
  JsonTreeBuilder builder(text, &cursor);
  TrackingIterator first{text.data(), &cursor};
  TrackingIterator last{text.data() + text.size(), &cursor};
  if (!J::sax_parse(first, last, &builder)) {
    // "[json.exception.parse_error.101] parse error at line 3, column 7: syntax error ..."
    // Read by hand: the message quotes the last token, which may be long, and std::regex
    // recurses once per character (a 50 KB token overflowed the stack; the spec_file fuzzer).
    const std::string& what = builder.error();
    const auto at = what.find("at line ");
    const auto digits = at == std::string::npos ? at : at + 8;
    std::size_t end = digits;
    while (end != std::string::npos && end < what.size() && std::isdigit(static_cast<unsigned char>(what[end]))) ++end;
    const auto colon = end == std::string::npos ? end : what.find(": ", end);
    if (end != std::string::npos && end > digits && what.compare(end, 9, ", column ") == 0 && colon != std::string::npos)
      throw ConfigError(fmt::format("{}:{}: not valid JSON: {}", source, what.substr(digits, end - digits),
                                    what.substr(colon + 2)));
    throw ConfigError(fmt::format("{}: not valid JSON: {}", source, what));
  }
  return std::move(builder.root());
}

// ---------------------------------------------------------------------------------------------
// The fields.

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
J setup_value(const FieldDef& f, const TrainingSetup& s) {
  if (f.knob) return knob_spec_value(*f.knob, s);
  return f.get ? f.get(s) : J();
}
bool has_setup_value(const FieldDef& f) { return f.knob || f.get; }

Ty type_of(KnobKind k) {
  switch (k) {
    case KnobKind::kInt: return Ty::kInt;
    case KnobKind::kNumber: return Ty::kNumber;
    case KnobKind::kBool: return Ty::kBool;
    case KnobKind::kEnum: return Ty::kEnum;
    case KnobKind::kString: return Ty::kString;
    case KnobKind::kModules: return Ty::kModules;
    case KnobKind::kEnv: return Ty::kEnvList;
  }
  return Ty::kString;
}

FieldDef field_of(const SetupKnob& k) {
  FieldDef f{.section = k.spec_section, .name = k.spec_name, .type = type_of(k.kind)};
  f.required = k.spec_required;
  f.min = k.spec_min.value_or(k.min);
  f.max = k.max;
  f.lo = k.lo;
  f.hi = k.hi;
  f.lo_open = k.lo_open;
  f.hi_open = k.hi_open;
  for (const char* v : k.spec_values.empty() ? k.values : k.spec_values) f.values.emplace_back(v);
  f.default_text = k.spec_default;
  f.summary = k.spec_summary;
  f.flag = k.flag ? k.flag : k.off_flag ? k.off_flag : "";
  f.knob = &k;
  return f;
}

const std::vector<FieldDef>& field_defs() {
  static const std::vector<FieldDef> model = {
      {.section = "model", .name = "hf", .type = Ty::kString, .default_text = "null",
       .summary = "base the model on this Hugging Face model (hub id, config.json, folder or bundled model); the "
                  "other model fields override it"},
      {.section = "model", .name = "name", .type = Ty::kString, .default_text = "the file name",
       .summary = "the name reports show"},
      {.section = "model", .name = "num_layers", .type = Ty::kInt, .required = true, .max = ConfigReader::kMaxLayers,
       .default_text = "required", .summary = "transformer layers"},
      {.section = "model", .name = "hidden_size", .type = Ty::kInt, .required = true,
       .max = ConfigReader::kMaxDimension, .default_text = "required",
       .summary = "hidden dimension; must be divisible by num_attention_heads"},
      {.section = "model", .name = "num_attention_heads", .type = Ty::kInt, .required = true,
       .max = ConfigReader::kMaxDimension, .default_text = "required", .summary = "attention heads"},
      {.section = "model", .name = "num_query_groups", .type = Ty::kInt, .max = ConfigReader::kMaxDimension,
       .default_text = "num_attention_heads",
       .summary = "query groups (KV heads) for GQA; must divide num_attention_heads"},
      {.section = "model", .name = "kv_channels", .type = Ty::kInt, .max = ConfigReader::kMaxDimension,
       .default_text = "hidden_size / num_attention_heads", .summary = "head dimension"},
      {.section = "model", .name = "ffn_hidden_size", .type = Ty::kInt, .required = true,
       .max = ConfigReader::kMaxDimension, .default_text = "required", .summary = "MLP intermediate dimension"},
      {.section = "model", .name = "vocab_size", .type = Ty::kInt, .required = true,
       .max = ConfigReader::kMaxDimension, .default_text = "required",
       .summary = "vocabulary size (padded like Megatron-LM: make_vocab_size_divisible_by x TP)"},
      {.section = "model", .name = "max_position_embeddings", .type = Ty::kInt, .required = true,
       .max = ConfigReader::kMaxDimension, .default_text = "required",
       .summary = "longest supported sequence; must be >= seq_length"},
      {.section = "model", .name = "position_embedding_type", .type = Ty::kEnum,
       .values = {"rope", "learned_absolute", "none"}, .default_text = "rope",
       .summary = "rotary positions, or a learned absolute position table"},
      {.section = "model", .name = "normalization", .type = Ty::kEnum, .values = {"RMSNorm", "LayerNorm"},
       .default_text = "RMSNorm", .summary = "layer normalization type"},
      {.section = "model", .name = "layernorm_epsilon", .type = Ty::kNumber, .lo = 0, .hi = 1, .lo_open = true,
       .hi_open = true, .default_text = "1e-5", .summary = "norm epsilon (no effect on memory)"},
      {.section = "model", .name = "activation_func", .type = Ty::kEnum,
       .values = {"swiglu", "gelu", "silu", "relu", "squared_relu"}, .default_text = "swiglu",
       .summary = "MLP activation; SwiGLU requires gated_linear_unit: true"},
      {.section = "model", .name = "gated_linear_unit", .type = Ty::kBool, .default_text = "true",
       .summary = "gated MLP (SwiGLU, GeGLU)"},
      {.section = "model", .name = "add_bias_linear", .type = Ty::kBool, .default_text = "false",
       .summary = "biases on every linear layer"},
      {.section = "model", .name = "add_qkv_bias", .type = Ty::kBool, .default_text = "false",
       .summary = "biases on the QKV projection only (Qwen2)"},
      {.section = "model", .name = "qk_layernorm", .type = Ty::kBool, .default_text = "false",
       .summary = "layernorm on queries and keys (MLA: the q/kv latent norms)"},
      {.section = "model", .name = "share_embeddings_and_output_weights", .type = Ty::kBool,
       .default_text = "false", .summary = "tie the output layer to the word embedding"},
      {.section = "model", .name = "hidden_dropout", .type = Ty::kNumber, .lo = 0, .hi = 1, .hi_open = true,
       .default_text = "0.0", .summary = "dropout after attention and MLP (masks are kept for backward)"},
      {.section = "model", .name = "attention_dropout", .type = Ty::kNumber, .lo = 0, .hi = 1, .hi_open = true,
       .default_text = "0.0", .summary = "dropout on attention probabilities"},
      {.section = "model", .name = "multi_latent_attention", .type = Ty::kBool, .default_text = "false",
       .summary = "multi-latent attention (DeepSeek-V2/V3) with the ranks below"},
      {.section = "model", .name = "q_lora_rank", .type = Ty::kInt, .max = ConfigReader::kMaxDimension,
       .default_text = "512", .summary = "MLA query compression rank; null = one query projection"},
      {.section = "model", .name = "kv_lora_rank", .type = Ty::kInt, .max = ConfigReader::kMaxDimension,
       .default_text = "512", .summary = "MLA key/value compression rank"},
      {.section = "model", .name = "qk_head_dim", .type = Ty::kInt, .max = ConfigReader::kMaxDimension,
       .default_text = "128", .summary = "MLA query/key head dimension without positions"},
      {.section = "model", .name = "qk_pos_emb_head_dim", .type = Ty::kInt, .max = ConfigReader::kMaxDimension,
       .default_text = "64", .summary = "MLA rotary query/key head dimension"},
      {.section = "model", .name = "v_head_dim", .type = Ty::kInt, .max = ConfigReader::kMaxDimension,
       .default_text = "128", .summary = "MLA value head dimension"},
      {.section = "model", .name = "num_experts", .type = Ty::kInt, .max = ConfigReader::kMaxCount,
       .default_text = "null", .summary = "experts per MoE layer; null = a dense model"},
      {.section = "model", .name = "moe_router_topk", .type = Ty::kInt, .max = ConfigReader::kMaxCount,
       .default_text = "2", .summary = "experts each token is routed to"},
      {.section = "model", .name = "moe_ffn_hidden_size", .type = Ty::kInt, .max = ConfigReader::kMaxDimension,
       .default_text = "ffn_hidden_size", .summary = "intermediate dimension of each expert"},
      {.section = "model", .name = "moe_shared_expert_intermediate_size", .type = Ty::kInt,
       .max = ConfigReader::kMaxDimension, .default_text = "null",
       .summary = "intermediate dimension of the shared experts together; null = none"},
      {.section = "model", .name = "moe_shared_expert_gate", .type = Ty::kBool, .default_text = "false",
       .summary = "a sigmoid gate on the shared experts (Qwen2-MoE)"},
      {.section = "model", .name = "moe_router_enable_expert_bias", .type = Ty::kBool, .default_text = "false",
       .summary = "per-expert router bias (DeepSeek-V3 aux-loss-free balancing)"},
      {.section = "model", .name = "moe_router_dtype", .type = Ty::kEnum, .values = {"fp32"}, .default_text = "null",
       .summary = "router computed in fp32; null = the training dtype"},
      {.section = "model", .name = "moe_layer_freq", .type = Ty::kLayerFreq, .default_text = "1",
       .summary = "which layers are MoE: N = every N-th, a list of 0/1, or \"([0]*3+[1]*58)\""},
      {.section = "model", .name = "mtp_num_layers", .type = Ty::kInt, .min = 0, .max = ConfigReader::kMaxLayers,
       .default_text = "0", .summary = "multi-token-prediction layers (DeepSeek-V3), on the last stage"},

  };
  static const std::vector<FieldDef> defs = [] {
    std::vector<FieldDef> all = model;
    for (const auto& k : setup_knobs()) {
      if (!k.spec_section) continue;
      all.push_back(field_of(k));
      if (std::string_view(k.spec_name) == "world_size")
        all.push_back({.section = "infrastructure", .name = "gpu", .type = Ty::kString, .default_text = "null",
                       .summary = "judge the fit on this GPU only (see `mme hardware`); null = every known GPU",
                       .flag = "gpu"});
      if (std::string_view(k.spec_name) == "params_dtype")
        all.push_back({.section = "precision", .name = "fp8", .type = Ty::kFp8, .default_text = "false",
                       .summary = "FP8 GEMMs (true, or Megatron's e4m3 / hybrid) with bf16 parameters",
                       .flag = "precision",
                       .get = [](const TrainingSetup& s) { return J(s.precision == Precision::kFP8); }});
    }
    return all;
  }();
  return defs;
}

const std::vector<std::string>& sections() {
  static const std::vector<std::string> s = {"model", "parallelism", "training", "infrastructure", "precision"};
  return s;
}

const FieldDef* find_def(std::string_view section, std::string_view name) {
  for (const auto& f : field_defs())
    if (section == f.section && name == f.name) return &f;
  return nullptr;
}

const FieldDef& def(std::string_view key) {  // "section.field"
  const auto dot = key.find('.');
  const FieldDef* f = find_def(key.substr(0, dot), key.substr(dot + 1));
  if (!f) throw std::logic_error("unknown spec field " + std::string(key));
  return *f;
}

std::string type_text(const FieldDef& f) {
  switch (f.type) {
    case Ty::kInt: return f.min > 0 ? "positive integer" : "non-negative integer";
    case Ty::kNumber: return "number";
    case Ty::kBool: return "true or false";
    case Ty::kEnum: {
      std::string out;
      for (const auto& v : f.values) out += (out.empty() ? "" : " | ") + v;
      return out;
    }
    case Ty::kString: return "string";
    case Ty::kModules: return "list of module names";
    case Ty::kLayerFreq: return "integer, list of 0/1, or string";
    case Ty::kFp8: return "true, false, e4m3 or hybrid";
    case Ty::kEnvList: return "list of NAME=VALUE";
  }
  return "";
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// How a value reads in a message.
std::string describe(const J& v) {
  if (v.is_array()) return "a list";
  if (v.is_object()) return "a mapping";
  std::string text = json_text(v);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

std::string number_text(double d) {
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string range_text(const FieldDef& f) {
  return fmt::format("{}{}, {}{}", f.lo_open ? "(" : "[", number_text(f.lo), number_text(f.hi), f.hi_open ? ")" : "]");
}

std::string join_or(const std::vector<std::string>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += i + 1 == v.size() ? " or " : ", ";
    out += v[i];
  }
  return out;
}

// Checks one value against its field; returns it normalised (canonical enum spellings, a list
// for recompute_modules, a bool for fp8). `fail` throws. Null is handled by the caller.
J check_value(const FieldDef& f, const J& v, const std::function<void(const std::string&)>& fail) {
  switch (f.type) {
    case Ty::kInt: {
      // Layer counts (num_layers, mtp_num_layers: the fields bounded by kMaxLayers) say why
      // their bound is so low, in the message every input shares.
      const char* expected = f.min > 0 ? "a positive integer" : "a non-negative integer";
      if (v.is_number_float()) {
        const double d = v.get<double>();
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) > 9e15)
          fail(f.max == ConfigReader::kMaxLayers && d > 0 ? too_many_layers(describe(v))
                                                          : fmt::format("{} is larger than {}", describe(v), f.max));
        fail(fmt::format("expected {}, got {}", expected, describe(v)));
      }
      if (!v.is_number_integer()) fail(fmt::format("expected {}, got {}", expected, describe(v)));
      const auto n = v.get<std::int64_t>();
      if (n < f.min) fail(fmt::format("expected {}, got {}", expected, n));
      if (n > f.max)
        fail(f.max == ConfigReader::kMaxLayers ? too_many_layers(std::to_string(n))
                                               : fmt::format("{} is larger than {}", n, f.max));
      return J(n);
    }
    case Ty::kNumber: {
      if (!v.is_number()) fail(fmt::format("expected a number, got {}", describe(v)));
      const double d = v.get<double>();
      const bool low = f.lo_open ? d <= f.lo : d < f.lo;
      const bool high = f.hi_open ? d >= f.hi : d > f.hi;
      if (!std::isfinite(d) || low || high)
        fail(fmt::format("expected a number in {}, got {}", range_text(f), describe(v)));
      return J(d);
    }
    case Ty::kBool:
      if (!v.is_boolean()) fail(fmt::format("expected true or false, got {}", describe(v)));
      return v;
    case Ty::kEnum: {
      if (v.is_string()) {
        const std::string t = lower(v.get<std::string>());
        for (const auto& c : f.values)
          if (lower(c) == t) return J(c);
        // The knob's other spellings ("alltoall_seq", "bfloat16", "none"): its canonical value.
        if (f.knob && f.knob->spec_values.empty()) {
          try {
            return parse_knob_text(*f.knob, f.name, v.get<std::string>());
          } catch (const UsageError&) {
          }
        }
      }
      std::vector<std::string> quoted;
      for (const auto& c : f.values) quoted.push_back(c);
      fail(fmt::format("expected {}, got {}", join_or(quoted), describe(v)));
      return J();
    }
    case Ty::kString:
      if (!v.is_string()) fail(fmt::format("expected a string, got {}", describe(v)));
      if (v.get<std::string>().empty()) fail("expected a non-empty string");
      return v;
    case Ty::kModules: {
      std::string text;
      if (v.is_string()) {
        text = v.get<std::string>();
      } else if (v.is_array()) {
        for (const auto& item : v) {
          if (!item.is_string())
            fail(fmt::format("expected a list of module names, got {} in the list", describe(item)));
          text += item.get<std::string>() + ",";
        }
      } else {
        fail(fmt::format("expected a list of module names, got {}", describe(v)));
      }
      std::uint32_t modules = 0;
      try {
        modules = parse_recompute_modules(text);
      } catch (const UsageError& e) {
        fail(e.what());
      }
      if (modules == 0) fail("expected at least one module");
      J list = J::array();
      std::stringstream ss(recompute_modules_to_string(modules));
      std::string item;
      while (std::getline(ss, item, ',')) list.push_back(item);
      return list;
    }
    case Ty::kLayerFreq:
      if (v.is_number_integer()) {
        if (v.get<std::int64_t>() < 1) fail(fmt::format("expected a positive integer, got {}", describe(v)));
        return v;
      }
      if (v.is_array()) {
        for (const auto& item : v)
          if (!item.is_number_integer() || (item.get<std::int64_t>() != 0 && item.get<std::int64_t>() != 1))
            fail(fmt::format("list items must be 0 or 1, got {}", describe(item)));
        return v;
      }
      if (v.is_string() && !v.get<std::string>().empty()) return v;
      fail(fmt::format("expected an integer, a list of 0/1 or a string such as \"([0]*3+[1]*58)\", got {}",
                       describe(v)));
      return J();
    case Ty::kEnvList: {
      if (!v.is_array()) fail(fmt::format("expected a list of NAME=VALUE, got {}", describe(v)));
      for (const auto& item : v) {
        if (!item.is_string()) fail(fmt::format("expected a list of NAME=VALUE, got {} in the list", describe(item)));
        try {
          const auto [name, value] = split_env_assignment(item.get<std::string>(), "environment");
          TrainingSetup scratch;
          (void)apply_environment(scratch, name, value);  // the values the variable can take
        } catch (const UsageError& e) {
          fail(e.what());
        }
      }
      return v;
    }
    case Ty::kFp8:
      if (v.is_boolean()) return v;
      if (v.is_string()) {
        const std::string t = lower(v.get<std::string>());
        if (t == "e4m3" || t == "hybrid") return J(true);
      }
      fail(fmt::format("expected true, false, e4m3 or hybrid, got {}", describe(v)));
      return J();
  }
  fail("unsupported field type");
  return J();
}

J to_json(const Node& n) {
  switch (n.kind) {
    case Node::Kind::kNull: return J();
    case Node::Kind::kBool: return J(n.b);
    case Node::Kind::kInt: return J(n.i);
    case Node::Kind::kFloat: return J(n.f);
    case Node::Kind::kString: return J(n.text);
    case Node::Kind::kList: {
      J a = J::array();
      for (const auto& c : n.children) a.push_back(to_json(c));
      return a;
    }
    case Node::Kind::kMap: {
      J o = J::object();
      for (const auto& c : n.children) o[c.key] = to_json(c);
      return o;
    }
  }
  return J();
}

// ---------------------------------------------------------------------------------------------
// Unknown names.

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Names people bring from Hugging Face configs, Megatron flags or the mme command line.
const std::map<std::string, std::string>& known_aliases() {
  static const std::map<std::string, std::string> m = {
      {"num_hidden_layers", "model.num_layers"},
      {"intermediate_size", "model.ffn_hidden_size"},
      {"num_key_value_heads", "model.num_query_groups"},
      {"head_dim", "model.kv_channels"},
      {"tie_word_embeddings", "model.share_embeddings_and_output_weights"},
      {"untie_embeddings_and_output_weights", "model.share_embeddings_and_output_weights"},
      {"num_moe_experts", "model.num_experts"},
      {"n_routed_experts", "model.num_experts"},
      {"num_experts_per_tok", "model.moe_router_topk"},
      {"moe_intermediate_size", "model.moe_ffn_hidden_size"},
      {"rms_norm_eps", "model.layernorm_epsilon"},
      {"hidden_act", "model.activation_func"},
      {"swiglu", "model.activation_func"},
      {"qk_nope_head_dim", "model.qk_head_dim"},
      {"qk_rope_head_dim", "model.qk_pos_emb_head_dim"},
      {"num_nextn_predict_layers", "model.mtp_num_layers"},
      {"tp", "parallelism.tensor_model_parallel_size"},
      {"pp", "parallelism.pipeline_model_parallel_size"},
      {"ep", "parallelism.expert_model_parallel_size"},
      {"etp", "parallelism.expert_tensor_parallel_size"},
      {"cp", "parallelism.context_parallel_size"},
      {"vpp", "parallelism.virtual_pipeline_model_parallel_size"},
      {"decoder_first_pipeline_num_layers", "parallelism.num_layers_in_first_pipeline_stage"},
      {"decoder_last_pipeline_num_layers", "parallelism.num_layers_in_last_pipeline_stage"},
      {"pipeline_layout", "parallelism.pipeline_model_parallel_layout"},
      {"num_gpus", "infrastructure.world_size"},
      {"gpus", "infrastructure.world_size"},
      {"precision", "precision.params_dtype"},
      {"bf16", "precision.params_dtype"},
      {"fp16", "precision.params_dtype"},
      {"distributed_optimizer", "training.use_distributed_optimizer"},
      {"moe_token_dispatcher", "training.moe_token_dispatcher_type"},
      {"moe_capacity_factor", "training.moe_expert_capacity_factor"},
  };
  return m;
}

std::string section_of_field(std::string_view name) {
  for (const auto& f : field_defs())
    if (name == f.name) return f.section;
  return "";
}

// "unknown field (did you mean 'num_layers'?)" and its variants.
std::string unknown_field_message(const std::string& section, const std::string& key) {
  const std::string home = section_of_field(key);
  if (!home.empty())
    return fmt::format("unknown field in the {} section; {} belongs in the {} section", section, key, home);
  std::string suggestion;
  if (auto it = known_aliases().find(lower(key)); it != known_aliases().end()) suggestion = it->second;
  if (suggestion.empty()) {
    std::vector<std::string> same, all;
    for (const auto& f : field_defs()) {
      all.push_back(std::string(f.section) + "." + f.name);
      if (section == f.section) same.push_back(std::string(f.section) + "." + f.name);
    }
    std::vector<std::string> same_names, all_names;
    for (const auto& s : same) same_names.push_back(s.substr(s.find('.') + 1));
    for (const auto& s : all) all_names.push_back(s.substr(s.find('.') + 1));
    if (auto c = closest_name(key, same_names); !c.empty()) suggestion = section + "." + c;
    else if (auto c2 = closest_name(key, all_names); !c2.empty()) suggestion = section_of_field(c2) + "." + c2;
  }
  if (suggestion.empty())
    return fmt::format("unknown field (docs/spec-files.md lists the fields of the {} section)", section);
  const auto dot = suggestion.find('.');
  const std::string s_section = suggestion.substr(0, dot), s_name = suggestion.substr(dot + 1);
  if (s_section == section) return fmt::format("unknown field (did you mean '{}'?)", s_name);
  return fmt::format("unknown field (did you mean '{}' in the {} section?)", s_name, s_section);
}

std::string file_stem(const std::string& path) {
  const std::string stem = fs::path(path).stem().string();
  return stem.empty() ? path : stem;
}

// ---------------------------------------------------------------------------------------------
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
      fail_at(0, "the file is empty (expected the sections model, parallelism, training, infrastructure and "
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
      if (!value.is_null())
        value = check_value(*f, value, [&](const std::string& what) { fail_field(key, what); });
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
    if (const J* hf = value("model.hf")) out_.hf = hf->get<std::string>();
    else if (given("model.hf")) fail_field("model.hf", "expected a model name, got null");
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
      fail_field("precision.fp8", fmt::format("FP8 training is estimated with bf16 parameters; params_dtype is {}",
                                              dtype));
    s.precision = fp8 ? Precision::kFP8 : dtype == "fp16" ? Precision::kFP16 : dtype == "fp32" ? Precision::kFP32
                                                                                                : Precision::kBF16;
    check_file_rules();
  }

  // Rules between fields of the file itself (the guide's and Megatron-LM's).
  void check_file_rules() {
    const TrainingSetup& s = out_.setup;
    const auto granularity = s.recompute.granularity;
    if (value("training.recompute_method") && granularity != RecomputeGranularity::kFull)
      fail_field("training.recompute_method", fmt::format("only used with recompute_granularity: full (it is {})",
                                                          granularity_text(granularity)));
    if (const J* n = value("training.recompute_num_layers");
        n && granularity == RecomputeGranularity::kFull && n->get<std::int64_t>() == 0)
      fail_field("training.recompute_num_layers",
                 "must be at least 1 with recompute_granularity: full (Megatron-LM refuses 0)");
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
  }

  static std::string granularity_text(RecomputeGranularity g) {
    return g == RecomputeGranularity::kNone ? "null" : to_string(g);
  }

  SpecFile& out_;
  std::map<std::string, J> values_;
  std::vector<std::string> order_;
};

}  // namespace

// -------------------------------------------------------------------------------------------------
// Public: fields, reading.

const std::vector<SpecFieldInfo>& spec_fields() {
  static const std::vector<SpecFieldInfo> out = [] {
    std::vector<SpecFieldInfo> v;
    for (const auto& f : field_defs())
      v.push_back({f.section, f.name, type_text(f), f.default_text, f.summary, f.flag});
    return v;
  }();
  return out;
}

const std::vector<std::string>& spec_sections() { return sections(); }

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

std::string closest_name(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::numeric_limits<std::size_t>::max();
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  return best_d <= limit ? best : std::string();
}

// -------------------------------------------------------------------------------------------------
// SpecModelReader.

SpecModelReader::SpecModelReader(const J& document) : doc_(document) {
  if (!is_spec_file_config(document)) throw ConfigError("not the model document of a spec file");
  if (auto it = doc_.find("file"); it != doc_.end() && it->is_string()) file_ = it->get<std::string>();
  else file_ = "spec file";
  const auto m = doc_.find("model");
  if (m == doc_.end() || !m->is_object()) throw ConfigError(fmt::format("{}: the model document has no fields", file_));
  for (const auto& item : m->items()) {
    // Not a structured binding: clang before 16 cannot capture one in the lambda below.
    const std::string& name = item.key();
    const FieldDef* f = find_def("model", name);
    if (!f) fail(name, unknown_field_message("model", name));
    if (!item.value().is_null()) (void)check_value(*f, item.value(), [&](const std::string& what) { fail(name, what); });
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

std::string activation_for(const std::string& activation_func) {
  return activation_func == "swiglu" ? "silu" : activation_func;
}

void apply_hf_overrides(ModelSpec& m, SpecModelReader& r, const std::string& hf) {
  for (const char* fixed : {"multi_latent_attention", "moe_layer_freq"})
    if (r.given(fixed))
      r.fail(fixed, fmt::format("cannot be overridden on a Hugging Face base (hf: {}); write the model out in full "
                                "(`mme init {}` prints every field)",
                                hf, hf));
  bool any_gqa = false, any_mla = false, any_dense = false, any_moe = false;
  for (const auto& l : m.layers) {
    any_gqa = any_gqa || l.attention.kind == "gqa";
    any_mla = any_mla || l.attention.kind == "mla";
    any_dense = any_dense || l.mlp.kind == "dense";
    any_moe = any_moe || l.mlp.kind == "moe";
  }
  auto need = [&](std::string_view field, bool ok, const char* what) {
    if (r.has(field) && !ok) r.fail(field, fmt::format("{} has no {} to override", hf, what));
  };
  for (const char* f : {"num_query_groups", "kv_channels"}) need(f, any_gqa, "GQA attention layers");
  for (const char* f : {"q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim"})
    need(f, any_mla, "multi-latent attention layers");
  if (r.given("q_lora_rank") && !any_mla)
    r.fail("q_lora_rank", fmt::format("{} has no multi-latent attention layers to override", hf));
  need("ffn_hidden_size", any_dense, "dense MLP layers");
  for (const char* f : {"num_experts", "moe_router_topk", "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size",
                        "moe_shared_expert_gate", "moe_router_enable_expert_bias", "moe_router_dtype"})
    need(f, any_moe, "MoE layers");

  if (auto n = r.optional_int("num_layers")) {
    const auto count = static_cast<std::size_t>(*n);
    if (count < m.layers.size()) m.layers.resize(count);
    while (m.layers.size() < count) m.layers.push_back(m.layers.back());
    m.num_layers = *n;
  }
  m.hidden_size = r.int_or("hidden_size", m.hidden_size);
  m.vocab_size = r.int_or("vocab_size", m.vocab_size);
  m.max_position_embeddings = r.int_or("max_position_embeddings", m.max_position_embeddings);
  m.mtp_num_layers = r.int_or("mtp_num_layers", m.mtp_num_layers);
  m.tie_embeddings = r.bool_or("share_embeddings_and_output_weights", m.tie_embeddings);
  m.add_bias_linear = r.bool_or("add_bias_linear", m.add_bias_linear);
  m.hidden_dropout = r.number_or("hidden_dropout", m.hidden_dropout);
  m.attention_dropout = r.number_or("attention_dropout", m.attention_dropout);
  (void)r.number_or("layernorm_epsilon", 1e-5);
  if (r.has("normalization"))
    m.normalization =
        r.string_or("normalization", "") == "LayerNorm" ? Normalization::kLayerNorm : Normalization::kRMSNorm;
  if (r.has("position_embedding_type")) {
    const std::string p = r.string_or("position_embedding_type", "rope");
    m.position_embedding = p == "learned_absolute" ? PositionEmbedding::kLearnedAbsolute
                           : p == "none"           ? PositionEmbedding::kNone
                                                   : PositionEmbedding::kRope;
  }
  m.gated_linear_unit = r.bool_or("gated_linear_unit", m.gated_linear_unit);
  if (r.has("activation_func")) {
    const std::string act = r.string_or("activation_func", "swiglu");
    if (act == "swiglu" && !m.gated_linear_unit)
      r.fail(r.given("gated_linear_unit") ? "gated_linear_unit" : "activation_func",
             "SwiGLU requires gated_linear_unit: true");
    m.activation = activation_for(act);
  }
  for (auto& l : m.layers) {
    auto& a = l.attention;
    a.num_heads = r.int_or("num_attention_heads", a.num_heads);
    a.qk_norm = r.bool_or("qk_layernorm", a.qk_norm);
    a.qkv_bias = r.bool_or("add_qkv_bias", a.qkv_bias);
    if (a.kind == "gqa") {
      a.num_query_groups = r.int_or("num_query_groups", a.num_query_groups);
      a.kv_channels = r.int_or("kv_channels", a.kv_channels);
    } else if (a.kind == "mla") {
      a.num_query_groups = a.num_heads;
      if (r.given("q_lora_rank")) a.q_lora_rank = r.optional_int("q_lora_rank");
      a.kv_lora_rank = r.int_or("kv_lora_rank", a.kv_lora_rank);
      a.qk_head_dim = r.int_or("qk_head_dim", a.qk_head_dim);
      a.qk_pos_emb_head_dim = r.int_or("qk_pos_emb_head_dim", a.qk_pos_emb_head_dim);
      a.v_head_dim = r.int_or("v_head_dim", a.v_head_dim);
    }
    if (a.kind == "gqa" && (a.num_query_groups > a.num_heads || a.num_heads % a.num_query_groups != 0))
      r.fail(r.has("num_query_groups") ? "num_query_groups" : "num_attention_heads",
             fmt::format("num_query_groups must divide num_attention_heads (num_query_groups {}, "
                         "num_attention_heads {})",
                         a.num_query_groups, a.num_heads));
    auto& f = l.mlp;
    if (f.kind == "dense") {
      f.ffn_hidden_size = r.int_or("ffn_hidden_size", f.ffn_hidden_size);
    } else if (f.kind == "moe") {
      f.num_experts = r.int_or("num_experts", f.num_experts);
      f.top_k = r.int_or("moe_router_topk", f.top_k);
      f.expert_ffn_hidden_size = r.int_or("moe_ffn_hidden_size", f.expert_ffn_hidden_size);
      if (r.given("moe_shared_expert_intermediate_size"))
        f.shared_expert_ffn_hidden_size = r.optional_int("moe_shared_expert_intermediate_size").value_or(0);
      f.shared_expert_gate = r.bool_or("moe_shared_expert_gate", f.shared_expert_gate);
      f.router_expert_bias = r.bool_or("moe_router_enable_expert_bias", f.router_expert_bias);
      if (r.given("moe_router_dtype")) f.router_fp32 = r.has("moe_router_dtype");
      if (f.top_k > f.num_experts)
        r.fail(r.has("moe_router_topk") ? "moe_router_topk" : "num_experts",
               fmt::format("moe_router_topk {} is more than num_experts {}", f.top_k, f.num_experts));
    }
  }
}

}  // namespace

ModelSpec load_spec_model(const SpecFile& spec, const Registry& registry, const SourceOptions& options) {
  if (!spec.has_model)
    throw ConfigError(fmt::format("{}: the file has no model section (give one, or MODEL on the command line)",
                                  spec.path));
  const std::string stem = file_stem(spec.path);
  if (!spec.hf) {
    if (!registry.best_adapter(spec.model_document))
      throw PluginError(fmt::format("{}: no loaded config adapter reads spec files (the spec_file plugin; see `mme "
                                    "plugins`)",
                                    spec.path));
    return adapt_config(spec.model_document, stem, spec.path, registry);
  }
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
  apply_hf_overrides(m, r, *spec.hf);
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

// -------------------------------------------------------------------------------------------------
// The guide's constraints on the final model and setup.

void check_spec_layout(const SpecFile* spec, const ModelSpec& model, const TrainingSetup& s) {
  // Where a setup value came from: the file (with its line), the command line, or the default.
  auto where = [&](const std::string& key) -> std::string {
    if (!spec) return key;
    const FieldDef& f = def(key);
    const bool same = !has_setup_value(f) || setup_value(f, spec->setup) == setup_value(f, s);
    const int line = spec->line_of(key);
    if (line > 0 && same) return fmt::format("{}:{}: {}", spec->path, line, key);
    if (!same && *f.flag) return fmt::format("{}: {} (--{} on the command line)", spec->path, key, f.flag);
    return fmt::format("{}: {} (the default)", spec->path, key);
  };
  // Where a model value came from: the spec's model section, or the model.
  auto model_value = [&](const std::string& field) -> std::string {
    if (spec && spec->has_model) {
      const int line = spec->line_of("model." + field);
      if (line > 0) return fmt::format("on line {}", line);
    }
    return fmt::format("of {}", model.name);
  };
  auto fail = [](const std::string& msg) { throw LayoutError(msg); };

  const auto& p = s.parallel;
  const std::int64_t etp = effective_etp(p);
  // Sizes that are not positive are resolve_setup's to report (naming the flag).
  if (p.tp <= 0 || p.pp <= 0 || p.cp <= 0 || p.ep <= 0 || etp <= 0 || p.world_size <= 0) return;
  bool any_moe = false;
  for (const auto& l : model.layers) any_moe = any_moe || l.mlp.kind == "moe" || l.mlp.num_experts > 0;

  // world_size = pp x tp x cp x dp
  using LD = long double;
  const LD attn = static_cast<LD>(p.pp) * static_cast<LD>(p.tp) * static_cast<LD>(p.cp);
  if (attn > static_cast<LD>(p.world_size) || p.world_size % (p.pp * p.tp * p.cp) != 0)
    fail(fmt::format("{}: must satisfy the parallelism constraint world_size = pp x tp x cp x dp, and {} is not "
                     "divisible by pp x tp x cp = {} x {} x {} = {}",
                     where("infrastructure.world_size"), p.world_size, p.pp, p.tp, p.cp,
                     static_cast<double>(attn)));
  // world_size = pp x ep x etp x edp
  const LD moe = static_cast<LD>(p.pp) * static_cast<LD>(p.ep) * static_cast<LD>(etp);
  if (moe > static_cast<LD>(p.world_size) || p.world_size % (p.pp * p.ep * etp) != 0)
    fail(fmt::format("{}: must satisfy the parallelism constraint world_size = pp x ep x etp x edp, and {} is not "
                     "divisible by pp x ep x etp = {} x {} x {} = {}",
                     where("infrastructure.world_size"), p.world_size, p.pp, p.ep, etp, static_cast<double>(moe)));
  // num_experts must be divisible by expert_model_parallel_size
  if (any_moe) {
    for (const auto& l : model.layers)
      if (l.mlp.num_experts > 0 && l.mlp.num_experts % p.ep != 0)
        fail(fmt::format("{}: num_experts must be divisible by expert_model_parallel_size ({} experts {}, "
                         "expert_model_parallel_size {})",
                         where("parallelism.expert_model_parallel_size"), l.mlp.num_experts,
                         model_value("num_experts"), p.ep));
  } else if (p.ep > 1) {
    fail(fmt::format("{}: {} needs a mixture-of-experts model, and {} has no experts",
                     where("parallelism.expert_model_parallel_size"), p.ep, model.name));
  }
  // seq_length must be <= max_position_embeddings
  if (model.max_position_embeddings > 0 && s.seq_length > model.max_position_embeddings)
    fail(fmt::format("{}: must be <= max_position_embeddings (seq_length {}, max_position_embeddings {} {})",
                     where("training.seq_length"), s.seq_length, model.max_position_embeddings,
                     model_value("max_position_embeddings")));
  // Heads by TP (Megatron splits whole heads and query groups).
  for (const auto& l : model.layers) {
    const auto& a = l.attention;
    if (a.num_heads % p.tp != 0)
      fail(fmt::format("{}: num_attention_heads must be divisible by tensor_model_parallel_size ({} heads {}, "
                       "tensor_model_parallel_size {})",
                       where("parallelism.tensor_model_parallel_size"), a.num_heads,
                       model_value("num_attention_heads"), p.tp));
    if (a.kind == "gqa" && a.num_query_groups % p.tp != 0)
      fail(fmt::format("{}: num_query_groups must be divisible by tensor_model_parallel_size ({} query groups {}, "
                       "tensor_model_parallel_size {}); Megatron-LM does not replicate KV heads",
                       where("parallelism.tensor_model_parallel_size"), a.num_query_groups,
                       model_value("num_query_groups"), p.tp));
  }
  // Uneven pipelines need num_layers_in_first/last_pipeline_stage.
  const auto& pl = s.pipeline;
  if (p.pp > 1 && !pl.first_stage_layers && !pl.last_stage_layers && pl.layout.empty() && !pl.account_for_embedding &&
      !pl.account_for_loss && model.num_layers % p.pp != 0)
    fail(fmt::format("{}: num_layers ({} {}) is not evenly divisible by pipeline_model_parallel_size ({}); set "
                     "num_layers_in_first_pipeline_stage or num_layers_in_last_pipeline_stage",
                     where("parallelism.pipeline_model_parallel_size"), model.num_layers, model_value("num_layers"),
                     p.pp));
  // Sequence parallelism requires tensor_model_parallel_size > 1.
  if (p.sequence_parallel.value_or(false) && p.tp == 1)
    fail(fmt::format("{}: requires tensor_model_parallel_size > 1 (tensor_model_parallel_size is 1)",
                     where("training.sequence_parallel")));
  // Megatron-LM: MoE with TP needs sequence parallelism.
  if (any_moe && p.tp > 1 && p.sequence_parallel.has_value() && !*p.sequence_parallel)
    fail(fmt::format("{}: Megatron-LM requires sequence parallelism when MoE and tensor parallelism are combined "
                     "(tensor_model_parallel_size {}); set sequence_parallel: true",
                     where("training.sequence_parallel"), p.tp));
}

// -------------------------------------------------------------------------------------------------
// Writing a spec.

namespace {

struct OutField {
  std::string name;
  OJ value;
  bool commented = false;
};

std::optional<std::string> activation_func_of(const ModelSpec& m) {
  const std::string& a = m.activation;
  if (a == "silu") return m.gated_linear_unit ? "swiglu" : "silu";
  if (a == "relu" || a == "squared_relu") return a;
  if (a.rfind("gelu", 0) == 0) return std::string("gelu");  // gelu_new, gelu_pytorch_tanh: the same memory
  return std::nullopt;
}

bool same_moe(const MlpSpec& a, const MlpSpec& b) {
  MlpSpec x = a, y = b;
  x.ffn_hidden_size = y.ffn_hidden_size = 0;  // the nominal width of an MoE layer is not used
  return x == y;
}

// A MoE layer pattern the way moe_layer_freq writes it: 1, N, or Megatron's string.
OJ layer_freq_of(const std::vector<int>& pattern) {
  const auto L = pattern.size();
  for (std::size_t every = 1; every <= L; ++every) {
    bool ok = true;
    for (std::size_t i = 0; i < L && ok; ++i) ok = pattern[i] == (i % every == 0 ? 1 : 0);
    if (ok) return OJ(static_cast<std::int64_t>(every));
  }
  std::string text = "(";
  for (std::size_t i = 0; i < L;) {
    std::size_t j = i;
    while (j < L && pattern[j] == pattern[i]) ++j;
    text += fmt::format("{}[{}]*{}", i == 0 ? "" : "+", pattern[i], j - i);
    i = j;
  }
  return OJ(text + ")");
}

std::string inexpressible(const ModelSpec& m) {
  if (m.layers.empty()) return "it has no layers";
  if (m.max_position_embeddings <= 0) return "its config does not give max_position_embeddings";
  const AttentionSpec& a0 = m.layers.front().attention;
  if (a0.kind != "gqa" && a0.kind != "mla") return fmt::format("its attention kind '{}' has no spec fields", a0.kind);
  const MlpSpec* dense = nullptr;
  const MlpSpec* moe = nullptr;
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const auto& l = m.layers[i];
    if (!(l.attention == a0)) return fmt::format("its layers differ in their attention (layer 0 and layer {})", i);
    if (l.post_attention_norm || l.post_mlp_norm) return "its layers have post-attention / post-MLP norms";
    if (l.mlp.kind == "dense") {
      MlpSpec plain;
      plain.kind = "dense";
      plain.ffn_hidden_size = l.mlp.ffn_hidden_size;
      if (!(l.mlp == plain)) return fmt::format("layer {} is a dense MLP with expert settings", i);
      if (dense && !(*dense == l.mlp)) return "its dense layers differ in width";
      dense = &l.mlp;
    } else if (l.mlp.kind == "moe") {
      if (moe && !same_moe(*moe, l.mlp)) return "its MoE layers differ";
      moe = &l.mlp;
    } else {
      return fmt::format("its MLP kind '{}' has no spec fields", l.mlp.kind);
    }
  }
  if (!activation_func_of(m)) return fmt::format("its activation '{}' has no activation_func value", m.activation);
  return "";
}

std::vector<OutField> model_fields(const ModelSpec& m, const TrainingSetup& s) {
  std::vector<OutField> out;
  auto add = [&](const char* name, OJ v, bool commented = false) { out.push_back({name, std::move(v), commented}); };
  const auto& a = m.layers.front().attention;
  const bool mla = a.kind == "mla";
  const MlpSpec* dense = nullptr;
  const MlpSpec* moe = nullptr;
  std::vector<int> pattern;
  for (const auto& l : m.layers) {
    if (l.mlp.kind == "moe") moe = &l.mlp;
    else dense = &l.mlp;
    pattern.push_back(l.mlp.kind == "moe" ? 1 : 0);
  }
  add("name", m.name);
  add("num_layers", m.num_layers);
  add("hidden_size", m.hidden_size);
  add("num_attention_heads", a.num_heads);
  add("num_query_groups", mla ? OJ() : OJ(a.num_query_groups), mla);
  add("kv_channels", mla ? OJ() : OJ(a.kv_channels), mla);
  add("ffn_hidden_size", dense ? dense->ffn_hidden_size : moe->expert_ffn_hidden_size);
  add("vocab_size", m.vocab_size);
  add("max_position_embeddings", m.max_position_embeddings);
  add("position_embedding_type", m.position_embedding == PositionEmbedding::kLearnedAbsolute ? "learned_absolute"
                                 : m.position_embedding == PositionEmbedding::kNone           ? "none"
                                                                                              : "rope");
  add("normalization", m.normalization == Normalization::kLayerNorm ? "LayerNorm" : "RMSNorm");
  add("layernorm_epsilon", 1e-5, true);
  add("activation_func", *activation_func_of(m));
  add("gated_linear_unit", m.gated_linear_unit);
  add("add_bias_linear", m.add_bias_linear);
  add("add_qkv_bias", a.qkv_bias);
  add("qk_layernorm", a.qk_norm);
  add("share_embeddings_and_output_weights", m.tie_embeddings);
  add("hidden_dropout", s.hidden_dropout.value_or(m.hidden_dropout));
  add("attention_dropout", s.attention_dropout.value_or(m.attention_dropout));
  add("multi_latent_attention", mla);
  add("q_lora_rank", mla ? (a.q_lora_rank ? OJ(*a.q_lora_rank) : OJ()) : OJ(512), !mla);
  add("kv_lora_rank", mla ? a.kv_lora_rank : 512, !mla);
  add("qk_head_dim", mla ? a.qk_head_dim : 128, !mla);
  add("qk_pos_emb_head_dim", mla ? a.qk_pos_emb_head_dim : 64, !mla);
  add("v_head_dim", mla ? a.v_head_dim : 128, !mla);
  add("num_experts", moe ? OJ(moe->num_experts) : OJ());
  add("moe_router_topk", moe ? moe->top_k : 2, !moe);
  add("moe_ffn_hidden_size", moe ? OJ(moe->expert_ffn_hidden_size) : OJ(), !moe);
  add("moe_shared_expert_intermediate_size",
      moe && moe->shared_expert_ffn_hidden_size > 0 ? OJ(moe->shared_expert_ffn_hidden_size) : OJ(), !moe);
  add("moe_shared_expert_gate", moe ? moe->shared_expert_gate : false, !moe);
  add("moe_router_enable_expert_bias", moe ? moe->router_expert_bias : false, !moe);
  add("moe_router_dtype", moe && moe->router_fp32 ? OJ("fp32") : OJ(), !moe);
  add("moe_layer_freq", moe ? layer_freq_of(pattern) : OJ(1), !moe);
  add("mtp_num_layers", m.mtp_num_layers);
  return out;
}

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

WrittenSpec build_written(const ModelSpec& m, const TrainingSetup& setup, const SpecWriteOptions& o) {
  // The interleaved schedule is written the way it was asked for: a layout string or layers per
  // chunk fix the chunks themselves, so the resolved count stays out.
  TrainingSetup s = setup;
  if (s.pipeline.layers_per_virtual_stage || !s.pipeline.layout.empty()) s.parallel.vpp = 1;
  WrittenSpec w;
  w.hf_reason = inexpressible(m);
  w.sections.emplace_back("model", w.hf_reason.empty() ? model_fields(m, s) : hf_model_fields(m, s, o));
  for (const auto& sec : sections())
    if (sec != "model") w.sections.emplace_back(sec, section_fields(sec, s, o));
  return w;
}

}  // namespace

std::string spec_model_inexpressible(const ModelSpec& model) { return inexpressible(model); }

std::string write_spec_yaml(const ModelSpec& model, const TrainingSetup& setup, const SpecWriteOptions& options) {
  const WrittenSpec w = build_written(model, setup, options);
  std::string out;
  // A header line may hold input (`mme init MODEL`): a newline in it would end the comment.
  for (const auto& h : options.header) out += h.empty() ? "#\n" : "# " + printable(h) + "\n";
  if (!w.hf_reason.empty())
    out += fmt::format("# The model is written as `hf:` (its own config) because {};\n"
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

std::string write_spec_json(const ModelSpec& model, const TrainingSetup& setup, const SpecWriteOptions& options) {
  const WrittenSpec w = build_written(model, setup, options);
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
