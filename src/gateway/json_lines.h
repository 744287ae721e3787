#pragma once
// Labeled data sets as JSON lines: one object per line, blank lines skipped.
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace llmserve::gateway {

// Calls fn(object, where) for each non-blank line of the file at `path`,
// `where` being "PATH:LINE: " for the caller's errors. Throws Error when
// the file cannot be opened or a line is not a JSON object.
void for_each_json_line(const std::string& path,
                        const std::function<void(const nlohmann::json& object, const std::string& where)>& fn);

}  // namespace llmserve::gateway
