#pragma once
// llmserve bench: the two halves share their flags and the machine's ceilings.
#include <cstddef>
#include <string>
#include <vector>

#include "engine/speculation.h"
#include "gguf/types.h"

namespace llmserve::cli {

struct BenchOptions {
  std::string model;
  int prompt_tokens = 512;    // -p
  int gen_tokens = 128;       // -n
  int depth = 0;              // -d: tokens already in the context when pp and tg start
  int threads = 0;            // -t; 0: physical cores
  int reps = 3;
  bool json = false;
  std::vector<int> batches;   // --batch: engine sweep instead of single-sequence pp/tg
  bool embed = false;         // --embed: embedding vs prefill throughput through the engine instead
  std::string kv_type = "f16";
  engine::SpeculationOptions spec;  // --spec: speculative vs plain decoding instead
};

// Ceilings measured on this machine in this run.
struct MachineCeilings {
  double read_bw_gbs = 0;      // streaming read, GB/s
  double peak_int8_gops = 0;
  double peak_f32_gflops = 0;
  double peak_int16_gops = 0;       // vpdpwssd, 0 below AVX-512
  double peak_bf16_gflops = 0;      // AMX-BF16 tiles, 0 without AMX
  double peak_amx_int8_gops = 0;   // AMX-INT8 tiles, 0 without AMX
};

// The streaming-read probe's buffer: well beyond any cache.
constexpr size_t kReadProbeBytes = size_t{1} << 30;

void run_single_bench(const BenchOptions& o);  // bench.cpp
void run_batch_bench(const BenchOptions& o);   // bench_batch.cpp
void run_embed_bench(const BenchOptions& o);   // bench_embed.cpp
void run_spec_bench(const BenchOptions& o, const engine::SpeculationOptions& spec);  // bench_spec.cpp

// F32, F16, BF16: weights whose peak is the f32 FMA rate, not the int8 one.
bool is_float_type(gguf::TensorType t);

}  // namespace llmserve::cli
