#pragma once
// Reading the fields of a request body, shared by the endpoints' parsers:
// each problem throws ApiError(400) naming the field.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/openai_request.h"

namespace llmserve::server::fields {

[[noreturn]] void bad(const std::string& param, const std::string& message);
// nullptr when the field is absent or null.
const Json* field(const Json& body, const char* name);
std::optional<int64_t> integer(const Json& body, const char* name, int64_t lo, int64_t hi);
// An array of token ids (non-negative integers, at most limits.max_prompt_items).
std::vector<int32_t> token_ids(const Json& arr, const RequestLimits& limits, const std::string& param);

}  // namespace llmserve::server::fields
