// Renders a parsed template: scopes, statements and expressions. Filters,
// tests and methods live in jinja_builtins.cpp.
#include <chrono>
#include <cmath>
#include <ctime>
#include <unordered_map>

#include "server/jinja_ast.h"

namespace llmserve::server::jinja {

namespace {

bool is_int(const Value& v) { return v.is_number_integer(); }

int64_t as_int(const Value& v, int line, const char* what) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  fail(line, std::string(what) + " must be an integer");
}

double as_number(const Value& v, int line) {
  if (v.is_number()) return v.get<double>();
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  fail(line, "expected a number, got " + to_json(v, -1));
}

// Python's negative-index and clamping rules for one slice bound.
int64_t slice_bound(const Value* v, int64_t size, int64_t fallback, int line) {
  if (!v || v->is_null() || is_undefined(*v)) return fallback;
  int64_t i = as_int(*v, line, "slice index");
  if (i < 0) i += size;
  return std::clamp<int64_t>(i, 0, size);
}

bool less_than(const Value& a, const Value& b, int line) {
  if ((a.is_number() || a.is_boolean()) && (b.is_number() || b.is_boolean())) return as_number(a, line) < as_number(b, line);
  if (a.is_string() && b.is_string()) return a.get_ref<const std::string&>() < b.get_ref<const std::string&>();
  fail(line, "cannot compare " + std::string(a.type_name()) + " with " + b.type_name());
}

bool equal(const Value& a, const Value& b) {
  if (is_undefined(a) || is_undefined(b)) return is_undefined(a) && is_undefined(b);
  if (a.is_boolean() && b.is_number()) return (a.get<bool>() ? 1.0 : 0.0) == b.get<double>();
  if (b.is_boolean() && a.is_number()) return equal(b, a);
  return a == b;
}

bool contains(const Value& haystack, const Value& needle, int line) {
  if (haystack.is_string()) {
    if (!needle.is_string()) fail(line, "'in <string>' requires a string on the left");
    return haystack.get_ref<const std::string&>().find(needle.get_ref<const std::string&>()) != std::string::npos;
  }
  if (haystack.is_array()) {
    for (const Value& item : haystack)
      if (equal(item, needle)) return true;
    return false;
  }
  if (haystack.is_object()) return needle.is_string() && haystack.contains(needle.get_ref<const std::string&>());
  if (is_undefined(haystack) || haystack.is_null()) return false;
  fail(line, std::string("'in' needs a string, list or mapping, got ") + haystack.type_name());
}

class Renderer {
 public:
  explicit Renderer(const Value& globals) {
    scopes_.emplace_back();
    for (const auto& [k, v] : globals.items()) scopes_.back()[k] = v;
  }

  void render(const NodeList& nodes, std::string& out) {
    for (const auto& n : nodes) node(*n, out);
  }

 private:
  void emit(std::string& out, std::string_view s, int line) {
    if (out.size() + s.size() > kMaxOutputBytes) fail(line, "rendered text exceeds the size limit");
    out += s;
  }

  Value* lookup(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  void node(const Node& n, std::string& out) {
    switch (n.kind) {
      case Node::Kind::Root:
        render(n.body, out);
        return;
      case Node::Kind::Text:
        emit(out, n.text, n.line);
        return;
      case Node::Kind::Output: {
        const Value v = eval(*n.expr);
        emit(out, to_str(v), n.line);
        return;
      }
      case Node::Kind::If:
        for (const auto& [cond, body] : n.branches)
          if (!cond || truthy(eval(*cond))) {
            render(body, out);
            return;
          }
        return;
      case Node::Kind::For:
        for_loop(n, out);
        return;
      case Node::Kind::Set: {
        Value v = eval(*n.expr);
        if (!n.attr.empty()) {
          Value* target = lookup(n.targets[0]);
          if (!target || !target->is_object()) fail(n.line, "cannot set attribute of '" + n.targets[0] + "'");
          (*target)[n.attr] = std::move(v);
        } else {
          assign(n.targets, std::move(v), n.line);
        }
        return;
      }
      case Node::Kind::SetBlock: {
        std::string text;
        render(n.body, text);
        scopes_.back()[n.targets[0]] = std::move(text);
        return;
      }
    }
  }

  void assign(const std::vector<std::string>& targets, Value v, int line) {
    if (targets.size() == 1) {
      scopes_.back()[targets[0]] = std::move(v);
      return;
    }
    if (!v.is_array() || v.size() != targets.size())
      fail(line, "cannot unpack into " + std::to_string(targets.size()) + " names");
    for (size_t i = 0; i < targets.size(); ++i) scopes_.back()[targets[i]] = std::move(v[i]);
  }

  void for_loop(const Node& n, std::string& out) {
    Value seq = eval(*n.expr);
    std::vector<Value> items;
    if (seq.is_array()) {
      items.assign(seq.begin(), seq.end());
    } else if (seq.is_object()) {
      for (const auto& [k, v] : seq.items()) items.emplace_back(k);  // iterating a dict yields its keys
    } else if (seq.is_string()) {
      for (char c : seq.get_ref<const std::string&>()) items.emplace_back(std::string(1, c));
    } else if (!is_undefined(seq) && !seq.is_null()) {
      fail(n.line, std::string("cannot iterate over ") + seq.type_name());
    }
    if (n.filter) {  // "for x in xs if cond": filtered before loop.* is computed
      std::vector<Value> kept;
      for (Value& item : items) {
        scopes_.emplace_back();
        assign(n.targets, item, n.line);
        const bool keep = truthy(eval(*n.filter));
        scopes_.pop_back();
        if (keep) kept.push_back(std::move(item));
      }
      items.swap(kept);
    }
    if (items.empty()) {
      render(n.else_body, out);
      return;
    }
    const int64_t len = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < len; ++i) {
      if (++iterations_ > kMaxIterations) fail(n.line, "too many loop iterations");
      scopes_.emplace_back();
      Value loop = Value::object();
      loop["index"] = i + 1;
      loop["index0"] = i;
      loop["revindex"] = len - i;
      loop["revindex0"] = len - i - 1;
      loop["first"] = i == 0;
      loop["last"] = i == len - 1;
      loop["length"] = len;
      loop["previtem"] = i > 0 ? items[static_cast<size_t>(i - 1)] : undefined();
      loop["nextitem"] = i + 1 < len ? items[static_cast<size_t>(i + 1)] : undefined();
      scopes_.back()["loop"] = std::move(loop);
      assign(n.targets, items[static_cast<size_t>(i)], n.line);
      render(n.body, out);
      scopes_.pop_back();
    }
  }

  std::vector<Value> eval_args(const Expr& e, size_t first) {
    std::vector<Value> args;
    for (size_t i = first; i < e.args.size(); ++i) args.push_back(eval(*e.args[i]));
    return args;
  }
  std::vector<std::pair<std::string, Value>> eval_kwargs(const Expr& e) {
    std::vector<std::pair<std::string, Value>> kw;
    for (const auto& [k, v] : e.kwargs) kw.emplace_back(k, eval(*v));
    return kw;
  }

  Value eval(const Expr& e) {
    if (++depth_ > kMaxNesting) fail(e.line, "expression nested too deeply");
    Value v = eval_inner(e);
    --depth_;
    return v;
  }

  Value eval_inner(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Literal:
        return e.value;
      case Expr::Kind::Name: {
        const Value* v = lookup(e.name);
        return v ? *v : undefined();
      }
      case Expr::Kind::List: {
        Value l = Value::array();
        for (const auto& a : e.args) l.push_back(eval(*a));
        return l;
      }
      case Expr::Kind::Dict: {
        Value d = Value::object();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          const Value k = eval(*e.args[i]);
          if (!k.is_string()) fail(e.line, "dict keys must be strings");
          d[k.get<std::string>()] = eval(*e.args[i + 1]);
        }
        return d;
      }
      case Expr::Kind::Attr:
        return item(eval(*e.args[0]), Value(e.name), e.line);
      case Expr::Kind::Index:
        return item(eval(*e.args[0]), eval(*e.args[1]), e.line);
      case Expr::Kind::Slice:
        return slice(e);
      case Expr::Kind::Call:
        return call(e);
      case Expr::Kind::Filter:
        return call_filter(e.name, eval(*e.args[0]), eval_args(e, 1), eval_kwargs(e), e.line);
      case Expr::Kind::Test: {
        const bool r = call_test(e.name, eval(*e.args[0]), eval_args(e, 1), e.line);
        return e.negated ? !r : r;
      }
      case Expr::Kind::Unary: {
        const Value v = eval(*e.args[0]);
        if (e.name == "not") return !truthy(v);
        if (is_int(v)) return e.name == "-" ? -v.get<int64_t>() : v.get<int64_t>();
        const double d = as_number(v, e.line);
        return e.name == "-" ? -d : d;
      }
      case Expr::Kind::Binary:
        return binary(e);
      case Expr::Kind::Conditional:
        if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : undefined();
    }
    fail(e.line, "unknown expression");
  }

  static Value item(const Value& obj, const Value& key, int line) {
    if (obj.is_object()) {
      if (!key.is_string()) return undefined();
      auto it = obj.find(key.get_ref<const std::string&>());
      return it == obj.end() ? undefined() : *it;
    }
    if ((obj.is_array() || obj.is_string()) && (key.is_number_integer())) {
      const int64_t size = obj.is_array() ? static_cast<int64_t>(obj.size())
                                          : static_cast<int64_t>(obj.get_ref<const std::string&>().size());
      int64_t i = key.get<int64_t>();
      if (i < 0) i += size;
      if (i < 0 || i >= size) return undefined();
      if (obj.is_array()) return obj[static_cast<size_t>(i)];
      return std::string(1, obj.get_ref<const std::string&>()[static_cast<size_t>(i)]);
    }
    if (is_undefined(obj) || obj.is_null())
      fail(line, "cannot read '" + to_str(key) + "' of an undefined value");
    return undefined();  // e.g. a method name; call() handles methods itself
  }

  Value slice(const Expr& e) {
    const Value obj = eval(*e.args[0]);
    Value parts[3];
    for (int i = 0; i < 3; ++i) parts[i] = e.args[static_cast<size_t>(i) + 1] ? eval(*e.args[static_cast<size_t>(i) + 1]) : undefined();
    const bool is_str = obj.is_string();
    if (!is_str && !obj.is_array()) fail(e.line, "only lists and strings can be sliced");
    const int64_t size = is_str ? static_cast<int64_t>(obj.get_ref<const std::string&>().size())
                                : static_cast<int64_t>(obj.size());
    const int64_t step = is_undefined(parts[2]) || parts[2].is_null() ? 1 : as_int(parts[2], e.line, "slice step");
    if (step == 0) fail(e.line, "slice step cannot be zero");
    Value out = is_str ? Value("") : Value::array();
    auto take = [&](int64_t i) {
      if (is_str) out.get_ref<std::string&>() += obj.get_ref<const std::string&>()[static_cast<size_t>(i)];
      else out.push_back(obj[static_cast<size_t>(i)]);
    };
    if (step > 0) {
      const int64_t lo = slice_bound(&parts[0], size, 0, e.line), hi = slice_bound(&parts[1], size, size, e.line);
      for (int64_t i = lo; i < hi; i += step) take(i);
    } else {
      // Negative steps clamp to [-1, size - 1] per Python.
      auto bound = [&](const Value& v, int64_t fallback) {
        if (is_undefined(v) || v.is_null()) return fallback;
        int64_t i = as_int(v, e.line, "slice index");
        if (i < 0) i += size;
        return std::clamp<int64_t>(i, -1, size - 1);
      };
      const int64_t hi = bound(parts[0], size - 1), lo = bound(parts[1], -1);
      for (int64_t i = hi; i > lo; i += step) take(i);
    }
    return out;
  }

  Value call(const Expr& e) {
    const Expr& callee = *e.args[0];
    std::vector<Value> args = eval_args(e, 1);
    if (callee.kind == Expr::Kind::Attr) {  // method call: x.strip(), d.items(), ...
      return call_method(eval(*callee.args[0]), callee.name, args, e.line);
    }
    if (callee.kind != Expr::Kind::Name) fail(e.line, "only functions and methods can be called");
    const std::string& f = callee.name;
    if (f == "raise_exception") fail(e.line, args.empty() ? "raise_exception called" : to_str(args[0]));
    if (f == "namespace") {
      Value ns = Value::object();
      for (auto& [k, v] : eval_kwargs(e)) ns[k] = std::move(v);
      return ns;
    }
    if (f == "range") return range(args, e.line);
    if (f == "strftime_now") {
      if (args.size() != 1 || !args[0].is_string()) fail(e.line, "strftime_now takes one format string");
      const std::time_t now = std::time(nullptr);
      std::tm tm{};
      localtime_r(&now, &tm);
      char buf[256];
      const size_t n = std::strftime(buf, sizeof buf, args[0].get_ref<const std::string&>().c_str(), &tm);
      return std::string(buf, n);
    }
    fail(e.line, "unknown function '" + f + "'");
  }

  Value range(const std::vector<Value>& args, int line) {
    int64_t start = 0, stop = 0, step = 1;
    if (args.size() == 1) stop = as_int(args[0], line, "range()");
    else if (args.size() == 2 || args.size() == 3) {
      start = as_int(args[0], line, "range()");
      stop = as_int(args[1], line, "range()");
      if (args.size() == 3) step = as_int(args[2], line, "range()");
    } else {
      fail(line, "range() takes 1 to 3 arguments");
    }
    if (step == 0) fail(line, "range() step cannot be zero");
    Value out = Value::array();
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (++iterations_ > kMaxIterations) fail(line, "range() too long");
      out.push_back(i);
    }
    return out;
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value a = eval(*e.args[0]);
      return truthy(a) ? eval(*e.args[1]) : a;
    }
    if (op == "or") {
      Value a = eval(*e.args[0]);
      return truthy(a) ? a : eval(*e.args[1]);
    }
    const Value a = eval(*e.args[0]);
    const Value b = eval(*e.args[1]);
    if (op == "==") return equal(a, b);
    if (op == "!=") return !equal(a, b);
    if (op == "<") return less_than(a, b, e.line);
    if (op == ">") return less_than(b, a, e.line);
    if (op == "<=") return !less_than(b, a, e.line);
    if (op == ">=") return !less_than(a, b, e.line);
    if (op == "in") return contains(b, a, e.line);
    if (op == "not in") return !contains(b, a, e.line);
    if (op == "~") {
      std::string s = to_str(a) + to_str(b);
      if (s.size() > kMaxOutputBytes) fail(e.line, "string exceeds the size limit");
      return s;
    }
    if (op == "+") {
      if (a.is_string() && b.is_string()) {
        if (a.get_ref<const std::string&>().size() + b.get_ref<const std::string&>().size() > kMaxOutputBytes)
          fail(e.line, "string exceeds the size limit");
        return a.get<std::string>() + b.get<std::string>();
      }
      if (a.is_array() && b.is_array()) {
        Value l = a;
        for (const Value& x : b) l.push_back(x);
        return l;
      }
      if (a.is_string() || b.is_string())
        fail(e.line, std::string("cannot add ") + a.type_name() + " and " + b.type_name() + " (use ~ to join as text)");
    }
    if (op == "*" && a.is_string() && is_int(b)) {
      const int64_t n = b.get<int64_t>();
      std::string s;
      if (n > 0 && a.get_ref<const std::string&>().size() * static_cast<size_t>(n) > kMaxOutputBytes)
        fail(e.line, "string exceeds the size limit");
      for (int64_t i = 0; i < n; ++i) s += a.get_ref<const std::string&>();
      return s;
    }
    return arithmetic(op, a, b, e.line);
  }

  static Value arithmetic(const std::string& op, const Value& a, const Value& b, int line) {
    const bool ints = (is_int(a) || a.is_boolean()) && (is_int(b) || b.is_boolean());
    if (ints && op != "/" && op != "**") {
      const int64_t x = as_int(a, line, "operand"), y = as_int(b, line, "operand");
      if (op == "+") return x + y;
      if (op == "-") return x - y;
      if (op == "*") return x * y;
      if (y == 0) fail(line, "division by zero");
      // Python floors integer division and modulo toward negative infinity.
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        --q;
        r += y;
      }
      return op == "//" ? q : r;
    }
    const double x = as_number(a, line), y = as_number(b, line);
    if (op == "+") return x + y;
    if (op == "-") return x - y;
    if (op == "*") return x * y;
    if (op == "**") return std::pow(x, y);
    if (y == 0) fail(line, "division by zero");
    if (op == "/") return x / y;
    if (op == "//") return std::floor(x / y);
    return x - y * std::floor(x / y);
  }

  std::vector<std::unordered_map<std::string, Value>> scopes_;
  long iterations_ = 0;
  int depth_ = 0;
};

}  // namespace

Template::Template(std::string_view source) : root_(parse(source)) {}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const Value& context) const {
  if (!context.is_object()) throw TemplateError("template context must be an object");
  std::string out;
  Renderer(context).render(root_->body, out);
  return out;
}

}  // namespace llmserve::server::jinja
