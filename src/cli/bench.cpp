// llmserve bench: prefill (pp) and decode (tg) speed of one sequence, set
// against the machine's ceilings measured in the same run: decode against
// memory read bandwidth (every weight byte is streamed once per token),
// prefill against the peak arithmetic rate.
#include "cli/bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "bench/roofline.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/spec_flags.h"
#include "cli/flag_checks.h"
#include "core/error.h"
#include "core/stats.h"
#include "core/thread_pool.h"
#include "gguf/quant.h"
#include "gguf/types.h"
#include "kernels/ops.h"
#include "model/runner.h"

namespace llmserve::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Matmul FLOPs of a prompt of p tokens after d tokens of context, plus
// causal attention's QK^T and PV (token i sees d + i + 1 keys).
double prefill_flops(const model::Model& m, uint64_t matmul_params, int d, int p) {
  const model::HParams& hp = m.hparams();
  const double keys = double(p) * d + double(p) * (p + 1) / 2;
  const double attention = 4.0 * hp.q_dim() * keys * hp.n_layer;
  return 2.0 * double(matmul_params) * p + attention;
}

}  // namespace

bool is_float_type(gguf::TensorType t) {
  return t == gguf::TensorType::F32 || t == gguf::TensorType::F16 || t == gguf::TensorType::BF16;
}

void run_single_bench(const BenchOptions& o) {
  if (o.prompt_tokens < 1 || o.gen_tokens < 1 || o.reps < 1 || o.depth < 0)
    throw Error("-p, -n and --reps must be >= 1, -d >= 0");
  const auto kv_type = gguf::type_info_by_name(o.kv_type);
  if (!kv_type) throw Error("unknown --kv-type '" + o.kv_type + "'");
  const int threads = o.threads > 0 ? o.threads : default_thread_count();
  ThreadPool pool(threads);
  const auto model = model::Model::load(resolve_model(o.model), &pool);
  const model::MatmulFootprint fp = model::matmul_footprint(model->weights());
  const gguf::TensorType wtype = model->weights().layers[0].wq.type;
  const std::string type_name(gguf::type_info(wtype)->name);

  MachineCeilings c;
  c.peak_int8_gops = kernels::measure_peak_int8_gops(pool);
  c.peak_f32_gflops = kernels::measure_peak_f32_gflops(pool);
  c.peak_int16_gops = kernels::measure_peak_int16_gops(pool);
  c.peak_bf16_gflops = kernels::measure_peak_bf16_gflops(pool);
  c.peak_amx_int8_gops = kernels::measure_peak_amx_int8_gops(pool);
  // Prefill against the units it runs on (kernels/matmul.h): with AMX,
  // AMX-INT8 tiles for quantized weights and AMX-BF16 tiles for f16 and
  // bf16 ones (three and two tile products per product, so at most a third
  // and a half of that peak); otherwise vpdpbusd for quantized weights, and
  // for f16 and bf16 ones vpdpwssd (their prompt path, at most 16/19 of
  // that peak: 3 float operations per 16 vpdpwssd) where the avx512 level
  // is active, f32 FMAs for the other float ones.
  struct PeakUnit {
    const char* name;
    double MachineCeilings::*value;
    double (*measure)(ThreadPool&);
  };
  const kernels::PromptPath prompt_path = kernels::prompt_path(wtype);
  const PeakUnit unit =
      prompt_path == kernels::PromptPath::amx_bf16
          ? PeakUnit{"amx-bf16", &MachineCeilings::peak_bf16_gflops, kernels::measure_peak_bf16_gflops}
      : prompt_path == kernels::PromptPath::int16
          ? PeakUnit{"int16", &MachineCeilings::peak_int16_gops, kernels::measure_peak_int16_gops}
      : is_float_type(wtype)
          ? PeakUnit{"f32", &MachineCeilings::peak_f32_gflops, kernels::measure_peak_f32_gflops}
      : c.peak_amx_int8_gops > 0
          ? PeakUnit{"amx-int8", &MachineCeilings::peak_amx_int8_gops, kernels::measure_peak_amx_int8_gops}
          : PeakUnit{"int8", &MachineCeilings::peak_int8_gops, kernels::measure_peak_int8_gops};
  double& peak = c.*unit.value;

  std::mt19937 rng(1);
  std::vector<int32_t> context(o.depth), prompt(o.prompt_tokens);
  for (auto* v : {&context, &prompt})
    for (auto& t : *v) t = static_cast<int32_t>(rng() % model->hparams().n_vocab);
  const int n_ctx = o.depth + std::max(o.prompt_tokens, o.gen_tokens);
  if (n_ctx > model->hparams().n_ctx_train)
    throw Error("-d + max(-p, -n) = " + std::to_string(n_ctx) + " exceeds the model's context of " +
                std::to_string(model->hparams().n_ctx_train));
  model::SequenceRunner runner(*model, pool, n_ctx, kv_type->type, o.prompt_tokens);
  // pp and tg each start from a context of `depth` tokens (llama-bench's
  // convention: tg128 alone decodes from an empty cache; -d 512 measures
  // decode whose attention reads 512+ tokens of KV, which roofline_frac's
  // weight bytes do not count).
  auto fill_context = [&] {
    runner.reset();
    if (o.depth > 0) runner.eval(context);
  };

  // Decode is timed in segments of kSegmentTokens with a probe read before
  // each and after the last, and each segment is set against the mean of
  // the two reads around it: on a shared host the bandwidth moves by tens of
  // percent within a second, more than a repetition's decode lasts. A
  // repetition's fraction is its median segment's.
  constexpr int kSegmentTokens = 16;
  // Prefill likewise: each repetition is set against the mean of the peak
  // loop's runs before and after it (one run's int8 peak read half what the
  // others did), and the reported peak is the median of those runs.
  const double flops = prefill_flops(*model, fp.params, o.depth, o.prompt_tokens);
  // The KV cache bytes decode steps read besides the weights: the step at
  // position pos reads every layer's K and V rows of the pos + 1 keys it
  // attends to.
  // roofline_frac counts the weights only; with -d the KV rows are a large
  // share (SmolLM at -d 1900: 31% of its Q8_0 weights), so the fraction that
  // counts them too, roofline_frac_kv, is reported beside it.
  const model::HParams& hp = model->hparams();
  const double kv_row_bytes = static_cast<double>(gguf::row_bytes(kv_type->type, hp.kv_dim()));
  // Steps at positions [pos, pos + n): pos + 1 .. pos + n keys, in closed form.
  auto kv_steps_bytes = [&](int pos, int n) {
    return 2.0 * hp.n_layer * kv_row_bytes * (double(n) * (pos + 1) + double(n) * (n - 1) / 2);
  };
  kernels::ReadProbe probe(pool, kReadProbeBytes);
  std::vector<double> bw, pp, tg, frac, frac_kv, peaks{peak}, pp_frac;
  double read_min = 1e30, read_max = 0;  // over every probe read: how far the host's bandwidth moved
  if (!o.json)
    std::printf("%-4s %12s %12s %12s %10s\n", "rep", "read GB/s", "pp tok/s", "tg tok/s", "roofline");
  for (int r = 0; r < o.reps; ++r) {
    fill_context();
    const auto t0 = Clock::now();
    runner.eval(prompt);
    const double pp_seconds = seconds_since(t0);
    pp.push_back(o.prompt_tokens / pp_seconds);
    peaks.push_back(unit.measure(pool));
    pp_frac.push_back(flops / pp_seconds / 1e9 / ((peaks[peaks.size() - 2] + peaks.back()) / 2));
    fill_context();
    int32_t next = prompt[0];
    std::vector<double> reads{probe.gbs()}, segment_frac, segment_frac_kv;
    double decode_seconds = 0;
    for (int done = 0; done < o.gen_tokens;) {
      const int n = std::min(kSegmentTokens, o.gen_tokens - done);
      const auto start = Clock::now();
      for (int i = 0; i < n; ++i) {
        const auto logits = runner.decode(next);
        next = static_cast<int32_t>(kernels::argmax(logits.data(), static_cast<int64_t>(logits.size())));
      }
      const double seconds = seconds_since(start);
      reads.push_back(probe.gbs());
      const double segment_bw = (reads[reads.size() - 2] + reads.back()) / 2;
      segment_frac.push_back(n / seconds * fp.bytes / (segment_bw * 1e9));
      const double segment_bytes = n * static_cast<double>(fp.bytes) + kv_steps_bytes(o.depth + done, n);
      segment_frac_kv.push_back(segment_bytes / seconds / (segment_bw * 1e9));
      decode_seconds += seconds;
      done += n;
    }
    tg.push_back(o.gen_tokens / decode_seconds);
    bw.push_back(median(reads));
    read_min = std::min(read_min, *std::min_element(reads.begin(), reads.end()));
    read_max = std::max(read_max, *std::max_element(reads.begin(), reads.end()));
    frac.push_back(median(segment_frac));
    frac_kv.push_back(median(segment_frac_kv));
    if (!o.json)
      std::printf("%-4d %12.2f %12.1f %12.2f %10.3f\n", r, bw.back(), pp.back(), tg.back(), frac.back());
  }

  const double bw_med = median(bw), pp_med = median(pp), tg_med = median(tg), roofline = median(frac);
  const double roofline_kv = median(frac_kv), kv_per_token = kv_steps_bytes(o.depth, o.gen_tokens) / o.gen_tokens;
  const double pp_gflops = flops * pp_med / o.prompt_tokens / 1e9, compute_frac = median(pp_frac);
  peak = median(peaks);
  if (o.json) {
    std::printf(
        "{\"model\":\"%s\",\"type\":\"%s\",\"threads\":%d,\"pp\":%d,\"tg\":%d,\"depth\":%d,\"reps\":%d,"
        "\"pp_tps\":%.2f,\"pp_tps_min\":%.2f,\"tg_tps\":%.3f,\"tg_tps_min\":%.3f,\"bytes_per_token\":%llu,"
        "\"read_bw_gbs\":%.3f,\"read_bw_min_gbs\":%.3f,\"read_bw_max_gbs\":%.3f,\"roofline_frac\":%.4f,"
        "\"kv_bytes_per_token\":%llu,\"roofline_frac_kv\":%.4f,\"pp_gflops\":%.2f,\"peak_int8_gops\":%.1f,"
        "\"peak_f32_gflops\":%.1f,\"peak_int16_gops\":%.1f,\"peak_bf16_gflops\":%.1f,\"peak_amx_int8_gops\":%.1f,"
        "\"pp_peak\":\"%s\",\"pp_compute_frac\":%.4f}\n",
        model->file().path().c_str(), type_name.c_str(), threads, o.prompt_tokens, o.gen_tokens, o.depth, o.reps,
        pp_med, *std::min_element(pp.begin(), pp.end()), tg_med, *std::min_element(tg.begin(), tg.end()),
        static_cast<unsigned long long>(fp.bytes), bw_med, read_min, read_max, roofline,
        static_cast<unsigned long long>(kv_per_token), roofline_kv, pp_gflops, c.peak_int8_gops,
        c.peak_f32_gflops, c.peak_int16_gops, c.peak_bf16_gflops, c.peak_amx_int8_gops, unit.name, compute_frac);
    return;
  }
  const std::string at = o.depth > 0 ? " @ d" + std::to_string(o.depth) : "";
  std::printf("\nmodel %s (%s weights), %d threads, median of %d\n", model->file().path().c_str(), type_name.c_str(),
              threads, o.reps);
  std::printf("  prefill pp%-5d%s %10.1f tokens/s (min %.1f)  %8.1f GFLOP/s = %.3f of peak %s %.1f\n",
              o.prompt_tokens, at.c_str(), pp_med, *std::min_element(pp.begin(), pp.end()), pp_gflops, compute_frac,
              unit.name, peak);
  std::printf("  decode  tg%-5d%s %10.2f tokens/s (min %.2f)\n", o.gen_tokens, at.c_str(), tg_med,
              *std::min_element(tg.begin(), tg.end()));
  std::printf("  weight bytes per token %.1f MB, read bandwidth %.2f GB/s (probe reads %.1f-%.1f) -> decode roofline "
              "%.2f tokens/s\n",
              fp.bytes / 1e6, bw_med, read_min, read_max, bw_med * 1e9 / fp.bytes);
  std::printf("  roofline_frac %.3f\n", roofline);
  std::printf("  KV cache bytes per token %.1f MB (mean over the decode); with the weights: roofline_frac_kv %.3f\n",
              kv_per_token / 1e6, roofline_kv);
}

void add_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure prefill/decode speed against the machine's ceilings");
  cmd->add_option("-m,--model", o->model, "GGUF model file (default: the built-in random-weight model)");
  cmd->add_option("-p,--prompt-tokens", o->prompt_tokens, "Prompt length for prefill")->capture_default_str();
  cmd->add_option("-n,--gen-tokens", o->gen_tokens, "Tokens to decode")->capture_default_str();
  cmd->add_option("-d,--depth", o->depth, "Tokens already in the context when prefill and decode start")
      ->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads (default: physical cores)")->check(thread_count(1));
  cmd->add_option("--reps", o->reps, "Repetitions (min and median reported)")->capture_default_str();
  cmd->add_option("--kv-type", o->kv_type, "KV cache type: f16, f32 or q8_0")->capture_default_str();
  cmd->add_option("--batch", o->batches, "Batch sizes for the engine sweep, e.g. 1,2,4,8,16,32")->delimiter(',');
  cmd->add_flag("--embed", o->embed, "Embedding vs prefill tokens/s through the engine (-p tokens per input)");
  cmd->add_flag("--json", o->json, "One JSON object per result line");
  add_spec_flags(cmd, o->spec);
  cmd->callback([o] {
    if (o->spec.method != "off")
      run_spec_bench(*o, o->spec);
    else if (o->embed)
      run_embed_bench(*o);
    else if (o->batches.empty())
      run_single_bench(*o);
    else
      run_batch_bench(*o);
  });
}

}  // namespace llmserve::cli
