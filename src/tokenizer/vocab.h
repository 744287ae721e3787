#pragma once
// The tokenizer-relevant part of a model file, read from GGUF metadata
// (tokenizer.ggml.*) or built in memory (tests, other formats). Tokenizer
// construction checks it, so both routes give the same clear errors.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmserve::gguf {
class File;
}

namespace llmserve::tok {

using Token = int32_t;

// Values as stored in tokenizer.ggml.token_type.
enum class TokenType : int32_t {
  NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6,
};

enum class ModelKind {
  SPM,       // tokenizer.ggml.model = "llama": SentencePiece BPE over scores
  BYTE_BPE,  // tokenizer.ggml.model = "gpt2": byte-level BPE over merge ranks
};

// GGUF keys, also used to name the field at fault in errors.
namespace keys {
inline constexpr std::string_view kModel = "tokenizer.ggml.model";
inline constexpr std::string_view kPre = "tokenizer.ggml.pre";
inline constexpr std::string_view kTokens = "tokenizer.ggml.tokens";
inline constexpr std::string_view kScores = "tokenizer.ggml.scores";
inline constexpr std::string_view kTokenType = "tokenizer.ggml.token_type";
inline constexpr std::string_view kMerges = "tokenizer.ggml.merges";
inline constexpr std::string_view kBos = "tokenizer.ggml.bos_token_id";
inline constexpr std::string_view kEos = "tokenizer.ggml.eos_token_id";
inline constexpr std::string_view kUnk = "tokenizer.ggml.unknown_token_id";
inline constexpr std::string_view kEot = "tokenizer.ggml.eot_token_id";
inline constexpr std::string_view kEom = "tokenizer.ggml.eom_token_id";
inline constexpr std::string_view kAddBos = "tokenizer.ggml.add_bos_token";
inline constexpr std::string_view kAddSpacePrefix = "tokenizer.ggml.add_space_prefix";
}  // namespace keys

struct Vocab {
  std::string source;  // file name (or a description) for error messages
  ModelKind kind = ModelKind::SPM;
  std::vector<std::string> texts;   // token id -> vocab string as stored
  std::vector<float> scores;        // SPM merge priority per token; empty = all 0
  std::vector<TokenType> types;     // empty = all NORMAL
  std::vector<std::string> merges;  // BYTE_BPE: "left right", rank = index
  std::string pre;                  // BYTE_BPE pre-tokenizer name; empty = default
  Token bos = -1, eos = -1, unk = -1, eot = -1, eom = -1;  // -1 = none
  bool add_bos = false;
  bool add_space_prefix = false;  // SPM: prepend U+2581 to the text
};

// Reads tokenizer.ggml.* with the defaults of the model kind (llama: add_bos
// when there is a BOS id, add_space_prefix true; gpt2: both false). Ids stored
// as -1 or UINT32_MAX mean "none". Throws Error naming the file and the key
// for a missing key, a wrong type or an unknown model, then runs check_vocab.
Vocab read_vocab(const gguf::File& file);

// Throws Error("<source>: <key>: <problem>") for mismatched array lengths,
// ids out of range, empty vocabularies and malformed merges.
void check_vocab(const Vocab& vocab);

}  // namespace llmserve::tok
