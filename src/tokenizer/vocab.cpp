#include "tokenizer/vocab.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "core/error.h"
#include "gguf/file.h"

namespace llmserve::tok {
namespace {

std::string str(std::string_view s) { return std::string(s); }

// gguf::Value accessors name the key but not the file; add it.
template <class F>
decltype(auto) with_file(const gguf::File& file, F&& read) {
  try {
    return read();
  } catch (const Error& e) {
    throw Error(file.path() + ": " + e.what());
  }
}

const gguf::Array& read_array(const gguf::File& file, std::string_view key) {
  const gguf::Value& v = file.require(key);
  return with_file(file, [&]() -> const gguf::Array& { return v.as_array(key); });
}

std::vector<std::string> read_strings(const gguf::File& file, std::string_view key) {
  const gguf::Array& arr = read_array(file, key);
  std::vector<std::string> out;
  out.reserve(arr.items.size());
  with_file(file, [&] {
    for (const gguf::Value& item : arr.items) out.push_back(item.as_string(key));
  });
  return out;
}

Token read_id(const gguf::File& file, std::string_view key) {
  const gguf::Value* v = file.find(key);
  if (v == nullptr) return -1;
  const int64_t id = with_file(file, [&] { return v->as_int(key); });
  // Converters write "no such token" as -1 or as UINT32_MAX.
  if (id == -1 || id == std::numeric_limits<uint32_t>::max()) return -1;
  if (id < 0 || id > std::numeric_limits<Token>::max()) {
    throw Error(file.path() + ": " + str(key) + ": token id " + std::to_string(id) + " is out of range");
  }
  return static_cast<Token>(id);
}

bool read_bool(const gguf::File& file, std::string_view key, bool fallback) {
  const gguf::Value* v = file.find(key);
  if (v == nullptr) return fallback;
  return with_file(file, [&] { return v->as_bool(key); });
}

void check_id(const Vocab& v, Token id, std::string_view key) {
  if (id == -1) return;
  if (id < 0 || static_cast<size_t>(id) >= v.texts.size()) {
    throw Error(v.source + ": " + str(key) + ": token id " + std::to_string(id) +
                " is out of range (the vocabulary has " + std::to_string(v.texts.size()) + " tokens)");
  }
}

void check_length(const Vocab& v, size_t n, std::string_view key) {
  if (n != 0 && n != v.texts.size()) {
    throw Error(v.source + ": " + str(key) + ": has " + std::to_string(n) + " entries but " +
                str(keys::kTokens) + " has " + std::to_string(v.texts.size()));
  }
}

}  // namespace

Vocab read_vocab(const gguf::File& file) {
  Vocab v;
  v.source = file.path();
  const gguf::Value& model_value = file.require(keys::kModel);
  const std::string model = with_file(file, [&] { return model_value.as_string(keys::kModel); });
  if (model == "llama") {
    v.kind = ModelKind::SPM;
  } else if (model == "gpt2") {
    v.kind = ModelKind::BYTE_BPE;
  } else {
    throw Error(file.path() + ": " + str(keys::kModel) + ": unsupported tokenizer model '" + model +
                "' (supported: llama, gpt2)");
  }
  const bool spm = v.kind == ModelKind::SPM;

  v.texts = read_strings(file, keys::kTokens);
  // SentencePiece merges are driven by scores, so they are required there;
  // byte-level BPE ranks come from the merges instead.
  if (spm || file.has(keys::kScores)) {
    const gguf::Array& arr = read_array(file, keys::kScores);
    v.scores.reserve(arr.items.size());
    with_file(file, [&] {
      for (const gguf::Value& item : arr.items) v.scores.push_back(static_cast<float>(item.as_float(keys::kScores)));
    });
  }
  if (file.has(keys::kTokenType)) {
    const gguf::Array& arr = read_array(file, keys::kTokenType);
    v.types.reserve(arr.items.size());
    with_file(file, [&] {
      for (const gguf::Value& item : arr.items) {
        // Kept as read (clamped to int32) so that check_vocab can report a bad value.
        const int64_t t = std::clamp<int64_t>(item.as_int(keys::kTokenType),
                                              std::numeric_limits<int32_t>::min(),
                                              std::numeric_limits<int32_t>::max());
        v.types.push_back(static_cast<TokenType>(t));
      }
    });
  }
  if (!spm) {
    v.merges = read_strings(file, keys::kMerges);
    if (const gguf::Value* pre = file.find(keys::kPre)) {
      v.pre = with_file(file, [&] { return pre->as_string(keys::kPre); });
    }
  }

  v.bos = read_id(file, keys::kBos);
  v.eos = read_id(file, keys::kEos);
  v.unk = read_id(file, keys::kUnk);
  v.eot = read_id(file, keys::kEot);
  v.eom = read_id(file, keys::kEom);
  // SentencePiece models are trained with BOS and a dummy prefix; GPT-2-style ones without.
  v.add_bos = read_bool(file, keys::kAddBos, spm && v.bos != -1);
  v.add_space_prefix = spm && read_bool(file, keys::kAddSpacePrefix, true);
  check_vocab(v);
  return v;
}

void check_vocab(const Vocab& v) {
  if (v.texts.empty()) throw Error(v.source + ": " + str(keys::kTokens) + ": the vocabulary is empty");
  if (v.texts.size() > static_cast<size_t>(std::numeric_limits<Token>::max())) {
    throw Error(v.source + ": " + str(keys::kTokens) + ": too many tokens");
  }
  check_length(v, v.scores.size(), keys::kScores);
  check_length(v, v.types.size(), keys::kTokenType);
  for (size_t i = 0; i < v.types.size(); ++i) {
    const auto t = static_cast<int32_t>(v.types[i]);
    if (t < 1 || t > 6) {
      throw Error(v.source + ": " + str(keys::kTokenType) + ": token " + std::to_string(i) +
                  " has type " + std::to_string(t) + " (expected 1..6)");
    }
  }
  check_id(v, v.bos, keys::kBos);
  check_id(v, v.eos, keys::kEos);
  check_id(v, v.unk, keys::kUnk);
  check_id(v, v.eot, keys::kEot);
  check_id(v, v.eom, keys::kEom);
  if (v.add_bos && v.bos == -1) {
    throw Error(v.source + ": " + str(keys::kAddBos) + ": is true but there is no " + str(keys::kBos));
  }
  for (size_t i = 0; i < v.merges.size(); ++i) {
    const std::string& m = v.merges[i];
    const size_t space = m.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == m.size()) {
      throw Error(v.source + ": " + str(keys::kMerges) + ": entry " + std::to_string(i) + " '" + m +
                  "' is not two tokens separated by a space");
    }
  }
}

}  // namespace llmserve::tok
