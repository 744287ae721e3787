#pragma once
// The subset of Jinja2 that chat templates (tokenizer.chat_template in GGUF
// files, from Hugging Face tokenizer_config.json) use, rendered the way
// transformers' apply_chat_template renders them: trim_blocks and
// lstrip_blocks on, undefined values print as "".
//
// Covered: {{ }}, {% %}, {# #}, whitespace control (-), if/elif/else,
// for (loop.index/index0/first/last/length, "for x in xs if cond", else,
// tuple targets), set (names, ns.attr, {% set x %}...{% endset %}),
// literals, list/dict literals, attribute and index access, slicing,
// arithmetic, ~ and +, comparisons, in / not in, and / or / not,
// a if c else b, "is" tests, the common filters and string/dict methods,
// and the globals raise_exception, namespace, range and strftime_now.
//
// A template from a model file is not trusted: parsing and rendering are
// bounded (nesting depth, loop iterations, output size) and every problem
// throws TemplateError naming the line.
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace llmserve::server::jinja {

// Values are JSON values whose objects keep insertion order, as Python
// dicts do; "undefined" is the discarded value.
using Value = nlohmann::ordered_json;

class TemplateError : public Error {
 public:
  using Error::Error;
};

struct Node;

class Template {
 public:
  explicit Template(std::string_view source);  // throws TemplateError
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // `context` is an object of global variables. Throws TemplateError,
  // including for raise_exception() called by the template.
  std::string render(const Value& context) const;

 private:
  std::unique_ptr<Node> root_;
};

}  // namespace llmserve::server::jinja
