// The line-tracking document of a spec file from JSON (nlohmann's SAX parser over an iterator
// that records how far it has read), the typing of plain scalars, and the tree back to JSON.
// The YAML reader (yaml-cpp) is parser_yaml.cpp, which the page does not compile.
#include <cctype>
#include <charconv>
#include <sstream>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"
#include "mme/sdk/input_text.hpp"
#include "mme/sdk/number_text.hpp"

#include "spec_internal.hpp"

namespace mme::spec_detail {

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
    n.f = parse_decimal(s).value_or(0.0);
    return n;
  }
  if (is_float()) {
    Node n = make_scalar(Node::Kind::kFloat, s);
    n.f = parse_decimal(s).value_or(0.0);  // the same under every locale (number_text.hpp)
    return n;
  }
  return make_scalar(Node::Kind::kString, s);
}

namespace {

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

}  // namespace

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
    if (end != std::string::npos && end > digits && what.compare(end, 9, ", column ") == 0 &&
        colon != std::string::npos)
      throw ConfigError(
          fmt::format("{}:{}: not valid JSON: {}", source, what.substr(digits, end - digits), what.substr(colon + 2)));
    throw ConfigError(fmt::format("{}: not valid JSON: {}", source, what));
  }
  return std::move(builder.root());
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

}  // namespace mme::spec_detail
