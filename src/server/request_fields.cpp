#include "server/request_fields.h"

#include "server/api_error.h"

namespace llmserve::server::fields {

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError(400, message, "invalid_request_error", param);
}

const Json* field(const Json& body, const char* name) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<int64_t> integer(const Json& body, const char* name, int64_t lo, int64_t hi) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) bad(name, std::string("'") + name + "' must be an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    bad(name, std::string("'") + name + "' is out of range");
  const int64_t i = v->get<int64_t>();
  if (i < lo || i > hi)
    bad(name, std::string("'") + name + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                  ", got " + std::to_string(i));
  return i;
}

std::vector<int32_t> token_ids(const Json& arr, const RequestLimits& limits, const std::string& param) {
  if (arr.size() > limits.max_prompt_items)
    bad(param, "'" + param + "' holds more than " + std::to_string(limits.max_prompt_items) + " token ids");
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (const Json& t : arr) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
      bad(param, "'" + param + "' must hold token ids (non-negative integers)");
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

}  // namespace llmserve::server::fields
