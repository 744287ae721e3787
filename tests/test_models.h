#pragma once
// Access to ../shared/models for tests. Tests that need a model call
// REQUIRE_MODEL(path, "file.gguf"), which skips with a clear message when absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "temp_file.h"  // temp_path, TempFile, TempDir: tests that write models use them

namespace llmserve::testing {

inline std::string model_path(const std::string& name) {
  return std::string(LLMSERVE_MODELS_DIR) + "/" + name;
}

}  // namespace llmserve::testing

// Declares std::string `var` = path of the model, or skips the test.
#define REQUIRE_MODEL(var, name)                                                    \
  const std::string var = ::llmserve::testing::model_path(name);                   \
  if (!std::filesystem::exists(var))                                                \
  GTEST_SKIP() << "test model " << var << " not found (../shared/models is absent)"
