#pragma once
// Checks for numeric flags: a value that cannot work is refused while the
// command line is parsed, in one line naming the flag ("--max-seqs: must be
// at least 1, not 0"), before anything is loaded or started.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>

namespace llmserve::cli {

namespace detail {
inline std::string number(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%g", v);
  return s;
}
}  // namespace detail

// lo <= value <= hi; `why` explains the bound in the message.
inline CLI::Validator in_range(double lo, double hi, const std::string& why = "") {
  const std::string bounds = "between " + detail::number(lo) + " and " + detail::number(hi) + why;
  return CLI::Validator(
      [lo, hi, bounds](std::string& value) {
        double v = 0;
        if (CLI::detail::lexical_cast(value, v) && v >= lo && v <= hi) return std::string();
        return "must be " + bounds + ", not " + value;
      },
      "[" + detail::number(lo) + ", " + detail::number(hi) + "]");
}

inline CLI::Validator at_least(double lo) {
  return CLI::Validator(
      [lo](std::string& value) {
        double v = 0;
        if (CLI::detail::lexical_cast(value, v) && v >= lo) return std::string();
        return "must be at least " + detail::number(lo) + ", not " + value;
      },
      ">= " + detail::number(lo));
}

inline CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& value) {
        double v = 0;
        if (CLI::detail::lexical_cast(value, v) && v > 0) return std::string();
        return "must be greater than 0, not " + value;
      },
      "> 0");
}

// A thread count from `lo` to 4 per hardware thread: more only adds
// switching (and -t 1000 would start a thousand threads).
inline CLI::Validator thread_count(int lo) {
  const int hw = std::max(1u, std::thread::hardware_concurrency());
  return in_range(lo, 4.0 * hw, " (4 per hardware thread; this machine has " + std::to_string(hw) + ")");
}

}  // namespace llmserve::cli
