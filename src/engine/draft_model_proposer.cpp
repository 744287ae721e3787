#include "engine/draft_model_proposer.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "core/error.h"

namespace llmserve::engine {

DraftModelProposer::DraftModelProposer(model::Instance& draft) : draft_(draft) {
  for (int b = draft.info().kv_blocks - 1; b >= 0; --b) free_.push_back(b);
}

void DraftModelProposer::release(SeqId id) {
  const auto it = kept_.find(id);
  if (it == kept_.end()) return;
  free_.insert(free_.end(), it->second.blocks.begin(), it->second.blocks.end());
  kept_.erase(it);
}

// Blocks for positions [0, positions); false (taking none) when the pool is short.
bool DraftModelProposer::reserve(Kept& kept, int positions) {
  const int bs = draft_.info().block_size;
  const size_t need = static_cast<size_t>((positions + bs - 1) / bs);
  if (need <= kept.blocks.size()) return true;
  if (need - kept.blocks.size() > free_.size()) return false;
  while (kept.blocks.size() < need) {
    kept.blocks.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

// Computes every token but the last of each sequence that the draft's KV
// does not hold yet, in passes of at most max_batch_tokens rows.
void DraftModelProposer::catch_up(std::span<Kept* const> seqs, std::span<const DraftRequest* const> requests) {
  const int max_rows = draft_.info().max_batch_tokens;
  size_t i = 0;
  int done_in_seq = 0;  // of seqs[i]'s pending tokens, already in a pass
  while (i < seqs.size()) {
    batch_.clear();
    int rows = 0;
    while (i < seqs.size() && rows < max_rows) {
      Kept& k = *seqs[i];
      const auto tokens = requests[i]->tokens;
      const int from = static_cast<int>(k.tokens.size()) + done_in_seq, to = static_cast<int>(tokens.size()) - 1;
      const int n = std::min(to - from, max_rows - rows);
      if (n > 0) {
        batch_.push_back({tokens.subspan(static_cast<size_t>(from), static_cast<size_t>(n)), from, k.blocks,
                          model::Logits::None, 0});
        rows += n;
      }
      if (from + std::max(n, 0) >= to) {
        ++i;
        done_in_seq = 0;
      } else {
        done_in_seq += n;
      }
    }
    if (!batch_.empty()) draft_.forward(batch_);
  }
  for (size_t s = 0; s < seqs.size(); ++s) {
    const auto tokens = requests[s]->tokens;
    seqs[s]->tokens.assign(tokens.begin(), tokens.end() - 1);
  }
}

void DraftModelProposer::propose(std::span<const DraftRequest> requests) {
  const model::InstanceInfo& info = draft_.info();
  active_.clear();
  active_requests_.clear();
  int passes = 0;
  for (const DraftRequest& r : requests) {
    r.out->tokens.clear();
    r.out->q.clear();
    Kept& k = kept_[r.id];
    // Keep the longest common prefix, but run the last token again: its
    // logits give the first guess.
    const size_t limit = std::min(k.tokens.size(), r.tokens.size() - 1);
    size_t common = 0;
    while (common < limit && k.tokens[common] == r.tokens[common]) ++common;
    k.tokens.resize(common);
    const int k_max = std::min(r.k, info.max_context - static_cast<int>(r.tokens.size()));
    if (k_max <= 0 || !reserve(k, static_cast<int>(r.tokens.size()) + k_max - 1)) continue;
    active_.push_back(&k);
    active_requests_.push_back(&r);
    passes = std::max(passes, k_max);
  }
  const auto t0 = std::chrono::steady_clock::now();
  catch_up(active_, active_requests_);
  catch_up_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  next_.resize(active_.size());
  for (int pass = 0; pass < passes; ++pass) {
    in_pass_.clear();
    for (size_t s = 0; s < active_.size(); ++s) {
      const DraftRequest& r = *active_requests_[s];
      if (pass < std::min(r.k, info.max_context - static_cast<int>(r.tokens.size()))) in_pass_.push_back(s);
    }
    // One row per sequence, in forward passes of at most max_batch_tokens rows.
    for (size_t first = 0; first < in_pass_.size(); first += static_cast<size_t>(info.max_batch_tokens))
      draft_one(pass, std::span(in_pass_).subspan(first).first(
                          std::min(in_pass_.size() - first, static_cast<size_t>(info.max_batch_tokens))));
  }
}

// Draws the pass-th guess of each of the sequences active_[seqs[j]].
void DraftModelProposer::draft_one(int pass, std::span<const size_t> seqs) {
  const size_t vocab = static_cast<size_t>(draft_.info().n_vocab);
  batch_.clear();
  for (const size_t s : seqs) {
    const DraftRequest& r = *active_requests_[s];
    next_[s] = pass == 0 ? r.tokens.back() : r.out->tokens.back();
    const int pos = static_cast<int>(r.tokens.size()) - 1 + pass;
    batch_.push_back({std::span(&next_[s], 1), pos, active_[s]->blocks, model::Logits::Last, 0});
  }
  const std::span<float> logits = draft_.forward(batch_);
  for (size_t j = 0; j < seqs.size(); ++j) {
    const size_t s = seqs[j];
    const DraftRequest& r = *active_requests_[s];
    active_[s]->tokens.push_back(next_[s]);
    const auto generated = r.tokens.subspan(static_cast<size_t>(r.num_prompt));
    history_.assign(generated.begin(), generated.end());
    history_.insert(history_.end(), r.out->tokens.begin(), r.out->tokens.end());
    r.sampler->probabilities(logits.subspan(j * vocab, vocab), history_, q_);
    r.out->tokens.push_back(r.sampler->draw(q_));
    r.out->q.insert(r.out->q.end(), q_.begin(), q_.end());
  }
}

void check_same_vocabulary(const model::LoadedModel& target, const model::LoadedModel& draft) {
  const tok::Tokenizer& a = target.tokenizer();
  const tok::Tokenizer& b = draft.tokenizer();
  const std::string both = "the draft model " + draft.path() + " and the target " + target.path();
  if (a.n_vocab() != b.n_vocab())
    throw Error(both + " have different vocabularies (" + std::to_string(b.n_vocab()) + " and " +
                std::to_string(a.n_vocab()) + " tokens)");
  for (int t = 0; t < a.n_vocab(); ++t)
    if (a.text(t) != b.text(t))
      throw Error(both + " have different vocabularies: token " + std::to_string(t) + " is '" + b.text(t) + "' and '" +
                  a.text(t) + "'");
}

}  // namespace llmserve::engine
