// Filters, tests, string/dict methods and Python-compatible conversions for
// the Jinja subset.
#include <charconv>
#include <cmath>
#include <cstdio>

#include "server/jinja_ast.h"

namespace llmserve::server::jinja {

void fail(int line, const std::string& message) {
  throw TemplateError("chat template line " + std::to_string(line) + ": " + message);
}

Value undefined() { return Value(Value::value_t::discarded); }
bool is_undefined(const Value& v) { return v.is_discarded(); }

bool truthy(const Value& v) {
  switch (v.type()) {
    case Value::value_t::boolean: return v.get<bool>();
    case Value::value_t::number_integer:
    case Value::value_t::number_unsigned: return v.get<int64_t>() != 0;
    case Value::value_t::number_float: return v.get<double>() != 0.0;
    case Value::value_t::string: return !v.get_ref<const std::string&>().empty();
    case Value::value_t::array:
    case Value::value_t::object: return !v.empty();
    default: return false;  // none, undefined
  }
}

namespace {

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string py_repr_string(const std::string& s) {
  const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    if (c == quote || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out + quote;
}

std::string repr(const Value& v) { return v.is_string() ? py_repr_string(v.get<std::string>()) : to_str(v); }

void json_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

// json.dumps layout: ", " and ": " without indent; newlines and indent
// spaces with one (and then "," and ": ").
void json_dump(const Value& v, int indent, int level, std::string& out) {
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * lvl), ' ');
  };
  const char* item_sep = indent < 0 ? ", " : ",";
  if (v.is_object()) {
    if (v.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      if (!first) out += item_sep;
      first = false;
      newline(level + 1);
      json_string(k, out);
      out += ": ";
      json_dump(x, indent, level + 1, out);
    }
    newline(level);
    out += '}';
  } else if (v.is_array()) {
    if (v.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    bool first = true;
    for (const Value& x : v) {
      if (!first) out += item_sep;
      first = false;
      newline(level + 1);
      json_dump(x, indent, level + 1, out);
    }
    newline(level);
    out += ']';
  } else if (v.is_string()) {
    json_string(v.get_ref<const std::string&>(), out);
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : float_repr(d);
  } else if (v.is_boolean()) {
    out += v.get<bool>() ? "true" : "false";
  } else if (v.is_number()) {
    out += v.dump();
  } else {
    out += "null";  // none and undefined
  }
}

const std::string& str_arg(const std::vector<Value>& args, size_t i, const char* fn, int line) {
  if (i >= args.size() || !args[i].is_string()) fail(line, std::string(fn) + ": expected a string argument");
  return args[i].get_ref<const std::string&>();
}

const std::string& self_str(const Value& v, const char* fn, int line) {
  if (!v.is_string()) fail(line, std::string(fn) + " applies to strings, got " + v.type_name());
  return v.get_ref<const std::string&>();
}

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  auto drop = [&](char c) {
    if (chars && chars->is_string()) return chars->get_ref<const std::string&>().find(c) != std::string::npos;
    return is_ws(c);
  };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && drop(s[b])) ++b;
  if (right)
    while (e > b && drop(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string map_chars(std::string s, int (*f)(int)) {
  for (char& c : s) c = static_cast<char>(f(static_cast<unsigned char>(c)));
  return s;
}

std::string title(std::string s) {
  bool start = true;
  for (char& c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
    start = !std::isalpha(u);
  }
  return s;
}

std::string capitalize(std::string s) {
  s = map_chars(std::move(s), [](int c) { return std::tolower(c); });
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
    if (out.size() > kMaxOutputBytes) throw TemplateError("chat template: replace() result too large");
  }
  out.append(s, pos);
  return out;
}

Value split(const std::string& s, const Value* sep) {
  Value out = Value::array();
  if (!sep || sep->is_null()) {  // runs of whitespace, no empty parts
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_ws(s[i])) ++i;
      const size_t b = i;
      while (i < s.size() && !is_ws(s[i])) ++i;
      if (i > b) out.push_back(s.substr(b, i - b));
    }
    return out;
  }
  const std::string& d = sep->get_ref<const std::string&>();
  if (d.empty()) throw TemplateError("chat template: split() separator is empty");
  size_t pos = 0;
  for (size_t hit; (hit = s.find(d, pos)) != std::string::npos; pos = hit + d.size()) out.push_back(s.substr(pos, hit - pos));
  out.push_back(s.substr(pos));
  return out;
}

Value items_of(const Value& v, int line) {
  if (!v.is_object()) fail(line, "items() applies to mappings");
  Value out = Value::array();
  for (const auto& [k, x] : v.items()) out.push_back(Value::array({k, x}));
  return out;
}

Value kwarg(const std::vector<std::pair<std::string, Value>>& kw, const std::string& name) {
  for (const auto& [k, v] : kw)
    if (k == name) return v;
  return undefined();
}

Value attribute_of(const Value& v, const std::string& path) {
  Value cur = v;
  size_t pos = 0;
  while (pos <= path.size()) {
    const size_t dot = path.find('.', pos);
    const std::string key = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (!cur.is_object() || !cur.contains(key)) return undefined();
    cur = Value(cur[key]);
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return cur;
}

// select / reject / selectattr / rejectattr
Value filter_seq(const Value& seq, bool keep_if, const Value* attr, const std::vector<Value>& args, size_t test_at, int line) {
  if (!seq.is_array()) fail(line, "select filters apply to lists");
  Value out = Value::array();
  for (const Value& item : seq) {
    const Value subject = attr ? attribute_of(item, attr->get<std::string>()) : item;
    bool ok;
    if (args.size() > test_at) {
      if (!args[test_at].is_string()) fail(line, "test name must be a string");
      const std::vector<Value> targs(args.begin() + static_cast<long>(test_at) + 1, args.end());
      ok = call_test(args[test_at].get<std::string>(), subject, targs, line);
    } else {
      ok = truthy(subject);
    }
    if (ok == keep_if) out.push_back(item);
  }
  return out;
}

}  // namespace

std::string to_str(const Value& v) {
  switch (v.type()) {
    case Value::value_t::string: return v.get<std::string>();
    case Value::value_t::boolean: return v.get<bool>() ? "True" : "False";
    case Value::value_t::null: return "None";
    case Value::value_t::discarded: return "";
    case Value::value_t::number_float: return float_repr(v.get<double>());
    case Value::value_t::array: {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + repr(v[i]);
      return s + "]";
    }
    case Value::value_t::object: {
      std::string s = "{";
      bool first = true;
      for (const auto& [k, x] : v.items()) {
        s += (first ? "" : ", ") + py_repr_string(k) + ": " + repr(x);
        first = false;
      }
      return s + "}";
    }
    default: return v.dump();
  }
}

std::string to_json(const Value& v, int indent) {
  std::string out;
  json_dump(v, indent, 0, out);
  return out;
}

Value call_filter(const std::string& name, Value in, std::vector<Value> args,
                  const std::vector<std::pair<std::string, Value>>& kwargs, int line) {
  auto arg = [&](size_t i, const char* key) -> Value {
    if (i < args.size()) return args[i];
    return kwarg(kwargs, key);
  };
  if (name == "default" || name == "d") {
    const Value fallback = arg(0, "default_value");
    const bool boolean = truthy(arg(1, "boolean"));
    if (is_undefined(in) || (boolean && !truthy(in))) return is_undefined(fallback) ? Value("") : fallback;
    return in;
  }
  if (is_undefined(in) && name != "length" && name != "count" && name != "string" && name != "tojson")
    fail(line, "filter '" + name + "' applied to an undefined value");
  if (name == "trim") {
    const Value chars = arg(0, "chars");
    return strip(self_str(in, "trim", line), is_undefined(chars) ? nullptr : &chars, true, true);
  }
  if (name == "upper") return map_chars(self_str(in, "upper", line), [](int c) { return std::toupper(c); });
  if (name == "lower") return map_chars(self_str(in, "lower", line), [](int c) { return std::tolower(c); });
  if (name == "capitalize") return capitalize(self_str(in, "capitalize", line));
  if (name == "title") return title(self_str(in, "title", line));
  if (name == "length" || name == "count") {
    if (in.is_string()) return static_cast<int64_t>(in.get_ref<const std::string&>().size());
    if (in.is_array() || in.is_object()) return static_cast<int64_t>(in.size());
    if (is_undefined(in)) return 0;
    fail(line, std::string("length of ") + in.type_name());
  }
  if (name == "tojson") {
    const Value indent = arg(0, "indent");
    return to_json(in, indent.is_number_integer() ? static_cast<int>(std::clamp<int64_t>(indent.get<int64_t>(), 0, 64)) : -1);
  }
  if (name == "string") return to_str(in);
  if (name == "safe") return in;
  if (name == "join") {
    if (!in.is_array()) fail(line, "join applies to lists");
    const Value sep = arg(0, "d");
    const Value attr = arg(1, "attribute");
    std::string out;
    for (size_t i = 0; i < in.size(); ++i) {
      if (i && sep.is_string()) out += sep.get_ref<const std::string&>();
      out += to_str(attr.is_string() ? attribute_of(in[i], attr.get<std::string>()) : in[i]);
      if (out.size() > kMaxOutputBytes) fail(line, "join result too large");
    }
    return out;
  }
  if (name == "first" || name == "last") {
    if (in.is_string()) {
      const auto& s = in.get_ref<const std::string&>();
      return s.empty() ? undefined() : Value(std::string(1, name == "first" ? s.front() : s.back()));
    }
    if (!in.is_array()) fail(line, name + " applies to lists and strings");
    return in.empty() ? undefined() : (name == "first" ? in.front() : in.back());
  }
  if (name == "list") {
    if (in.is_array()) return in;
    Value out = Value::array();
    if (in.is_string())
      for (char c : in.get_ref<const std::string&>()) out.push_back(std::string(1, c));
    else if (in.is_object())
      for (const auto& [k, x] : in.items()) out.push_back(k);
    else
      fail(line, std::string("list of ") + in.type_name());
    return out;
  }
  if (name == "reverse") {
    if (in.is_string()) return std::string(in.get<std::string>().rbegin(), in.get<std::string>().rend());
    if (!in.is_array()) fail(line, "reverse applies to lists and strings");
    Value out = Value::array();
    for (auto it = in.rbegin(); it != in.rend(); ++it) out.push_back(*it);
    return out;
  }
  if (name == "items") return items_of(in, line);
  if (name == "int") {
    if (in.is_number()) return static_cast<int64_t>(in.get<double>());
    if (in.is_string()) {
      int64_t v = 0;
      const auto& s = in.get_ref<const std::string&>();
      std::from_chars(s.data(), s.data() + s.size(), v);
      return v;
    }
    return 0;
  }
  if (name == "float") return in.is_number() ? in.get<double>() : 0.0;
  if (name == "abs") {
    if (in.is_number_integer()) return std::abs(in.get<int64_t>());
    if (in.is_number()) return std::fabs(in.get<double>());
    fail(line, "abs applies to numbers");
  }
  if (name == "replace") {
    return replace_all(self_str(in, "replace", line), str_arg(args, 0, "replace", line), str_arg(args, 1, "replace", line));
  }
  if (name == "select" || name == "reject") return filter_seq(in, name == "select", nullptr, args, 0, line);
  if (name == "selectattr" || name == "rejectattr") {
    if (args.empty() || !args[0].is_string()) fail(line, name + " needs an attribute name");
    return filter_seq(in, name == "selectattr", &args[0], args, 1, line);
  }
  if (name == "map") {
    if (!in.is_array()) fail(line, "map applies to lists");
    const Value attr = kwarg(kwargs, "attribute");
    Value out = Value::array();
    for (const Value& item : in) {
      if (attr.is_string()) out.push_back(attribute_of(item, attr.get<std::string>()));
      else if (!args.empty() && args[0].is_string())
        out.push_back(call_filter(args[0].get<std::string>(), item, std::vector<Value>(args.begin() + 1, args.end()), {}, line));
      else fail(line, "map needs a filter name or attribute=");
    }
    return out;
  }
  fail(line, "unknown filter '" + name + "'");
}

bool call_test(const std::string& name, const Value& v, const std::vector<Value>& args, int line) {
  if (name == "defined") return !is_undefined(v);
  if (name == "undefined") return is_undefined(v);
  if (name == "none") return v.is_null();
  if (name == "boolean") return v.is_boolean();
  if (name == "true") return v.is_boolean() && v.get<bool>();
  if (name == "false") return v.is_boolean() && !v.get<bool>();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_number_integer();
  if (name == "float") return v.is_number_float();
  if (name == "mapping") return v.is_object();
  if (name == "sequence" || name == "iterable") return v.is_array() || v.is_string() || v.is_object();
  if (name == "callable") return false;
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    for (char c : v.get_ref<const std::string&>())
      if (name == "lower" ? std::isupper(static_cast<unsigned char>(c)) : std::islower(static_cast<unsigned char>(c)))
        return false;
    return true;
  }
  if (name == "even" || name == "odd" || name == "divisibleby") {
    if (!v.is_number_integer()) fail(line, "'" + name + "' test needs an integer");
    const int64_t x = v.get<int64_t>();
    if (name == "even") return x % 2 == 0;
    if (name == "odd") return x % 2 != 0;
    if (args.empty() || !args[0].is_number_integer() || args[0].get<int64_t>() == 0) fail(line, "divisibleby needs a non-zero integer");
    return x % args[0].get<int64_t>() == 0;
  }
  if (args.size() != 1 && (name == "equalto" || name == "eq" || name == "==" || name == "ne" || name == "!=" ||
                           name == "sameas" || name == "in"))
    fail(line, "'" + name + "' test takes one argument");
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return !is_undefined(v) && v == args[0];
  if (name == "ne" || name == "!=") return !(v == args[0]);
  if (name == "in") {
    const Value& h = args[0];
    if (h.is_array()) return std::find(h.begin(), h.end(), v) != h.end();
    if (h.is_string() && v.is_string()) return h.get<std::string>().find(v.get<std::string>()) != std::string::npos;
    if (h.is_object() && v.is_string()) return h.contains(v.get<std::string>());
    return false;
  }
  fail(line, "unknown test '" + name + "'");
}

Value call_method(const Value& self, const std::string& name, const std::vector<Value>& args, int line) {
  const Value* a0 = args.empty() ? nullptr : &args[0];
  if (self.is_string()) {
    const std::string& s = self.get_ref<const std::string&>();
    if (name == "strip") return strip(s, a0, true, true);
    if (name == "lstrip") return strip(s, a0, true, false);
    if (name == "rstrip") return strip(s, a0, false, true);
    if (name == "upper") return map_chars(s, [](int c) { return std::toupper(c); });
    if (name == "lower") return map_chars(s, [](int c) { return std::tolower(c); });
    if (name == "title") return title(s);
    if (name == "capitalize") return capitalize(s);
    if (name == "startswith") return s.starts_with(str_arg(args, 0, "startswith", line));
    if (name == "endswith") return s.ends_with(str_arg(args, 0, "endswith", line));
    if (name == "split") return split(s, a0);
    if (name == "replace") return replace_all(s, str_arg(args, 0, "replace", line), str_arg(args, 1, "replace", line));
    if (name == "find") {
      const size_t p = s.find(str_arg(args, 0, "find", line));
      return p == std::string::npos ? int64_t{-1} : static_cast<int64_t>(p);
    }
    if (name == "join") {
      if (!a0 || !a0->is_array()) fail(line, "join() needs a list");
      std::string out;
      for (size_t i = 0; i < a0->size(); ++i) out += (i ? s : "") + to_str((*a0)[i]);
      return out;
    }
  } else if (self.is_object()) {
    if (name == "items") return items_of(self, line);
    if (name == "keys" || name == "values") {
      Value out = Value::array();
      for (const auto& [k, x] : self.items()) out.push_back(name == "keys" ? Value(k) : x);
      return out;
    }
    if (name == "get") {
      if (!a0 || !a0->is_string()) fail(line, "get() needs a string key");
      const auto it = self.find(a0->get<std::string>());
      if (it != self.end()) return *it;
      return args.size() > 1 ? args[1] : Value(nullptr);
    }
  }
  if (is_undefined(self)) fail(line, "cannot call '" + name + "' on an undefined value");
  fail(line, std::string("unknown method '") + name + "' of " + self.type_name());
}

}  // namespace llmserve::server::jinja
