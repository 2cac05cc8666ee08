// A launch script's values (launch_shell.hpp): variables, parameter expansion with its operators,
// field splitting, bash's glob patterns.

#include <algorithm>
#include <cctype>

#include "launch_shell.hpp"

namespace mme::launch {

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

// ---- the shell's values ---------------------------------------------------------------

void Shell::run_script(const Node& script) {
  collect_own(script);
  try {
    run(script);
  } catch (const ExitSignal&) {
  } catch (const ReturnSignal&) {
  } catch (const LoopSignal&) {
  }
}

void Shell::collect_own(const Node& n) {
  for (const auto& a : n.assigns) own.insert(a.name);
  if (n.kind == Node::kFor) own.insert(n.name);
  for (const auto& k : n.kids) collect_own(*k);
}

Str Shell::unset_value(const std::string& name, std::size_t line) const {
  if (own.count(name)) return Str::of("");
  if (all_digits(name)) {
    const std::size_t n = std::stoul(name.size() > 6 ? "999999" : name);
    return Str::not_known("$" + name,
                          fmt::format("line {}: ${}, the script's {} argument, is not given (--script-arg gives it)",
                                      line, name, ordinal(n)),
                          "$" + name);
  }
  return Str::not_known("$" + name,
                        fmt::format("line {}: {} is not set in the script (--set {}=VALUE gives it)", line, name, name),
                        name);
}

const Var* Shell::find(const std::string& name) const {
  const auto it = vars.find(name);
  return it == vars.end() ? nullptr : &it->second;
}

void Shell::set_var(const std::string& name, std::vector<Str> items, bool array, std::size_t line) {
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

std::vector<Str> Shell::expand(const Word& w) {
  Fields f;
  f.cur = Str::of("");
  expand_into(w, f, true);
  f.push();
  return f.out;
}

// One string (assignments, case words, [[ ]] operands, here-documents): no field splitting.
Str Shell::expand_one(const Word& w) {
  Fields f;
  f.cur = Str::of("");
  expand_into(w, f, false);
  return f.cur;
}

// As a pattern: quoted characters stand for themselves.
std::string Shell::expand_pattern(const Word& w, std::string& unknown) {
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

void Shell::expand_into(const Word& w, Fields& f, bool split) {
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

Shell::Expanded Shell::expand_part(const Part& p, std::size_t line) {
  Expanded e;
  if (p.kind == Part::kCmdSub) {
    e.items.push_back(
        Str::not_known(p.source, fmt::format("line {}: {} is a command substitution, which mme never "
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
std::optional<Shell::Expanded> Shell::lookup(const Part& p, std::size_t line) {
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
    e.items.push_back(Str::not_known("$" + n, fmt::format("line {}: ${} is known only when the script runs", line, n)));
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

Shell::Expanded Shell::parameter(const Part& p, std::size_t line) {
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

std::string Shell::remove_pattern(const std::string& t, const std::string& pat, const std::string& op) {
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

std::string Shell::replace_pattern(const std::string& t, const std::string& pat, const std::string& rep,
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

Str Shell::substring(const Str& s, const Part& p, std::size_t line) {
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

}  // namespace mme::launch
