#pragma once
#include <string>

namespace llmserve::cli {

// The model to use when the user gave none: a small random-weight model that
// llmserve writes on first use into the user's cache directory
// ($XDG_CACHE_HOME/llmserve, else ~/.cache/llmserve). Prints a note to
// stderr that its weights are random.
std::string resolve_model(const std::string& given);

}  // namespace llmserve::cli
