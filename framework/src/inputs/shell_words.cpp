// The words of the shell parser (shell_parser.hpp): quoting, escapes, $X, ${X op word}, $(( )),
// command substitutions (kept as text, never run) and here-document bodies.
#include <algorithm>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"

#include "shell_parser.hpp"

namespace mme::shell {

Word Parser::arith_until_close() {
  // Up to the "))" that closes "((" (parentheses inside balance).
  const std::size_t start = i_, line = line_;
  int depth = 0;
  for (;;) {
    if (eof()) fail("'((' without '))'");
    if (peek() == '(') ++depth;
    if (peek() == ')') {
      if (depth == 0 && peek(1) == ')') break;
      --depth;
    }
    advance();
  }
  Word w = parse_expandable_text(s_.substr(start, i_ - start), source_, line);
  advance(2);
  return w;
}

void Parser::add_lit(Word& w, char c, bool quoted) {
  if (!w.parts.empty() && w.parts.back().kind == Part::kLit && w.parts.back().quoted == quoted) {
    w.parts.back().text.push_back(c);
  } else {
    w.parts.push_back(lit_part(quoted, std::string(1, c)));
  }
}

// A word in `mode`; `stops` are the extra characters that end it in kParam mode.
Word Parser::read_word(Mode mode, std::string_view stops) {
  Nest nest(*this);
  Word w;
  w.line = line_;
  const std::size_t start = i_;
  for (;;) {
    if (eof()) break;
    const char c = peek();
    if (mode == Mode::kCommand && is_meta(c)) {
      // <(...) and >(...) inside or at the start of a word: process substitutions.
      if ((c == '<' || c == '>') && peek(1) == '(') {
        advance();
        w.parts.push_back(command_substitution(false));
        continue;
      }
      break;
    }
    if (mode == Mode::kParam && (c == '}' || stops.find(c) != std::string_view::npos)) break;
    if (c == '\\') {
      if (peek(1) == '\n') {
        advance(2);
        continue;
      }
      if (mode == Mode::kText) {
        const char n = peek(1);
        if (n == '$' || n == '`' || n == '\\') {
          advance(2);
          add_lit(w, n, true);
        } else {
          advance();
          add_lit(w, '\\', false);
        }
        continue;
      }
      advance();
      if (eof()) break;
      add_lit(w, peek(), true);
      advance();
      continue;
    }
    if (mode != Mode::kText && c == '\'') {
      advance();
      const std::size_t close = s_.find('\'', i_);
      if (close == std::string_view::npos) fail("unterminated ' quote (it opens on this line)");
      w.parts.push_back(lit_part(true, std::string(s_.substr(i_, close - i_))));
      advance(close - i_ + 1);
      continue;
    }
    if (mode != Mode::kText && c == '$' && peek(1) == '\'') {
      advance(2);
      w.parts.push_back(lit_part(true, ansi_c_string()));
      continue;
    }
    if (mode != Mode::kText && (c == '"' || (c == '$' && peek(1) == '"'))) {
      advance(c == '$' ? 2 : 1);
      double_quoted(w);
      continue;
    }
    if (c == '$') {
      w.parts.push_back(dollar(false));
      continue;
    }
    if (c == '`') {
      w.parts.push_back(backquote(false));
      continue;
    }
    if (c == '\n' && mode != Mode::kCommand) {
      advance();
      add_lit(w, '\n', false);
      continue;
    }
    add_lit(w, c, false);
    advance();
  }
  w.source = std::string(s_.substr(start, i_ - start));
  return w;
}

std::string Parser::ansi_c_string() {
  std::string out;
  for (;;) {
    if (eof()) fail("unterminated $' quote");
    char c = peek();
    advance();
    if (c == '\'') return out;
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    c = peek();
    advance();
    switch (c) {
      case 'n': out.push_back('\n'); break;
      case 't': out.push_back('\t'); break;
      case 'r': out.push_back('\r'); break;
      case '0': out.push_back('\0'); break;
      default: out.push_back(c);
    }
  }
}

void Parser::double_quoted(Word& w) {
  const std::size_t opened = line_;
  for (;;) {
    if (eof()) {
      line_ = opened;
      fail("unterminated \" quote (it opens on this line)");
    }
    const char c = peek();
    if (c == '"') {
      advance();
      // "" alone is an empty word, not nothing.
      if (w.parts.empty()) w.parts.push_back(lit_part(true, ""));
      return;
    }
    if (c == '\\') {
      const char n = peek(1);
      if (n == '\n') {
        advance(2);
        continue;
      }
      if (n == '$' || n == '`' || n == '"' || n == '\\') {
        advance(2);
        add_lit(w, n, true);
        continue;
      }
      advance();
      add_lit(w, '\\', true);
      continue;
    }
    if (c == '$' && (is_name_start(peek(1)) || peek(1) == '{' || peek(1) == '(' ||
                     std::isdigit(static_cast<unsigned char>(peek(1))) ||
                     std::string_view("@*#?$!-").find(peek(1)) != std::string_view::npos)) {
      w.parts.push_back(dollar(true));
      continue;
    }
    if (c == '`') {
      w.parts.push_back(backquote(true));
      continue;
    }
    add_lit(w, c, true);
    advance();
  }
}

// The text up to the ')' that closes an opening '(' just read (quotes and parentheses inside).
std::string Parser::balanced_parens() {
  const std::size_t start = i_;
  int depth = 1;
  while (!eof()) {
    const char c = peek();
    if (c == '\\') {
      advance(2);
      continue;
    }
    if (c == '\'') {
      const std::size_t close = s_.find('\'', i_ + 1);
      if (close == std::string_view::npos) fail("unterminated ' quote");
      advance(close - i_ + 1);
      continue;
    }
    if (c == '"') {
      advance();
      while (!eof() && peek() != '"') advance(peek() == '\\' ? 2 : 1);
      advance();
      continue;
    }
    if (c == '(') ++depth;
    if (c == ')' && --depth == 0) {
      std::string text(s_.substr(start, i_ - start));
      advance();
      return text;
    }
    advance();
  }
  fail("'(' without its ')'");
}

Part Parser::command_substitution(bool quoted) {
  // At '(' of $( or <( / >(.
  const std::size_t start = i_;
  advance();
  Part p;
  p.kind = Part::kCmdSub;
  p.quoted = quoted;
  p.text = balanced_parens();
  p.source = "$(" + p.text + ")";
  (void)start;
  return p;
}

Part Parser::backquote(bool quoted) {
  advance();
  Part p;
  p.kind = Part::kCmdSub;
  p.quoted = quoted;
  while (!eof() && peek() != '`') {
    if (peek() == '\\' && peek(1) == '`') advance();
    p.text.push_back(peek());
    advance();
  }
  if (eof()) fail("unterminated ` quote");
  advance();
  p.source = "`" + p.text + "`";
  return p;
}

Part Parser::dollar(bool quoted) {
  const std::size_t start = i_;
  advance();  // $
  Part p;
  p.quoted = quoted;
  const char c = peek();
  if (c == '{') {
    advance();
    p = brace_parameter(quoted);
  } else if (c == '(' && peek(1) == '(') {
    advance(2);
    p.kind = Part::kArith;
    p.args.push_back(arith_until_close());
  } else if (c == '(') {
    p = command_substitution(quoted);
  } else if (is_name_start(c)) {
    p.kind = Part::kParam;
    while (is_name_char(peek())) p.text.push_back(s_[i_++]);
  } else if (std::isdigit(static_cast<unsigned char>(c)) ||
             std::string_view("@*#?$!-").find(c) != std::string_view::npos) {
    p.kind = Part::kParam;
    p.text = std::string(1, c);
    advance();
  } else {
    p.kind = Part::kLit;
    p.text = "$";
  }
  p.source = std::string(s_.substr(start, i_ - start));
  return p;
}

// After "${": ${#X}, ${!X}, ${X}, ${X[i]}, ${X op word}.
Part Parser::brace_parameter(bool quoted) {
  Part p;
  p.kind = Part::kParam;
  p.quoted = quoted;
  if (peek() == '#' && peek(1) != '}' && peek(1) != ':' && peek(1) != '-' && peek(1) != '=' && peek(1) != '+') {
    p.op = "len";
    advance();
  } else if (peek() == '!' && peek(1) != '}') {
    p.indirect = true;
    advance();
  }
  if (is_name_start(peek())) {
    while (is_name_char(peek())) p.text.push_back(s_[i_++]);
  } else if (std::isdigit(static_cast<unsigned char>(peek()))) {
    while (std::isdigit(static_cast<unsigned char>(peek()))) p.text.push_back(s_[i_++]);
  } else if (std::string_view("@*#?$!-").find(peek()) != std::string_view::npos && peek() != '\0') {
    p.text = std::string(1, peek());
    advance();
  } else {
    fail(fmt::format("bad substitution '${{{}'", line_text(i_)));
  }
  if (peek() == '[') {
    advance();
    const std::size_t start = i_;
    int depth = 1;
    while (!eof()) {
      if (peek() == '[') ++depth;
      if (peek() == ']' && --depth == 0) break;
      advance();
    }
    if (eof()) fail("'[' without ']' in ${...}");
    p.index = std::string(s_.substr(start, i_ - start));
    advance();
  }
  if (peek() == '}') {
    advance();
    if (p.op.empty()) p.op = "";
    return p;
  }
  if (p.op == "len") fail("bad substitution: ${#...} with an operator");
  for (std::string_view op : {":-", ":=", ":+", ":?", "##", "%%", "//", "/#", "/%", "^^", ",,",
                              "-",  "=",  "+",  "?",  "#",  "%",  "/",  "^",  ",",  ":"}) {
    if (starts(op)) {
      p.op = std::string(op);
      advance(op.size());
      break;
    }
  }
  if (p.op.empty()) fail(fmt::format("bad substitution '${{{}'", line_text(i_)));
  if (p.op[0] == '/') {
    p.args.push_back(read_word(Mode::kParam, "/"));
    if (peek() == '/') {
      advance();
      p.args.push_back(read_word(Mode::kParam, ""));
    }
  } else if (p.op == ":") {
    p.args.push_back(read_word(Mode::kParam, ":"));
    if (peek() == ':') {
      advance();
      p.args.push_back(read_word(Mode::kParam, ""));
    }
  } else {
    p.args.push_back(read_word(Mode::kParam, ""));
  }
  if (peek() != '}') fail("'${' without its '}'");
  advance();
  return p;
}

}  // namespace mme::shell
