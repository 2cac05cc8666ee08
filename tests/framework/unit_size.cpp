#include "unit_size.hpp"

#include <cctype>
#include <regex>

namespace mme::test {

namespace {

enum class Block { kTransparent, kFunction, kOther };

std::string collapse(const std::string& text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

Block classify(const std::string& head) {
  static const std::regex transparent(
      R"((^|[^A-Za-z0-9_])(namespace|class|struct|union|enum)([^A-Za-z0-9_]|$)|extern "C")");
  if (std::regex_search(head, transparent) && head.find('(') == std::string::npos) return Block::kTransparent;
  if (head.rfind("extern \"C\"", 0) == 0 && head.find('(') == std::string::npos) return Block::kTransparent;
  const auto close = head.rfind(')');
  if (close == std::string::npos) return Block::kOther;
  // "= {" after the parenthesis: an initializer (a table), not a body.
  const std::string after = head.substr(close + 1);
  if (after.find('=') != std::string::npos) return Block::kOther;
  return Block::kFunction;
}

}  // namespace

std::vector<FunctionSpan> function_spans(const std::string& s) {
  std::vector<FunctionSpan> out;
  struct Open {
    Block kind;
    std::size_t index;  // into out, for functions
  };
  std::vector<Open> stack;
  std::string head;           // code since the last ';', '{' or '}' at the current level
  std::size_t head_line = 0;  // line of the first non-space character of head
  std::size_t line = 1;
  bool in_function = false;
  auto note = [&](char c) {
    if (head.empty() && std::isspace(static_cast<unsigned char>(c))) return;
    if (head.empty()) head_line = line;
    head.push_back(c);
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\n') {
      ++line;
      if (!head.empty()) head.push_back(' ');
      continue;
    }
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {  // line comment
      while (i < s.size() && s[i] != '\n') ++i;
      --i;
      continue;
    }
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {  // block comment
      i += 2;
      while (i + 1 < s.size() && !(s[i] == '*' && s[i + 1] == '/')) line += s[i++] == '\n';
      ++i;
      continue;
    }
    if (c == '#' && head.empty()) {  // preprocessor line (with continuations)
      while (i < s.size() && !(s[i] == '\n' && s[i - 1] != '\\')) line += (s[i] == '\n'), ++i;
      --i;
      continue;
    }
    if (c == 'R' && i + 1 < s.size() && s[i + 1] == '"' &&
        (i == 0 || !std::isalnum(static_cast<unsigned char>(s[i - 1])))) {
      const auto paren = s.find('(', i + 2);
      if (paren != std::string::npos) {
        const std::string end = ")" + s.substr(i + 2, paren - i - 2) + "\"";
        const auto stop = s.find(end, paren);
        const std::size_t last = stop == std::string::npos ? s.size() : stop + end.size();
        for (std::size_t k = i; k < last; ++k) line += s[k] == '\n';
        note('"');
        i = last - 1;
        continue;
      }
    }
    if (c == '"' || (c == '\'' && !(i > 0 && std::isxdigit(static_cast<unsigned char>(s[i - 1])) && in_function))) {
      // A string or character literal (a digit separator such as 1'000 inside code is skipped
      // by the check above).
      std::size_t k = i + 1;
      while (k < s.size() && s[k] != c && s[k] != '\n') k += s[k] == '\\' ? 2 : 1;
      note(c);
      i = k;
      continue;
    }
    if (c == '{') {
      Block kind = in_function ? Block::kOther : classify(collapse(head));
      Open o{kind, 0};
      if (kind == Block::kFunction) {
        out.push_back({collapse(head), head_line ? head_line : line, 0});
        o.index = out.size() - 1;
        in_function = true;
      }
      stack.push_back(o);
      head.clear();
      continue;
    }
    if (c == '}') {
      if (!stack.empty()) {
        const Open o = stack.back();
        stack.pop_back();
        if (o.kind == Block::kFunction) {
          out[o.index].last_line = line;
          in_function = false;
        }
      }
      head.clear();
      continue;
    }
    if (c == ';') {
      head.clear();
      continue;
    }
    note(c);
  }
  return out;
}

}  // namespace mme::test
