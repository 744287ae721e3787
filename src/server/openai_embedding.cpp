#include "server/openai_embedding.h"

#include <bit>
#include <charconv>

#include "server/request_fields.h"

namespace llmserve::server {

namespace {

using fields::bad;
using fields::field;

constexpr const char* kInputShapes =
    "'input' must be a string, an array of strings, an array of token ids, or an array of arrays of token ids";

EmbeddingInput text_input(const Json& s, const std::string& param) {
  if (s.get_ref<const std::string&>().empty()) bad("input", "'" + param + "' is an empty string");
  return {s.get<std::string>(), {}, false};
}

EmbeddingInput token_input(const Json& a, const RequestLimits& limits, const std::string& param) {
  if (a.empty()) bad("input", "'" + param + "' is an empty list of token ids");
  return {{}, fields::token_ids(a, limits, "input"), true};
}

std::vector<EmbeddingInput> parse_inputs(const Json& body, const RequestLimits& limits) {
  const Json* in = field(body, "input");
  if (!in) bad("input", "'input' is required");
  if (in->is_string()) return {text_input(*in, "input")};
  if (!in->is_array()) bad("input", kInputShapes);
  if (in->empty()) bad("input", "'input' must not be empty");
  if ((*in)[0].is_number()) return {token_input(*in, limits, "input")};
  if (in->size() > limits.max_embedding_inputs)
    bad("input", "'input' holds more than " + std::to_string(limits.max_embedding_inputs) + " inputs");
  std::vector<EmbeddingInput> inputs;
  const bool texts = (*in)[0].is_string();
  for (size_t i = 0; i < in->size(); ++i) {
    const Json& item = (*in)[i];
    const std::string param = "input[" + std::to_string(i) + "]";
    if (texts && item.is_string())
      inputs.push_back(text_input(item, param));
    else if (!texts && item.is_array())
      inputs.push_back(token_input(item, limits, param));
    else
      bad("input", std::string(kInputShapes) + "; '" + param + "' breaks the shape");
  }
  return inputs;
}

// The double nearest the float's shortest decimal: JSON shows that decimal,
// which reads back as the same float.
double shortest(float f) {
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, f).ptr;
  double d = 0;
  std::from_chars(buf, end, d);
  return d;
}

}  // namespace

EmbeddingRequest parse_embedding_request(const Json& body, const RequestLimits& limits) {
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  EmbeddingRequest r;
  if (const Json* m = field(body, "model")) {
    if (!m->is_string()) bad("model", "'model' must be a string");
    r.model = m->get<std::string>();
  }
  r.inputs = parse_inputs(body, limits);
  if (const Json* e = field(body, "encoding_format")) {
    if (*e == "float")
      r.encoding = EmbeddingEncoding::Float;
    else if (*e == "base64")
      r.encoding = EmbeddingEncoding::Base64;
    else
      bad("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
  }
  if (auto d = fields::integer(body, "dimensions", 1, 1 << 20)) r.dimensions = static_cast<int>(*d);
  return r;
}

std::string base64_floats(std::span<const float> v) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes;
  bytes.reserve(v.size() * 4);
  for (float f : v)
    for (int shift = 0; shift < 32; shift += 8) bytes += static_cast<char>(std::bit_cast<uint32_t>(f) >> shift & 0xff);
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = 0;
    for (size_t k = 0; k < 3; ++k) chunk = chunk << 8 | (k < n ? static_cast<uint8_t>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[chunk >> (18 - 6 * k) & 63] : '=';
  }
  return out;
}

Json embedding_response(const std::vector<std::vector<float>>& vectors, EmbeddingEncoding encoding,
                        const std::string& model, int prompt_tokens) {
  Json data = Json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    Json values;
    if (encoding == EmbeddingEncoding::Base64) {
      values = base64_floats(vectors[i]);
    } else {
      values = Json::array();
      for (float f : vectors[i]) values.push_back(shortest(f));
    }
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(values)}});
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

}  // namespace llmserve::server
