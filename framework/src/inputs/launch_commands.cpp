// A launch script's commands (launch_shell.hpp): lists and compound commands, conditions of
// known values, [ ] / test / [[ ]], assignments and declarations, functions, eval, source and
// bash -c. A command that may change the launch under a condition mme cannot decide is an error.

#include <algorithm>
#include <cctype>

#include "mme/inputs/setup_schema.hpp"
#include "mme/sdk/input_text.hpp"

#include "launch_shell.hpp"

namespace mme::launch {

void Shell::step(std::size_t line) {
  if (++sh_.steps > kMaxSteps)
    fail(line, fmt::format("the script runs more than {} commands (a loop that does not end?)", kMaxSteps));
}

Status Shell::run(const Node& n) {
  step(n.line);
  Status st = run_inner(n);
  if (n.negate && st.tri != Tri::kUnknown) st.tri = st.tri == Tri::kTrue ? Tri::kFalse : Tri::kTrue;
  return st;
}

Status Shell::run_inner(const Node& n) {
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

// A copy of this shell for a subshell: what it assigns is lost, what it launches is kept.
Status Shell::subshell(const Node& n) {
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

Status Shell::run_case(const Node& n) {
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
bool Shell::inert(const Node& n) const {
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

// In a condition, a variable the script never sets (or an argument not given) is taken as
// unset, as the script reads it in a clean environment: which branch runs is the script's
// default path, and the assumptions list the names (--set, --script-arg change them). A value
// with another unknown part (a command substitution) stays unknown.
Str Shell::assume_unset(const Str& s) {
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

Status Shell::run_cond(const Node& n) {
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

Status Shell::run_test(const std::vector<Str>& words, std::size_t line, const std::string& src) {
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

Status Shell::both(const Status& a, const Status& b, bool conj) {
  // Kleene logic: false && unknown = false, true || unknown = true.
  const Tri stop = conj ? Tri::kFalse : Tri::kTrue;
  if (a.tri == stop || b.tri == stop) return {stop, ""};
  if (a.tri == Tri::kUnknown) return a;
  if (b.tri == Tri::kUnknown) return b;
  return known(conj);
}

Status Shell::test_or(std::vector<TestArg>& a, std::size_t& pos, bool cond, std::size_t line) {
  Status st = test_and(a, pos, cond, line);
  while (pos < a.size() && (is_op(a[pos], cond ? "||" : "-o", cond))) {
    ++pos;
    st = both(st, test_and(a, pos, cond, line), false);
  }
  return st;
}

Status Shell::test_and(std::vector<TestArg>& a, std::size_t& pos, bool cond, std::size_t line) {
  Status st = test_not(a, pos, cond, line);
  while (pos < a.size() && (is_op(a[pos], cond ? "&&" : "-a", cond))) {
    ++pos;
    st = both(st, test_not(a, pos, cond, line), true);
  }
  return st;
}

Status Shell::test_not(std::vector<TestArg>& a, std::size_t& pos, bool cond, std::size_t line) {
  if (pos > 1000) fail(line, "a test of more than 1000 words");
  if (pos < a.size() && is_op(a[pos], "!", cond) && pos + 1 < a.size()) {
    ++pos;
    Status st = test_not(a, pos, cond, line);
    if (st.tri != Tri::kUnknown) st.tri = st.tri == Tri::kTrue ? Tri::kFalse : Tri::kTrue;
    return st;
  }
  return test_primary(a, pos, cond, line);
}

Status Shell::test_primary(std::vector<TestArg>& a, std::size_t& pos, bool cond, std::size_t line) {
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

Status Shell::binary_test(const TestArg& l, const std::string& op, const TestArg& r, bool cond, std::size_t line) {
  if (op == "-nt" || op == "-ot" || op == "-ef")
    return unknown_status(fmt::format("line {}: `{}` compares files, which mme does not look at", line, op));
  if (!l.value.known()) return unknown_status(l.value.unknown);
  if (op == "=~") return unknown_status(fmt::format("line {}: the regular expression test =~ is not evaluated", line));
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

void Shell::assign(const shell::Assignment& a, bool local_export, bool declared_array) {
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

Status Shell::simple(const Node& n) {
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

Status Shell::declaration(const Node& n, const std::vector<Str>& fields, const std::set<std::size_t>& declared) {
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

Status Shell::call(const Node& body, const std::vector<Str>& fields, std::size_t line) {
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
bool Shell::inert_text(const std::string& t) {
  for (const char* w : {".py", "torchrun", "srun", "mpirun", "deepspeed", "python"})
    if (t.find(w) != std::string::npos) return false;
  return t.find('$') == std::string::npos && t.find('`') == std::string::npos;
}

// The --script-source file a path names: by its path, or by its file name when the script
// builds the folder at run time.
const std::filesystem::path* Shell::named_source(const Str& path) const {
  const std::string name = path.file_name();
  for (const auto& given : sh_.options.sources)
    if ((path.known() && path.text == given.string()) || (!name.empty() && given.filename().string() == name))
      return &given;
  return nullptr;
}

Status Shell::source(const Node& n, const std::vector<Str>& fields) {
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
Status Shell::run_text(const std::string& text, const std::string& name, bool own_lines) {
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
void Shell::run_child(const std::string& text, const std::string& name, std::vector<Str> args,
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

}  // namespace mme::launch
