// A recursive-descent parser of the shell launch scripts use (shell_syntax.hpp). It follows
// bash's grammar for what it reads and refuses the rest with the line and the construct.
#include <algorithm>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"

#include "shell_parser.hpp"

namespace mme::shell {

std::unique_ptr<Node> Parser::script() {
  auto list = parse_list({});
  skip_blanks();
  if (!eof()) fail(fmt::format("unexpected '{}'", peek()));
  if (!pending_.empty()) fail("a here-document without its body");
  return list;
}

Word Parser::text_word() {
  Word w = read_word(Mode::kText, "");
  return w;
}

void Parser::advance(std::size_t n) {
  for (std::size_t k = 0; k < n && i_ < s_.size(); ++k)
    if (s_[i_++] == '\n') ++line_;
}

// The rest of the current line, for messages.
std::string Parser::line_text(std::size_t from) const {
  const std::size_t end = std::min(s_.find('\n', from), s_.size());
  std::string t(s_.substr(from, end - from));
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  return t.size() > 80 ? t.substr(0, 77) + "..." : t;
}

// Blanks, line continuations and comments; not newlines.
void Parser::skip_blanks() {
  for (;;) {
    const char c = peek();
    if (c == ' ' || c == '\t' || c == '\r') {
      advance();
    } else if (c == '\\' && peek(1) == '\n') {
      advance(2);
    } else if (c == '\\' && peek(1) == '\r' && peek(2) == '\n') {
      advance(3);
    } else if (c == '#') {
      while (!eof() && peek() != '\n') advance();
    } else {
      return;
    }
  }
}

// A newline, then the bodies of the here-documents started on its line.
void Parser::newline() {
  advance();
  std::vector<Redirect*> pending;
  pending.swap(pending_);
  for (Redirect* r : pending) heredoc_body(*r);
}

void Parser::skip_newlines() {
  for (;;) {
    skip_blanks();
    if (peek() != '\n') return;
    newline();
  }
}

// A reserved word at the current position (followed by a blank, an operator or the end).
bool Parser::at_word(std::string_view w) const {
  if (!starts(w)) return false;
  const char next = peek(w.size());
  return next == '\0' || is_meta(next) || next == '\r';
}

void Parser::expect_word(std::string_view w, std::string_view in) {
  skip_newlines();
  if (!at_word(w)) fail(fmt::format("expected '{}' in {}", w, in));
  advance(w.size());
}

std::unique_ptr<Node> Parser::parse_list(const std::vector<std::string_view>& stops) {
  Nest nest(*this);
  auto seq = std::make_unique<Node>();
  seq->kind = Node::kSeq;
  seq->line = line_;
  for (;;) {
    skip_newlines();
    if (eof() || at_any(stops) || peek() == ')' || (peek() == ';' && peek(1) == ';') ||
        (peek() == ';' && peek(1) == '&'))
      break;
    seq->kids.push_back(and_or());
    skip_blanks();
    if (peek() == ';' && peek(1) != ';' && peek(1) != '&') {
      advance();
    } else if (peek() == '&' && peek(1) != '&' && peek(1) != '>') {
      advance();  // in the background: read as if it ran in order
    } else if (peek() == '\n') {
      newline();
    } else if (!(eof() || at_any(stops) || peek() == ')' || peek() == ';')) {
      fail(fmt::format("unexpected '{}' after a command", peek()));
    }
  }
  return seq;
}

std::unique_ptr<Node> Parser::and_or() {
  auto left = pipeline();
  for (;;) {
    skip_blanks();
    Node::Kind kind;
    if (starts("&&"))
      kind = Node::kAnd;
    else if (starts("||"))
      kind = Node::kOr;
    else
      return left;
    advance(2);
    skip_newlines();
    auto node = std::make_unique<Node>();
    node->kind = kind;
    node->line = left->line;
    node->kids.push_back(std::move(left));
    node->kids.push_back(pipeline());
    left = std::move(node);
  }
}

std::unique_ptr<Node> Parser::pipeline() {
  skip_blanks();
  bool negate = false;
  if (peek() == '!' && (peek(1) == ' ' || peek(1) == '\t')) {
    negate = true;
    advance();
  }
  auto first = command();
  skip_blanks();
  if (!(peek() == '|' && peek(1) != '|')) {
    first->negate = negate;
    return first;
  }
  auto pipe = std::make_unique<Node>();
  pipe->kind = Node::kPipeline;
  pipe->line = first->line;
  pipe->negate = negate;
  pipe->kids.push_back(std::move(first));
  while (peek() == '|' && peek(1) != '|') {
    advance(peek(1) == '&' ? 2 : 1);
    skip_newlines();
    pipe->kids.push_back(command());
    skip_blanks();
  }
  return pipe;
}

std::unique_ptr<Node> Parser::command() {
  Nest nest(*this);
  skip_blanks();
  const std::size_t start = i_;
  std::unique_ptr<Node> node;
  if (at_word("if")) {
    node = parse_if();
  } else if (at_word("while") || at_word("until")) {
    node = parse_loop();
  } else if (at_word("for")) {
    node = parse_for();
  } else if (at_word("case")) {
    node = parse_case();
  } else if (at_word("{")) {
    advance();
    node = compound(Node::kGroup, {"}"});
    expect_word("}", "a { } group");
  } else if (starts("((")) {
    node = std::make_unique<Node>();
    node->kind = Node::kArith;
    node->line = line_;
    advance(2);
    node->words.push_back(arith_until_close());
  } else if (peek() == '(') {
    advance();
    node = compound(Node::kSubshell, {});
    skip_newlines();
    if (peek() != ')') fail("expected ')' closing a subshell");
    advance();
  } else if (at_word("[[")) {
    node = parse_cond();
  } else if (at_word("function")) {
    node = parse_function_keyword();
  } else if (at_word("then") || at_word("else") || at_word("elif") || at_word("fi") || at_word("do") ||
             at_word("done") || at_word("esac") || at_word("}")) {
    fail(fmt::format("unexpected '{}'", line_text(i_)));
  } else {
    node = simple();
  }
  if (node->source.empty()) node->source = line_text(start);
  if (node->kind != Node::kSimple && node->kind != Node::kFunction) redirections(*node);
  return node;
}

std::unique_ptr<Node> Parser::compound(Node::Kind kind, const std::vector<std::string_view>& stops) {
  auto node = std::make_unique<Node>();
  node->kind = kind;
  node->line = line_;
  node->kids.push_back(parse_list(stops));
  return node;
}

void Parser::redirections(Node& node) {
  for (;;) {
    skip_blanks();
    if (!at_redirect()) break;
    node.redirects.push_back(redirect());
  }
  for (auto& r : node.redirects)
    if (r.heredoc) pending_.push_back(&r);
}

std::unique_ptr<Node> Parser::parse_if() {
  auto node = std::make_unique<Node>();
  node->kind = Node::kIf;
  node->line = line_;
  advance(2);
  node->kids.push_back(parse_list({"then"}));
  expect_word("then", "an if");
  node->kids.push_back(parse_list({"elif", "else", "fi"}));
  for (;;) {
    skip_newlines();
    if (at_word("elif")) {
      advance(4);
      node->kids.push_back(parse_list({"then"}));
      expect_word("then", "an elif");
      node->kids.push_back(parse_list({"elif", "else", "fi"}));
    } else if (at_word("else")) {
      advance(4);
      node->kids.push_back(parse_list({"fi"}));
      node->has_else = true;
      expect_word("fi", "an if");
      return node;
    } else {
      expect_word("fi", "an if");
      return node;
    }
  }
}

std::unique_ptr<Node> Parser::parse_loop() {
  auto node = std::make_unique<Node>();
  node->kind = at_word("while") ? Node::kWhile : Node::kUntil;
  node->line = line_;
  advance(5);
  node->kids.push_back(parse_list({"do"}));
  expect_word("do", "a loop");
  node->kids.push_back(parse_list({"done"}));
  expect_word("done", "a loop");
  return node;
}

std::unique_ptr<Node> Parser::parse_for() {
  auto node = std::make_unique<Node>();
  node->line = line_;
  advance(3);
  skip_blanks();
  if (starts("((")) {
    node->kind = Node::kArithFor;
    advance(2);
    const Word all = arith_until_close();
    // Three expressions separated by ';' (written as text: split the source).
    std::string text;
    for (const auto& p : all.parts) text += p.kind == Part::kLit ? p.text : p.source;
    std::size_t from = 0;
    for (int k = 0; k < 3; ++k) {
      const std::size_t semi = k < 2 ? text.find(';', from) : std::string::npos;
      if (k < 2 && semi == std::string::npos) fail("expected three expressions in for (( ; ; ))");
      node->words.push_back(parse_expandable_text(text.substr(from, semi - from), source_, node->line));
      from = semi + 1;
    }
  } else {
    node->kind = Node::kFor;
    if (!is_name_start(peek())) fail("expected a variable name after 'for'");
    while (is_name_char(peek())) node->name.push_back(s_[i_++]);
    skip_newlines();
    if (at_word("in")) {
      advance(2);
      for (;;) {
        skip_blanks();
        if (peek() == ';' || peek() == '\n' || eof()) break;
        // An operator ('(', '|', '&', '<', '>', ...) is no word: bash stops with a syntax error
        // there, and an empty word would never move on.
        const std::size_t start = i_;
        node->words.push_back(read_word(Mode::kCommand, ""));
        if (i_ == start) fail(fmt::format("unexpected '{}' in the word list of 'for'", peek()));
      }
    } else {
      node->for_all_args = true;
    }
  }
  skip_blanks();
  if (peek() == ';') advance();
  expect_word("do", "a for loop");
  node->kids.push_back(parse_list({"done"}));
  expect_word("done", "a for loop");
  return node;
}

std::unique_ptr<Node> Parser::parse_case() {
  auto node = std::make_unique<Node>();
  node->kind = Node::kCase;
  node->line = line_;
  advance(4);
  skip_blanks();
  node->words.push_back(read_word(Mode::kCommand, ""));
  expect_word("in", "a case");
  for (;;) {
    skip_newlines();
    if (at_word("esac")) {
      advance(4);
      return node;
    }
    if (eof()) fail("a case without 'esac'");
    if (peek() == '(') advance();
    std::vector<Word> patterns;
    for (;;) {
      skip_blanks();
      patterns.push_back(read_word(Mode::kCommand, ""));
      if (patterns.back().parts.empty()) fail("expected a pattern in a case item");
      skip_blanks();
      if (peek() == '|') {
        advance();
        continue;
      }
      if (peek() != ')') fail("expected ')' after a case pattern");
      advance();
      break;
    }
    node->patterns.push_back(std::move(patterns));
    node->kids.push_back(parse_list({"esac"}));
    skip_newlines();
    if (starts(";;&")) {
      node->terminators.push_back(";;&");
      advance(3);
    } else if (starts(";;")) {
      node->terminators.push_back(";;");
      advance(2);
    } else if (starts(";&")) {
      node->terminators.push_back(";&");
      advance(2);
    } else if (at_word("esac")) {
      node->terminators.push_back(";;");
    } else {
      fail("expected ';;' or 'esac' after a case item");
    }
  }
}

std::unique_ptr<Node> Parser::parse_cond() {
  auto node = std::make_unique<Node>();
  node->kind = Node::kCond;
  node->line = line_;
  advance(2);
  for (;;) {
    skip_blanks();
    while (peek() == '\n') {
      newline();
      skip_blanks();
    }
    if (eof()) fail("'[[' without ']]'");
    if (at_word("]]")) {
      advance(2);
      return node;
    }
    for (std::string_view op : {"&&", "||", "(", ")", "<", ">", "!"}) {
      if (starts(op) && (op != "!" || at_word("!"))) {
        Word w;
        w.op = true;
        w.line = line_;
        w.source = std::string(op);
        w.parts.push_back(lit_part(false, std::string(op)));
        node->words.push_back(std::move(w));
        advance(op.size());
        goto next;
      }
    }
    node->words.push_back(read_word(Mode::kCommand, ""));
    if (node->words.back().parts.empty()) fail(fmt::format("unexpected '{}' in [[ ]]", peek()));
  next:;
  }
}

std::unique_ptr<Node> Parser::parse_function_keyword() {
  advance(8);
  skip_blanks();
  std::string name;
  while (!eof() && !is_meta(peek())) name.push_back(s_[i_++]);
  if (name.empty()) fail("expected a function name");
  skip_blanks();
  if (starts("()")) advance(2);
  return function_body(std::move(name));
}

std::unique_ptr<Node> Parser::function_body(std::string name) {
  auto node = std::make_unique<Node>();
  node->kind = Node::kFunction;
  node->line = line_;
  node->name = std::move(name);
  skip_newlines();
  node->kids.push_back(command());
  return node;
}

bool Parser::at_redirect() const {
  std::size_t k = 0;
  while (std::isdigit(static_cast<unsigned char>(peek(k)))) ++k;
  const char c = peek(k);
  if (c == '<' || c == '>') return peek(k + 1) != '(';  // <(...) is a process substitution
  return k == 0 && c == '&' && peek(1) == '>';
}

Redirect Parser::redirect() {
  while (std::isdigit(static_cast<unsigned char>(peek()))) advance();
  Redirect r;
  for (std::string_view op : {"<<<", "<<-", "&>>", "<<", ">>", ">&", "<&", "&>", "<>", ">|", "<", ">"}) {
    if (starts(op)) {
      r.op = std::string(op);
      advance(op.size());
      break;
    }
  }
  skip_blanks();
  r.target = read_word(Mode::kCommand, "");
  if (r.target.parts.empty()) fail(fmt::format("'{}' without a target", r.op));
  if (r.op == "<<" || r.op == "<<-") {
    r.heredoc = true;
    r.heredoc_quoted = std::any_of(r.target.parts.begin(), r.target.parts.end(),
                                   [](const Part& p) { return p.quoted || p.kind != Part::kLit; });
  }
  return r;
}

void Parser::heredoc_body(Redirect& r) {
  std::string delimiter;
  for (const auto& p : r.target.parts) delimiter += p.kind == Part::kLit ? p.text : p.source;
  const std::size_t first_line = line_;
  std::string body;
  for (;;) {
    if (eof()) fail(fmt::format("here-document without its closing '{}' line", delimiter));
    const std::size_t end = std::min(s_.find('\n', i_), s_.size());
    std::string_view text = s_.substr(i_, end - i_);
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (r.op == "<<-")
      while (!text.empty() && text.front() == '\t') text.remove_prefix(1);
    advance(end - i_);
    if (!eof()) advance();  // the newline
    if (text == delimiter) break;
    body.append(text);
    body.push_back('\n');
  }
  if (r.heredoc_quoted) {
    r.body.line = first_line;
    r.body.parts.push_back(lit_part(true, body));
  } else {
    r.body = parse_expandable_text(body, source_, first_line);
  }
}

// NAME=, NAME+=, NAME[...]= at the current position.
bool Parser::at_assignment() const {
  if (!is_name_start(peek())) return false;
  std::size_t k = 0;
  while (is_name_char(peek(k))) ++k;
  if (peek(k) == '[') {
    int depth = 0;
    for (; peek(k) != '\0'; ++k) {
      if (peek(k) == '[') ++depth;
      if (peek(k) == ']' && --depth == 0) break;
      if (peek(k) == '\n') return false;
    }
    if (peek(k) != ']') return false;
    ++k;
  }
  if (peek(k) == '+') ++k;
  return peek(k) == '=';
}

Assignment Parser::assignment() {
  Assignment a;
  a.line = line_;
  while (is_name_char(peek())) a.name.push_back(s_[i_++]);
  if (peek() == '[') {
    advance();
    std::size_t start = i_;
    int depth = 1;
    while (!eof()) {
      if (peek() == '[') ++depth;
      if (peek() == ']' && --depth == 0) break;
      advance();
    }
    a.index = parse_expandable_text(s_.substr(start, i_ - start), source_, line_);
    advance();  // ]
  }
  if (peek() == '+') {
    a.append = true;
    advance();
  }
  advance();  // =
  if (peek() == '(') {
    a.array = true;
    advance();
    for (;;) {
      skip_newlines();
      if (peek() == ')') {
        advance();
        break;
      }
      if (eof()) fail(fmt::format("the array {}=( has no closing ')'", a.name));
      Word w = read_word(Mode::kCommand, "");
      if (w.parts.empty()) fail(fmt::format("unexpected '{}' in the array {}=( )", peek(), a.name));
      a.items.push_back(std::move(w));
    }
  } else {
    a.value = read_word(Mode::kCommand, "");
  }
  return a;
}

std::unique_ptr<Node> Parser::simple() {
  auto node = std::make_unique<Node>();
  node->kind = Node::kSimple;
  node->line = line_;
  bool declaration = false;  // export / declare / local / readonly / typeset take assignments
  for (;;) {
    skip_blanks();
    const char c = peek();
    if (eof() || c == '\n' || c == ';' || c == '|' || c == ')' || (c == '&' && peek(1) != '>')) break;
    if (at_redirect()) {
      node->redirects.push_back(redirect());
      continue;
    }
    if ((node->words.empty() || declaration) && at_assignment()) {
      Assignment a = assignment();
      if (declaration) {
        // The builtin's argument: a word that stands for assignment k (kDeclared + k).
        Word w;
        w.line = a.line;
        w.source = a.name + "=...";
        w.parts.push_back(lit_part(true, std::string(kDeclared) + std::to_string(node->assigns.size())));
        node->words.push_back(std::move(w));
      }
      node->assigns.push_back(std::move(a));
      continue;
    }
    if (c == '(') {
      if (node->words.size() == 1 && node->assigns.empty() && peek(1) == ')') {
        advance(2);  // name() compound-command
        std::string name;
        for (const auto& p : node->words[0].parts) name += p.text;
        return function_body(std::move(name));
      }
      fail(fmt::format("unexpected '(' in '{}'", line_text(i_)));
    }
    Word w = read_word(Mode::kCommand, "");
    if (w.parts.empty()) fail(fmt::format("unexpected '{}'", c));
    if (node->words.empty() && w.parts.size() == 1 && w.parts[0].kind == Part::kLit && !w.parts[0].quoted) {
      const std::string& t = w.parts[0].text;
      declaration = t == "export" || t == "declare" || t == "typeset" || t == "local" || t == "readonly";
    }
    node->words.push_back(std::move(w));
  }
  for (auto& r : node->redirects)
    if (r.heredoc) pending_.push_back(&r);
  return node;
}

std::unique_ptr<Node> parse_script(std::string_view text, const std::string& source, std::size_t first_line) {
  if (text.find('\0') != std::string_view::npos) throw UsageError(fmt::format("{}: contains a NUL byte", source));
  Parser p(text, source, first_line);
  return p.script();
}

Word parse_expandable_text(std::string_view text, const std::string& source, std::size_t line) {
  Parser p(text, source, line);
  return p.text_word();
}

}  // namespace mme::shell
