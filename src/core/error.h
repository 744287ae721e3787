#pragma once
// The one error type that crosses module boundaries. Its message is meant for
// a user: it names the thing that is wrong (a file, a key, a field) and why.
// Only cli/ (and later server/) decide what an error means for the process.
#include <stdexcept>
#include <string>

namespace llmserve {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace llmserve
