// The syntax of the shell that launch scripts use (bash's, the parts scripts use): words with
// their quoting and expansions, simple commands with assignments and redirections, lists,
// pipelines, if / case / while / until / for, groups, subshells, (( )), [[ ]], functions and
// here-documents. Parsed into a tree that launch_script.cpp evaluates without running anything.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mme::shell {

struct Word;

// One piece of a word as written.
struct Part {
  enum Kind : unsigned char {
    kLit,     // characters
    kParam,   // $X, ${X...}, $1, $@, ...
    kCmdSub,  // $(...), `...`, <(...), >(...): never run
    kArith,   // $((...))
  };
  Kind kind = kLit;
  bool quoted = false;  // inside quotes or escaped: no field splitting, no pattern meaning
  std::string text;     // kLit: the characters; kParam: the name; kCmdSub: the command
  // kParam: the operator: "" (plain), "len" (${#X}), ":-", "-", ":=", "=", ":+", "+", ":?", "?",
  // "#", "##", "%", "%%", "/", "//", "/#", "/%", ":" (substring), "^", "^^", ",", ",,".
  std::string op;
  std::string index;       // kParam: "" none, "@", "*", or the index expression's text
  bool indirect = false;   // ${!X}
  std::vector<Word> args;  // the operator's words; kArith: the expression
  std::string source;      // as written, for messages ("${X:-1}")
};

struct Word {
  std::vector<Part> parts;
  std::size_t line = 0;
  std::string source;  // as written
  bool op = false;     // an operator of [[ ]] (&&, ||, !, (, ), <, >), not a word
};

struct Redirect {
  std::string op;  // "<", ">", ">>", "<<", "<<-", "<<<", ">&", "<&", "&>", "&>>", "<>", ">|"
  Word target;     // the file, descriptor or here-document delimiter
  // A here-document's body: text (quoted delimiter) or a word to expand.
  bool heredoc = false;
  bool heredoc_quoted = false;
  Word body;
};

struct Assignment {
  std::string name;
  std::optional<Word> index;  // X[i]=v
  bool append = false;        // X+=v
  bool array = false;         // X=( ... )
  Word value;
  std::vector<Word> items;  // X=( items )
  std::size_t line = 0;
};

// In the words of a declaration builtin (export, declare, local, readonly, typeset), an
// assignment argument is the word kDeclared + k, standing for assigns[k].
inline constexpr std::string_view kDeclared = "\x01assignment ";

struct Node {
  enum Kind : unsigned char {
    kSimple,
    kPipeline,
    kAnd,
    kOr,
    kSeq,
    kIf,
    kWhile,
    kUntil,
    kFor,
    kArithFor,
    kCase,
    kGroup,
    kSubshell,
    kArith,
    kCond,
    kFunction
  };
  Kind kind = kSimple;
  std::size_t line = 0;
  std::string source;   // the start of the construct as written (one line), for messages
  bool negate = false;  // `! pipeline`
  // kSimple: assignments (before the command word, or a declaration's), words, redirections. kArith / kArithFor: the
  // expressions in `words`; kCond: the words and operators of [[ ]]; kFor: the list (for_all_args: none, "$@").
  std::vector<Assignment> assigns;
  std::vector<Word> words;
  std::vector<Redirect> redirects;
  // kPipeline: the commands; kAnd / kOr: two; kSeq: the list; kIf: cond, then, [cond, then]...,
  // [else]; kWhile / kUntil: cond, body; kFor / kArithFor / kGroup / kSubshell / kFunction: body;
  // kCase: one body per item.
  std::vector<std::unique_ptr<Node>> kids;
  std::string name;  // kFor: the variable; kFunction: the name
  bool for_all_args = false;
  bool has_else = false;                    // kIf
  std::vector<std::vector<Word>> patterns;  // kCase: per item
  std::vector<std::string> terminators;     // kCase: ";;", ";&" or ";;&" per item
};

// Parses a script; UsageError "<source>:<line>: ..." on a syntax error. Lines count from
// `first_line` (a here-document or `bash -c` string inside a script keeps its lines).
std::unique_ptr<Node> parse_script(std::string_view text, const std::string& source, std::size_t first_line = 1);
// A word from text as a here-document body (unquoted delimiter) or an arithmetic expression
// reads it: only $-expansions, backquotes and backslashes are special.
Word parse_expandable_text(std::string_view text, const std::string& source, std::size_t line);

}  // namespace mme::shell
