// llmserve bench --batch: B concurrent sequences through the engine for each
// B, decode throughput and step time per batch size, and the batch size at
// which decode stops being bound by memory bandwidth.
//
// At batch 1 a decode step streams every weight byte for one row of work;
// at batch B the same bytes serve B rows, so the step time stays flat until
// the arithmetic (2 FLOPs per parameter per row) catches up with the
// streaming time: that batch is the crossover.
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>

#include "cli/bench.h"
#include "bench/roofline.h"
#include "cli/default_model.h"
#include "core/error.h"
#include "core/stats.h"
#include "core/thread_pool.h"
#include "engine/engine.h"

namespace llmserve::cli {

namespace {

// Runs `batch` requests at once; returns each one's mean time per output token.
std::vector<double> run_batch(engine::Engine& eng, int batch, int prompt_len, int gen_len, std::mt19937& rng) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<double> tpot;
  std::string error;
  const int vocab = eng.info().n_vocab;
  for (int b = 0; b < batch; ++b) {
    engine::RequestParams p;
    // Distinct random prompts: no prefix-cache hits between them.
    for (int i = 0; i < prompt_len; ++i) p.prompt.push_back(static_cast<int32_t>(rng() % vocab));
    p.sampling.temperature = 0.0f;
    p.max_new_tokens = gen_len;
    p.ignore_eos = true;
    eng.submit(std::move(p), [&](const engine::RequestOutput& out) {
      if (!out.finished) return;
      std::lock_guard lock(mu);
      if (out.finish_reason == engine::FinishReason::Error) error = out.error;
      tpot.push_back(out.timings.tpot_ms);
      cv.notify_all();
    });
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return static_cast<int>(tpot.size()) == batch; });
  if (!error.empty()) throw Error("benchmark request failed: " + error);
  return tpot;
}

}  // namespace

void run_batch_bench(const BenchOptions& o) {
  const int prompt_len = 128, gen_len = 128;  // the workload
  std::vector<int> batches = o.batches;
  std::sort(batches.begin(), batches.end());
  if (batches.front() < 1) throw Error("--batch sizes must be >= 1");
  if (o.depth != 0) throw Error("-d applies to the single-sequence bench, not to --batch");
  const int max_batch = batches.back();

  const int threads = o.threads > 0 ? o.threads : default_thread_count();
  ThreadPool pool(threads);  // the engine's, and the ceilings', measured between the engine's runs
  model::InstanceConfig config;
  const auto kv_type = gguf::type_info_by_name(o.kv_type);
  if (!kv_type) throw Error("unknown --kv-type '" + o.kv_type + "'");
  config.kv_type = kv_type->type;
  const int blocks_per_seq = (prompt_len + gen_len + config.block_size - 1) / config.block_size;
  config.kv_blocks = max_batch * blocks_per_seq + 1;
  // Every prompt fits in the first step, so the decode steps measured after it are pure decode.
  config.max_batch_tokens = std::max(512, max_batch * prompt_len);
  const auto model = model::LoadedModel::load(resolve_model(o.model), pool, config);
  engine::Engine eng({model.get()}, {.max_seqs = max_batch});

  const model::MatmulFootprint fp = model::matmul_footprint(model->model().weights());
  const gguf::TensorType wtype = model->model().weights().layers[0].wq.type;
  const bool float_weights = is_float_type(wtype);
  const double peak_gops = float_weights ? kernels::measure_peak_f32_gflops(pool) : kernels::measure_peak_int8_gops(pool);

  // Repetitions interleave the batch sizes (1 2 4 .. 1 2 4 ..) so slow
  // phases of the shared host spread over all of them.
  std::mt19937 rng(7);
  std::vector<std::vector<double>> step_ms(batches.size());
  std::vector<double> bandwidth;
  kernels::ReadProbe probe(pool, kReadProbeBytes);
  for (int r = 0; r < o.reps; ++r) {
    bandwidth.push_back(probe.gbs());
    for (size_t i = 0; i < batches.size(); ++i) step_ms[i].push_back(median(run_batch(eng, batches[i], prompt_len, gen_len, rng)));
  }
  const double bw = median(bandwidth);

  if (!o.json)
    std::printf("%6s %14s %10s %10s %16s\n", "batch", "decode tok/s", "tpot ms", "step ms", "FLOP/byte");
  std::vector<double> step(batches.size());
  for (size_t i = 0; i < batches.size(); ++i) {
    step[i] = median(step_ms[i]);
    const int b = batches[i];
    const double tps = b * 1000.0 / step[i];
    const double intensity = 2.0 * fp.params * b / fp.bytes;
    if (o.json)
      std::printf("{\"batch\":%d,\"decode_tps\":%.2f,\"tpot_ms\":%.3f,\"step_ms\":%.3f,\"arith_intensity\":%.3f,"
                  "\"speedup_vs_first\":%.3f}\n",
                  b, tps, step[i], step[i], intensity, tps / (batches[0] * 1000.0 / step[0]));
    else
      std::printf("%6d %14.2f %10.2f %10.2f %16.2f\n", b, tps, step[i], step[i], intensity);
  }
  // Measured: the largest batch whose step is within 25% of the smallest batch's.
  int measured = batches[0];
  for (size_t i = 0; i < batches.size(); ++i)
    if (step[i] <= 1.25 * step[0]) measured = batches[i];
  // Predicted by the roofline: step(B) = max(bytes / bw, 2 * params * B / peak)
  // stays within 25% of the bandwidth-bound time while B <= 1.25 * peak * bytes / (bw * 2 * params).
  const double predicted = 1.25 * peak_gops * fp.bytes / (bw * 2.0 * fp.params);
  if (o.json)
    std::printf("{\"crossover_batch\":%d,\"predicted_crossover_batch\":%d,\"read_bw_gbs\":%.3f,\"peak_gops\":%.1f,"
                "\"bytes_per_token\":%llu,\"threads\":%d,\"reps\":%d}\n",
                measured, static_cast<int>(predicted), bw, peak_gops, static_cast<unsigned long long>(fp.bytes),
                threads, o.reps);
  else
    std::printf("\ncrossover batch: measured %d (largest batch with step time within 25%% of batch %d), "
                "predicted %.1f (roofline: read %.2f GB/s, peak %.1f G%s/s)\n",
                measured, batches[0], predicted, bw, peak_gops, float_weights ? "FLOP" : "int8 op");
}

}  // namespace llmserve::cli
