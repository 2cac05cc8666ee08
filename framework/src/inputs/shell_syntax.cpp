// A recursive-descent parser of the shell launch scripts use (shell_syntax.hpp). It follows
// bash's grammar for what it reads and refuses the rest with the line and the construct.
#include "shell_syntax.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"

namespace mme::shell {

namespace {

constexpr int kMaxNesting = 200;  // compound commands and expansions inside each other

Part lit_part(bool quoted, std::string text) {
  Part p;
  p.quoted = quoted;
  p.text = std::move(text);
  return p;
}

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_meta(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '&' || c == '|' || c == '<' || c == '>' || c == '(' ||
         c == ')';
}

// Where a word stops being read.
enum class Mode {
  kCommand,  // a command word: stops at white space and operators
  kParam,    // the argument of ${X op ...}: stops at '}' (and at '/' or ':' where asked)
  kText,     // a here-document body or an arithmetic expression: only $, ` and \ are special
};

class Parser {
 public:
  Parser(std::string_view text, const std::string& source, std::size_t line) : s_(text), source_(source), line_(line) {}

  std::unique_ptr<Node> script() {
    auto list = parse_list({});
    skip_blanks();
    if (!eof()) fail(fmt::format("unexpected '{}'", peek()));
    if (!pending_.empty()) fail("a here-document without its body");
    return list;
  }

  Word text_word() {
    Word w = read_word(Mode::kText, "");
    return w;
  }

 private:
  std::string_view s_;
  const std::string& source_;
  std::size_t i_ = 0, line_;
  int depth_ = 0;
  std::vector<Redirect*> pending_;  // here-documents whose bodies follow the next newline

  [[noreturn]] void fail(const std::string& why) const {
    throw UsageError(fmt::format("{}:{}: {}", source_, line_, why));
  }
  bool eof() const { return i_ >= s_.size(); }
  char peek(std::size_t k = 0) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }
  bool starts(std::string_view t) const { return s_.substr(i_, t.size()) == t; }
  void advance(std::size_t n = 1) {
    for (std::size_t k = 0; k < n && i_ < s_.size(); ++k)
      if (s_[i_++] == '\n') ++line_;
  }

  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting) p.fail(fmt::format("nested more than {} levels deep", kMaxNesting));
    }
    ~Nest() { --p.depth_; }
  };

  // The rest of the current line, for messages.
  std::string line_text(std::size_t from) const {
    const std::size_t end = std::min(s_.find('\n', from), s_.size());
    std::string t(s_.substr(from, end - from));
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
    return t.size() > 80 ? t.substr(0, 77) + "..." : t;
  }

  // Blanks, line continuations and comments; not newlines.
  void skip_blanks() {
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
  void newline() {
    advance();
    std::vector<Redirect*> pending;
    pending.swap(pending_);
    for (Redirect* r : pending) heredoc_body(*r);
  }

  void skip_newlines() {
    for (;;) {
      skip_blanks();
      if (peek() != '\n') return;
      newline();
    }
  }

  // A reserved word at the current position (followed by a blank, an operator or the end).
  bool at_word(std::string_view w) const {
    if (!starts(w)) return false;
    const char next = peek(w.size());
    return next == '\0' || is_meta(next) || next == '\r';
  }

  bool at_any(const std::vector<std::string_view>& stops) const {
    return std::any_of(stops.begin(), stops.end(), [&](std::string_view w) { return at_word(w); });
  }

  void expect_word(std::string_view w, std::string_view in) {
    skip_newlines();
    if (!at_word(w)) fail(fmt::format("expected '{}' in {}", w, in));
    advance(w.size());
  }

  // ---- lists ----------------------------------------------------------------------------

  std::unique_ptr<Node> parse_list(const std::vector<std::string_view>& stops) {
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

  std::unique_ptr<Node> and_or() {
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

  std::unique_ptr<Node> pipeline() {
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

  // ---- commands -------------------------------------------------------------------------

  std::unique_ptr<Node> command() {
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

  std::unique_ptr<Node> compound(Node::Kind kind, const std::vector<std::string_view>& stops) {
    auto node = std::make_unique<Node>();
    node->kind = kind;
    node->line = line_;
    node->kids.push_back(parse_list(stops));
    return node;
  }

  void redirections(Node& node) {
    for (;;) {
      skip_blanks();
      if (!at_redirect()) break;
      node.redirects.push_back(redirect());
    }
    for (auto& r : node.redirects)
      if (r.heredoc) pending_.push_back(&r);
  }

  std::unique_ptr<Node> parse_if() {
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

  std::unique_ptr<Node> parse_loop() {
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

  std::unique_ptr<Node> parse_for() {
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
          node->words.push_back(read_word(Mode::kCommand, ""));
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

  std::unique_ptr<Node> parse_case() {
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

  std::unique_ptr<Node> parse_cond() {
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

  std::unique_ptr<Node> parse_function_keyword() {
    advance(8);
    skip_blanks();
    std::string name;
    while (!eof() && !is_meta(peek())) name.push_back(s_[i_++]);
    if (name.empty()) fail("expected a function name");
    skip_blanks();
    if (starts("()")) advance(2);
    return function_body(std::move(name));
  }

  std::unique_ptr<Node> function_body(std::string name) {
    auto node = std::make_unique<Node>();
    node->kind = Node::kFunction;
    node->line = line_;
    node->name = std::move(name);
    skip_newlines();
    node->kids.push_back(command());
    return node;
  }

  // ---- simple commands ------------------------------------------------------------------

  bool at_redirect() const {
    std::size_t k = 0;
    while (std::isdigit(static_cast<unsigned char>(peek(k)))) ++k;
    const char c = peek(k);
    if (c == '<' || c == '>') return peek(k + 1) != '(';  // <(...) is a process substitution
    return k == 0 && c == '&' && peek(1) == '>';
  }

  Redirect redirect() {
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

  void heredoc_body(Redirect& r) {
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
  bool at_assignment() const {
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

  Assignment assignment() {
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

  std::unique_ptr<Node> simple() {
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

  // ---- words ----------------------------------------------------------------------------

  Word arith_until_close() {
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

  static void add_lit(Word& w, char c, bool quoted) {
    if (!w.parts.empty() && w.parts.back().kind == Part::kLit && w.parts.back().quoted == quoted) {
      w.parts.back().text.push_back(c);
    } else {
      w.parts.push_back(lit_part(quoted, std::string(1, c)));
    }
  }

  // A word in `mode`; `stops` are the extra characters that end it in kParam mode.
  Word read_word(Mode mode, std::string_view stops) {
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

  std::string ansi_c_string() {
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

  void double_quoted(Word& w) {
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
  std::string balanced_parens() {
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

  Part command_substitution(bool quoted) {
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

  Part backquote(bool quoted) {
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

  Part dollar(bool quoted) {
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
  Part brace_parameter(bool quoted) {
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
};

}  // namespace

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
