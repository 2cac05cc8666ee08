// The static reader of launch scripts (launch_script.hpp): evaluates the tree of
// shell_syntax.cpp on the values the script gives, never running a command, and finds the
// command that launches the entry script. Launcher and entry-script handling is at the end.
#include "mme/inputs/launch_script.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>

#include <fmt/core.h>

#include "mme/inputs/megatron_flags.hpp"
#include "mme/inputs/setup_schema.hpp"
#include "mme/sdk/error.hpp"
#include "mme/sdk/input_text.hpp"
#include "mme/sdk/training_setup.hpp"

#include "shell_syntax.hpp"

namespace mme {

namespace {

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
Status known(bool b) { return {b ? Tri::kTrue : Tri::kFalse, ""}; }
Status unknown_status(std::string why) { return {Tri::kUnknown, std::move(why)}; }

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

bool is_name(std::string_view n) {
  return !n.empty() && (std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_') &&
         std::all_of(n.begin(), n.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

bool all_digits(std::string_view t) {
  return !t.empty() &&
         std::all_of(t.begin(), t.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

std::string ordinal(std::size_t n) {
  static const char* names[] = {"first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth"};
  return n >= 1 && n <= 9 ? names[n - 1] : fmt::format("{}th", n);
}

// Glob matching of bash patterns: *, ?, [...] ([!...], [^...], ranges); a backslash quotes.
bool glob_match(std::string_view pat, std::string_view s) {
  std::size_t p = 0, i = 0, star_p = std::string_view::npos, star_i = 0;
  auto match_class = [&](std::size_t& pp, char c) {
    std::size_t k = pp + 1;
    bool negate = false;
    if (k < pat.size() && (pat[k] == '!' || pat[k] == '^')) {
      negate = true;
      ++k;
    }
    bool hit = false;
    bool first = true;
    for (; k < pat.size() && (first || pat[k] != ']'); ++k, first = false) {
      char lo = pat[k];
      if (lo == '\\' && k + 1 < pat.size()) lo = pat[++k];
      char hi = lo;
      if (k + 2 < pat.size() && pat[k + 1] == '-' && pat[k + 2] != ']') {
        hi = pat[k + 2];
        k += 2;
      }
      if (c >= lo && c <= hi) hit = true;
    }
    if (k >= pat.size()) return -1;  // no closing ']': a literal '['
    pp = k + 1;
    return hit != negate ? 1 : 0;
  };
  while (i < s.size()) {
    if (p < pat.size()) {
      const char c = pat[p];
      if (c == '*') {
        star_p = p++;
        star_i = i;
        continue;
      }
      if (c == '?') {
        ++p;
        ++i;
        continue;
      }
      if (c == '[') {
        std::size_t pp = p;
        const int r = match_class(pp, s[i]);
        if (r == 1) {
          p = pp;
          ++i;
          continue;
        }
        if (r == -1 && s[i] == '[') {
          ++p;
          ++i;
          continue;
        }
      } else {
        char lit = c;
        std::size_t next = p + 1;
        if (c == '\\' && p + 1 < pat.size()) {
          lit = pat[p + 1];
          next = p + 2;
        }
        if (lit == s[i]) {
          p = next;
          ++i;
          continue;
        }
      }
    }
    if (star_p == std::string_view::npos) return false;
    p = star_p + 1;
    i = ++star_i;
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

std::string glob_escape(std::string_view t) {
  std::string out;
  for (char c : t) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

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

  void run_script(const Node& script) {
    collect_own(script);
    try {
      run(script);
    } catch (const ExitSignal&) {
    } catch (const ReturnSignal&) {
    } catch (const LoopSignal&) {
    }
  }

  [[noreturn]] void fail(std::size_t line, const std::string& why) const {
    throw UsageError(fmt::format("{}:{}: {}", source_, line, why));
  }

  // ---- values ----------------------------------------------------------------------------

  std::string where(std::size_t line) const { return fmt::format("{}:{}", source_, line); }

  // The names the script assigns anywhere: its own variables. Read before they are set they are
  // empty, as in bash (an environment that sets one is not assumed); other unset names are the
  // environment's, which mme does not know.
  std::set<std::string> own;
  void collect_own(const Node& n) {
    for (const auto& a : n.assigns) own.insert(a.name);
    if (n.kind == Node::kFor) own.insert(n.name);
    for (const auto& k : n.kids) collect_own(*k);
  }

  Str unset_value(const std::string& name, std::size_t line) const {
    if (own.count(name)) return Str::of("");
    if (all_digits(name)) {
      const std::size_t n = std::stoul(name.size() > 6 ? "999999" : name);
      return Str::not_known("$" + name,
                            fmt::format("line {}: ${}, the script's {} argument, is not given (--script-arg gives it)",
                                        line, name, ordinal(n)),
                            "$" + name);
    }
    return Str::not_known(
        "$" + name, fmt::format("line {}: {} is not set in the script (--set {}=VALUE gives it)", line, name, name),
        name);
  }

  const Var* find(const std::string& name) const {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : &it->second;
  }

  void set_var(const std::string& name, std::vector<Str> items, bool array, std::size_t line) {
    if (!is_name(name)) fail(line, fmt::format("'{}' is not a valid variable name", name));
    std::size_t bytes = 0;
    for (const auto& i : items) bytes += i.text.size();
    if (bytes > kMaxValueBytes) fail(line, fmt::format("the value of {} grows beyond 1 MiB", name));
    Var& v = vars[name];
    v.items = std::move(items);
    v.array = array;
    v.given = false;
    ever_assigned.insert(name);
  }

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

  std::vector<Str> expand(const Word& w) {
    Fields f;
    f.cur = Str::of("");
    expand_into(w, f, true);
    f.push();
    return f.out;
  }

  // One string (assignments, case words, [[ ]] operands, here-documents): no field splitting.
  Str expand_one(const Word& w) {
    Fields f;
    f.cur = Str::of("");
    expand_into(w, f, false);
    return f.cur;
  }

  // As a pattern: quoted characters stand for themselves.
  std::string expand_pattern(const Word& w, std::string& unknown) {
    std::string out;
    for (const auto& p : w.parts) {
      if (p.kind == Part::kLit) {
        out += p.quoted ? glob_escape(p.text) : p.text;
        continue;
      }
      Word one;
      one.line = w.line;
      one.parts.push_back(p);
      const Str s = expand_one(one);
      if (!s.known() && unknown.empty()) unknown = s.unknown;
      out += p.quoted ? glob_escape(s.text) : s.text;
    }
    return out;
  }

  void expand_into(const Word& w, Fields& f, bool split) {
    for (const auto& p : w.parts) {
      if (p.kind == Part::kLit) {
        if (p.quoted || !split)
          f.add(Str::of(p.text));
        else
          f.add_split(Str::of(p.text));
        if (p.quoted) f.has = true;
        continue;
      }
      const Expanded e = expand_part(p, w.line);
      if (e.list && !(p.quoted && e.star)) {
        // "$@", "${X[@]}": one field per item (none for no items); unquoted, each item split.
        for (std::size_t k = 0; k < e.items.size(); ++k) {
          if (k > 0) {
            if (split)
              f.push();
            else
              f.add(Str::of(" "));
          }
          if (p.quoted || !split)
            f.add(e.items[k]);
          else
            f.add_split(e.items[k]);
        }
        continue;
      }
      Str joined = Str::of("");
      for (std::size_t k = 0; k < e.items.size(); ++k) {
        if (k) joined.append(Str::of(" "));
        joined.append(e.items[k]);
      }
      if (p.quoted || !split) {
        f.add(joined);
        if (p.quoted) f.has = true;
      } else {
        f.add_split(joined);
      }
    }
  }

  Expanded expand_part(const Part& p, std::size_t line) {
    Expanded e;
    if (p.kind == Part::kCmdSub) {
      e.items.push_back(Str::not_known(
          p.source, fmt::format("line {}: {} is a command substitution, which mme never "
                                "runs",
                                line, p.source.size() > 60 ? p.source.substr(0, 57) + "..." : p.source)));
      return e;
    }
    if (p.kind == Part::kArith) {
      const Str text = expand_one(p.args.at(0));
      if (!text.known()) {
        e.items.push_back(Str::not_known("$((" + text.text + "))", text.unknown));
        return e;
      }
      Arith a(*this, text.text, line);
      const auto v = a.run();
      e.items.push_back(v ? Str::of(std::to_string(*v)) : Str::not_known("$((" + text.text + "))", a.why()));
      return e;
    }
    return parameter(p, line);
  }

  // The value of a name without an operator: nullopt when unset.
  std::optional<Expanded> lookup(const Part& p, std::size_t line) {
    Expanded e;
    const std::string& n = p.text;
    if (n == "@" || n == "*") {
      e.items = positional;
      e.list = true;
      e.star = n == "*";
      return e;
    }
    if (n == "#") {
      e.items.push_back(Str::of(std::to_string(positional.size())));
      return e;
    }
    if (n == "0") {
      e.items.push_back(Str::of(zero));
      return e;
    }
    if (all_digits(n)) {
      const std::size_t k = n.size() > 6 ? 999999 : std::stoul(n);
      if (k > positional.size()) return std::nullopt;
      e.items.push_back(positional[k - 1]);
      return e;
    }
    if (n == "?" || n == "$" || n == "!" || n == "-") {
      e.items.push_back(
          Str::not_known("$" + n, fmt::format("line {}: ${} is known only when the script runs", line, n)));
      return e;
    }
    const Var* v = find(n);
    if (!v) return std::nullopt;
    if (p.index.empty()) {
      if (v->items.empty()) return std::nullopt;
      e.items.push_back(v->items.front());
      return e;
    }
    if (p.index == "@" || p.index == "*") {
      e.items = v->items;
      e.list = true;
      e.star = p.index == "*";
      return e;
    }
    const Str idx = expand_one(shell::parse_expandable_text(p.index, source_, line));
    if (!idx.known()) {
      e.items.push_back(Str::not_known(p.source, idx.unknown));
      return e;
    }
    Arith a(*this, idx.text, line);
    const auto k = a.run();
    if (!k) {
      e.items.push_back(Str::not_known(p.source, a.why()));
      return e;
    }
    std::int64_t at = *k;
    if (at < 0) at += static_cast<std::int64_t>(v->items.size());
    if (at < 0 || at >= static_cast<std::int64_t>(v->items.size())) return std::nullopt;
    e.items.push_back(v->items[static_cast<std::size_t>(at)]);
    return e;
  }

  Expanded parameter(const Part& p, std::size_t line) {
    if (p.indirect) fail(line, fmt::format("{}: indirect expansion is not evaluated", p.source));
    if (p.op == "len") {
      Expanded e;
      const auto v = lookup(p, line);
      if (!v) {
        e.items.push_back(unset_value(p.text, line));
        return e;
      }
      if (v->list) {
        e.items.push_back(Str::of(std::to_string(v->items.size())));
        return e;
      }
      const Str& s = v->items.front();
      e.items.push_back(s.known() ? Str::of(std::to_string(s.text.size())) : Str::not_known(p.source, s.unknown));
      return e;
    }
    auto v = lookup(p, line);
    auto empty = [&] {
      if (!v) return true;
      if (v->list) return v->items.empty();
      return v->items.front().known() && v->items.front().text.empty();
    };
    const std::string& op = p.op;
    auto word = [&](std::size_t k) { return expand_one(p.args.at(k)); };
    if (op.empty()) {
      if (v) return *v;
      Expanded e;
      e.items.push_back(unset_value(p.text, line));
      return e;
    }
    const bool colon = op[0] == ':' && op.size() == 2;
    const bool missing = !v || (v->list && v->items.empty()) || (colon && empty());
    // A value mme does not know decides nothing: "${X:-d}" with X unknown stays unknown.
    const bool unknown_value = v && !v->list && !v->items.front().known();
    if (op == ":-" || op == "-" || op == ":=" || op == "=") {
      if (unknown_value) return *v;
      if (!missing) return *v;
      Str d = word(0);
      if (!v && !ever_assigned.count(p.text) && (is_name(p.text) || all_digits(p.text)))
        sh_.defaults_used.insert(fmt::format("{}={}", all_digits(p.text) ? "$" + p.text : p.text, d.text));
      if (op == ":=" || op == "=") {
        if (!is_name(p.text)) fail(line, fmt::format("{}: cannot assign to ${}", p.source, p.text));
        set_var(p.text, {d}, false, line);
      }
      Expanded e;
      e.items.push_back(d);
      return e;
    }
    if (op == ":+" || op == "+") {
      if (unknown_value) return {{Str::not_known(p.source, v->items.front().unknown)}, false, false};
      Expanded e;
      e.items.push_back(missing ? Str::of("") : word(0));
      return e;
    }
    if (op == ":?" || op == "?") {
      if (!missing) return *v;
      Expanded e;
      const Str msg = word(0);
      e.items.push_back(Str::not_known(
          p.source, fmt::format("line {}: {} is not set (the script stops: {}); {}", line, p.text,
                                msg.text.empty() ? "parameter null or not set" : msg.text,
                                all_digits(p.text) ? "--script-arg gives it" : "--set " + p.text + "=VALUE gives it")));
      return e;
    }
    if (!v) {
      Expanded e;
      e.items.push_back(unset_value(p.text, line));
      return e;
    }
    // Operators on the value(s): each item of a list.
    Expanded out = *v;
    for (Str& s : out.items) {
      if (!s.known()) {
        s = Str::not_known(p.source, s.unknown);
        continue;
      }
      if (op[0] != ':' && op[0] != '^' && op[0] != ',' && s.text.size() > 4096)
        fail(line, fmt::format("{}: a pattern on a value of {} characters is not evaluated", p.source, s.text.size()));
      if (op == "#" || op == "##" || op == "%" || op == "%%") {
        std::string why;
        const std::string pat = expand_pattern(p.args.at(0), why);
        if (!why.empty()) {
          s = Str::not_known(p.source, why);
          continue;
        }
        s = Str::of(remove_pattern(s.text, pat, op));
      } else if (op[0] == '/') {
        std::string why;
        const std::string pat = expand_pattern(p.args.at(0), why);
        const Str rep = p.args.size() > 1 ? word(1) : Str::of("");
        if (!why.empty() || !rep.known()) {
          s = Str::not_known(p.source, why.empty() ? rep.unknown : why);
          continue;
        }
        s = Str::of(replace_pattern(s.text, pat, rep.text, op));
      } else if (op == ":") {
        s = substring(s, p, line);
      } else if (op == "^^" || op == ",," || op == "^" || op == ",") {
        if (!p.args.empty() && !p.args[0].parts.empty())
          fail(line, fmt::format("{}: case conversion of a pattern is not evaluated", p.source));
        std::string t = s.text;
        const bool upper = op[0] == '^';
        const std::size_t n = op.size() == 2 ? t.size() : std::min<std::size_t>(1, t.size());
        for (std::size_t k = 0; k < n; ++k)
          t[k] = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(t[k]))
                                         : std::tolower(static_cast<unsigned char>(t[k])));
        s = Str::of(t);
      } else {
        fail(line, fmt::format("{}: the operator '{}' is not evaluated", p.source, op));
      }
    }
    return out;
  }

  static std::string remove_pattern(const std::string& t, const std::string& pat, const std::string& op) {
    const bool prefix = op[0] == '#', longest = op.size() == 2;
    const std::size_t n = t.size();
    if (prefix) {
      for (std::size_t k = 0; k <= n; ++k) {
        const std::size_t len = longest ? n - k : k;
        if (glob_match(pat, std::string_view(t).substr(0, len))) return t.substr(len);
      }
    } else {
      for (std::size_t k = 0; k <= n; ++k) {
        const std::size_t start = longest ? k : n - k;
        if (glob_match(pat, std::string_view(t).substr(start))) return t.substr(0, start);
      }
    }
    return t;
  }

  static std::string replace_pattern(const std::string& t, const std::string& pat, const std::string& rep,
                                     const std::string& op) {
    if (pat.empty()) return t;
    std::string out;
    std::size_t k = 0;
    const bool all = op == "//", anchor_start = op == "/#", anchor_end = op == "/%";
    while (k <= t.size()) {
      // The longest match starting at k.
      std::size_t best = std::string::npos;
      if (!anchor_start || k == 0) {
        for (std::size_t len = t.size() - k + 1; len-- > 0;) {
          if (anchor_end && k + len != t.size()) continue;
          if (glob_match(pat, std::string_view(t).substr(k, len))) {
            best = len;
            break;
          }
        }
      }
      if (best != std::string::npos && best > 0) {
        out += rep;
        k += best;
        if (!all) return out + t.substr(k);
        continue;
      }
      if (k < t.size()) out.push_back(t[k]);
      ++k;
    }
    return out;
  }

  Str substring(const Str& s, const Part& p, std::size_t line) {
    auto number = [&](const Word& w) -> std::optional<std::int64_t> {
      const Str t = expand_one(w);
      if (!t.known()) return std::nullopt;
      Arith a(*this, t.text, line);
      return a.run();
    };
    const auto off = number(p.args.at(0));
    if (!off) return Str::not_known(p.source, fmt::format("line {}: {}: an offset mme does not know", line, p.source));
    const auto n = static_cast<std::int64_t>(s.text.size());
    std::int64_t start = *off < 0 ? std::max<std::int64_t>(0, n + *off) : std::min(*off, n);
    std::int64_t len = n - start;
    if (p.args.size() > 1) {
      const auto l = number(p.args[1]);
      if (!l) return Str::not_known(p.source, fmt::format("line {}: {}: a length mme does not know", line, p.source));
      len = *l < 0 ? std::max<std::int64_t>(0, n + *l - start) : std::min(*l, n - start);
    }
    return Str::of(s.text.substr(static_cast<std::size_t>(start), static_cast<std::size_t>(len)));
  }

  // ---- commands --------------------------------------------------------------------------

  void step(std::size_t line) {
    if (++sh_.steps > kMaxSteps)
      fail(line, fmt::format("the script runs more than {} commands (a loop that does not end?)", kMaxSteps));
  }

  Status run(const Node& n) {
    step(n.line);
    Status st = run_inner(n);
    if (n.negate && st.tri != Tri::kUnknown) st.tri = st.tri == Tri::kTrue ? Tri::kFalse : Tri::kTrue;
    return st;
  }

  Status run_inner(const Node& n) {
    switch (n.kind) {
      case Node::kSeq: {
        Status st;
        for (const auto& k : n.kids) st = run(*k);
        return st;
      }
      case Node::kSimple: return simple(n);
      case Node::kPipeline: {
        // Each command of a pipeline runs in a subshell: what it assigns is lost, what it
        // launches counts.
        Status st;
        for (const auto& k : n.kids) st = subshell(*k);
        return st;
      }
      case Node::kAnd:
      case Node::kOr: {
        const Status a = run(*n.kids[0]);
        if (a.tri == Tri::kUnknown) {
          if (inert(*n.kids[1])) return a;
          fail(n.line, fmt::format("`{}`: {}, and what follows '{}' depends on it", clip(n.source), a.why,
                                   n.kind == Node::kAnd ? "&&" : "||"));
        }
        const bool go = (a.tri == Tri::kTrue) == (n.kind == Node::kAnd);
        return go ? run(*n.kids[1]) : a;
      }
      case Node::kIf: {
        std::size_t k = 0;
        for (; k + 1 < n.kids.size(); k += 2) {
          const Status c = run(*n.kids[k]);
          if (c.tri == Tri::kUnknown) {
            // Which branch runs is not known: none may change the launch.
            bool all_inert = true;
            for (std::size_t j = k + 1; j < n.kids.size(); ++j)
              if (!inert(*n.kids[j])) all_inert = false;
            if (all_inert) return c;
            fail(n.kids[k]->line,
                 fmt::format("`{}`: {}, and a branch of this if changes the launch", clip(n.source), c.why));
          }
          if (c.tri == Tri::kTrue) return run(*n.kids[k + 1]);
        }
        if (n.has_else) return run(*n.kids.back());
        return known(true);
      }
      case Node::kWhile:
      case Node::kUntil: {
        Status st;
        for (;;) {
          const Status c = run(*n.kids[0]);
          if (c.tri == Tri::kUnknown) {
            if (inert(*n.kids[1])) return c;
            fail(n.line, fmt::format("`{}`: {}, and the loop's body changes the launch", clip(n.source), c.why));
          }
          if ((c.tri == Tri::kTrue) != (n.kind == Node::kWhile)) return st;
          try {
            st = run(*n.kids[1]);
          } catch (LoopSignal& s) {
            if (--s.levels > 0) throw;
            if (s.brk) return st;
          }
        }
      }
      case Node::kFor: {
        std::vector<Str> items;
        if (n.for_all_args) {
          items = positional;
        } else {
          for (const auto& w : n.words)
            for (auto& f : expand(w)) items.push_back(std::move(f));
        }
        Status st;
        for (const auto& item : items) {
          set_var(n.name, {item}, false, n.line);
          try {
            st = run(*n.kids[0]);
          } catch (LoopSignal& s) {
            if (--s.levels > 0) throw;
            if (s.brk) break;
          }
        }
        return st;
      }
      case Node::kArithFor: {
        auto arith = [&](const Word& w) -> std::optional<std::int64_t> {
          const Str t = expand_one(w);
          if (!t.known()) fail(n.line, fmt::format("`{}`: {}", clip(n.source), t.unknown));
          if (t.text.find_first_not_of(" \t") == std::string::npos) return 1;
          Arith a(*this, t.text, n.line);
          const auto v = a.run();
          if (!v) fail(n.line, fmt::format("`{}`: {}", clip(n.source), a.why()));
          return v;
        };
        arith(n.words[0]);
        Status st;
        while (*arith(n.words[1]) != 0) {
          try {
            st = run(*n.kids[0]);
          } catch (LoopSignal& s) {
            if (--s.levels > 0) throw;
            if (s.brk) break;
          }
          arith(n.words[2]);
        }
        return st;
      }
      case Node::kCase: return run_case(n);
      case Node::kGroup: return run(*n.kids[0]);
      case Node::kSubshell: return subshell(*n.kids[0]);
      case Node::kArith: {
        const Str t = expand_one(n.words[0]);
        if (!t.known()) return unknown_status(t.unknown);
        Arith a(*this, t.text, n.line);
        const auto v = a.run();
        if (!v) return unknown_status(a.why());
        return known(*v != 0);
      }
      case Node::kCond: return run_cond(n);
      case Node::kFunction: functions[n.name] = n.kids[0].get(); return known(true);
    }
    return known(true);
  }

  static std::string clip(const std::string& t) { return t.size() > 60 ? t.substr(0, 57) + "..." : t; }

  // A copy of this shell for a subshell: what it assigns is lost, what it launches is kept.
  Status subshell(const Node& n) {
    Shell copy(sh_, source_, depth_);
    copy.vars = vars;
    copy.positional = positional;
    copy.zero = zero;
    copy.functions = functions;
    copy.ever_assigned = ever_assigned;
    copy.own = own;
    try {
      return copy.run(n);
    } catch (const ExitSignal&) {
      return known(true);
    }
  }

  Status run_case(const Node& n) {
    const Str subject = assume_unset(expand_one(n.words[0]));
    for (std::size_t k = 0; k < n.patterns.size(); ++k) {
      bool hit = false;
      for (const auto& pw : n.patterns[k]) {
        std::string why;
        const std::string pat = expand_pattern(pw, why);
        if (!subject.known() || !why.empty()) {
          // Which item runs is not known: every item must leave the launch alone.
          for (const auto& body : n.kids)
            if (!inert(*body))
              fail(n.line, fmt::format("`{}`: {}, and an item of this case changes the launch", clip(n.source),
                                       subject.known() ? why : subject.unknown));
          return unknown_status(subject.known() ? why : subject.unknown);
        }
        if (glob_match(pat, subject.text)) hit = true;
      }
      if (!hit) continue;
      if (n.terminators[k] != ";;") fail(n.line, fmt::format("`{}`: ';&' and ';;&' are not evaluated", clip(n.source)));
      return run(*n.kids[k]);
    }
    return known(true);
  }

  // Commands that can change what is launched: assignments, declarations, function calls,
  // launchers, anything whose name is not known. An unknown condition may guard only the others.
  bool inert(const Node& n) const {
    switch (n.kind) {
      case Node::kSimple: {
        if (n.words.empty()) return n.assigns.empty();
        const Word& first = n.words[0];
        if (first.parts.size() != 1 || first.parts[0].kind != Part::kLit) return false;
        const std::string& cmd = first.parts[0].text;
        static const std::set<std::string> changes = {
            "export", "declare", "typeset", "local",     "readonly", "unset",   "shift",    "set",      "source",
            ".",      "eval",    "read",    "readarray", "mapfile",  "getopts", "printf",   "let",      "exec",
            "env",    "bash",    "sh",      "srun",      "sbatch",   "mpirun",  "mpiexec",  "torchrun", "deepspeed",
            "uv",     "nsys",    "numactl", "python",    "python3",  "break",   "continue", "return"};
        if (changes.count(cmd) || cmd.rfind("python", 0) == 0 || functions.count(cmd) ||
            cmd.find(".py") != std::string::npos)
          return false;
        // Expansions that assign (${X:=v}, $((i++))) change the script's state.
        for (const auto& w : n.words)
          for (const auto& p : w.parts)
            if ((p.kind == Part::kParam && (p.op == ":=" || p.op == "=")) ||
                (p.kind == Part::kArith &&
                 (p.source.find('=') != std::string::npos || p.source.find("++") != std::string::npos ||
                  p.source.find("--") != std::string::npos)))
              return false;
        return true;
      }
      case Node::kFunction:
      case Node::kFor:
      case Node::kArithFor: return false;
      case Node::kArith: {
        const std::string& src = n.source;
        return src.find("++") == std::string::npos && src.find("--") == std::string::npos &&
               src.find_first_of("=") == std::string::npos;
      }
      case Node::kCond: return true;
      default: return std::all_of(n.kids.begin(), n.kids.end(), [&](const auto& k) { return inert(*k); });
    }
  }

  // ---- tests: [ ], test, [[ ]] ----------------------------------------------------------

  // In a condition, a variable the script never sets (or an argument not given) is taken as
  // unset, as the script reads it in a clean environment: which branch runs is the script's
  // default path, and the assumptions list the names (--set, --script-arg change them). A value
  // with another unknown part (a command substitution) stays unknown.
  Str assume_unset(const Str& s) {
    if (s.known()) return s;
    if (std::any_of(s.spans.begin(), s.spans.end(), [](const Str::Span& sp) { return sp.variable.empty(); })) return s;
    std::string text;
    std::size_t at = 0;
    for (const auto& sp : s.spans) {
      text += s.text.substr(at, sp.begin - at);
      at = sp.end;
      sh_.defaults_used.insert(sp.variable + " unset");
    }
    text += s.text.substr(at);
    return Str::of(text);
  }

  struct TestArg {
    Str value;
    std::string pattern;  // [[ == ]]: the right side as a pattern
    std::string pattern_unknown;
    bool op = false;  // an operator of [[ ]]
  };

  Status run_cond(const Node& n) {
    std::vector<TestArg> args;
    for (std::size_t k = 0; k < n.words.size(); ++k) {
      TestArg a;
      const Word& w = n.words[k];
      a.op = w.op;
      if (w.op) {
        a.value = Str::of(w.source);
      } else {
        a.value = assume_unset(expand_one(w));
        a.pattern = expand_pattern(w, a.pattern_unknown);
      }
      args.push_back(std::move(a));
    }
    std::size_t pos = 0;
    const Status st = test_or(args, pos, true, n.line);
    if (pos != args.size()) fail(n.line, fmt::format("`{}`: a test mme does not read", clip(n.source)));
    return st;
  }

  Status run_test(const std::vector<Str>& words, std::size_t line, const std::string& src) {
    std::vector<TestArg> args;
    for (const auto& w : words) {
      TestArg a;
      a.value = assume_unset(w);
      a.pattern = glob_escape(w.text);
      args.push_back(std::move(a));
    }
    if (args.empty()) return known(false);
    std::size_t pos = 0;
    const Status st = test_or(args, pos, false, line);
    if (pos != args.size()) fail(line, fmt::format("`{}`: a test mme does not read", clip(src)));
    return st;
  }

  static bool is_op(const TestArg& a, std::string_view op, bool cond) {
    return (cond ? a.op : a.value.known()) && a.value.text == op;
  }

  static Status both(const Status& a, const Status& b, bool conj) {
    // Kleene logic: false && unknown = false, true || unknown = true.
    const Tri stop = conj ? Tri::kFalse : Tri::kTrue;
    if (a.tri == stop || b.tri == stop) return {stop, ""};
    if (a.tri == Tri::kUnknown) return a;
    if (b.tri == Tri::kUnknown) return b;
    return known(conj);
  }

  Status test_or(std::vector<TestArg>& a, std::size_t& pos, bool cond, std::size_t line) {
    Status st = test_and(a, pos, cond, line);
    while (pos < a.size() && (is_op(a[pos], cond ? "||" : "-o", cond))) {
      ++pos;
      st = both(st, test_and(a, pos, cond, line), false);
    }
    return st;
  }

  Status test_and(std::vector<TestArg>& a, std::size_t& pos, bool cond, std::size_t line) {
    Status st = test_not(a, pos, cond, line);
    while (pos < a.size() && (is_op(a[pos], cond ? "&&" : "-a", cond))) {
      ++pos;
      st = both(st, test_not(a, pos, cond, line), true);
    }
    return st;
  }

  Status test_not(std::vector<TestArg>& a, std::size_t& pos, bool cond, std::size_t line) {
    if (pos > 1000) fail(line, "a test of more than 1000 words");
    if (pos < a.size() && is_op(a[pos], "!", cond) && pos + 1 < a.size()) {
      ++pos;
      Status st = test_not(a, pos, cond, line);
      if (st.tri != Tri::kUnknown) st.tri = st.tri == Tri::kTrue ? Tri::kFalse : Tri::kTrue;
      return st;
    }
    return test_primary(a, pos, cond, line);
  }

  Status test_primary(std::vector<TestArg>& a, std::size_t& pos, bool cond, std::size_t line) {
    if (pos >= a.size()) fail(line, "a test without an operand");
    if (is_op(a[pos], "(", cond)) {
      ++pos;
      const Status st = test_or(a, pos, cond, line);
      if (pos >= a.size() || !is_op(a[pos], ")", cond)) fail(line, "a test without its ')'");
      ++pos;
      return st;
    }
    // Binary: x OP y.
    static const std::set<std::string> binary = {"=",   "==",  "!=",  "<",  ">",   "-eq", "-ne", "-lt",
                                                 "-le", "-gt", "-ge", "=~", "-nt", "-ot", "-ef"};
    if (pos + 2 < a.size()) {
      const TestArg& opa = a[pos + 1];
      const std::string& op = opa.value.text;
      // In [[ ]], < and > are operators of their own and the others plain words.
      const bool is_binary = binary.count(op) && opa.value.known() && (!cond || opa.op == (op == "<" || op == ">"));
      if (is_binary) {
        const TestArg& l = a[pos];
        const TestArg& r = a[pos + 2];
        pos += 3;
        return binary_test(l, op, r, cond, line);
      }
    }
    // Unary: -z x, -n x, file tests.
    const std::string& t = a[pos].value.text;
    if (a[pos].value.known() && t.size() == 2 && t[0] == '-' && pos + 1 < a.size() && !(cond && a[pos].op)) {
      const char u = t[1];
      const Str& x = a[pos + 1].value;
      if (u == 'z' || u == 'n') {
        pos += 2;
        if (!x.known()) return unknown_status(x.unknown);
        return known((u == 'z') == x.text.empty());
      }
      if (u == 'v') {
        pos += 2;
        if (!x.known()) return unknown_status(x.unknown);
        return known(find(x.text) != nullptr);
      }
      if (std::string_view("bcdefghkprsStuwxLGNO").find(u) != std::string_view::npos) {
        pos += 2;
        // A file named with --script-source exists and is a readable regular file.
        if (std::string_view("efrs").find(u) != std::string_view::npos && named_source(x)) return known(true);
        return unknown_status(
            fmt::format("line {}: `{} {}` tests the file system, which mme does not look at", line, t, x.text));
      }
    }
    // A single word: true when not empty.
    const Str& x = a[pos].value;
    ++pos;
    if (!x.known()) return unknown_status(x.unknown);
    return known(!x.text.empty());
  }

  Status binary_test(const TestArg& l, const std::string& op, const TestArg& r, bool cond, std::size_t line) {
    if (op == "-nt" || op == "-ot" || op == "-ef")
      return unknown_status(fmt::format("line {}: `{}` compares files, which mme does not look at", line, op));
    if (!l.value.known()) return unknown_status(l.value.unknown);
    if (op == "=~")
      return unknown_status(fmt::format("line {}: the regular expression test =~ is not evaluated", line));
    if (op == "=" || op == "==" || op == "!=") {
      bool eq;
      if (cond) {
        if (!r.pattern_unknown.empty() && !r.value.known()) return unknown_status(r.pattern_unknown);
        eq = glob_match(r.pattern_unknown.empty() ? r.pattern : glob_escape(r.value.text), l.value.text);
      } else {
        if (!r.value.known()) return unknown_status(r.value.unknown);
        eq = l.value.text == r.value.text;
      }
      return known(eq == (op != "!="));
    }
    if (!r.value.known()) return unknown_status(r.value.unknown);
    if (op == "<") return known(l.value.text < r.value.text);
    if (op == ">") return known(l.value.text > r.value.text);
    auto integer = [&](const Str& s) -> std::optional<std::int64_t> {
      if (cond) {
        Arith a(*this, s.text, line);
        return a.run();
      }
      std::string t = s.text;
      while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
      std::size_t k = t.find_first_not_of(" \t");
      if (k == std::string::npos) fail(line, fmt::format("`{}`: integer expression expected", s.text));
      t = t.substr(k);
      const bool neg = !t.empty() && t[0] == '-';
      if (!all_digits(neg ? t.substr(1) : t) || t.size() > 19)
        fail(line, fmt::format("`{}`: integer expression expected", s.text));
      return std::stoll(t);
    };
    const auto x = integer(l.value), y = integer(r.value);
    if (!x || !y) return unknown_status(fmt::format("line {}: an integer mme does not know", line));
    if (op == "-eq") return known(*x == *y);
    if (op == "-ne") return known(*x != *y);
    if (op == "-lt") return known(*x < *y);
    if (op == "-le") return known(*x <= *y);
    if (op == "-gt") return known(*x > *y);
    return known(*x >= *y);
  }

  // ---- simple commands -------------------------------------------------------------------

  void assign(const shell::Assignment& a, bool local_export, bool declared_array) {
    std::vector<Str> items;
    if (a.array) {
      for (const auto& w : a.items)
        for (auto& f : expand(w)) items.push_back(std::move(f));
    } else {
      items.push_back(expand_one(a.value));
    }
    if (a.index) {
      const Str idx = expand_one(*a.index);
      if (!idx.known()) fail(a.line, fmt::format("{}[...]: {}", a.name, idx.unknown));
      Arith ar(*this, idx.text, a.line);
      const auto k = ar.run();
      if (!k || *k < 0 || *k > 100000)
        fail(a.line, fmt::format("{}[{}]: an index mme cannot evaluate", a.name, idx.text));
      Var& v = vars[a.name];
      if (v.items.size() <= static_cast<std::size_t>(*k)) v.items.resize(static_cast<std::size_t>(*k) + 1, Str::of(""));
      v.array = true;
      v.items[static_cast<std::size_t>(*k)] = a.append ? [&] {
        Str s = v.items[static_cast<std::size_t>(*k)];
        s.append(items.front());
        return s;
      }()
                                                     : items.front();
      ever_assigned.insert(a.name);
      return;
    }
    Var* old = vars.count(a.name) ? &vars[a.name] : nullptr;
    if (a.append && old) {
      std::vector<Str> merged = old->items;
      if (a.array || old->array) {
        merged.insert(merged.end(), items.begin(), items.end());
      } else {
        if (merged.empty()) merged.push_back(Str::of(""));
        merged.front().append(items.front());
      }
      const bool arr = a.array || old->array;
      const bool exp = old->exported;
      set_var(a.name, std::move(merged), arr, a.line);
      vars[a.name].exported = exp || local_export;
      return;
    }
    const bool exp = (old && old->exported) || local_export;
    set_var(a.name, std::move(items), a.array || declared_array, a.line);
    vars[a.name].exported = exp;
  }

  Status simple(const Node& n) {
    // A here-document or here-string: the input of the command (sbatch, bash).
    std::optional<Str> input;
    std::size_t input_line = n.line;
    for (const auto& r : n.redirects) {
      if (r.heredoc) {
        input = expand_one(r.body);
        input_line = r.body.line;
      } else if (r.op == "<<<") {
        input = expand_one(r.target);
        input->append(Str::of("\n"));
      }
    }
    std::set<std::size_t> declared;  // assignments that are a declaration builtin's arguments
    std::vector<Str> fields;
    for (const auto& w : n.words) {
      const std::string* lit = w.parts.size() == 1 && w.parts[0].kind == Part::kLit ? &w.parts[0].text : nullptr;
      if (lit && lit->rfind(shell::kDeclared, 0) == 0) {
        declared.insert(std::stoul(lit->substr(shell::kDeclared.size())));
        fields.push_back(Str::of(*lit));
        continue;
      }
      for (auto& f : expand(w)) fields.push_back(std::move(f));
    }
    if (fields.empty()) {
      // Assignments alone set the shell's variables.
      for (const auto& a : n.assigns) assign(a, false, false);
      return known(true);
    }
    // Prefix assignments are the command's environment only.
    std::vector<std::pair<std::string, Str>> prefix;
    for (std::size_t k = 0; k < n.assigns.size(); ++k)
      if (!declared.count(k)) prefix.emplace_back(n.assigns[k].name, expand_one(n.assigns[k].value));

    const Str& cmd = fields[0];
    if (!cmd.known()) return launch(fields, prefix, input, input_line, n);
    const std::string& c = cmd.text;
    if (c == "export" || c == "declare" || c == "typeset" || c == "local" || c == "readonly")
      return declaration(n, fields, declared);
    if (c == "unset") {
      for (std::size_t k = 1; k < fields.size(); ++k) {
        if (fields[k].text == "-v" || fields[k].text == "-f") continue;
        if (!fields[k].known()) fail(n.line, fmt::format("unset {}: {}", fields[k].text, fields[k].unknown));
        vars.erase(fields[k].text);
        functions.erase(fields[k].text);
      }
      return known(true);
    }
    if (c == "shift") {
      std::size_t k = 1;
      if (fields.size() > 1) {
        if (!fields[1].known() || !all_digits(fields[1].text) || fields[1].text.size() > 6)
          fail(n.line, fmt::format("shift {}: not a count mme knows", fields[1].text));
        k = std::stoul(fields[1].text);
      }
      if (k > positional.size()) return known(false);
      positional.erase(positional.begin(), positional.begin() + static_cast<std::ptrdiff_t>(k));
      return known(true);
    }
    if (c == "set") {
      for (std::size_t k = 1; k < fields.size(); ++k) {
        if (fields[k].text == "--") {
          positional.assign(fields.begin() + static_cast<std::ptrdiff_t>(k) + 1, fields.end());
          return known(true);
        }
        if (fields[k].text == "-o" || fields[k].text == "+o") ++k;
      }
      return known(true);
    }
    if (c == "source" || c == ".") return source(n, fields);
    if (c == "eval") {
      Str text = Str::of("");
      for (std::size_t k = 1; k < fields.size(); ++k) {
        if (k > 1) text.append(Str::of(" "));
        text.append(fields[k]);
      }
      // The parts mme does not know are their own expansions again ("$X", "$(cmd)"): read in
      // the same shell, they are the same unknown values.
      return run_text(text.text, fmt::format("{} (eval)", where(n.line)), false);
    }
    if (c == "exit") throw ExitSignal{};
    if (c == "return") throw ReturnSignal{};
    if (c == "break" || c == "continue") {
      int levels = 1;
      if (fields.size() > 1 && all_digits(fields[1].text) && fields[1].text.size() < 4)
        levels = std::stoi(fields[1].text);
      throw LoopSignal{c == "break", levels};
    }
    if (c == "true" || c == ":") return known(true);
    if (c == "false") return known(false);
    if (c == "test" || c == "[") {
      std::vector<Str> args(fields.begin() + 1, fields.end());
      if (c == "[") {
        if (args.empty() || args.back().text != "]") fail(n.line, "'[' without its ']'");
        args.pop_back();
      }
      return run_test(args, n.line, n.source);
    }
    if (c == "read" || c == "readarray" || c == "mapfile" || c == "getopts" || c == "let" ||
        (c == "printf" && fields.size() > 1 && fields[1].text == "-v")) {
      // They set variables from input the script reads when it runs.
      for (std::size_t k = 1; k < fields.size(); ++k)
        if (is_name(fields[k].text) && c != "let")
          set_var(fields[k].text,
                  {Str::not_known("$" + fields[k].text,
                                  fmt::format("line {}: {} sets {} when the script runs", n.line, c, fields[k].text))},
                  false, n.line);
      return unknown_status(fmt::format("line {}: `{}` reads input when the script runs", n.line, c));
    }
    if (const auto f = functions.find(c); f != functions.end()) return call(*f->second, fields, n.line);
    return launch(fields, prefix, input, input_line, n);
  }

  Status declaration(const Node& n, const std::vector<Str>& fields, const std::set<std::size_t>& declared) {
    const std::string& c = fields[0].text;
    bool exported = c == "export", array = false;
    for (std::size_t k = 1; k < fields.size(); ++k) {
      const std::string& t = fields[k].text;
      if (t.rfind(shell::kDeclared, 0) == 0) {
        assign(n.assigns[std::stoul(t.substr(shell::kDeclared.size()))], exported, array);
        continue;
      }
      if (!t.empty() && (t[0] == '-' || t[0] == '+')) {
        if (t.find('A') != std::string::npos)
          fail(n.line, fmt::format("`{}`: associative arrays are not evaluated", clip(n.source)));
        if (t.find('f') != std::string::npos) return known(true);
        if (t[0] == '-' && t.find('x') != std::string::npos) exported = true;
        if (t[0] == '-' && t.find('a') != std::string::npos) array = true;
        if (t == "-p") return known(true);
        continue;
      }
      if (!fields[k].known()) fail(n.line, fmt::format("{} {}: {}", c, fields[k].text, fields[k].unknown));
      if (!is_name(t)) fail(n.line, fmt::format("{}: '{}' is not a valid variable name", c, t));
      Var& v = vars[t];
      if (exported) v.exported = true;
      if (array) v.array = true;
    }
    (void)declared;
    return known(true);
  }

  Status call(const Node& body, const std::vector<Str>& fields, std::size_t line) {
    if (depth_ + 1 > kMaxDepth) fail(line, fmt::format("functions call each other more than {} deep", kMaxDepth));
    std::vector<Str> saved(fields.begin() + 1, fields.end());
    std::swap(saved, positional);
    ++depth_;
    Status st;
    try {
      st = run(body);
    } catch (const ReturnSignal&) {
    }
    --depth_;
    std::swap(saved, positional);
    return st;
  }

  // Text that eval or bash -c would run, when it is not known: harmless if it holds nothing
  // that launches (no .py, no launcher).
  static bool inert_text(const std::string& t) {
    for (const char* w : {".py", "torchrun", "srun", "mpirun", "deepspeed", "python"})
      if (t.find(w) != std::string::npos) return false;
    return t.find('$') == std::string::npos && t.find('`') == std::string::npos;
  }

  // The --script-source file a path names: by its path, or by its file name when the script
  // builds the folder at run time.
  const std::filesystem::path* named_source(const Str& path) const {
    const std::string name = path.file_name();
    for (const auto& given : sh_.options.sources)
      if ((path.known() && path.text == given.string()) || (!name.empty() && given.filename().string() == name))
        return &given;
    return nullptr;
  }

  Status source(const Node& n, const std::vector<Str>& fields) {
    if (fields.size() < 2) fail(n.line, "source without a file");
    const Str& path = fields[1];
    const std::string name = path.file_name();
    if (const auto* given = named_source(path)) {
      const std::string g = given->string();
      const std::string text = read_text_file(*given, kMaxSourceBytes, "a file the launch script sources");
      std::vector<Str> saved(fields.begin() + 2, fields.end());
      const bool args = fields.size() > 2;
      if (args) std::swap(saved, positional);
      const Status st = run_text(text, g, true);
      if (args) std::swap(saved, positional);
      return st;
    }
    fail(n.line, fmt::format("`{}` reads another file, which mme does not without being told: name it with "
                             "--script-source {}{}",
                             clip(n.source), path.known() ? path.text : (name.empty() ? "FILE" : name),
                             path.known() ? "" : fmt::format(" ({})", path.unknown)));
  }

  // Runs text as script in this shell (eval, source): its functions stay defined.
  Status run_text(const std::string& text, const std::string& name, bool own_lines) {
    auto tree = shell::parse_script(text, name, 1);
    const Node& root = *tree;
    collect_own(root);
    keep.push_back(std::move(tree));
    std::string saved = source_;
    if (own_lines) source_ = name;
    ++depth_;
    if (depth_ > kMaxDepth) fail(root.line, fmt::format("nested more than {} levels deep", kMaxDepth));
    Status st;
    try {
      st = run(root);
    } catch (...) {
      --depth_;
      source_ = saved;
      throw;
    }
    --depth_;
    source_ = saved;
    return st;
  }

  // A child shell for bash -c, an sbatch or bash here-document: the exported variables only.
  void run_child(const std::string& text, const std::string& name, std::vector<Str> args,
                 const std::vector<std::pair<std::string, Str>>& env) {
    Shell child(sh_, name, depth_ + 1);
    for (const auto& [k, v] : vars)
      if (v.exported) child.vars[k] = v;
    for (const auto& [k, v] : env) {
      child.vars[k].items = {v};
      child.vars[k].exported = true;
    }
    child.ever_assigned = ever_assigned;
    if (!args.empty()) {
      child.zero = args.front().text;
      child.positional.assign(args.begin() + 1, args.end());
    }
    auto tree = shell::parse_script(text, name, 1);
    child.run_script(*tree);
  }

  // ---- launchers ---------------------------------------------------------------------------

  // A command that is not a builtin: a launch of an entry script (recorded), a launcher whose
  // command is a script of its own (bash -c, an sbatch here-document: read), or any other
  // command, which mme does not run (its status is not known).
  Status launch(const std::vector<Str>& fields, const std::vector<std::pair<std::string, Str>>& prefix,
                const std::optional<Str>& input, std::size_t input_line, const Node& n);

  Shared& sh_;
  std::string source_;
  int depth_;
};

// ---- arithmetic -----------------------------------------------------------------------------

void Arith::fail(const std::string& what) const {
  throw UsageError(fmt::format("{}: $(( {} )): {}", sh_.where(line_), s_, what));
}

std::optional<std::int64_t> Arith::run() {
  ws();
  if (i_ >= s_.size()) return 0;
  const V v = comma();
  ws();
  if (i_ < s_.size()) fail(fmt::format("unexpected '{}'", s_.substr(i_, 10)));
  if (!v.known) return std::nullopt;
  return v.v;
}

Arith::V Arith::value(V v) {
  if (v.lvalue.empty()) return v;
  const Var* var = sh_.find(v.lvalue);
  if (!var || var->items.empty()) {
    // bash reads an unset name as 0; a name the script never sets is the environment's.
    if (sh_.ever_assigned.count(v.lvalue) || sh_.own.count(v.lvalue)) return V{0, true, v.lvalue};
    why_ = sh_.unset_value(v.lvalue, line_).unknown;
    return V{0, false, v.lvalue};
  }
  const Str& s = var->items.front();
  if (!s.known()) {
    why_ = s.unknown;
    return V{0, false, v.lvalue};
  }
  if (++depth_ > 16) fail(fmt::format("{} refers to itself", v.lvalue));
  Arith inner(sh_, s.text, line_);
  const auto r = inner.run();
  --depth_;
  if (!r) {
    why_ = inner.why();
    return V{0, false, v.lvalue};
  }
  return V{*r, true, v.lvalue};
}

Arith::V Arith::store(const V& target, V v) {
  if (target.lvalue.empty()) fail("assignment to a value that is not a variable");
  if (v.known)
    sh_.set_var(target.lvalue, {Str::of(std::to_string(v.v))}, false, line_);
  else
    sh_.set_var(target.lvalue, {Str::not_known("$" + target.lvalue, why_)}, false, line_);
  v.lvalue.clear();
  return v;
}

Arith::V Arith::comma() {
  V v = assign();
  while (take(",")) v = assign();
  return v;
}

Arith::V Arith::assign() {
  V target = ternary();
  ws();
  for (std::string_view op : {"=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^="}) {
    if (s_.substr(i_, op.size()) != op || (op == "=" && s_.substr(i_, 2) == "==")) continue;
    if (target.lvalue.empty()) fail("assignment to a value that is not a variable");
    i_ += op.size();
    V rhs = value(assign());
    if (op == "=") return store(target, rhs);
    const V cur = value(target);
    std::int64_t r = 0;
    const bool ok = cur.known && rhs.known;
    if (ok) {
      const char o = op[0];
      if ((o == '/' || o == '%') && rhs.v == 0) fail("division by 0");
      bool of = false;
      switch (o) {
        case '+': of = __builtin_add_overflow(cur.v, rhs.v, &r); break;
        case '-': of = __builtin_sub_overflow(cur.v, rhs.v, &r); break;
        case '*': of = __builtin_mul_overflow(cur.v, rhs.v, &r); break;
        case '/': r = cur.v / rhs.v; break;
        case '%': r = cur.v % rhs.v; break;
        case '&': r = cur.v & rhs.v; break;
        case '|': r = cur.v | rhs.v; break;
        case '^': r = cur.v ^ rhs.v; break;
        case '<':
          r = rhs.v >= 0 && rhs.v < 63 ? static_cast<std::int64_t>(static_cast<std::uint64_t>(cur.v) << rhs.v) : 0;
          break;
        case '>': r = rhs.v >= 0 && rhs.v < 63 ? cur.v >> rhs.v : 0; break;
      }
      checked(of, r);
    }
    return store(target, V{r, ok, ""});
  }
  return value(target);
}

Arith::V Arith::ternary() {
  V c = binary(0);
  ws();
  if (i_ >= s_.size() || s_[i_] != '?') return c;
  ++i_;
  c = value(c);
  V a = value(assign());
  if (!take(":")) fail("'?' without ':'");
  V b = value(assign());
  if (!c.known) return V{0, false, ""};
  return c.v ? a : b;
}

// Binary operators by precedence, lowest first.
Arith::V Arith::binary(int level) {
  static const std::vector<std::vector<std::string_view>> levels = {
      {"||"},       {"&&"},     {"|"},          {"^"}, {"&"}, {"==", "!="}, {"<=", ">=", "<", ">"},
      {"<<", ">>"}, {"+", "-"}, {"*", "/", "%"}};
  if (level == static_cast<int>(levels.size())) return unary();
  V left = binary(level + 1);
  for (;;) {
    std::string_view op;
    for (std::string_view o : levels[static_cast<std::size_t>(level)])
      if (take(o)) {
        op = o;
        break;
      }
    if (op.empty()) return left;
    const V l = value(left);
    const V r = value(binary(level + 1));
    std::int64_t out = 0;
    if (l.known && r.known) {
      const std::int64_t a = l.v, b = r.v;
      bool of = false;
      if (op == "||")
        out = (a || b);
      else if (op == "&&")
        out = (a && b);
      else if (op == "|")
        out = a | b;
      else if (op == "^")
        out = a ^ b;
      else if (op == "&")
        out = a & b;
      else if (op == "==")
        out = a == b;
      else if (op == "!=")
        out = a != b;
      else if (op == "<=")
        out = a <= b;
      else if (op == ">=")
        out = a >= b;
      else if (op == "<")
        out = a < b;
      else if (op == ">")
        out = a > b;
      else if (op == "<<")
        out = b >= 0 && b < 63 ? static_cast<std::int64_t>(static_cast<std::uint64_t>(a) << b) : 0;
      else if (op == ">>")
        out = b >= 0 && b < 63 ? a >> b : 0;
      else if (op == "+")
        of = __builtin_add_overflow(a, b, &out);
      else if (op == "-")
        of = __builtin_sub_overflow(a, b, &out);
      else if (op == "*")
        of = __builtin_mul_overflow(a, b, &out);
      else {
        if (b == 0) fail("division by 0");
        if (a == std::numeric_limits<std::int64_t>::min() && b == -1) fail("overflows 64 bits");
        out = op == "/" ? a / b : a % b;
      }
      checked(of, out);
    }
    left = combine(l, r, out);
  }
}

Arith::V Arith::unary() {
  struct Guard {
    int& n;
    explicit Guard(int& d) : n(d) { ++n; }
    ~Guard() { --n; }
  } guard(nested_);
  if (nested_ > 200) fail("nested more than 200 levels deep");
  ws();
  for (std::string_view op : {"++", "--"}) {
    if (s_.substr(i_, 2) == op) {
      i_ += 2;
      const V target = unary();
      V cur = value(target);
      if (cur.known) checked(__builtin_add_overflow(cur.v, op == "++" ? 1 : -1, &cur.v), cur.v);
      return store(target, cur);
    }
  }
  if (take("!")) {
    V v = value(unary());
    return V{!v.v, v.known, ""};
  }
  if (take("~")) {
    V v = value(unary());
    return V{~v.v, v.known, ""};
  }
  if (take("-")) {
    V v = value(unary());
    if (v.known && v.v == std::numeric_limits<std::int64_t>::min()) fail("overflows 64 bits");
    return V{-v.v, v.known, ""};
  }
  if (take("+")) return value(unary());
  V base = primary();
  // Postfix ++ / --.
  for (std::string_view op : {"++", "--"}) {
    ws();
    if (s_.substr(i_, 2) == op && !base.lvalue.empty()) {
      i_ += 2;
      V cur = value(base);
      V next = cur;
      if (cur.known) checked(__builtin_add_overflow(cur.v, op == "++" ? 1 : -1, &next.v), next.v);
      store(base, next);
      cur.lvalue.clear();
      return cur;
    }
  }
  ws();
  if (s_.substr(i_, 2) == "**") {
    i_ += 2;
    const V b = value(base);
    const V e = value(unary());
    if (e.known && e.v < 0) fail("a negative exponent");
    std::int64_t r = 1;
    if (b.known && e.known)
      for (std::int64_t k = 0; k < e.v; ++k) checked(__builtin_mul_overflow(r, b.v, &r), r);
    return combine(b, e, r);
  }
  return base;
}

Arith::V Arith::primary() {
  ws();
  if (i_ >= s_.size()) fail("an operand is missing");
  const char c = s_[i_];
  if (c == '(') {
    ++i_;
    V v = value(comma());
    if (!take(")")) fail("'(' without ')'");
    return v;
  }
  if (std::isdigit(static_cast<unsigned char>(c))) {
    std::size_t e = i_;
    while (e < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[e])) || s_[e] == '#' || s_[e] == '_')) ++e;
    std::string t(s_.substr(i_, e - i_));
    i_ = e;
    int base = 10;
    std::string digits = t;
    if (const auto hash = t.find('#'); hash != std::string::npos) {
      if (!all_digits(t.substr(0, hash)) || hash > 2) fail(fmt::format("'{}' is not a number", t));
      base = std::stoi(t.substr(0, hash));
      digits = t.substr(hash + 1);
    } else if (t.size() > 1 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
      base = 16;
      digits = t.substr(2);
    } else if (t.size() > 1 && t[0] == '0') {
      base = 8;
      digits = t.substr(1);
    }
    if (base < 2 || base > 36 || digits.empty()) fail(fmt::format("'{}' is not a number", t));
    std::int64_t v = 0;
    for (char d : digits) {
      const int x = std::isdigit(static_cast<unsigned char>(d)) ? d - '0'
                    : std::isalpha(static_cast<unsigned char>(d))
                        ? std::tolower(static_cast<unsigned char>(d)) - 'a' + 10
                        : 99;
      if (x >= base) fail(fmt::format("'{}' is not a number in base {}", t, base));
      checked(__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, x, &v), v);
    }
    return V{v, true, ""};
  }
  if (c == '$') ++i_;  // $NAME inside (( )) after expansion is rare; accept it
  if (i_ < s_.size() && (std::isalpha(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) {
    std::size_t e = i_;
    while (e < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[e])) || s_[e] == '_')) ++e;
    V v;
    v.lvalue = std::string(s_.substr(i_, e - i_));
    i_ = e;
    return v;
  }
  fail(fmt::format("unexpected '{}'", s_.substr(i_, 10)));
}

}  // namespace

// ---- launch commands --------------------------------------------------------------------------

namespace {

bool is_python(const std::string& b) {
  if (b.rfind("python", 0) != 0) return false;
  const std::string rest = b.substr(6);
  return std::all_of(rest.begin(), rest.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; });
}

// An option word: "--name=value", "--name", "-x".
bool is_option(const Str& s) { return s.known() && s.text.size() > 1 && s.text[0] == '-'; }

std::string dashes(std::string t) {
  std::replace(t.begin(), t.end(), '_', '-');
  return t;
}

// Skips a launcher's options from f[k]: `arity(name)` says how many words an option takes
// (written --name=value it takes none); `seen(name, value)` gets each. Returns the index of
// the first word that is not an option.
std::size_t skip_options(const std::vector<Str>& f, std::size_t k, const std::function<int(const std::string&)>& arity,
                         const std::function<void(const std::string&, const Str&)>& seen) {
  while (k < f.size() && is_option(f[k])) {
    const std::string& t = f[k].text;
    if (t == "--") return k + 1;
    if (const auto eq = t.find('='); eq != std::string::npos && t[1] == '-') {
      seen(t.substr(0, eq), Str::of(t.substr(eq + 1)));
      ++k;
      continue;
    }
    const auto n = static_cast<std::size_t>(arity(t));
    seen(t, n > 0 && k + 1 < f.size() ? f[k + 1] : Str::of(""));
    k += 1 + n;
  }
  return std::min(k, f.size());
}

// The GPU counts a launcher's options give.
struct Counts {
  std::optional<Str> nproc, nnodes;           // torchrun
  std::optional<Str> ds_gpus, ds_nodes;       // deepspeed
  std::optional<Str> tasks, nodes, per_node;  // srun, mpirun
  std::string torchrun, tasks_from;
  bool deepspeed = false;
};

}  // namespace

Status Shell::launch(const std::vector<Str>& fields, const std::vector<std::pair<std::string, Str>>& prefix,
                     const std::optional<Str>& input, std::size_t input_line, const Node& n) {
  const std::size_t line = n.line;
  auto run_env = [&](const std::vector<std::pair<std::string, Str>>& extra) {
    std::vector<std::pair<std::string, Str>> env;
    for (const auto& [name, v] : vars)
      if (v.exported && !v.items.empty() && !(v.given && !is_modelled_environment(name)))
        env.emplace_back(name, v.items.front());
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
  };
  // A bare argument list: the lines of an argument file, or a pasted list of flags.
  if (is_option(fields[0]) && fields[0].text.rfind("--", 0) == 0) {
    if (!sh_.found.empty() && sh_.found.back().bare && sh_.found.back().where.rfind(source_, 0) == 0) {
      auto& args = sh_.found.back().args;
      args.insert(args.end(), fields.begin(), fields.end());
      sh_.found.back().env = run_env(prefix);
    } else {
      Found f;
      f.line = line;
      f.where = where(line);
      f.bare = true;
      f.args = fields;
      f.env = run_env(prefix);
      sh_.found.push_back(std::move(f));
    }
    return known(true);
  }
  std::vector<std::pair<std::string, Str>> env = prefix;
  Counts counts;
  std::size_t k = 0, entry = fields.size();
  while (k < fields.size()) {
    const Str& w = fields[k];
    const std::string b = w.file_name();
    if (b.size() > 3 && b.substr(b.size() - 3) == ".py") {
      entry = k;
      break;
    }
    if (b == "torchrun" || b == "torch.distributed.run" || b == "torch.distributed.launch") {
      counts.torchrun = b == "torchrun" ? b : "python -m " + b;
      static const std::set<std::string> switches = {"--standalone", "--no-python", "--run-path",
                                                     "-m",           "--module",    "--use-env"};
      k = skip_options(
          fields, k + 1, [](const std::string& t) { return switches.count(dashes(t)) ? 0 : 1; },
          [&](const std::string& name, const Str& v) {
            if (dashes(name) == "--nproc-per-node") counts.nproc = v;
            if (dashes(name) == "--nnodes") counts.nnodes = v;
          });
      continue;
    }
    if (is_python(b)) {
      // python [options] script | -m torch.distributed.run ... | -m module | -c code
      std::size_t j = k + 1;
      while (j < fields.size() && is_option(fields[j]) && fields[j].text != "-m" && fields[j].text != "-c")
        j += (fields[j].text == "-W" || fields[j].text == "-X") ? 2 : 1;
      if (j < fields.size() && fields[j].text == "-c")
        return unknown_status(fmt::format("line {}: python -c, which mme does not run", line));
      if (j < fields.size() && fields[j].text == "-m") {
        const std::string module = j + 1 < fields.size() ? fields[j + 1].text : "";
        if (module != "torch.distributed.run" && module != "torch.distributed.launch") {
          sh_.notes.push_back(fmt::format("{}: `{} -m {}` runs a module, not an entry script", where(line), b, module));
          return unknown_status(fmt::format("line {}: a module mme does not run", line));
        }
        ++j;  // at the module: the torchrun branch reads its options
      }
      k = j;
      continue;
    }
    if (b == "bash" || b == "sh" || b == "dash") {
      std::size_t j = k + 1;
      while (j < fields.size() && is_option(fields[j]) && fields[j].text != "-c") j += fields[j].text == "-o" ? 2 : 1;
      if (j < fields.size() && fields[j].text == "-c") {
        if (j + 1 >= fields.size()) fail(line, fmt::format("{} -c without a command", b));
        const Str& cmd = fields[j + 1];
        // Parts mme does not know stay their expansions ("$X", "$(cmd)"), unknown in the child
        // too; an argument of this shell ($1) would mean the child's own.
        for (const auto& sp : cmd.spans)
          if (!sp.variable.empty() && sp.variable[0] == '$')
            fail(line, fmt::format("`{} -c` of a command mme does not know: {}", b, sp.why));
        run_child(cmd.text, fmt::format("{} ({} -c)", where(line), b),
                  std::vector<Str>(fields.begin() + static_cast<std::ptrdiff_t>(j) + 2, fields.end()), env);
        return known(true);
      }
      if (j < fields.size()) {
        sh_.notes.push_back(
            fmt::format("{}: `{} {}` runs another script, which mme does not read", where(line), b, fields[j].text));
        return unknown_status(fmt::format("line {}: another script", line));
      }
      if (input) {
        run_child(input->text, fmt::format("{} ({} here-document)", where(input_line), b), {}, env);
        return known(true);
      }
      return unknown_status(fmt::format("line {}: `{}` reads its commands from its input", line, b));
    }
    if (b == "sbatch") {
      std::size_t j = k + 1;
      while (j < fields.size() && is_option(fields[j])) {
        const std::string& t = fields[j].text;
        if (t.rfind("--wrap", 0) == 0) {
          const Str cmd = t == "--wrap" && j + 1 < fields.size() ? fields[j + 1] : Str::of(t.substr(7));
          run_child(cmd.text, fmt::format("{} (sbatch --wrap)", where(line)), {}, env);
          return known(true);
        }
        j += (t.size() == 2 && t[1] != '-') ? 2 : 1;  // -N 2; long options are written --name=value
      }
      if (j < fields.size()) {
        sh_.notes.push_back(fmt::format("{}: `sbatch {}` submits another script, which mme does not read", where(line),
                                        fields[j].text));
        return unknown_status(fmt::format("line {}: another script", line));
      }
      if (input) {
        // The job script; sbatch hands it the environment (--export=ALL).
        run_child(input->text, fmt::format("{} (sbatch here-document)", where(input_line)), {}, env);
        return known(true);
      }
      return unknown_status(fmt::format("line {}: sbatch reads its script from its input", line));
    }
    if (b == "srun") {
      static const std::set<std::string> long_values = {"--ntasks",
                                                        "--nodes",
                                                        "--ntasks-per-node",
                                                        "--gpus-per-node",
                                                        "--gpus",
                                                        "--partition",
                                                        "--account",
                                                        "--time",
                                                        "--job-name",
                                                        "--output",
                                                        "--error",
                                                        "--mpi",
                                                        "--container-image",
                                                        "--container-mounts",
                                                        "--container-workdir",
                                                        "--cpus-per-task",
                                                        "--mem",
                                                        "--gres",
                                                        "--nodelist",
                                                        "--exclude",
                                                        "--export",
                                                        "--cpu-bind",
                                                        "--distribution",
                                                        "--dependency",
                                                        "--reservation",
                                                        "--qos",
                                                        "--constraint",
                                                        "--chdir"};
      static const std::set<std::string> short_switches = {"-l", "-u", "-K", "-k", "-Q", "-v", "-X",
                                                           "-Z", "-E", "-H", "-O", "-s", "-h"};
      k = skip_options(
          fields, k + 1,
          [](const std::string& t) {
            if (t.rfind("--", 0) == 0) return long_values.count(t) ? 1 : 0;
            return short_switches.count(t) || t.size() > 2 ? 0 : 1;  // -N2: the value attached
          },
          [&](const std::string& name, const Str& v) {
            if (name == "-n" || name == "--ntasks") counts.tasks = v;
            if (name == "-N" || name == "--nodes") counts.nodes = v;
            if (name == "--ntasks-per-node") counts.per_node = v;
            if (name.size() > 2 && (name.rfind("-n", 0) == 0 || name.rfind("-N", 0) == 0))
              (name[1] == 'n' ? counts.tasks : counts.nodes) = Str::of(name.substr(2));
          });
      counts.tasks_from = "srun";
      continue;
    }
    if (b == "mpirun" || b == "mpiexec") {
      static const std::set<std::string> switches = {"--allow-run-as-root",
                                                     "--oversubscribe",
                                                     "--tag-output",
                                                     "-tag-output",
                                                     "--report-bindings",
                                                     "--display-map",
                                                     "-q",
                                                     "--quiet",
                                                     "-v"};
      k = skip_options(
          fields, k + 1,
          [](const std::string& t) { return switches.count(t)               ? 0
                                            : (t == "--mca" || t == "-mca") ? 2
                                                                            : 1; },
          [&](const std::string& name, const Str& v) {
            if (name == "-np" || name == "-n" || name == "--np" || name == "-c") counts.tasks = v;
            if (name == "-x" && v.known() && v.text.find('=') != std::string::npos)
              env.emplace_back(v.text.substr(0, v.text.find('=')), Str::of(v.text.substr(v.text.find('=') + 1)));
          });
      counts.tasks_from = b;
      continue;
    }
    if (b == "deepspeed") {
      counts.deepspeed = true;
      k = skip_options(
          fields, k + 1, [](const std::string& t) { return t == "--no_python" || t == "--no_local_rank" ? 0 : 1; },
          [&](const std::string& name, const Str& v) {
            if (dashes(name) == "--num-gpus") counts.ds_gpus = v;
            if (dashes(name) == "--num-nodes") counts.ds_nodes = v;
          });
      continue;
    }
    if (b == "env") {
      for (++k; k < fields.size(); ++k) {
        const Str& e = fields[k];
        const auto eq = e.text.find('=');
        if (e.known() && (e.text == "-i" || e.text == "-")) continue;
        if (e.known() && e.text == "-u") {
          ++k;
          continue;
        }
        if (eq == std::string::npos || !is_name(e.text.substr(0, eq)) || e.text[0] == '-') break;
        Str value = e;
        value.text = e.text.substr(eq + 1);
        env.emplace_back(e.text.substr(0, eq), value);
      }
      continue;
    }
    static const std::set<std::string> wrappers = {"uv",      "nsys",        "ncu",       "numactl",  "taskset",
                                                   "nice",    "nohup",       "time",      "exec",     "stdbuf",
                                                   "timeout", "singularity", "apptainer", "xvfb-run", "chrt"};
    if (wrappers.count(b)) {
      // Wrappers: a sub-command, then options (a value each unless written --name=value), then
      // what they run.
      ++k;
      static const std::set<std::string> subcommands = {"run", "profile", "exec"};
      if (k < fields.size() && subcommands.count(fields[k].text)) ++k;
      static const std::set<std::string> switches = {"--no-sync",    "--frozen", "--locked",          "--isolated",
                                                     "--no-project", "-p",       "--preserve-status", "--all"};
      k = skip_options(
          fields, k,
          [&](const std::string& t) {
            return (b == "nohup" || b == "time" || b == "exec" || switches.count(t)) ? 0 : 1;
          },
          [](const std::string&, const Str&) {});
      if ((b == "timeout" || b == "taskset" || b == "singularity" || b == "apptainer" || b == "chrt") &&
          k < fields.size())
        ++k;  // the duration, the CPU mask, the image, the priority
      continue;
    }
    if (!w.known()) {
      // A command word mme does not know (a launcher in a variable): a launch if a script follows.
      ++k;
      continue;
    }
    break;  // not a launcher
  }
  if (entry == fields.size()) {
    if (!counts.torchrun.empty() || counts.deepspeed)
      sh_.notes.push_back(fmt::format("{}: `{}` launches no Python script mme can see", where(line), clip(n.source)));
    else if (!fields[0].known())
      sh_.notes.push_back(fmt::format("{}: `{}`: {}", where(line), clip(n.source), fields[0].unknown));
    return unknown_status(fmt::format("line {}: `{}` is a command mme does not run", line, clip(n.source)));
  }
  Found f;
  f.line = line;
  f.where = where(line);
  f.entry = fields[entry];
  f.args.assign(fields.begin() + static_cast<std::ptrdiff_t>(entry) + 1, fields.end());
  f.env = run_env(env);
  // The GPU count: torchrun's (or deepspeed's) own, else srun's or mpirun's tasks, else an
  // exported WORLD_SIZE.
  std::string why;
  auto count = [&](const std::optional<Str>& v, const char* what) -> std::optional<std::int64_t> {
    if (!v) return 1;
    if (!v->known()) {
      why = fmt::format("{} {}: {}", what, v->text, v->unknown);
      return std::nullopt;
    }
    if (!all_digits(v->text) || v->text.size() > 9 || std::stoll(v->text) < 1) {
      why = fmt::format("line {}: {} {} is not a number of GPUs mme can use", line, what, v->text);
      return std::nullopt;
    }
    return std::stoll(v->text);
  };
  auto product = [&](const std::optional<Str>& a, const char* an, const std::optional<Str>& b, const char* bn,
                     const std::string& launcher) {
    const auto x = count(a, an), y = count(b, bn);
    if (!x || !y) return;
    f.world_size = *x * *y;
    f.world_from = fmt::format("{} {} {} x {} {} (line {})", launcher, an, *x, bn, *y, line);
  };
  if (!counts.torchrun.empty()) {
    f.launcher = counts.torchrun;
    product(counts.nproc, "--nproc_per_node", counts.nnodes, "--nnodes", counts.torchrun);
  } else if (counts.deepspeed) {
    f.launcher = "deepspeed";
    if (!counts.ds_gpus)
      why = fmt::format("line {}: deepspeed without --num_gpus uses every GPU of the machine", line);
    else
      product(counts.ds_gpus, "--num_gpus", counts.ds_nodes, "--num_nodes", "deepspeed");
  } else if (!counts.tasks_from.empty() && counts.tasks) {
    f.launcher = counts.tasks_from;
    if (const auto t = count(counts.tasks, "--ntasks")) {
      f.world_size = *t;
      f.world_from = fmt::format("{} tasks {} (line {})", counts.tasks_from, *t, line);
    }
  } else if (!counts.tasks_from.empty() && counts.nodes && counts.per_node) {
    f.launcher = counts.tasks_from;
    product(counts.nodes, "--nodes", counts.per_node, "--ntasks-per-node", "srun");
  } else {
    f.launcher = counts.tasks_from.empty() ? "python" : counts.tasks_from;
    for (const auto& [name, v] : f.env)
      if (name == "WORLD_SIZE") {
        if (const auto ws = count(v, "WORLD_SIZE")) {
          f.world_size = *ws;
          f.world_from = fmt::format("the exported WORLD_SIZE={}", *ws);
        }
      }
  }
  f.world_unknown = why;
  sh_.found.push_back(std::move(f));
  return known(true);
}

namespace {

struct Entry {
  const char* file;
  const char* family;  // "" modelled
};
// Megatron-LM's entry scripts (its top folder and examples/): what each trains.
constexpr Entry kEntries[] = {
    {"pretrain_gpt.py", ""},
    {"pretrain_bert.py", "BERT models"},
    {"pretrain_t5.py", "T5 encoder-decoder models"},
    {"pretrain_hybrid.py", "hybrid Mamba models"},
    {"pretrain_mamba.py", "hybrid Mamba models"},
    {"pretrain_retro.py", "RETRO models"},
    {"pretrain_ict.py", "ICT retrievers (BERT models)"},
    {"pretrain_vlm.py", "vision-language models"},
    {"train_rl.py", "RL loops (a generation engine next to training)"},
    {"run_simple_mcore_train_loop.py", "the example loop's own model"},
};

bool looks_like_flag(const Str& s) {
  if (!s.known() || s.text.size() < 2 || s.text[0] != '-') return false;
  // A negative number is a value (argparse: the parser has no option that looks like one).
  return !(std::isdigit(static_cast<unsigned char>(s.text[1])) || s.text[1] == '.');
}

// The flags of an argument list, each with the number of values Megatron-LM's parser gives it
// (the entry script's own named flags, and flags it lacks: the words up to the next flag).
void read_flags(const Found& f, const LaunchScriptOptions& options, const std::string& entry, LaunchScript& out) {
  const std::string who = entry.empty() ? "Megatron-LM" : entry;
  const auto& words = f.args;
  std::vector<MegatronArgs::Flag> flags;
  std::size_t k = 0;
  while (k < words.size()) {
    const Str& w = words[k];
    if (!w.known())
      throw UsageError(
          fmt::format("{}: {} stands where a flag of {} would: {}; its words may be flags, so mme does "
                      "not guess them (give its value, or an empty one)",
                      f.where, w.text, who, w.unknown));
    if (!looks_like_flag(w) || w.text.rfind("--", 0) != 0)
      throw UsageError(
          fmt::format("{}: '{}' is not a flag, and {} takes no more values: {} would stop with "
                      "'unrecognized arguments'",
                      f.where, w.text, flags.empty() ? "no flag before it" : "--" + flags.back().name, who));
    std::string name = w.text.substr(2);
    std::optional<std::string> inline_value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name.resize(eq);
    }
    const MegatronLmFlag* lm = find_megatron_lm_flag(name);
    const bool extra =
        std::find(options.extra_flags.begin(), options.extra_flags.end(), name) != options.extra_flags.end();
    if (!lm && !extra) out.not_megatron.push_back("--" + name);
    MegatronArgs::Flag flag{name, {}};
    ++k;
    if (inline_value) {
      if (lm && lm->max_values == 0)
        throw UsageError(
            fmt::format("{}: --{}={}: --{} is a switch and takes no value", f.where, name, *inline_value, name));
      flag.values.push_back(*inline_value);
    } else {
      const int lo = lm ? lm->min_values : 0, hi = lm ? lm->max_values : -1;
      while (k < words.size() && (hi < 0 || static_cast<int>(flag.values.size()) < hi) && !looks_like_flag(words[k])) {
        const Str& v = words[k];
        // Beyond the values a flag needs, a word mme does not know may hold flags.
        if (!v.known() && static_cast<int>(flag.values.size()) >= std::max(lo, 1)) break;
        if (!v.known() && flag.unknown.empty()) flag.unknown = v.unknown;
        flag.values.push_back(v.text);
        ++k;
      }
      if (static_cast<int>(flag.values.size()) < lo)
        throw UsageError(fmt::format("{}: --{} expects {} value{}{}: {} would stop with an error", f.where, name,
                                     lo == 1 ? "one" : std::to_string(lo), lo == 1 ? "" : "s",
                                     k < words.size() ? fmt::format(", not '{}'", words[k].text) : std::string(), who));
    }
    std::replace(flag.name.begin(), flag.name.end(), '_', '-');
    flags.push_back(std::move(flag));
  }
  std::vector<std::pair<std::string, std::string>> env;
  for (const auto& [name, v] : f.env) {
    env.emplace_back(name, v.text);
    if (!v.known()) out.unknown_env[name] = v.unknown;
  }
  out.args = MegatronArgs::from_flags(std::move(flags), std::move(env));
}

}  // namespace

std::optional<std::string> entry_script_family(std::string_view file_name) {
  for (const auto& e : kEntries)
    if (file_name == e.file) return std::string(e.family);
  if (file_name.rfind("pretrain_vision_", 0) == 0) return std::string("vision models");
  return std::nullopt;
}

LaunchScript read_launch_script(std::string_view text, const std::string& source, const LaunchScriptOptions& options) {
  Shared shared{options, {}, {}, {}, 0};
  Shell sh(shared, source, 0);
  sh.zero = source;
  for (const auto& [name, value] : options.variables) {
    if (!is_name(name)) throw UsageError(fmt::format("--set {}=...: '{}' is not a variable name", name, name));
    Var& v = sh.vars[name];
    v.items = {Str::of(value)};
    v.exported = true;
    v.given = true;
  }
  for (const auto& a : options.script_args) sh.positional.push_back(Str::of(a));
  const auto tree = shell::parse_script(text, source, 1);
  sh.run_script(*tree);

  auto& found = shared.found;
  if (found.empty()) {
    std::string notes;
    for (const auto& n : shared.notes) notes += "; " + n;
    throw UsageError(
        fmt::format("{}: no command launches a Megatron-LM entry script (torchrun ... pretrain_gpt.py "
                    "..., python pretrain_gpt.py ..., or a list of flags){}",
                    source, notes));
  }
  if (found.size() > 1) {
    std::string lines;
    for (const auto& f : found) lines += (lines.empty() ? "" : ", ") + f.where;
    throw UsageError(
        fmt::format("{}: {} commands launch an entry script ({}): mme reads one run; keep one, or give "
                    "the run as a list of flags",
                    source, found.size(), lines));
  }
  const Found& f = found.front();
  LaunchScript out;
  out.line = f.line;
  out.where = f.where;
  out.launcher = f.launcher;
  out.world_size_from = f.world_from;
  out.world_size_unknown = f.world_unknown;
  if (!f.bare) {
    out.entry = f.entry.text;
    out.entry_name = f.entry.file_name();
    if (out.entry_name.empty())
      throw UsageError(fmt::format("{}: the entry script {} is not known: {}", f.where, f.entry.text, f.entry.unknown));
  }
  try {
    read_flags(f, options, out.entry_name, out);
  } catch (const UsageError&) {
    // An entry script mme refuses by name: that is the error to give (check_launch_script).
    const auto family = entry_script_family(out.entry_name);
    if (!family || family->empty()) throw;
  }
  out.args.world_size = f.world_size;
  if (!shared.defaults_used.empty()) {
    std::string list;
    for (const auto& d : shared.defaults_used) list += (list.empty() ? "" : ", ") + d;
    out.assumptions.push_back(printable(fmt::format(
        "{}: variables the script does not set take the script's defaults: {} (--set NAME=VALUE, --script-arg give "
        "them)",
        source, list.size() > 400 ? list.substr(0, 397) + "..." : list)));
  }
  return out;
}

namespace {

// Whether mme reads a flag's value: the setup's flags and the model's (those with a condition
// when it holds).
bool value_read(const std::string& name, const MegatronArgs& args) {
  for (const auto& m : model_flags())
    if (name == m.name) return !m.value_read || m.value_read(args);
  const SetupKnob* k = find_knob(name);
  if (!k) return false;
  auto in = [&](const std::vector<const char*>& list) {
    return std::any_of(list.begin(), list.end(), [&](const char* f) { return name == f; });
  };
  return in(k->megatron) || in(k->megatron_off) || in(k->megatron_extra);
}

// What a flag that Megatron-LM lacks is, where mme knows: a launcher's, or a name Megatron-LM
// has only in its config.
std::string not_megatron_hint(const std::string& flag) {
  static const std::set<std::string> launcher = {
      "nnodes",      "nproc-per-node", "nproc_per_node", "node-rank",    "node_rank", "master-addr", "master_addr",
      "master-port", "master_port",    "rdzv-endpoint",  "rdzv-backend", "rdzv-id",   "standalone"};
  const std::string name = flag.substr(2);
  if (name.find_first_of(" \t") != std::string::npos)
    return "one argument that holds a blank, as a quoted \"${X[@]}\" hands over an array element \"--flag value\": "
           "argparse reads it as no flag";
  if (launcher.count(name))
    return fmt::format("it is torchrun's: write it before the entry script (torchrun {} ... pretrain_gpt.py ...)",
                       flag);
  if (name == "world-size")
    return "torchrun sets the world size: give the GPU count as torchrun --nproc_per_node N --nnodes M, or with "
           "mme's --num-gpus";
  if (name == "virtual-pipeline-model-parallel-size")
    return "Megatron-LM sets it from --num-virtual-stages-per-pipeline-rank or --num-layers-per-virtual-pipeline-stage";
  if (name.rfind("cpu-offloading", 0) == 0 || name.rfind("no-cpu-offloading", 0) == 0)
    return "Megatron-LM's activation offloading is --cpu-offloading-num-layers N (it turns cpu_offloading on)";
  const std::string near = closest_megatron_lm_flag(name);
  return near.empty() ? "" : fmt::format("did you mean --{}?", near);
}

}  // namespace

void check_launch_script(LaunchScript& s, const std::string& source, const LaunchScriptOptions& options) {
  if (!s.entry.empty()) {
    const auto family = entry_script_family(s.entry_name);
    if (family && !family->empty())
      throw UsageError(
          fmt::format("{}: {} trains {}, which mme does not model: mme estimates the models of "
                      "Megatron-LM's pretrain_gpt.py (dense, MoE, MLA, MTP)",
                      s.where, s.entry, *family));
    if (!family) {
      if (!options.assume_gpt_entry)
        throw UsageError(
            fmt::format("{}: {} is not a Megatron-LM entry script mme knows: mme models "
                        "pretrain_gpt.py; if {} builds its model as pretrain_gpt.py does, say so with "
                        "--assume-gpt-entry",
                        s.where, s.entry, s.entry_name));
      s.warnings.push_back(printable(fmt::format(
          "{}: {} is taken to build its model as pretrain_gpt.py does (--assume-gpt-entry)", s.where, s.entry)));
    }
  }
  if (!s.not_megatron.empty()) {
    std::string list;
    for (const auto& f : s.not_megatron) {
      const std::string hint = not_megatron_hint(f);
      list += (list.empty() ? "" : "; ") + f + (hint.empty() ? "" : " (" + hint + ")");
    }
    throw UsageError(printable(fmt::format(
        "{}: {} Megatron-LM's parser lacks (megatron/training/arguments.py, commit {}), which would stop with "
        "'unrecognized arguments': {}. A flag the entry script adds itself is accepted with --extra-megatron-flag "
        "NAME",
        s.where, s.not_megatron.size() == 1 ? "a flag" : fmt::format("{} flags", s.not_megatron.size()),
        megatron_lm_commit(), list)));
  }
  for (const auto& f : s.args.flags())
    if (!f.unknown.empty() && value_read(f.name, s.args)) {
      std::string shown;
      for (const auto& v : f.values) shown += " " + v;
      throw UsageError(printable(fmt::format("{}: --{}{}: {}", source, f.name, shown, f.unknown)));
    }
  for (const auto& [name, why] : s.unknown_env)
    if (is_modelled_environment(name))
      throw UsageError(printable(fmt::format("{}: the environment variable {}: {}", source, name, why)));
  for (const auto& name : options.extra_flags)
    if (s.args.has(name) && !find_megatron_lm_flag(name))
      s.warnings.push_back(
          printable(fmt::format("--{}: not a flag of Megatron-LM's parser, taken as the entry script's own "
                                "(--extra-megatron-flag); its memory effect is not modelled",
                                name)));
  MegatronFlagReview review = review_megatron_flags(s.args);
  s.assumptions.insert(s.assumptions.end(), review.not_modelled.begin(), review.not_modelled.end());
  // The entry script's own flags have their warning above.
  std::erase_if(review.unknown, [&](const std::string& f) {
    return std::find(options.extra_flags.begin(), options.extra_flags.end(), f.substr(2)) != options.extra_flags.end();
  });
  if (!review.unknown.empty()) {
    std::string names;
    for (const auto& n : review.unknown) names += (names.empty() ? "" : ", ") + n;
    s.warnings.push_back(
        printable(fmt::format("{}: {} Megatron-LM flag{} whose memory effect mme does not know, "
                              "taken to have none: {}",
                              source, review.unknown.size(), review.unknown.size() == 1 ? "" : "s", names)));
  }
}

}  // namespace mme
