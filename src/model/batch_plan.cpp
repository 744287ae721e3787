#include "model/batch_plan.h"

#include <string>

#include "core/error.h"

namespace llmserve::model {

namespace {

void check(std::span<const SeqBatch> batch, int max_rows, int bs, int n_blocks, int n_vocab) {
  size_t rows = 0;
  for (const SeqBatch& s : batch) {
    if (s.tokens.empty()) throw Error("a sequence in the batch has no tokens");
    rows += s.tokens.size();
    const size_t end = static_cast<size_t>(s.pos0) + s.tokens.size();
    const size_t block = static_cast<size_t>(bs);
    if (s.pos0 < 0 || s.block_table.size() * block < end)
      throw Error("a sequence's block table does not cover positions up to " + std::to_string(end));
    for (int32_t b : s.block_table.first((end + block - 1) / block))
      if (b < 0 || b >= n_blocks) throw Error("block id " + std::to_string(b) + " is outside the KV pool");
    for (int32_t t : s.tokens)
      if (t < 0 || t >= n_vocab) throw Error("token id " + std::to_string(t) + " is outside the vocabulary");
    if (s.prompt_tokens < 0 || static_cast<size_t>(s.prompt_tokens) > s.tokens.size())
      throw Error("a sequence's prompt_tokens " + std::to_string(s.prompt_tokens) + " is outside 0.." +
                  std::to_string(s.tokens.size()));
  }
  if (rows > static_cast<size_t>(max_rows))
    throw Error("the batch has " + std::to_string(rows) + " tokens, more than the runner's " + std::to_string(max_rows));
}

}  // namespace

void BatchPlan::build(std::span<const SeqBatch> batch, int max_rows, int bs, int n_blocks, int n_vocab) {
  check(batch, max_rows, bs, n_blocks, n_vocab);
  tokens.resize(static_cast<size_t>(max_rows));
  positions.resize(static_cast<size_t>(max_rows));
  slots.resize(static_cast<size_t>(max_rows));
  runs.clear();
  seq_rows_.clear();
  for (const SeqBatch& s : batch) seq_rows_.resize(seq_rows_.size() + s.tokens.size());
  int n = 0;
  for (int part = 0; part < 2; ++part) {  // the prompt tokens, then the generated ones
    size_t token0 = 0;                    // the sequence's first token in seq_rows_
    for (const SeqBatch& s : batch) {
      const int begin = part == 0 ? 0 : s.prompt_tokens;
      const int end = part == 0 ? s.prompt_tokens : static_cast<int>(s.tokens.size());
      // Prompt rows attend as one run; each generated row alone, as a
      // decode token does, so it gets plain decoding's bits also when
      // verified among draft tokens or recomputed after a preemption.
      if (part == 0 && begin < end) runs.push_back({n, end - begin, s.pos0 + begin, s.block_table.data()});
      for (int i = begin; i < end; ++i, ++n) {
        if (part == 1) runs.push_back({n, 1, s.pos0 + i, s.block_table.data()});
        const int pos = s.pos0 + i;
        tokens[n] = s.tokens[i];
        positions[n] = pos;
        slots[n] = s.block_table[pos / bs] * bs + pos % bs;
        seq_rows_[token0 + i] = n;
      }
      token0 += s.tokens.size();
    }
    if (part == 0) prompt_rows = n;
  }
  rows = n;
  output_rows.clear();
  summed_rows.clear();
  summed_ends.clear();
  size_t token0 = 0;
  for (const SeqBatch& s : batch) {
    for (size_t i = 0; i < s.tokens.size(); ++i)
      if (s.logits == Logits::SumHidden)
        summed_rows.push_back(seq_rows_[token0 + i]);
      else if (s.logits == Logits::All || (s.logits == Logits::Last && i + 1 == s.tokens.size()))
        output_rows.push_back(seq_rows_[token0 + i]);
    if (s.logits == Logits::SumHidden) summed_ends.push_back(static_cast<int32_t>(summed_rows.size()));
    token0 += s.tokens.size();
  }
}

}  // namespace llmserve::model
