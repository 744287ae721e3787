#include "cli/default_model.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "model/synthetic.h"

namespace llmserve::cli {

namespace {

std::filesystem::path cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "llmserve";
  if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "llmserve";
  return std::filesystem::temp_directory_path() / "llmserve-cache";
}

}  // namespace

std::string resolve_model(const std::string& given) {
  if (!given.empty()) return given;
  const std::filesystem::path dir = cache_dir();
  // The name carries the generator's settings, so a change to them makes a new file.
  const std::filesystem::path path = dir / "default-tiny-q8_0-seed0.gguf";
  std::error_code ec;
  if (!std::filesystem::exists(path)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) throw Error("cannot create cache directory " + dir.string() + ": " + ec.message());
    model::SyntheticSpec spec;
    spec.shape = *model::find_shape("tiny");
    spec.type = gguf::TensorType::Q8_0;
    spec.seed = 0;
    model::write_synthetic_model(spec, path.string());
    std::fprintf(stderr, "llmserve: created the built-in default model at %s\n", path.c_str());
  }
  std::fprintf(stderr,
               "llmserve: no model given (-m), using the built-in default model %s.\n"
               "llmserve: its weights are RANDOM, so its output is gibberish; pass -m MODEL.gguf for a real model.\n",
               path.c_str());
  return path.string();
}

}  // namespace llmserve::cli
