#pragma once
// Access to ../shared/models for tests. Tests that need a model call
// REQUIRE_MODEL(path, "file.gguf"), which skips with a clear message when absent.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <system_error>

namespace llmserve::testing {

inline std::string model_path(const std::string& name) {
  return std::string(LLMSERVE_MODELS_DIR) + "/" + name;
}

// A path in the temp directory, unique to this test process.
inline std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("llmserve-test-" + std::to_string(getpid()) + "-" + name)).string();
}

// A file at temp_path(name), written by `write` and removed when this goes
// out of scope. As a function-local static (a model several tests share) it
// is removed when the test process exits, so runs leave no files behind.
class TempFile {
 public:
  TempFile(const std::string& name, const std::function<void(const std::string&)>& write) : path_(temp_path(name)) {
    write(path_);
  }
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace llmserve::testing

// Declares std::string `var` = path of the model, or skips the test.
#define REQUIRE_MODEL(var, name)                                                    \
  const std::string var = ::llmserve::testing::model_path(name);                   \
  if (!std::filesystem::exists(var))                                                \
  GTEST_SKIP() << "test model " << var << " not found (../shared/models is absent)"
