// Integer arithmetic of launch scripts (launch_shell.hpp): bash's operators on 64-bit integers,
// overflow an error, a variable mme does not know an unknown result.

#include <cctype>
#include <limits>

#include "launch_shell.hpp"

namespace mme::launch {

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

}  // namespace mme::launch
