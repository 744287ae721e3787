#pragma once
// Batch planning: how a ragged batch of sequences becomes the rows of one
// forward pass. Prompt tokens of every sequence come first (the matmuls'
// prompt-path rows over f16/bf16 weights), then generated ones. A
// sequence's prompt rows attend as one run; each generated row as a run of
// its own, exactly as a decode token, seeing the KV of the rows before it.
#include <cstdint>
#include <span>
#include <vector>

namespace llmserve::model {

// SumHidden: no logits; the sum of every row's final hidden state (after the
// final norm), for pooled embeddings (LlamaGraph::summed()).
enum class Logits { None, Last, All, SumHidden };

struct SeqBatch {
  std::span<const int32_t> tokens;       // run at positions pos0, pos0 + 1, ...
  int pos0 = 0;
  std::span<const int32_t> block_table;  // must cover positions 0 .. pos0 + tokens.size() - 1
  Logits logits = Logits::Last;          // which rows' outputs (logits, hidden state) to return
  // How many of `tokens`, from the front, are the request's prompt rather
  // than tokens it generated. Over f16 and bf16 weights prompt tokens may
  // take the matmuls' prompt path (kernels/matmul.h: PromptPath), generated
  // ones always the f32 path: the path is a property of the token, so a
  // sequence gives the same bits in any batch and in any chunking of its
  // prompt. Quantized weights give the same bits on every path.
  int prompt_tokens = 0;
};

// One sequence's consecutive rows, attending through its block table.
struct AttentionRun {
  int row0;
  int n_tokens;
  int pos0;
  const int32_t* block_table;
};

struct BatchPlan {
  // Throws Error for a batch the pass cannot take: an empty sequence, a
  // block table that misses a position or leaves the pool, a token outside
  // the vocabulary, more than max_rows rows.
  void build(std::span<const SeqBatch> batch, int max_rows, int block_size, int n_blocks, int n_vocab);

  int rows = 0;                      // tokens in the pass
  int prompt_rows = 0;               // of those, the first ones on the prompt path
  std::vector<int32_t> tokens, positions, slots;  // per row; slot = block * block_size + offset
  std::vector<int32_t> output_rows;  // rows whose outputs are wanted, in batch order
  // The rows of the Logits::SumHidden sequences, grouped by sequence in batch
  // order: sequence j's are summed_rows[j ? summed_ends[j - 1] : 0 .. summed_ends[j]).
  std::vector<int32_t> summed_rows, summed_ends;
  std::vector<AttentionRun> runs;

 private:
  std::vector<int32_t> seq_rows_;  // the row of the batch's i-th token
};

}  // namespace llmserve::model
