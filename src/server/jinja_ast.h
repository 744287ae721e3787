#pragma once
// The parsed form of a template (internal to jinja*.cpp).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/jinja.h"

namespace llmserve::server::jinja {

// Bounds that keep a hostile template from exhausting the stack or memory.
inline constexpr int kMaxNesting = 256;              // parser recursion, statements and expressions
inline constexpr size_t kMaxOutputBytes = 16u << 20;  // rendered text
inline constexpr long kMaxIterations = 1'000'000;     // loop bodies run, all loops together

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,      // value
    Name,         // name
    List,         // args: items
    Dict,         // args: key, value, key, value, ...
    Attr,         // args[0].name
    Index,        // args[0][args[1]]
    Slice,        // args[0][args[1]:args[2]:args[3]], missing parts null
    Call,         // args[0](args[1..], kwargs)
    Filter,       // args[0] | name(args[1..], kwargs)
    Test,         // args[0] is [not] name(args[1..])
    Unary,        // name in {"not", "-", "+"}, args[0]
    Binary,       // args[0] name args[1]
    Conditional,  // args[0] if args[1] else args[2] (args[2] may be null)
  };
  Kind kind = Kind::Literal;
  int line = 0;
  std::string name;
  Value value;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // Test: "is not"
};

using NodeList = std::vector<std::unique_ptr<Node>>;

struct Node {
  enum class Kind { Root, Text, Output, If, For, Set, SetBlock };
  Kind kind = Kind::Root;
  int line = 0;
  std::string text;                                // Text
  ExprPtr expr;                                    // Output, Set value, For iterable
  std::vector<std::pair<ExprPtr, NodeList>> branches;  // If: condition (null for else), body
  std::vector<std::string> targets;                // For / Set / SetBlock: names
  std::string attr;                                // Set: targets[0].attr = value when not empty
  ExprPtr filter;                                  // For: "if" condition, may be null
  NodeList body;                                   // Root, For, SetBlock
  NodeList else_body;                              // For: when the sequence is empty
};

// jinja_parse.cpp
std::unique_ptr<Node> parse(std::string_view source);

// jinja_builtins.cpp: helpers the evaluator shares with the filters.
Value undefined();
bool is_undefined(const Value& v);
bool truthy(const Value& v);
std::string to_str(const Value& v);     // Python str()
std::string to_json(const Value& v, int indent);  // Python json.dumps(ensure_ascii=False)
Value call_filter(const std::string& name, Value input, std::vector<Value> args,
                  const std::vector<std::pair<std::string, Value>>& kwargs, int line);
bool call_test(const std::string& name, const Value& input, const std::vector<Value>& args, int line);
Value call_method(const Value& self, const std::string& name, const std::vector<Value>& args, int line);
[[noreturn]] void fail(int line, const std::string& message);

}  // namespace llmserve::server::jinja
