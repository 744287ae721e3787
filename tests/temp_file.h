#pragma once
// Temporary files and folders for tests, removed when they go out of scope:
// also when a failed ASSERT returns early or an exception leaves the test.
// As a function-local static (a model several tests share) a TempFile is
// removed when the test process exits.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <system_error>

namespace llmserve::testing {

// A path in the temp directory, unique to this test process. A '/' in
// `name` (parameterized test names have one) becomes '_'.
inline std::string temp_path(std::string name) {
  std::replace(name.begin(), name.end(), '/', '_');
  return (std::filesystem::temp_directory_path() / ("llmserve-test-" + std::to_string(getpid()) + "-" + name)).string();
}

// The file at temp_path(name), removed (if it exists) on destruction. With
// `write`, the constructor creates it: write(path()); should that throw,
// whatever it left is removed before the exception goes on.
class TempFile {
 public:
  explicit TempFile(const std::string& name) : path_(temp_path(name)) {}
  TempFile(const std::string& name, const std::function<void(const std::string&)>& write) : TempFile(name) {
    try {
      write(path_);
    } catch (...) {
      remove();
      throw;
    }
  }
  ~TempFile() { remove(); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  void remove() const {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  std::string path_;
};

// An empty folder at temp_path(name), created by the constructor (anything
// already there is removed first) and removed with its contents on
// destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& name) : path_(temp_path(name)) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // The path of `name` inside the folder.
  std::string file(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }

 private:
  std::string path_;
};

}  // namespace llmserve::testing
