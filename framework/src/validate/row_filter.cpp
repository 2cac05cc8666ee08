// The --golden / --case filters of `mme validate` (validation.hpp, RowFilter).
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <istream>
#include <sstream>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"
#include "mme/sdk/input_text.hpp"
#include "mme/validate/validation.hpp"

namespace mme {

// RowFilter: a regular-expression matcher in linear time (a Pike VM over a compiled program,
// no backtracking): the text is read once, each step advancing every live state together, so
// `(\w+)+!` or `(.)*$` against a long field costs pattern x text, never more, and nothing
// recurses on the text.

namespace {

constexpr std::size_t kMaxFilterLength = 256;
constexpr std::size_t kMaxFilterStates = 20000;
constexpr int kMaxFilterCount = 1000;

}  // namespace

struct RowFilter::Parser {
  using Fragment = std::vector<RowFilter::Inst>;  // jumps relative to the instruction
  std::string_view flag;
  std::string_view p;
  std::size_t i = 0;
  std::vector<std::bitset<256>>& classes;

  [[noreturn]] void fail(const std::string& what) const {
    throw UsageError(fmt::format("{}: invalid regular expression: {} (at offset {})", flag, what, i));
  }
  void check(const Fragment& f) const {
    if (f.size() > kMaxFilterStates)
      throw UsageError(
          fmt::format("{}: the regular expression expands to more than {} states; use smaller repeat "
                      "counts",
                      flag, kMaxFilterStates));
  }
  static RowFilter::Inst inst(RowFilter::Op op, int x = 0, int y = 0) { return {op, 0, x, y, 0}; }
  static void append(Fragment& to, const Fragment& f) { to.insert(to.end(), f.begin(), f.end()); }

  Fragment alternation() {
    Fragment left = sequence();
    while (i < p.size() && p[i] == '|') {
      ++i;
      Fragment right = sequence();
      Fragment f;
      f.push_back(inst(Op::kSplit, 1, static_cast<int>(left.size()) + 2));
      append(f, left);
      f.push_back(inst(Op::kJmp, static_cast<int>(right.size()) + 1));
      append(f, right);
      check(f);
      left = std::move(f);
    }
    return left;
  }

  Fragment sequence() {
    Fragment f;
    while (i < p.size() && p[i] != '|' && p[i] != ')') {
      append(f, repeat());
      check(f);
    }
    return f;
  }

  // {n}, {n,}, {n,m} at i; false (nothing consumed) when the braces are not a quantifier, which
  // ECMAScript (Annex B) then reads as literal characters.
  bool counts(int& lo, int& hi) {
    std::size_t j = i + 1;
    auto number = [&](int& out) {
      const std::size_t start = j;
      long v = 0;
      while (j < p.size() && std::isdigit(static_cast<unsigned char>(p[j])) && j - start < 5)
        v = v * 10 + (p[j++] - '0');
      if (j == start) return false;
      if (v > kMaxFilterCount)
        throw UsageError(fmt::format("{}: a repeat count of {} in the regular expression is more than {}", flag, v,
                                     kMaxFilterCount));
      out = static_cast<int>(v);
      return true;
    };
    if (!number(lo)) return false;
    hi = lo;
    if (j < p.size() && p[j] == ',') {
      ++j;
      hi = -1;
      if (j < p.size() && p[j] != '}' && !number(hi)) return false;
    }
    if (j >= p.size() || p[j] != '}') return false;
    if (hi >= 0 && hi < lo) fail("a repeat count {n,m} with m < n");
    i = j + 1;
    return true;
  }

  Fragment repeat() {
    Fragment e = atom();
    if (i >= p.size()) return e;
    int lo = 0, hi = -1;
    const char q = p[i];
    if (q == '*') {
      ++i;
    } else if (q == '+') {
      ++i, lo = 1;
    } else if (q == '?') {
      ++i, hi = 1;
    } else if (q == '{' && counts(lo, hi)) {
    } else {
      return e;
    }
    if (i < p.size() && p[i] == '?') ++i;  // lazy: the same rows match
    if (i < p.size() && (p[i] == '*' || p[i] == '+' || p[i] == '?')) fail("nothing to repeat");
    if (!e.empty() && (e.front().op == Op::kBol || e.front().op == Op::kEol) && e.size() == 1) return e;
    Fragment f;
    for (int k = 0; k < lo; ++k) {
      append(f, e);
      check(f);
    }
    const int n = static_cast<int>(e.size());
    if (hi < 0) {  // a loop: split into e or past it, e jumps back
      f.push_back(inst(Op::kSplit, 1, n + 2));
      append(f, e);
      f.push_back(inst(Op::kJmp, -(n + 1)));
    } else {  // hi - lo optional copies, nested: (e(e(e)?)?)?
      Fragment tail;
      for (int k = lo; k < hi; ++k) {
        Fragment t;
        t.push_back(inst(Op::kSplit, 1, n + static_cast<int>(tail.size()) + 1));
        append(t, e);
        append(t, tail);
        check(t);
        tail = std::move(t);
      }
      append(f, tail);
    }
    check(f);
    return f;
  }

  int add_class(const std::bitset<256>& set) {
    classes.push_back(set);
    return static_cast<int>(classes.size()) - 1;
  }
  static std::bitset<256> named(char c) {
    std::bitset<256> s;
    const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (int b = 0; b < 256; ++b) {
      const bool in = lower == 'd'   ? std::isdigit(b) != 0
                      : lower == 'w' ? (std::isalnum(b) != 0 && b < 128) || b == '_'
                                     : b == ' ' || (b >= '\t' && b <= '\r');
      s[static_cast<std::size_t>(b)] = in;
    }
    if (std::isupper(static_cast<unsigned char>(c))) s.flip();
    return s;
  }
  // The character of an escape \c that stands for one character; -1 for a class (\d ...).
  int escaped(char c) {
    switch (c) {
      case 'd':
      case 'D':
      case 'w':
      case 'W':
      case 's':
      case 'S': return -1;
      case 't': return '\t';
      case 'n': return '\n';
      case 'r': return '\r';
      case 'f': return '\f';
      case 'v': return '\v';
      case '0': return '\0';
      case 'x': {
        if (i + 2 > p.size() || !std::isxdigit(static_cast<unsigned char>(p[i])) ||
            !std::isxdigit(static_cast<unsigned char>(p[i + 1])))
          fail("\\x needs two hexadecimal digits");
        const int v = std::stoi(std::string(p.substr(i, 2)), nullptr, 16);
        i += 2;
        return v;
      }
      default: break;
    }
    if (std::isdigit(static_cast<unsigned char>(c)))
      fail("back-references are not supported (the matcher runs in linear time)");
    if (c == 'b' || c == 'B') fail("word boundaries (\\b, \\B) are not supported");
    if (std::isalnum(static_cast<unsigned char>(c))) fail(fmt::format("unknown escape '\\{}'", c));
    return static_cast<unsigned char>(c);  // \. \* \\ \( ...
  }

  Fragment atom() {
    const char c = p[i++];
    Fragment f;
    switch (c) {
      case '(': {
        if (i < p.size() && p[i] == '?') {
          if (i + 1 < p.size() && p[i + 1] == ':') {
            i += 2;
          } else {
            fail("lookahead and lookbehind are not supported");
          }
        }
        f = alternation();
        if (i >= p.size() || p[i] != ')') fail("a '(' without its ')'");
        ++i;
        return f;
      }
      case ')': fail("a ')' without its '('");
      case '*':
      case '+':
      case '?': fail("nothing to repeat");
      case '^': f.push_back(inst(Op::kBol)); return f;
      case '$': f.push_back(inst(Op::kEol)); return f;
      case '.': f.push_back(inst(Op::kAny)); return f;
      case '[': {
        std::bitset<256> set;
        const bool negate = i < p.size() && p[i] == '^';
        if (negate) ++i;
        bool first = true;
        while (true) {
          if (i >= p.size()) fail("a '[' without its ']'");
          char a = p[i++];
          if (a == ']' && !first) break;
          first = false;
          int lo = static_cast<unsigned char>(a);
          if (a == '\\') {
            if (i >= p.size()) fail("a '\\' at the end");
            const char e = p[i++];
            if (e == 'b') {
              lo = '\b';
            } else {
              lo = escaped(e);
              if (lo < 0) {
                set |= named(e);
                continue;
              }
            }
          }
          int hi = lo;
          if (i + 1 < p.size() && p[i] == '-' && p[i + 1] != ']') {
            ++i;
            const char b = p[i++];
            hi = static_cast<unsigned char>(b);
            if (b == '\\') {
              if (i >= p.size()) fail("a '\\' at the end");
              hi = escaped(p[i++]);
              if (hi < 0) fail("a class escape cannot end a range");
            }
            if (hi < lo) fail("a range out of order in [...]");
          }
          for (int b = lo; b <= hi; ++b) set[static_cast<std::size_t>(b)] = true;
        }
        if (negate) set.flip();
        RowFilter::Inst in = inst(Op::kClass);
        in.cls = add_class(set);
        f.push_back(in);
        return f;
      }
      case '\\': {
        if (i >= p.size()) fail("a '\\' at the end");
        const char e = p[i++];
        const int v = escaped(e);
        RowFilter::Inst in = inst(v < 0 ? Op::kClass : Op::kByte);
        if (v < 0)
          in.cls = add_class(named(e));
        else
          in.c = static_cast<unsigned char>(v);
        f.push_back(in);
        return f;
      }
      default: {
        RowFilter::Inst in = inst(Op::kByte);
        in.c = static_cast<unsigned char>(c);
        f.push_back(in);
        return f;
      }
    }
  }
};

RowFilter::RowFilter(std::string_view flag, std::string_view pattern) {
  if (pattern.size() > kMaxFilterLength)
    throw UsageError(fmt::format("{}: the regular expression is longer than {} characters", flag, kMaxFilterLength));
  Parser parser{flag, pattern, 0, classes_};
  Parser::Fragment f = parser.alternation();
  if (parser.i < pattern.size()) parser.fail("a ')' without its '('");
  f.push_back(Parser::inst(Op::kMatch));
  // Relative jumps to absolute ones.
  for (std::size_t k = 0; k < f.size(); ++k) {
    if (f[k].op == Op::kJmp || f[k].op == Op::kSplit) {
      f[k].x += static_cast<int>(k);
      f[k].y += static_cast<int>(k);
    }
  }
  program_ = std::move(f);
}

bool RowFilter::search(std::string_view text) const {
  const std::size_t n = program_.size();
  std::vector<int> current, next, stack;
  std::vector<std::size_t> mark(n, static_cast<std::size_t>(-1));
  // Adds the state `start` and every state reachable from it without reading a character
  // (jumps, splits, anchors that hold at `pos`) to `list`, each once per position; true when
  // the match state is among them.
  auto add = [&](std::vector<int>& list, int start, std::size_t pos) {
    stack.assign(1, start);
    while (!stack.empty()) {
      const int pc = stack.back();
      stack.pop_back();
      if (mark[static_cast<std::size_t>(pc)] == pos) continue;
      mark[static_cast<std::size_t>(pc)] = pos;
      const Inst& in = program_[static_cast<std::size_t>(pc)];
      switch (in.op) {
        case Op::kMatch: return true;
        case Op::kJmp: stack.push_back(in.x); break;
        case Op::kSplit:
          stack.push_back(in.y);
          stack.push_back(in.x);
          break;
        case Op::kBol:
          if (pos == 0) stack.push_back(pc + 1);
          break;
        case Op::kEol:
          if (pos == text.size()) stack.push_back(pc + 1);
          break;
        default: list.push_back(pc);
      }
    }
    return false;
  };
  for (std::size_t pos = 0;; ++pos) {
    if (add(current, 0, pos)) return true;  // a match may start anywhere
    if (pos == text.size()) return false;
    const auto c = static_cast<unsigned char>(text[pos]);
    next.clear();
    for (const int pc : current) {
      const Inst& in = program_[static_cast<std::size_t>(pc)];
      const bool step = in.op == Op::kByte  ? in.c == c
                        : in.op == Op::kAny ? c != '\n' && c != '\r'
                                            : classes_[static_cast<std::size_t>(in.cls)][c];
      if (step && add(next, pc + 1, pos + 1)) return true;
    }
    std::swap(current, next);
  }
}

}  // namespace mme
