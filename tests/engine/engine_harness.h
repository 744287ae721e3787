#pragma once
// Running requests through an engine and the reference they are held to:
// each prompt alone through the single-sequence path.
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "engine/engine.h"
#include "model/runner.h"
#include "model/synthetic.h"
#include "temp_file.h"

namespace llmserve::engine::testing {

struct Result {
  // Takes one output of its request; true when that was the last.
  bool take(const RequestOutput& out) {
    for (const auto& t : out.tokens) tokens.push_back(t.token);
    if (out.finished) {
      reason = out.finish_reason;
      error = out.error;
      embedding = out.embedding;
    }
    return out.finished;
  }
  std::vector<int32_t> tokens;
  std::vector<float> embedding;
  FinishReason reason = FinishReason::None;
  std::string error;
};

// Submits all requests at once and waits for all of them.
inline std::vector<Result> run_all(Engine& engine, const std::vector<RequestParams>& requests) {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, size_t> index;
  std::vector<Result> results(requests.size());
  size_t done = 0;
  {
    std::unique_lock lock(mu);  // callbacks wait until every id is known
    for (size_t i = 0; i < requests.size(); ++i) {
      const uint64_t id = engine.submit(requests[i], [&](const RequestOutput& out) {
        std::lock_guard l(mu);
        if (results[index.at(out.id)].take(out)) {
          ++done;
          cv.notify_all();
        }
      });
      index[id] = i;
    }
    cv.wait(lock, [&] { return done == requests.size(); });
  }
  return results;
}

inline RequestParams greedy(std::vector<int32_t> prompt, int n) {
  RequestParams p;
  p.prompt = std::move(prompt);
  p.sampling.temperature = 0.0f;
  p.max_new_tokens = n;
  return p;
}

// A model loaded on its own pool, and an engine over it.
struct Served {
  explicit Served(const std::string& path, const model::InstanceConfig& c = {}, EngineConfig e = {})
      : pool(2), model(model::LoadedModel::load(path, pool, c)), engine({model.get()}, e) {}
  const tok::Tokenizer& tok() const { return model->tokenizer(); }
  const model::Model& m() const { return model->model(); }
  ThreadPool pool;
  std::unique_ptr<model::LoadedModel> model;
  Engine engine;
};

// The same prompt through the single-sequence path, greedily, stopping where the engine would.
inline std::vector<int32_t> alone(const model::Model& m, const tok::Tokenizer& tok, const std::vector<int32_t>& prompt, int n) {
  ThreadPool pool(2);
  model::SequenceRunner runner(m, pool, static_cast<int>(prompt.size()) + n, gguf::TensorType::F16);
  std::vector<int32_t> out;
  auto logits = runner.eval(prompt);
  for (int i = 0; i < n; ++i) {
    const int32_t t = engine::argmax(logits);
    if (tok.is_end_of_generation(t)) break;
    out.push_back(t);
    if (i + 1 < n) logits = runner.decode(t);
  }
  return out;
}

inline std::vector<std::vector<int32_t>> sixteen_prompts(const tok::Tokenizer& tok) {
  const char* texts[] = {"Once upon a time", "Lily and Tom went to the zoo.", "The cat sat on the mat.",
                         "One day, a little boy", "The sun was shining", "Tim had a red ball",
                         "Sue liked to sing", "There was a big dog", "Mom said", "The bird flew",
                         "Once upon a time, there was a girl", "Ben and his dad", "It was a cold day",
                         "The little fish", "Anna found a box", "Once upon a time, in a small town"};
  std::vector<std::vector<int32_t>> prompts;
  for (const char* t : texts) prompts.push_back(tok.encode(t, true));
  return prompts;
}

// A small synthetic Q8_0 model, written once per test binary.
inline std::string synthetic_tiny() {
  static const llmserve::testing::TempFile file("engine-test.gguf", [](const std::string& p) {
    model::SyntheticSpec spec;
    spec.shape = *model::find_shape("tiny");
    spec.type = gguf::TensorType::Q8_0;
    spec.seed = 11;
    model::write_synthetic_model(spec, p);
  });
  return file.path();
}

}  // namespace llmserve::engine::testing
