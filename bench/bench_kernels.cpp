// Kernel micro-benchmarks at tinyllama-1.1b shapes.
//
//   matvec  (1 token):   bytes/s of weights streamed, and "roofline" = that
//                        over the streaming-read bandwidth measured at start.
//                        Each iteration uses the next of many packed copies
//                        (>= 512 MiB in all), so weights come from DRAM as in
//                        decode, not from a warm cache, and is followed by an
//                        untimed read of two other copies' packed bytes:
//                        "vs_read" = the median over iterations of the
//                        kernel's rate over that read's, the yardstick
//                        measured beside each run (the host's bandwidth moves
//                        from one second to the next). Matrices with fewer
//                        than 4 copies (F32 32000x2048) go without.
//   matmul  (n tokens):  FLOP/s (2 per multiply-add), on the kernels the
//                        CPU allows (with AMX: AMX-INT8 tiles for quantized
//                        weights' whole groups of 16 tokens). Where the CPU
//                        has AMX, also matmul_vnni (quantized, AMX off);
//                        where f16 and bf16 weights have a prompt path
//                        (AMX-BF16 tiles or int16 codes), matmul_prompt (the
//                        tokens as prompt tokens).
//   attention, ops, thread pool fork/join, read bandwidth, peak loops, and
//   read_pattern (read_patterns.cpp): loop shapes against the read probe.
//
// Threads: LLMSERVE_THREADS (default: physical cores). ISA: LLMSERVE_ISA.
#include <algorithm>
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/roofline.h"
#include "bench_common.h"
#include "core/fp16.h"
#include "core/stats.h"
#include "core/thread_pool.h"
#include "gguf/quant.h"
#include "kernels/attention.h"
#include "kernels/cpu.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace llmserve::bench {

ThreadPool& pool() {
  static ThreadPool p([] {
    const char* env = std::getenv("LLMSERVE_THREADS");
    return env ? std::atoi(env) : default_thread_count();
  }());
  return p;
}

namespace {

using gguf::TensorType;
using kernels::Matrix;

double read_bandwidth_gbs() {
  static const double gbs = kernels::measure_read_bandwidth(pool(), size_t{1} << 30, 5);
  return gbs;
}

// Random weights of `type` made by quantizing Gaussian values where the
// type can be quantized, random bytes with sane scales otherwise.
std::vector<uint8_t> random_matrix(TensorType type, int64_t rows, int64_t cols) {
  std::mt19937 rng(42);
  const size_t rb = gguf::row_bytes(type, cols);
  std::vector<uint8_t> out(rb * rows);
  if (gguf::can_quantize(type)) {
    std::normal_distribution<float> dist(0.0f, 0.02f);
    std::vector<float> row(cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& x : row) x = dist(rng);
      gguf::quantize_row(type, row.data(), out.data() + r * rb, cols);
    }
    return out;
  }
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : out) b = static_cast<uint8_t>(byte(rng));
  // Overwrite each K-quant super-block's f16 scale(s) with small normal values.
  const size_t bb = gguf::type_info(type)->block_bytes;
  const uint16_t small = f32_to_f16(0.01f);
  for (size_t off = 0; off < out.size(); off += bb) {
    if (type == TensorType::Q6_K) std::memcpy(&out[off + offsetof(gguf::BlockQ6_K, d)], &small, 2);
    else {
      std::memcpy(&out[off], &small, 2);
      std::memcpy(&out[off + 2], &small, 2);
    }
  }
  return out;
}

// Enough packed copies of one matrix that cycling through them defeats the caches.
struct Copies {
  Matrix raw;
  std::vector<uint8_t> raw_bytes;
  std::vector<kernels::PackedWeights> packed;
  std::vector<Matrix> views;
};

Copies& copies(TensorType type, int64_t rows, int64_t cols, size_t min_total) {
  static std::map<std::tuple<int, int64_t, int64_t, size_t>, Copies> cache;
  auto key = std::make_tuple(static_cast<int>(type), rows, cols, min_total);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Copies& c = cache[key];
  c.raw_bytes = random_matrix(type, rows, cols);
  c.raw = Matrix{type, c.raw_bytes.data(), rows, cols, gguf::row_bytes(type, cols)};
  const size_t n = std::max<size_t>(1, (min_total + c.raw_bytes.size() - 1) / c.raw_bytes.size());
  for (size_t i = 0; i < n; ++i) {
    Matrix m = c.raw;
    c.packed.push_back(kernels::prepare(m, &pool()));
    c.views.push_back(m);
  }
  return c;
}

// min_total 512 MiB streams the weights from memory (decode) on every
// thread. 0 reuses one copy on one thread: a small matrix then stays in L2,
// and the rate is the decode kernel's arithmetic rate per core.
// The streaming case also sets "vs_read" (see the top of this file): the
// read's four passes (roofline.h) take the copies a fifth, two, three and
// four fifths of the cycle away, so between two uses of a copy a whole
// cycle's bytes (512 MiB, more than the Intel host's 300 MiB L3) pass by,
// for the kernel and for the read alike.
void matvec(benchmark::State& state, TensorType type, int64_t rows, int64_t cols, size_t min_total) {
  static ThreadPool one_thread(1);
  const bool streaming = min_total > 0;
  ThreadPool& threads = streaming ? pool() : one_thread;
  Copies& c = copies(type, rows, cols, min_total);
  std::vector<float> x(cols), y(rows);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  for (auto& v : x) v = dist(rng);
  const size_t n = c.views.size();
  const size_t read_bytes = c.packed[0].size() / 256 * 256;  // whole read-loop steps
  std::vector<double> vs_read;
  size_t i = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    kernels::matmul(c.views[i], x.data(), 1, y.data(), threads);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(s);
    if (streaming && n >= 5) {
      const double read_s = kernels::read_seconds(threads,
                                                  {c.packed[(i + n / 5) % n].data(), c.packed[(i + 2 * n / 5) % n].data(),
                                                   c.packed[(i + 3 * n / 5) % n].data(), c.packed[(i + 4 * n / 5) % n].data()},
                                                  read_bytes);
      vs_read.push_back((static_cast<double>(c.packed[i].size()) / s) / (static_cast<double>(read_bytes) / read_s));
    }
    if (++i == n) i = 0;
  }
  benchmark::DoNotOptimize(y.data());
  const double bytes = static_cast<double>(c.raw_bytes.size());
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
  state.counters["roofline"] = benchmark::Counter(bytes * state.iterations() / (read_bandwidth_gbs() * 1e9),
                                                  benchmark::Counter::kIsRate);
  if (!vs_read.empty()) state.counters["vs_read"] = median(vs_read);
}

// Which kernels a matmul benchmark runs (matmul.h): those the CPU allows
// (with AMX, quantized weights' whole token groups take AMX-INT8 tiles),
// AMX turned off (the VNNI kernels), or the tokens as prompt tokens (f16 and
// bf16 weights' prompt path, matmul.h: PromptPath).
enum class MatmulPath { usual, no_amx, prompt };

void matmul(benchmark::State& state, TensorType type, int64_t rows, int64_t cols, MatmulPath path) {
  const int64_t n_tokens = state.range(0);
  Copies& c = copies(type, rows, cols, 0);
  std::vector<float> x(n_tokens * cols), y(n_tokens * rows);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  for (auto& v : x) v = dist(rng);
  const bool amx_before = kernels::use_amx();
  if (path == MatmulPath::no_amx) kernels::set_amx(false);
  const int64_t n_prompt = path == MatmulPath::prompt ? n_tokens : 0;
  for (auto _ : state) kernels::matmul(c.views[0], x.data(), n_tokens, y.data(), pool(), n_prompt);
  kernels::set_amx(amx_before);
  benchmark::DoNotOptimize(y.data());
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * rows * cols * n_tokens * state.iterations(),
                                                benchmark::Counter::kIsRate);
}

void register_matmuls() {
  const TensorType types[] = {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q6_K,
                              TensorType::F16,  TensorType::BF16, TensorType::F32};
  const int64_t shapes[][2] = {{2048, 2048}, {5632, 2048}, {2048, 5632}, {32000, 2048}};
  for (TensorType t : types)
    for (const auto& s : shapes) {
      const std::string name = std::string(gguf::type_info(t)->name) + "/" + std::to_string(s[0]) + "x" +
                               std::to_string(s[1]);
      benchmark::RegisterBenchmark(("matvec/" + name).c_str(), matvec, t, s[0], s[1], size_t{512} << 20)
          ->UseManualTime();
      if (s[0] == 32000) continue;
      benchmark::RegisterBenchmark(("matmul/" + name).c_str(), matmul, t, s[0], s[1], MatmulPath::usual)
          ->UseRealTime()
          ->Arg(8)
          ->Arg(16)
          ->Arg(64)
          ->Arg(512);
      const bool quantized = gguf::type_info(t)->block_elems > 1;
      if ((quantized && kernels::amx_detected()) || kernels::prompt_path(t) != kernels::PromptPath::none)
        benchmark::RegisterBenchmark(((quantized ? "matmul_vnni/" : "matmul_prompt/") + name).c_str(), matmul, t,
                                     s[0], s[1], quantized ? MatmulPath::no_amx : MatmulPath::prompt)
            ->UseRealTime()
            ->Arg(16)
            ->Arg(64)
            ->Arg(512);
    }
  for (TensorType t : types)
    benchmark::RegisterBenchmark(("matvec_in_l2/" + std::string(gguf::type_info(t)->name) + "/256x2048").c_str(),
                                 matvec, t, 256, 2048, size_t{0})
        ->UseManualTime();
}

// All the matvecs of one decode step of a llama-shaped model, in order (each
// layer its own weights, so nothing stays cached): the ceiling a forward pass
// can reach. tok/s, and "roofline" = achieved over read bandwidth.
struct ModelShape {
  const char* name;
  int64_t dim, hidden, kv_dim, vocab, layers;
};

// One decode step's matmuls of a model shape, random weights.
// `grouped`: Q/K/V and gate/up go as one call each (shared input), as the
// engine calls them. `arena`: all matrices packed into one allocation in
// decode order, as the engine loads them (model/weights.cpp); otherwise each
// has its own, and matrices under 2 MiB get 4 KiB pages.
class DecodeStep {
 public:
  DecodeStep(const ModelShape& m, TensorType type, bool grouped, bool arena) {
    struct Shape {
      int64_t rows, cols;
      bool same_call;
    };
    std::vector<Shape> shapes;
    for (int64_t l = 0; l < m.layers; ++l) {
      shapes.push_back({m.dim, m.dim, false});     // q
      shapes.push_back({m.kv_dim, m.dim, true});   // k
      shapes.push_back({m.kv_dim, m.dim, true});   // v
      shapes.push_back({m.dim, m.dim, false});     // o
      shapes.push_back({m.hidden, m.dim, false});  // gate
      shapes.push_back({m.hidden, m.dim, true});   // up
      shapes.push_back({m.dim, m.hidden, false});  // down
    }
    shapes.push_back({m.vocab, m.dim, false});
    // One random matrix per shape, the source of every matrix of that shape
    // (random_matrix's fixed seed would make them equal anyway): each gets a
    // packed copy of its own below. Made per matrix, tinyllama's 155 took
    // minutes on one thread for every variant and repetition.
    std::map<std::pair<int64_t, int64_t>, std::vector<uint8_t>> raw;
    ws_.reserve(shapes.size());
    for (const Shape& sh : shapes) {
      std::vector<uint8_t>& source = raw[{sh.rows, sh.cols}];
      if (source.empty()) source = random_matrix(type, sh.rows, sh.cols);
      ws_.push_back(Matrix{type, source.data(), sh.rows, sh.cols, gguf::row_bytes(type, sh.cols)});
      bytes_ += source.size();
    }
    if (arena) {
      std::vector<Matrix*> all;
      for (Matrix& w : ws_) all.push_back(&w);
      storage_.push_back(kernels::prepare_all(all, &pool()));
    } else {
      for (Matrix& w : ws_) storage_.push_back(kernels::prepare(w, &pool()));
    }
    for (const auto& [shape, source] : raw) check_packed(type, shape.first, shape.second, source);
    for (Matrix& w : ws_) w.data = nullptr;  // only the packed copy is kept
    const int64_t max_rows = std::max(m.vocab, m.hidden);
    x_.assign(std::max(m.hidden, m.dim), 0.01f);
    y_.resize(3 * max_rows);  // up to 3 targets per call
    for (size_t i = 0; i < ws_.size(); ++i) {
      if (!(grouped && shapes[i].same_call)) calls_.emplace_back();
      calls_.back().push_back({&ws_[i], y_.data() + calls_.back().size() * max_rows});
    }
    acts_.resize(static_cast<size_t>(std::max(m.hidden, m.dim) / kernels::kQBlock));
  }

  // The weights' bytes as the file holds them: what a token streams.
  double bytes() const { return static_cast<double>(bytes_); }

  // Aborts unless the first packed matrix of this shape gives what the
  // scalar reference gives from `source`: a layout or chunking experiment
  // that reads the wrong bytes must not get timed (a 32-panel chunk over
  // 8-panel tiles once read the down projection's slices wrongly and
  // looked 7% faster). The activations quantize to int8 exactly (each
  // block's largest is 127 / 1024, all are multiples of 1 / 1024), so
  // only the float sums' rounding separates the two.
  void check_packed(TensorType type, int64_t rows, int64_t cols, const std::vector<uint8_t>& source) const {
    const auto packed =
        std::find_if(ws_.begin(), ws_.end(), [&](const Matrix& w) { return w.rows == rows && w.cols == cols; });
    std::vector<float> x(static_cast<size_t>(cols)), y(rows), ref(rows), wrow(cols);
    for (int64_t c = 0; c < cols; ++c) x[c] = (c % kernels::kQBlock == 0 ? 127 : (c * 37) % 255 - 127) / 1024.0f;
    kernels::matmul(*packed, x.data(), 1, y.data(), pool());
    const Matrix w{type, source.data(), rows, cols, gguf::row_bytes(type, cols)};
    kernels::matmul_reference(w, x.data(), 1, ref.data());
    for (int64_t r = 0; r < rows; ++r) {
      gguf::dequantize_row(type, source.data() + r * w.row_bytes, wrow.data(), cols);
      double abs_dot = 0;
      for (int64_t c = 0; c < cols; ++c) abs_dot += std::fabs(wrow[c] * x[c]);
      if (std::fabs(y[r] - ref[r]) > 2e-5 * abs_dot + 1e-30) {
        std::fprintf(stderr, "decode_matmuls: a packed %s %lldx%lld matrix gives %g at row %lld, the reference %g\n",
                     gguf::type_info(type)->name.data(), static_cast<long long>(rows), static_cast<long long>(cols),
                     y[r], static_cast<long long>(r), ref[r]);
        std::abort();
      }
    }
  }
  size_t calls() const { return calls_.size(); }

  // The step's jobs, with the kernels the current settings pick (cpu.h).
  std::vector<kernels::MatmulJob> jobs() const {
    std::vector<kernels::MatmulJob> jobs;
    for (const auto& call : calls_) jobs.emplace_back(call, x_.data(), 1, acts_.data());
    return jobs;
  }
  // Seconds of one step as steps of one ThreadPool::run_team job, each call
  // after a one-row step that quantizes its input, as the engine runs them
  // (model/runner.cpp).
  double run_team(const std::vector<kernels::MatmulJob>& jobs) const {
    const auto start = std::chrono::steady_clock::now();
    pool().run_team([&](Team& t) {
      for (const kernels::MatmulJob& job : jobs) {
        t.share(1, [&](int64_t) { job.prepare_row(0); });
        job.run(t);
      }
    });
    return seconds_since(start);
  }
  // The same with a matmul() fork/join per call.
  double run_calls() const {
    const auto start = std::chrono::steady_clock::now();
    for (const auto& call : calls_) kernels::matmul(call, x_.data(), 1, pool());
    return seconds_since(start);
  }
  // The packed bytes' read rate (kernels::read_seconds), bytes/s: the
  // yardstick without the question of which buffer the probe got. Arena only.
  double read_rate() const {
    const size_t n = storage_[0].size() / 256 * 256;  // whole read-loop steps
    return static_cast<double>(n) / kernels::read_seconds(pool(), storage_[0].data(), n);
  }

 private:
  static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  size_t bytes_ = 0;
  std::vector<Matrix> ws_;
  std::vector<kernels::PackedWeights> storage_;
  std::vector<float> x_, y_;
  mutable std::vector<kernels::Q8Act> acts_;
  std::vector<std::vector<kernels::MatmulTarget>> calls_;
};

// `team`: the calls run as DecodeStep::run_team, instead of a matmul()
// fork/join each. With the weights in one allocation, every iteration also
// reads those same bytes (DecodeStep::read_rate), untimed: "vs_read" = the
// step's bytes/s over that read's.
// F16 is there as a yardstick for the quantized formats: on the Intel AMX
// host its decode read the bytes at 1.07-1.10 of that read, Q8_0's at
// 0.96-0.98 (grouped/team, 2 runs; with LLMSERVE_PREFETCH=0 0.95 and 0.92-0.93).
void decode_matmuls(benchmark::State& state, ModelShape m, TensorType type, bool grouped, bool arena, bool team) {
  const DecodeStep step(m, type, grouped, arena);
  const std::vector<kernels::MatmulJob> jobs = step.jobs();
  // read_seconds: what reading the step's bytes at each iteration's read
  // rate took, so vs_read = read_seconds / decode_seconds.
  double decode_seconds = 0, read_seconds = 0;
  for (auto _ : state) {
    const double s = team ? step.run_team(jobs) : step.run_calls();
    state.SetIterationTime(s);
    decode_seconds += s;
    if (arena) read_seconds += step.bytes() / step.read_rate();
  }
  if (arena) state.counters["vs_read"] = read_seconds / decode_seconds;
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["roofline"] = benchmark::Counter(step.bytes() * state.iterations() / (read_bandwidth_gbs() * 1e9),
                                                  benchmark::Counter::kIsRate);
  state.counters["MB/token"] = step.bytes() / 1e6;
  state.counters["calls/token"] = static_cast<double>(step.calls());
}

// A kernel setting (cpu.h) off against on, paired: every iteration runs the
// engine's decode step (grouped, arena, team) both ways, in alternating
// order, each followed by a read of the packed bytes. A pair sees the same
// second of the host's bandwidth, which moves by tens of percent between
// seconds, more than the differences in question.
// "vs_read_off" / "vs_read_on": medians of each way's rate over its read;
// "on_over_off": the median of the pairs' ratios of those.
// decode_prefetch_ab: prefetch_weights(), which only the float formats
// follow: Q8_0 prefetches either way, so its pair runs the same kernels
// twice, the pairing's own noise.
// decode_nta_ab: prefetch_non_temporal().
struct Setting {
  bool (*get)();
  void (*set)(bool);
};

void decode_setting_ab(benchmark::State& state, ModelShape m, TensorType type, Setting setting) {
  const DecodeStep step(m, type, true, true);
  const bool initial = setting.get();
  std::vector<kernels::MatmulJob> jobs[2];
  for (int on = 0; on < 2; ++on) {
    setting.set(on);
    jobs[on] = step.jobs();
  }
  setting.set(initial);
  std::vector<double> vs_read[2], ratio;
  for (auto _ : state) {
    double frac[2], seconds = 0;
    for (int k = 0; k < 2; ++k) {
      const int on = (static_cast<int>(ratio.size()) + k) % 2;
      const double s = step.run_team(jobs[on]);
      seconds += s;
      frac[on] = step.bytes() / s / step.read_rate();
      vs_read[on].push_back(frac[on]);
    }
    ratio.push_back(frac[1] / frac[0]);
    state.SetIterationTime(seconds / 2);
  }
  state.counters["vs_read_off"] = median(vs_read[0]);
  state.counters["vs_read_on"] = median(vs_read[1]);
  state.counters["on_over_off"] = median(ratio);
}

void register_decode_chains() {
  const ModelShape models[] = {{"tinyllama", 2048, 5632, 256, 32000, 22}, {"stories110m", 768, 2048, 768, 32000, 12}};
  struct Variant {
    const char* name;
    bool grouped, arena, team;
  };
  const Variant variants[] = {{"grouped", true, true, false},
                              {"grouped/team", true, true, true},
                              {"grouped/own_allocations", true, false, false},
                              {"separate", false, true, false}};
  for (const ModelShape& m : models)
    for (TensorType t : {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q6_K, TensorType::F16})
      for (const Variant& v : variants)
        benchmark::RegisterBenchmark(
            (std::string("decode_matmuls/") + m.name + "/" + std::string(gguf::type_info(t)->name) + "/" + v.name).c_str(),
            decode_matmuls, m, t, v.grouped, v.arena, v.team)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
  const struct {
    const char* name;
    Setting setting;
    std::vector<TensorType> types;
  } settings[] = {
      {"decode_prefetch_ab/",
       {kernels::prefetch_weights, kernels::set_prefetch_weights},
       {TensorType::F16, TensorType::Q8_0}},
      {"decode_nta_ab/",
       {kernels::prefetch_non_temporal, kernels::set_prefetch_non_temporal},
       {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q6_K}}};
  for (const auto& s : settings)
    for (const ModelShape& m : models)
      for (TensorType t : s.types)
        benchmark::RegisterBenchmark(
            (s.name + std::string(m.name) + "/" + std::string(gguf::type_info(t)->name)).c_str(), decode_setting_ab,
            m, t, s.setting)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
}

void BM_ReadBandwidth(benchmark::State& state) {
  double gbs = 0;
  for (auto _ : state) gbs = kernels::measure_read_bandwidth(pool(), size_t{1} << 30, 3);
  state.counters["GB/s"] = gbs;
}
BENCHMARK(BM_ReadBandwidth)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

void BM_PeakInt8(benchmark::State& state) {
  double g = 0;
  for (auto _ : state) g = kernels::measure_peak_int8_gops(pool());
  state.counters["Gop/s"] = g;
}
BENCHMARK(BM_PeakInt8)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

void BM_PeakF32(benchmark::State& state) {
  double g = 0;
  for (auto _ : state) g = kernels::measure_peak_f32_gflops(pool());
  state.counters["GFLOP/s"] = g;
}
BENCHMARK(BM_PeakF32)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

void BM_ForkJoin(benchmark::State& state) {
  std::vector<int> sink(64);
  for (auto _ : state) pool().run([&](int i, int) { benchmark::DoNotOptimize(sink[i * 16 % 64]); });
}
BENCHMARK(BM_ForkJoin)->UseRealTime();

void BM_Barrier(benchmark::State& state) {
  for (auto _ : state)
    pool().run([&](int, int) {
      for (int i = 0; i < 16; ++i) pool().barrier();
    });
  state.SetItemsProcessed(state.iterations() * 16);
}
BENCHMARK(BM_Barrier)->UseRealTime();

// Attention over an f16 or q8_0 cache: tinyllama's shape (32 query heads,
// 4 KV heads, head_dim 64: 8 query heads per KV head), Llama 3 8B's (32,
// 8, 128: 4 per KV head, the group size of Mistral 7B too), or
// stories110m's (12, 12, 64: one query head per KV head, as Llama 2 7B).
const kernels::AttentionShape kTinyllamaAttention{32, 4, 64}, kLlama3Attention{32, 8, 128},
    kStoriesAttention{12, 12, 64};

void attention(benchmark::State& state, kernels::AttentionShape shape, TensorType kv_type, bool prefill) {
  const int n_ctx = static_cast<int>(state.range(0));
  const int n_q = prefill ? n_ctx : 1;
  const int block = 16, kv_dim = shape.n_head_kv * shape.head_dim, q_dim = shape.n_head * shape.head_dim;
  kernels::KvLayout layout{kv_type, block, kv_dim, gguf::row_bytes(kv_type, kv_dim)};
  const int n_blocks = (n_ctx + block - 1) / block;
  std::vector<uint8_t> k(n_blocks * block * layout.row_bytes), v(k.size());
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  std::vector<float> row(kv_dim);
  for (int64_t p = 0; p < int64_t{n_blocks} * block; ++p)
    for (auto* cache : {&k, &v}) {
      for (auto& x : row) x = dist(rng);
      gguf::quantize_row(kv_type, row.data(), cache->data() + p * layout.row_bytes, kv_dim);
    }
  std::vector<int32_t> table(n_blocks);
  for (int i = 0; i < n_blocks; ++i) table[i] = n_blocks - 1 - i;  // scattered pages
  std::vector<float> q(int64_t{n_q} * q_dim), out(q.size());
  for (auto& x : q) x = dist(rng);
  kernels::AttentionSeq seq{q.data(), out.data(), n_q, n_ctx - n_q, table.data()};
  for (auto _ : state) kernels::attention(shape, layout, k.data(), v.data(), &seq, 1, pool());
  // QK^T and PV: 2 FLOPs per multiply-add, causal.
  const double pairs = prefill ? 0.5 * n_q * (n_q + 1) : n_ctx;
  state.counters["FLOP/s"] = benchmark::Counter(4.0 * pairs * q_dim * state.iterations(), benchmark::Counter::kIsRate);
}
void BM_AttentionPrefillF16(benchmark::State& s) { attention(s, kTinyllamaAttention, TensorType::F16, true); }
void BM_AttentionDecodeF16(benchmark::State& s) { attention(s, kTinyllamaAttention, TensorType::F16, false); }
void BM_AttentionDecodeQ8_0(benchmark::State& s) { attention(s, kTinyllamaAttention, TensorType::Q8_0, false); }
void BM_AttentionDecodeF16Llama3(benchmark::State& s) { attention(s, kLlama3Attention, TensorType::F16, false); }
void BM_AttentionDecodeF16Mha(benchmark::State& s) { attention(s, kStoriesAttention, TensorType::F16, false); }
BENCHMARK(BM_AttentionPrefillF16)->Arg(128)->Arg(512)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AttentionDecodeF16)->Arg(64)->Arg(512)->Arg(2048)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AttentionDecodeQ8_0)->Arg(2048)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AttentionDecodeF16Llama3)->Arg(2048)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AttentionDecodeF16Mha)->Arg(512)->Arg(2048)->UseRealTime()->Unit(benchmark::kMicrosecond);

template <class F>
void op_bench(benchmark::State& state, F f) {
  const int64_t n = state.range(0);
  std::vector<float> a(n), b(n), out(n);
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  for (auto& x : a) x = dist(rng);
  for (auto& x : b) x = dist(rng);
  for (auto _ : state) f(a.data(), b.data(), n, out.data());
  benchmark::DoNotOptimize(out.data());
  state.SetItemsProcessed(state.iterations() * n);
}
void BM_RmsNorm(benchmark::State& s) {
  op_bench(s, [](const float* a, const float* b, int64_t n, float* o) { kernels::rmsnorm(a, b, 1e-5f, 2048, n / 2048, o); });
}
void BM_SiluMul(benchmark::State& s) { op_bench(s, kernels::silu_mul); }
void BM_Add(benchmark::State& s) { op_bench(s, kernels::add); }
void BM_Softmax(benchmark::State& s) {
  op_bench(s, [](const float* a, const float*, int64_t n, float* o) {
    std::memcpy(o, a, n * sizeof(float));
    kernels::softmax(o, n);
  });
}
// Greedy decoding's pick over a vocabulary, against the standard library's.
void BM_Argmax(benchmark::State& s) {
  op_bench(s, [](const float* a, const float*, int64_t n, float* o) { o[0] = static_cast<float>(kernels::argmax(a, n)); });
}
void BM_ArgmaxStdMaxElement(benchmark::State& s) {
  op_bench(s, [](const float* a, const float*, int64_t n, float* o) { o[0] = static_cast<float>(std::max_element(a, a + n) - a); });
}
BENCHMARK(BM_RmsNorm)->Arg(2048)->Arg(2048 * 512);
BENCHMARK(BM_SiluMul)->Arg(5632)->Arg(5632 * 512);
BENCHMARK(BM_Add)->Arg(2048)->Arg(2048 * 512);
BENCHMARK(BM_Softmax)->Arg(32000);
BENCHMARK(BM_Argmax)->Arg(32000);
BENCHMARK(BM_ArgmaxStdMaxElement)->Arg(32000);

}  // namespace
}  // namespace llmserve::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  llmserve::bench::register_matmuls();
  llmserve::bench::register_decode_chains();
  llmserve::bench::register_read_patterns();
  benchmark::AddCustomContext("isa", std::string(llmserve::kernels::isa_name(llmserve::kernels::active_isa())));
  benchmark::AddCustomContext("threads", std::to_string(llmserve::bench::pool().size()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
