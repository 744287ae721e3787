#include "gateway/route_features.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

namespace llmserve::gateway {

namespace {

constexpr std::array<std::string_view, 24> kCodeWords = {
    "def",   "return", "function", "class",  "int",    "void",   "import", "include", "print",  "const",   "let",     "lambda",
    "code",  "python", "javascript", "rust", "sql",    "regex",  "bug",    "compile", "array",  "pointer", "recursion", "api"};
constexpr std::array<std::string_view, 22> kMathWords = {
    "solve", "equation", "integral", "derivative", "prove", "probability", "sum", "product", "percent", "average", "calculate",
    "compute", "ratio", "prime", "matrix", "theorem", "factor", "divisible", "remainder", "interest", "speed", "area"};
constexpr std::array<std::string_view, 16> kReasoningWords = {
    "why", "how", "explain", "compare", "step", "steps", "analyze", "derive", "design", "tradeoffs", "reason", "evaluate",
    "justify", "implement", "optimize", "difference"};

template <size_t N>
bool among(const std::array<std::string_view, N>& words, std::string_view w) {
  return std::find(words.begin(), words.end(), w) != words.end();
}

bool code_char(char c) { return std::string_view("{}[]();=<>_#\\|&").find(c) != std::string_view::npos; }
bool math_char(char c) { return std::string_view("+-*/^=%").find(c) != std::string_view::npos; }

}  // namespace

const std::array<std::string_view, kRouteFeatureCount> kRouteFeatureNames = {
    "log_prompt_tokens", "log_turns", "code_chars", "code_words", "math_chars", "math_words",
    "digits", "reasoning_words", "log_max_tokens", "entropy", "margin"};

RouteFeatures route_features(const RouteRequest& r) {
  size_t code = 0, math = 0, digits = 0;
  int code_words = 0, math_words = 0, reasoning_words = 0;
  std::string word;
  auto end_word = [&] {
    if (word.empty()) return;
    code_words += among(kCodeWords, word);
    math_words += among(kMathWords, word);
    reasoning_words += among(kReasoningWords, word);
    word.clear();
  };
  for (const char c : r.text) {
    code += code_char(c);
    math += math_char(c);
    digits += std::isdigit(static_cast<unsigned char>(c)) != 0;
    if (std::isalpha(static_cast<unsigned char>(c))) word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else end_word();
  }
  end_word();
  const double chars = static_cast<double>(std::max<size_t>(1, r.text.size()));
  return {std::log1p(std::max(0, r.prompt_tokens)),
          std::log(std::max(1, r.turns)),
          code / chars,
          std::log1p(code_words),
          math / chars,
          std::log1p(math_words),
          digits / chars,
          std::log1p(reasoning_words),
          std::log1p(std::max(0, r.max_tokens)),
          r.entropy,
          r.margin};
}

}  // namespace llmserve::gateway
