// The evaluator of launch scripts (launch_script.hpp), shared by its parts: the values a script
// computes (Str: text, and where it holds parts mme does not know), the shell's state and its
// commands (Shell), integer arithmetic (Arith). It never runs a command.
//   launch_expand.cpp    values, parameter expansion, patterns
//   launch_commands.cpp  commands, conditions and tests, builtins, eval / source / bash -c
//   launch_arith.cpp     $(( )), (( )), indices
//   launch_launcher.cpp  the commands that launch an entry script, and the launcher's GPU count
//   launch_script.cpp    the launch found: the entry script, its flags by Megatron-LM's arity, checks
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "mme/inputs/launch_script.hpp"
#include "mme/sdk/error.hpp"

#include "shell_syntax.hpp"

namespace mme::launch {

using shell::Node;
using shell::Part;
using shell::Word;

constexpr std::size_t kMaxSteps = 100000;         // commands evaluated: a loop that does not end
constexpr int kMaxDepth = 16;                     // function calls, eval, bash -c, source inside each other
constexpr std::size_t kMaxValueBytes = 1u << 20;  // one value's text
constexpr std::uintmax_t kMaxSourceBytes = 1u << 20;

// A string the script computes. `unknown` says why its value is not known ("" when it is);
// such a string keeps its source text ("$1", "${PWD}/cache") for messages and for the values
// mme does not read. `spans` are where the parts mme does not know lie in `text`, each with the
// variable it comes from when that is a variable the script never sets (an empty name for a
// command substitution or a value derived from unknown ones).
struct Str {
  struct Span {
    std::size_t begin = 0, end = 0;
    std::string why, variable;
  };
  std::string text;
  std::string unknown;
  std::vector<Span> spans;
  // Set on the words that field splitting cut out of one unquoted value with blanks inside
  // ($X, ${X[@]} unquoted): that value, which the messages about such a word quote.
  std::string split_from;

  static Str of(std::string t) {
    Str s;
    s.text = std::move(t);
    return s;
  }
  static Str not_known(std::string shown, std::string why, std::string variable = "") {
    Str s;
    s.text = std::move(shown);
    s.unknown = why;
    s.spans.push_back({0, s.text.size(), std::move(why), std::move(variable)});
    return s;
  }
  bool known() const { return unknown.empty(); }
  // How many trailing characters are known (a path's file name).
  std::size_t known_tail() const { return spans.empty() ? text.size() : text.size() - spans.back().end; }
  void append(const Str& o) {
    const std::size_t shift = text.size();
    text += o.text;
    for (Span sp : o.spans) {
      sp.begin += shift;
      sp.end += shift;
      spans.push_back(std::move(sp));
    }
    if (unknown.empty()) unknown = o.unknown;
  }
  // The characters [b, e) with the spans inside them.
  Str slice(std::size_t b, std::size_t e) const {
    Str out = Str::of(text.substr(b, e - b));
    for (const Span& sp : spans) {
      if (sp.end <= b || sp.begin >= e) continue;
      out.spans.push_back({std::max(sp.begin, b) - b, std::min(sp.end, e) - b, sp.why, sp.variable});
      if (out.unknown.empty()) out.unknown = sp.why;
    }
    return out;
  }
  bool blank_at(std::size_t k) const {
    if (!std::isspace(static_cast<unsigned char>(text[k]))) return false;
    return std::none_of(spans.begin(), spans.end(), [&](const Span& sp) { return k >= sp.begin && k < sp.end; });
  }
  // The file name, when it is known ("" otherwise).
  std::string file_name() const {
    const std::size_t slash = text.rfind('/');
    const std::size_t start = slash == std::string::npos ? 0 : slash + 1;
    if (text.size() - start > known_tail()) return "";
    return text.substr(start);
  }
};

struct Var {
  std::vector<Str> items;  // a scalar is one item
  bool array = false;
  bool exported = false;
  bool given = false;  // from --set, not assigned by the script since
};

enum class Tri { kFalse, kTrue, kUnknown };
struct Status {
  Tri tri = Tri::kTrue;
  std::string why;  // kUnknown: why
};
inline Status known(bool b) { return {b ? Tri::kTrue : Tri::kFalse, ""}; }
inline Status unknown_status(std::string why) { return {Tri::kUnknown, std::move(why)}; }

struct ExitSignal {};
struct ReturnSignal {};
struct LoopSignal {
  bool brk;
  int levels;
};

// A command that launches an entry script, as found.
struct Found {
  std::size_t line = 0;
  std::string where;  // "launch.sh:40", "launch.sh:40 (bash -c)"
  std::string launcher;
  Str entry;
  std::vector<Str> args;
  bool bare = false;
  std::vector<std::pair<std::string, Str>> env;
  std::optional<std::int64_t> world_size;
  std::string world_from, world_unknown;
};

struct Shared {
  const LaunchScriptOptions& options;
  std::vector<Found> found;
  std::vector<std::string> notes;       // why a command that might launch was not followed
  std::set<std::string> defaults_used;  // NAME=default of variables unset from the start
  std::size_t steps = 0;
};

// Names, digits, ordinals ("third") and bash's glob patterns (launch_expand.cpp).
bool is_name(std::string_view n);
bool all_digits(std::string_view t);
std::string ordinal(std::size_t n);
// *, ?, [...] ([!...], [^...], ranges); a backslash quotes.
bool glob_match(std::string_view pat, std::string_view s);
std::string glob_escape(std::string_view t);

class Shell;

// Integer arithmetic of $(( )), (( )), array indices and [[ -eq ]]: bash's operators on 64-bit
// integers; a variable mme does not know makes the result unknown.
class Arith {
 public:
  Arith(Shell& sh, std::string_view text, std::size_t line) : sh_(sh), s_(text), line_(line) {}
  // nullopt: unknown (why()).
  std::optional<std::int64_t> run();
  const std::string& why() const { return why_; }

 private:
  struct V {
    std::int64_t v = 0;
    bool known = true;
    std::string lvalue;  // a variable name, for assignments
  };
  Shell& sh_;
  std::string_view s_;
  std::size_t i_ = 0, line_;
  std::string why_;
  int depth_ = 0;   // variables that refer to variables
  int nested_ = 0;  // parentheses and unary operators inside each other

  [[noreturn]] void fail(const std::string& what) const;
  void ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool take(std::string_view op) {
    ws();
    if (s_.substr(i_, op.size()) != op) return false;
    // Not the start of a longer operator ("<" of "<<", "&" of "&&", "=" of "==").
    const char next = i_ + op.size() < s_.size() ? s_[i_ + op.size()] : '\0';
    if ((op == "<" || op == ">") && (next == op[0] || next == '=')) return false;
    if ((op == "&" || op == "|") && (next == op[0] || next == '=')) return false;
    if ((op == "=" || op == "!") && next == '=') return false;
    if ((op == "*" && next == '*') || (op == "*" && next == '=')) return false;
    if ((op == "+" || op == "-") && (next == op[0] || next == '=')) return false;
    if ((op == "/" || op == "%" || op == "^" || op == "<<" || op == ">>" || op == "**") && next == '=') return false;
    i_ += op.size();
    return true;
  }
  V value(V v);  // a variable's value
  V combine(const V& a, const V& b, std::int64_t r) const {
    V out;
    out.known = a.known && b.known;
    out.v = out.known ? r : 0;
    return out;
  }
  std::int64_t checked(bool overflow, std::int64_t r) const {
    if (overflow) fail("overflows 64 bits");
    return r;
  }
  V comma();
  V assign();
  V ternary();
  V binary(int level);
  V unary();
  V primary();
  V store(const V& target, V v);
};

class Shell {
 public:
  Shell(Shared& shared, std::string source, int depth) : sh_(shared), source_(std::move(source)), depth_(depth) {
    if (depth_ > kMaxDepth)
      throw UsageError(
          fmt::format("{}: nested more than {} levels deep (functions, eval, bash -c, source)", source_, kMaxDepth));
  }

  std::map<std::string, Var> vars;
  std::vector<Str> positional;
  std::string zero;  // $0
  std::map<std::string, const Node*> functions;
  std::set<std::string> ever_assigned;      // names the script assigns (their defaults are not assumptions)
  std::vector<std::unique_ptr<Node>> keep;  // trees of eval, source and bash -c that functions may point into

  void run_script(const Node& script);

  [[noreturn]] void fail(std::size_t line, const std::string& why) const {
    throw UsageError(fmt::format("{}:{}: {}", source_, line, why));
  }

  // ---- values ----------------------------------------------------------------------------

  std::string where(std::size_t line) const { return fmt::format("{}:{}", source_, line); }

  // The names the script assigns anywhere: its own variables. Read before they are set they are
  // empty, as in bash (an environment that sets one is not assumed); other unset names are the
  // environment's, which mme does not know.
  std::set<std::string> own;
  void collect_own(const Node& n);

  Str unset_value(const std::string& name, std::size_t line) const;

  const Var* find(const std::string& name) const;

  void set_var(const std::string& name, std::vector<Str> items, bool array, std::size_t line);

  // ---- expansion -------------------------------------------------------------------------

  struct Fields {
    std::vector<Str> out;
    Str cur;
    bool has = false;  // cur holds something (a quoted "" counts)
    void push() {
      if (has) out.push_back(std::move(cur));
      cur = Str::of("");
      has = false;
    }
    void add(const Str& s) {
      cur.append(s);
      has = true;
    }
    // An unquoted value: split at its blanks. A part mme does not know is taken as one word
    // (it holds no blank), which the messages of the values it reaches say.
    void add_split(const Str& s) {
      const std::string& t = s.text;
      // Blanks between two parts: the value becomes several words.
      std::size_t first = 0, last = t.size();
      while (first < last && s.blank_at(first)) ++first;
      while (last > first && s.blank_at(last - 1)) --last;
      bool cut = false;
      for (std::size_t i = first; i < last && !cut; ++i) cut = s.blank_at(i);
      const std::string whole = cut ? t.substr(first, last - first) : std::string();
      std::size_t k = 0;
      while (k < t.size()) {
        if (s.blank_at(k)) {
          push();
          while (k < t.size() && s.blank_at(k)) ++k;
          continue;
        }
        std::size_t e = k;
        while (e < t.size() && !s.blank_at(e)) ++e;
        add(s.known() ? Str::of(t.substr(k, e - k)) : s.slice(k, e));
        if (cut) cur.split_from = whole;
        k = e;
      }
    }
  };

  // The values of one expansion: a list for $@, ${X[@]}; one otherwise.
  struct Expanded {
    std::vector<Str> items;
    bool list = false;  // "$@" / "${X[@]}": one field per item when quoted
    bool star = false;  // "$*" / "${X[*]}": joined by a space when quoted
  };

  std::vector<Str> expand(const Word& w);

  // One string (assignments, case words, [[ ]] operands, here-documents): no field splitting.
  Str expand_one(const Word& w);

  // As a pattern: quoted characters stand for themselves.
  std::string expand_pattern(const Word& w, std::string& unknown);

  void expand_into(const Word& w, Fields& f, bool split);

  Expanded expand_part(const Part& p, std::size_t line);

  // The value of a name without an operator: nullopt when unset.
  std::optional<Expanded> lookup(const Part& p, std::size_t line);

  Expanded parameter(const Part& p, std::size_t line);

  static std::string remove_pattern(const std::string& t, const std::string& pat, const std::string& op);

  static std::string replace_pattern(const std::string& t, const std::string& pat, const std::string& rep,
                                     const std::string& op);

  Str substring(const Str& s, const Part& p, std::size_t line);

  // ---- commands --------------------------------------------------------------------------

  void step(std::size_t line);

  Status run(const Node& n);

  Status run_inner(const Node& n);

  static std::string clip(const std::string& t) { return t.size() > 60 ? t.substr(0, 57) + "..." : t; }

  // A copy of this shell for a subshell: what it assigns is lost, what it launches is kept.
  Status subshell(const Node& n);

  Status run_case(const Node& n);

  // Commands that can change what is launched: assignments, declarations, function calls,
  // launchers, anything whose name is not known. An unknown condition may guard only the others.
  bool inert(const Node& n) const;

  // ---- tests: [ ], test, [[ ]] ----------------------------------------------------------

  // In a condition, a variable the script never sets (or an argument not given) is taken as
  // unset, as the script reads it in a clean environment: which branch runs is the script's
  // default path, and the assumptions list the names (--set, --script-arg change them). A value
  // with another unknown part (a command substitution) stays unknown.
  Str assume_unset(const Str& s);

  struct TestArg {
    Str value;
    std::string pattern;  // [[ == ]]: the right side as a pattern
    std::string pattern_unknown;
    bool op = false;  // an operator of [[ ]]
  };

  Status run_cond(const Node& n);

  Status run_test(const std::vector<Str>& words, std::size_t line, const std::string& src);

  static bool is_op(const TestArg& a, std::string_view op, bool cond) {
    return (cond ? a.op : a.value.known()) && a.value.text == op;
  }

  static Status both(const Status& a, const Status& b, bool conj);

  Status test_or(std::vector<TestArg>& a, std::size_t& pos, bool cond, std::size_t line);

  Status test_and(std::vector<TestArg>& a, std::size_t& pos, bool cond, std::size_t line);

  Status test_not(std::vector<TestArg>& a, std::size_t& pos, bool cond, std::size_t line);

  Status test_primary(std::vector<TestArg>& a, std::size_t& pos, bool cond, std::size_t line);

  Status binary_test(const TestArg& l, const std::string& op, const TestArg& r, bool cond, std::size_t line);

  // ---- simple commands -------------------------------------------------------------------

  void assign(const shell::Assignment& a, bool local_export, bool declared_array);

  Status simple(const Node& n);

  Status declaration(const Node& n, const std::vector<Str>& fields, const std::set<std::size_t>& declared);

  Status call(const Node& body, const std::vector<Str>& fields, std::size_t line);

  // Text that eval or bash -c would run, when it is not known: harmless if it holds nothing
  // that launches (no .py, no launcher).
  static bool inert_text(const std::string& t);

  // The --script-source file a path names: by its path, or by its file name when the script
  // builds the folder at run time.
  const std::filesystem::path* named_source(const Str& path) const;

  Status source(const Node& n, const std::vector<Str>& fields);

  // Runs text as script in this shell (eval, source): its functions stay defined.
  Status run_text(const std::string& text, const std::string& name, bool own_lines);

  // A child shell for bash -c, an sbatch or bash here-document: the exported variables only.
  void run_child(const std::string& text, const std::string& name, std::vector<Str> args,
                 const std::vector<std::pair<std::string, Str>>& env);

  // ---- launchers ---------------------------------------------------------------------------

  // A command that is not a builtin: a launch of an entry script (recorded), a launcher whose
  // command is a script of its own (bash -c, an sbatch here-document: read), or any other
  // command, which mme does not run (its status is not known).
  Status launch(const std::vector<Str>& fields, const std::vector<std::pair<std::string, Str>>& prefix,
                const std::optional<Str>& input, std::size_t input_line, const Node& n);
  // bash -c, a here-document, sbatch --wrap (launch_launcher.cpp): a script of its own.
  Status child_script(const std::string& b, const std::vector<Str>& fields, std::size_t k,
                      const std::optional<Str>& input, std::size_t input_line, std::size_t line,
                      const std::vector<std::pair<std::string, Str>>& env);
  // The exported variables, then `extra` (a command's own prefix assignments): a launch's environment.
  std::vector<std::pair<std::string, Str>> exported_env(const std::vector<std::pair<std::string, Str>>& extra) const;

  Shared& sh_;
  std::string source_;
  int depth_;
};

}  // namespace mme::launch
