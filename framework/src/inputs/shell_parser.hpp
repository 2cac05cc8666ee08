// The parser of shell_syntax.hpp, shared by its two parts: shell_syntax.cpp (lists, commands,
// compound commands, assignments, redirections and here-documents) and shell_words.cpp (words,
// quoting, $-expansions).
#pragma once

#include <cctype>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"

#include "shell_syntax.hpp"

namespace mme::shell {

inline constexpr int kMaxNesting = 200;  // compound commands and expansions inside each other

inline Part lit_part(bool quoted, std::string text) {
  Part p;
  p.quoted = quoted;
  p.text = std::move(text);
  return p;
}

inline bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
inline bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
inline bool is_meta(char c) {
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

  std::unique_ptr<Node> script();

  Word text_word();

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
  void advance(std::size_t n = 1);

  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting) p.fail(fmt::format("nested more than {} levels deep", kMaxNesting));
    }
    ~Nest() { --p.depth_; }
  };

  // The rest of the current line, for messages.
  std::string line_text(std::size_t from) const;

  // Blanks, line continuations and comments; not newlines.
  void skip_blanks();

  // A newline, then the bodies of the here-documents started on its line.
  void newline();

  void skip_newlines();

  // A reserved word at the current position (followed by a blank, an operator or the end).
  bool at_word(std::string_view w) const;

  bool at_any(const std::vector<std::string_view>& stops) const {
    return std::any_of(stops.begin(), stops.end(), [&](std::string_view w) { return at_word(w); });
  }

  void expect_word(std::string_view w, std::string_view in);

  // ---- lists ----------------------------------------------------------------------------

  std::unique_ptr<Node> parse_list(const std::vector<std::string_view>& stops);

  std::unique_ptr<Node> and_or();

  std::unique_ptr<Node> pipeline();

  // ---- commands -------------------------------------------------------------------------

  std::unique_ptr<Node> command();

  std::unique_ptr<Node> compound(Node::Kind kind, const std::vector<std::string_view>& stops);

  void redirections(Node& node);

  std::unique_ptr<Node> parse_if();

  std::unique_ptr<Node> parse_loop();

  std::unique_ptr<Node> parse_for();

  std::unique_ptr<Node> parse_case();

  std::unique_ptr<Node> parse_cond();

  std::unique_ptr<Node> parse_function_keyword();

  std::unique_ptr<Node> function_body(std::string name);

  // ---- simple commands ------------------------------------------------------------------

  bool at_redirect() const;

  Redirect redirect();

  void heredoc_body(Redirect& r);

  // NAME=, NAME+=, NAME[...]= at the current position.
  bool at_assignment() const;

  Assignment assignment();

  std::unique_ptr<Node> simple();

  // ---- words ----------------------------------------------------------------------------

  Word arith_until_close();

  static void add_lit(Word& w, char c, bool quoted);

  // A word in `mode`; `stops` are the extra characters that end it in kParam mode.
  Word read_word(Mode mode, std::string_view stops);

  std::string ansi_c_string();

  void double_quoted(Word& w);

  // The text up to the ')' that closes an opening '(' just read (quotes and parentheses inside).
  std::string balanced_parens();

  Part command_substitution(bool quoted);

  Part backquote(bool quoted);

  Part dollar(bool quoted);

  // After "${": ${#X}, ${!X}, ${X}, ${X[i]}, ${X op word}.
  Part brace_parameter(bool quoted);
};

}  // namespace mme::shell
