// The line-tracking document of a spec file from YAML (yaml-cpp marks): aliases expanded with
// bounds on size, depth and documents. Not in the page (web/CMakeLists.txt): it has no yaml-cpp.
#include <sstream>

#include <fmt/core.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "mme/sdk/error.hpp"
#include "mme/sdk/input_text.hpp"

#include "spec_internal.hpp"

namespace mme::spec_detail {

namespace {

// A spec file has a few hundred values; YAML aliases can expand a few bytes into billions
// (`a: &a [*a]` is a cycle), so the expanded tree is bounded, as is its depth (input_text.hpp).
constexpr std::size_t kMaxYamlNodes = 100000;
// An alias to a long scalar repeated by other aliases copies its text each time: the expanded
// text is bounded as well (16 x the largest file).
constexpr std::size_t kMaxYamlBytes = std::size_t{16} << 20;

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
    throw ConfigError(
        fmt::format("{}: more than {} values once YAML aliases are expanded; a spec file has a few "
                    "hundred",
                    walk.source, kMaxYamlNodes));
  if (y.IsSequence() || y.IsMap()) {
    for (const auto& above : walk.path)
      if (above.is(y))
        throw ConfigError(
            fmt::format("{}:{}: a YAML alias refers to a node that contains it (a cycle)", walk.source, line));
    if (static_cast<int>(walk.path.size()) >= kMaxNestingDepth)
      throw ConfigError(fmt::format("{}:{}: YAML nested more than {} levels deep; a spec file nests a few", walk.source,
                                    line, kMaxNestingDepth));
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
        throw ConfigError(
            fmt::format("{}: more than {} bytes of text once YAML aliases are expanded; a spec file "
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

}  // namespace

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
      throw ConfigError(
          fmt::format("{}: not valid YAML: {} or more documents (a stray ',' or other flow character?); "
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

}  // namespace mme::spec_detail
