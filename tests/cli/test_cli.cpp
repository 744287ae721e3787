// The llmserve binary end to end: exit codes, error messages and output.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include "model/synthetic.h"
#include "server/raw_client.h"
#include "test_models.h"

namespace {

using llmserve::testing::temp_path;
using llmserve::testing::TempFile;

struct Result {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

// `env`: NAME=VALUE assignments for the command's environment.
Result run(const std::string& args, const std::string& env = "") {
  const std::string cmd = env + " " + std::string(LLMSERVE_BIN) + " " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// `args` is refused at start-up: exit 1 and one line of output, which
// starts with `text` (or, !at_start, holds it).
void expect_refused(const std::string& args, const std::string& text, bool at_start = true) {
  const Result r = run(args);
  EXPECT_EQ(r.exit_code, 1) << args << ": " << r.out;
  if (at_start) EXPECT_TRUE(r.out.starts_with(text)) << args << ": " << r.out;
  else EXPECT_NE(r.out.find(text), std::string::npos) << args << ": " << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << args << ": " << r.out;
}

}  // namespace

TEST(Cli, GreedyStories260KTellsTheKnownStory) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  const Result r = run("generate -m " + path + " -p \"Once upon a time\" -n 24 --temp 0 -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The float64 reference's greedy continuation of this file (see the test vectors).
  EXPECT_NE(r.out.find("Once upon a time, there was a little girl named Lily. She loved to play outside"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("TTFT"), std::string::npos);
  EXPECT_NE(r.out.find("TPOT"), std::string::npos);
}

TEST(Cli, TruncatedModelsFailWithExitCode1) {
  for (const char* name : {"stories260K.gguf", "TinyStories-656K.f16.gguf", "tinystories-656k-q8_0.gguf",
                           "llama-2-tiny-random.gguf"}) {
    REQUIRE_MODEL(path, name);
    const std::string bytes = read_file(path);
    const TempFile cut(std::string("cut-") + name,
                       [&](const std::string& p) { write_file(p, bytes.substr(0, bytes.size() * 2 / 3)); });
    const Result r = run("generate -m " + cut.path() + " -p hi -n 4");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("error: " + cut.path()), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("truncated"), std::string::npos) << r.out;
  }
}

TEST(Cli, RandomBytesFailWithExitCode1) {
  std::mt19937 rng(7);
  std::string bytes(4096, '\0');
  for (auto& c : bytes) c = static_cast<char>(rng());
  const TempFile file("random.gguf", [&](const std::string& p) { write_file(p, bytes); });
  const Result r = run("inspect " + file.path());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("not a GGUF file"), std::string::npos) << r.out;
}

TEST(Cli, TensorOffsetPastTheEndFails) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  // Keep the header whole but drop the tensor data: every offset now points past the end.
  const std::string bytes = read_file(path);
  const TempFile cut("no-data.gguf", [&](const std::string& p) { write_file(p, bytes.substr(0, 14176 + 64)); });
  const Result r = run("inspect " + cut.path());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("extends past the end of the file"), std::string::npos) << r.out;
}

TEST(Cli, InspectPrintsTensorsAndCounts) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  const Result r = run("inspect " + path);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("blk.4.ffn_down.weight"), std::string::npos);
  EXPECT_NE(r.out.find("parameters:"), std::string::npos);
}

// stories260K: 5 layers of 4 KV heads of 8 at f16 is 640 bytes a token;
// the default pool holds its 2048-token context for each of 64 sequences
// (unless half the machine's free memory, 80 MiB, is less).
TEST(Cli, InspectGivesTheKvCacheFigures) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  const Result r = run("inspect " + path);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("KV cache, serve's default pool (--max-seqs 64): f16, 640 bytes/token, "), std::string::npos) << r.out;
}

TEST(Cli, ServeLogsTheKvCacheSizeAndWhy) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  const TempFile log("serve-kv.log");
  // Starts serve, waits for its start-up lines, stops it with SIGINT.
  const std::string script = std::string(LLMSERVE_BIN) + " serve -m " + path + " --host 127.0.0.1 --port 0 -t 1 --max-seqs 4 >" +
                             log.path() + " 2>&1 & p=$!; for i in $(seq 600); do grep -q 'KV cache' " + log.path() +
                             " && break; kill -0 $p || break; sleep 0.1; done; kill -INT $p; wait $p";
  ASSERT_EQ(std::system(script.c_str()), 0) << read_file(log.path());
  EXPECT_NE(read_file(log.path()).find("KV cache: f16, 640 bytes/token, 512 blocks × 16 = 8192 tokens, 5.0 MiB (context 2048 × 4 seqs)"),
            std::string::npos)
      << read_file(log.path());
}

TEST(Cli, TokenizeIdsMatchTheVectors) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  const Result r = run("tokenize -m " + path + " --ids --no-bos \"Once upon a time\"");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "403 407 261 378\n");
}

TEST(Cli, TokenizeStdinKeepsNewlines) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  const TempFile text_file("text.txt",
                           [](const std::string& p) { write_file(p, "The cat sat on the mat.\nThe end."); });
  const Result r = run("tokenize -m " + path + " --ids --no-bos --stdin < " + text_file.path());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "291 280 294 262 294 353 265 284 294 426 13 434 260 344 264 426\n");
}

// Checked before any command runs (a server would otherwise start and then
// fail every request); inspect alone never touches the kernels.
TEST(Cli, BadKernelEnvironmentIsAClearErrorAtStartup) {
  const std::pair<std::string, std::string> cases[] = {
      {"LLMSERVE_ISA=foo", "error: LLMSERVE_ISA=foo: expected scalar, avx2 or avx512"},
      {"LLMSERVE_PREFETCH=2", "error: LLMSERVE_PREFETCH=2: expected 0 or 1"},
      {"LLMSERVE_PREFETCH_NTA=x", "error: LLMSERVE_PREFETCH_NTA=x: expected 0 or 1"},
      {"LLMSERVE_AMX=yes", "error: LLMSERVE_AMX=yes: expected 0 or 1"}};
  for (const auto& [env, message] : cases) {
    const Result r = run("inspect " + temp_path("absent.gguf"), env);
    EXPECT_EQ(r.exit_code, 1) << env << ": " << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << env << ": " << r.out;
  }
}

// A flag the parser refuses (unknown, missing value, wrong type) exits 1 with
// a message naming it, as every other error does; --version and --help exit 0.
TEST(Cli, BadFlagsExitOneAndVersionPrints) {
  for (const char* args : {"generate --no-such-flag", "generate -n many", "serve --port", "bench --reps"}) {
    const Result r = run(args);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.out;
  }
  const Result unknown = run("generate --no-such-flag");
  EXPECT_NE(unknown.out.find("--no-such-flag"), std::string::npos) << unknown.out;
  const Result v = run("--version");
  EXPECT_EQ(v.exit_code, 0) << v.out;
  EXPECT_NE(v.out.find("llmserve " LLMSERVE_VERSION), std::string::npos) << v.out;
  EXPECT_EQ(run("serve --help").exit_code, 0);
}

// A given seed repeats a sampled run; a negative one is random, as llama.cpp's -1.
TEST(Cli, NegativeSeedIsRandom) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  auto sample = [&](const char* seed) {
    const Result r = run("generate -m " + path + " -p \"Once upon a time\" -n 24 --temp 1.5 --top-k 0 --top-p 1" +
                         " --min-p 0 -t 1 --seed " + seed);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return r.out.substr(0, r.out.find("timings:"));  // the text, not the timings line
  };
  EXPECT_EQ(sample("7"), sample("7"));
  EXPECT_NE(sample("-1"), sample("-1"));
}

TEST(Cli, UnknownShapeIsAClearError) {
  const Result r = run("gen-model --shape nope -o " + temp_path("x.gguf"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("unknown shape 'nope'"), std::string::npos) << r.out;
}

// gen-model writes every weight type the matmuls take from files it makes,
// bf16 included; an unknown type is refused with the list.
TEST(Cli, GenModelWritesBf16AndRefusesUnknownTypes) {
  const TempFile model("tiny-bf16.gguf");
  ASSERT_EQ(run("gen-model --shape tiny --type bf16 -o " + model.path()).exit_code, 0);
  const Result r = run("inspect " + model.path());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const size_t q = r.out.find("blk.0.attn_q.weight");
  ASSERT_NE(q, std::string::npos) << r.out;
  EXPECT_EQ(r.out.substr(r.out.find_first_not_of(' ', q + 19), 4), "bf16") << r.out;
  const Result bad = run("gen-model --shape tiny --type q5_1 -o " + model.path());
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find("unsupported --type 'q5_1' (use f32, f16, bf16,"), std::string::npos) << bad.out;
}

// bench --json carries every field the README documents, the median read
// within the range of the probe reads, and -d is taken into account (the
// KV bytes decode reads; a context that does not fit is refused by name).
TEST(Cli, BenchJsonReportsTheRooflineFields) {
  const TempFile model("bench-tiny.gguf");
  ASSERT_EQ(run("gen-model --shape tiny --type q8_0 -o " + model.path()).exit_code, 0);
  const Result r = run("bench -m " + model.path() + " -p 8 -n 4 -d 4 --reps 1 -t 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* field : {"\"pp_tps\":", "\"tg_tps\":", "\"bytes_per_token\":", "\"read_bw_gbs\":",
                            "\"roofline_frac\":", "\"pp_gflops\":", "\"peak_int8_gops\":", "\"peak_f32_gflops\":",
                            "\"peak_int16_gops\":", "\"peak_bf16_gflops\":", "\"peak_amx_int8_gops\":", "\"pp_peak\":",
                            "\"read_bw_min_gbs\":", "\"read_bw_max_gbs\":",
                            "\"pp_compute_frac\":", "\"kv_bytes_per_token\":", "\"roofline_frac_kv\":",
                            "\"type\":\"q8_0\"", "\"threads\":2", "\"depth\":4"})
    EXPECT_NE(r.out.find(field), std::string::npos) << field << " missing in " << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_GT(j["read_bw_min_gbs"].get<double>(), 0);
  EXPECT_LE(j["read_bw_min_gbs"].get<double>(), j["read_bw_gbs"].get<double>());
  EXPECT_LE(j["read_bw_gbs"].get<double>(), j["read_bw_max_gbs"].get<double>());
  // Decode steps at positions 4..7 read every layer's K and V rows (f16)
  // of 5..8 keys: 6.5 on average.
  const auto tiny = llmserve::model::find_shape("tiny");
  ASSERT_TRUE(tiny.has_value());
  EXPECT_EQ(j["kv_bytes_per_token"].get<double>(), 2 * tiny->n_layer * (tiny->kv_dim() * 2) * 6.5);
  EXPECT_GT(j["roofline_frac_kv"].get<double>(), j["roofline_frac"].get<double>());
  const Result too_deep = run("bench -m " + model.path() + " -p 8 -n 4 -d 100000 --reps 1");
  EXPECT_EQ(too_deep.exit_code, 1) << too_deep.out;
  EXPECT_NE(too_deep.out.find("exceeds the model's context"), std::string::npos) << too_deep.out;
}

// bench --embed: embedding and prefill tokens/s of the same run side by
// side; flags of the other benches are refused by name.
TEST(Cli, BenchEmbedReportsEmbeddingBesidePrefill) {
  const TempFile model("bench-embed-tiny.gguf");
  ASSERT_EQ(run("gen-model --shape tiny --type q8_0 -o " + model.path()).exit_code, 0);
  const Result r = run("bench --embed -m " + model.path() + " -p 8 --reps 1 -t 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_GT(j["prefill_tps"].get<double>(), 0);
  EXPECT_GT(j["embed_tps"].get<double>(), 0);
  EXPECT_NEAR(j["embed_vs_prefill"].get<double>(), j["embed_tps"].get<double>() / j["prefill_tps"].get<double>(), 1e-3);
  const Result deep = run("bench --embed -m " + model.path() + " -d 4");
  EXPECT_EQ(deep.exit_code, 1) << deep.out;
  EXPECT_NE(deep.out.find("-d applies to the single-sequence bench"), std::string::npos) << deep.out;
}

// Every flag value that cannot work is refused before anything is loaded:
// one "error: FLAG: ..." line and exit 1.
TEST(Cli, BadFlagValuesAreOneLineNamingTheFlag) {
  const std::string too_many = std::to_string(4 * std::max(1u, std::thread::hardware_concurrency()) + 1);
  const std::pair<std::string, std::string> cases[] = {
      {"serve --kv-mem 0", "--kv-mem"}, {"serve --kv-mem -1", "--kv-mem"}, {"serve --kv-blocks 0", "--kv-blocks"},
      {"serve --kv-blocks -2", "--kv-blocks"}, {"serve --max-tokens 0", "--max-tokens"}, {"serve --max-body 0", "--max-body"},
      {"serve --max-json-depth 0", "--max-json-depth"}, {"serve --max-n 0", "--max-n"}, {"serve --max-seqs 0", "--max-seqs"},
      {"serve --max-batch-tokens 0", "--max-batch-tokens"}, {"serve --http-threads 0", "--http-threads"},
      {"serve --max-connections 0", "--max-connections"},
      {"serve --max-connections-per-client 0", "--max-connections-per-client"}, {"serve --port 70000", "--port"},
      {"serve --ctx -1", "--ctx"}, {"serve --timeout -1", "--timeout"}, {"serve --header-timeout 0", "--header-timeout"},
      {"serve --drain-timeout -1", "--drain-timeout"}, {"serve --max-queue -1", "--max-queue"},
      {"serve -t " + too_many, "--threads"}, {"generate -t " + too_many, "--threads"}, {"bench -t " + too_many, "--threads"},
      {"generate -n -1", "--n-predict"}};
  for (const auto& [args, flag] : cases) expect_refused(args + " -m " + temp_path("absent.gguf"), "error: " + flag + ": ");
  EXPECT_NE(run("serve -t 100000").out.find("4 per hardware thread"), std::string::npos);
}

namespace {

// `llmserve serve ARGS` in the background, its output read as it comes.
class ServeProcess {
 public:
  explicit ServeProcess(const std::string& args) {
    int fds[2];
    if (pipe(fds) != 0) return;
    const std::string cmd = "exec " + std::string(LLMSERVE_BIN) + " serve " + args + " 2>&1";
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      _exit(127);
    }
    close(fds[1]);
    out_ = fds[0];
  }
  ~ServeProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) close(out_);
  }

  // The next output line holding `text`; "" when the output ends first or
  // nothing comes for 60 s.
  std::string line_with(const std::string& text) {
    for (;;) {
      for (size_t end; (end = pending_.find('\n')) != std::string::npos;) {
        const std::string line = pending_.substr(0, end);
        pending_.erase(0, end + 1);
        output_ += line + "\n";
        if (line.find(text) != std::string::npos) return line;
      }
      pollfd p{out_, POLLIN, 0};
      char buf[4096];
      ssize_t n = 0;
      if (poll(&p, 1, 60'000) <= 0 || (n = read(out_, buf, sizeof buf)) <= 0) return "";
      pending_.append(buf, size_t(n));
    }
  }
  // The port of the start-up line's http://HOST:PORT (0 when it never came).
  uint16_t port() {
    const std::string line = line_with(" on http://");
    const size_t end = line.find(" | ");
    const size_t colon = line.rfind(':', end);
    return end == std::string::npos ? 0 : static_cast<uint16_t>(std::stoi(line.substr(colon + 1, end - colon - 1)));
  }
  void signal(int sig) { kill(pid_, sig); }
  // The exit code (128 + n after a death by signal n); -1 when it still
  // runs after 60 s.
  int exit_code() {
    for (int i = 0; i < 6000; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  const std::string& output() const { return output_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  bool exited_ = false;
  std::string pending_, output_;
};

const std::string& tiny_model() {
  static const TempFile model("serve-tiny.gguf", [](const std::string& p) {
    EXPECT_EQ(run("gen-model --shape tiny --type q8_0 -o " + p).exit_code, 0);
  });
  return model.path();
}

}  // namespace

// --host takes a name; the start-up line gives the address it resolved to,
// an IPv6 one in brackets (scripts read "on http://127.0.0.1:PORT ").
TEST(Cli, ServeListensOnHostNamesAndPrintsIpv6InBrackets) {
  ServeProcess named("-m " + tiny_model() + " --host localhost --port 0");
  const std::string line = named.line_with(" on http://");
  EXPECT_TRUE(line.find(" on http://127.0.0.1:") != std::string::npos || line.find(" on http://[::1]:") != std::string::npos)
      << named.output();
  named.signal(SIGTERM);
  EXPECT_EQ(named.exit_code(), 0) << named.output();

  ServeProcess v6("-m " + tiny_model() + " --host ::1 --port 0");
  const std::string v6_line = v6.line_with(" on http://");
  if (v6_line.empty() && v6.output().find("cannot listen on ::1") != std::string::npos) GTEST_SKIP() << "no IPv6 here";
  EXPECT_NE(v6_line.find(" on http://[::1]:"), std::string::npos) << v6.output();
}

// serve's models: NAME=FILE, repeatable; every name or file that cannot
// work is one "error: --model ..." line and exit 1, before anything loads.
TEST(Cli, ServeRefusesBadModelFlags) {
  const std::string f = tiny_model(), absent = temp_path("absent.gguf");
  const std::pair<std::string, std::string> cases[] = {
      {"-m =" + f, "error: --model =" + f + ": the name before '=' is empty"},
      {"-m a/b=" + f, "error: --model a/b=" + f + ": the name 'a/b' may hold only"},
      {"-m 'a b=" + f + "'", "error: --model a b=" + f + ": the name 'a b' may hold only"},
      {"-m ..=" + f, "error: --model ..=" + f + ": the name '..' is a path segment"},
      {"-m a=" + f + " -m a=" + f, "error: --model a=" + f + ": the name 'a' is given twice"},
      {"-m a=" + f + " -m b=" + absent, "error: --model b=" + absent + ": no such file"},
      {"-m " + absent, "error: --model " + absent + ": no such file"},
      {"-m " + f + " -m b=" + f, "error: --model " + f + ": with several models, give each as NAME=FILE"},
      {"-m a=" + f + " --model-name x", "error: --model-name: "},
  };
  for (const auto& [args, message] : cases) expect_refused("serve --port 0 " + args, message);
}

// Two models: the first start-up line names both (scripts read its
// "on http://HOST:PORT "), then a line per model.
TEST(Cli, ServeTwoModelsLogsEachModel) {
  ServeProcess serve("-m first=" + tiny_model() + " --model second=" + tiny_model() + " --port 0 -t 1 --max-seqs 2");
  const std::string line = serve.line_with(" on http://");
  EXPECT_NE(line.find("serving first, second on http://"), std::string::npos) << serve.output();
  EXPECT_NE(serve.line_with("model first ("), "") << serve.output();
  const std::string second = serve.line_with("model second (");
  EXPECT_NE(second.find("max seqs 2 | queue 256 | KV cache: "), std::string::npos) << serve.output();
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.exit_code(), 0) << serve.output();
}

// A second SIGTERM during the drain exits at once, with a shell's code for
// the signal (128 + 15), while requests are still being answered.
TEST(Cli, SecondSignalDuringTheDrainExitsAtOnce) {
  ServeProcess serve("-m " + tiny_model() + " --port 0 --max-seqs 1 -t 1 --drain-timeout 50");
  const uint16_t port = serve.port();
  ASSERT_NE(port, 0) << serve.output();
  // Sixteen long streams, one running and the rest queued: a drain of seconds.
  std::vector<std::unique_ptr<llmserve::server::RawClient>> clients;
  const std::string body = R"({"prompt":"Once","max_tokens":1000,"stream":true})";
  for (int i = 0; i < 16; ++i) {
    clients.push_back(std::make_unique<llmserve::server::RawClient>(port));
    clients.back()->send("POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body);
  }
  ASSERT_NE(clients.front()->read_some(), "");  // streaming
  serve.signal(SIGTERM);
  ASSERT_NE(serve.line_with("SIGTERM: no new requests"), "") << serve.output();
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.exit_code(), 143) << serve.output();
  EXPECT_NE(serve.line_with("SIGTERM again: exiting at once"), "") << serve.output();
}

// generate --spec: the greedy text is plain decoding's, the timings line
// gives the draft acceptance, and bad speculation flags are one error line.
TEST(Cli, SpeculativeGenerateKeepsTheGreedyText) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  auto text = [&](const std::string& flags) {
    const Result r = run("generate -m " + path + " -p \"Once upon a time\" -n 48 --temp 0 -t 1 " + flags);
    EXPECT_EQ(r.exit_code, 0) << flags << ": " << r.out;
    if (!flags.empty()) {
      EXPECT_NE(r.out.find("draft acceptance"), std::string::npos) << r.out;
    }
    return r.out.substr(0, r.out.find("timings:"));
  };
  const std::string plain = text("");
  EXPECT_EQ(text("--spec ngram --spec-k 3"), plain);
  EXPECT_EQ(text("--spec self --draft-quant q4_0"), plain);
  EXPECT_EQ(text("--spec draft --draft-model " + path), plain);
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {"--spec draft", "--spec draft needs --draft-model"},
           {"--spec ngram --spec-k 0", "--spec-k"},
           {"--spec eagle", "--spec"},
           {"--spec self --draft-quant f16", "--draft-quant"}}) {
    const Result r = run("generate -m " + path + " -p x -n 4 " + flags);
    EXPECT_EQ(r.exit_code, 1) << flags << ": " << r.out;
    EXPECT_NE(r.out.find("error: " + message), std::string::npos) << flags << ": " << r.out;
  }
}

TEST(Cli, CacheEvalPrintsHitRatesPerKind) {
  const Result r = run("cache-eval --data " LLMSERVE_SEMANTIC_PAIRS " --tau 0.5,0.9");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* row : {"paraphrase ", "negation ", "number_swap ", "entity_swap ", "unrelated ", "false hits "})
    EXPECT_NE(r.out.find(std::string("\n") + row), std::string::npos) << row << "\n" << r.out;
  EXPECT_NE(r.out.find(" 0.50  0.90\n"), std::string::npos) << r.out;
}

TEST(Cli, CacheEvalRefusesBadInputInOneLine) {
  const TempFile bad("bad-pairs.jsonl", [](const std::string& p) { write_file(p, "{\"kind\":\"x\",\"a\":\"1\",\"b\":\"2\"}\n"); });
  const std::pair<std::string, std::string> cases[] = {
      {"cache-eval --data " LLMSERVE_SEMANTIC_PAIRS " --tau 1.5", "error: --tau: must be between 0 and 1"},
      {"cache-eval --data " + temp_path("absent.jsonl"), "cannot open"},
      {"cache-eval --data " + bad.path(), ":1: unknown kind 'x'"},
      {"cache-eval --data " LLMSERVE_SEMANTIC_PAIRS " --ngram-min 5 --ngram-max 3", "n-gram sizes"}};
  for (const auto& [args, message] : cases) expect_refused(args, message, false);
}

// The router's flags: both models or neither, names that are served, two
// models at least; each mistake is one "error:" line and exit 1.
TEST(Cli, ServeRefusesBadRouterFlags) {
  const std::string two = "-m a=" + tiny_model() + " -m b=" + tiny_model();
  const std::pair<std::string, std::string> cases[] = {
      {two + " --router-small a", "error: --router-small requires --router-large"},
      {two + " --router-name x", "error: --router-name requires --router-small"},
      {two + " --router-small a --router-large b --router-threshold 2", "error: --router-threshold: must be between 0 and 1"},
      {two + " --router-small a --router-large c", "error: --router-large: no served model is named 'c'"},
      {two + " --router-small a --router-large a", "error: --router-small and --router-large both name 'a'"},
      {two + " --router-small a --router-large b --router-name b", "error: --router-name 'b' is also a served model's name"},
      {"-m a=" + tiny_model() + " --router-small a --router-large b", "error: the router needs two served models"},
  };
  for (const auto& [args, message] : cases) expect_refused("serve --port 0 -t 1 " + args, message);
}

// router-eval on the repository's labeled set: the table's shape, the
// target share respected, and on the prompts held out from the weights'
// fit, decisions better than always answering with the majority label and
// an APGR above a random router's 0.5.
TEST(Cli, RouterEvalBeatsChanceOnTheHeldOutPrompts) {
  REQUIRE_MODEL(small, "stories260K.gguf");
  REQUIRE_MODEL(large, "TinyStories-656K.f16.gguf");
  const Result r = run("router-eval --data " LLMSERVE_ROUTER_PROMPTS " --small " + small + " --large " + large +
                       " --target-share 0.3 -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("threshold "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("set       prompts  hard  accuracy  large_share  cost_ms/request  all_small_ms  all_large_ms  quality  "
                       "random_q    apgr\n"),
            std::string::npos)
      << r.out;
  auto row = [&](const std::string& name) {
    const size_t at = r.out.find("\n" + name + " ");
    std::vector<double> v;
    if (at == std::string::npos) return v;
    std::istringstream in(r.out.substr(at + name.size() + 1));
    for (double x; v.size() < 10 && in >> x;) v.push_back(x);
    return v;
  };
  const std::vector<double> all = row("all"), held = row("held_out");
  ASSERT_EQ(all.size(), 10u) << r.out;
  ASSERT_EQ(held.size(), 10u) << r.out;
  EXPECT_LE(all[3], 0.3) << "large share";
  const double majority = std::max(held[1], held[0] - held[1]) / held[0];
  EXPECT_GT(held[2], majority) << r.out;
  EXPECT_GT(held[9], 0.5) << r.out;
}

TEST(Cli, RouterEvalRefusesBadInputInOneLine) {
  REQUIRE_MODEL(small, "stories260K.gguf");
  const TempFile bad("bad-router.jsonl", [](const std::string& p) { write_file(p, "{\"label\":\"maybe\",\"prompt\":\"x\"}\n"); });
  const std::string models = " --small " + small + " --large " + small;
  const std::pair<std::string, std::string> cases[] = {
      {"router-eval --data " LLMSERVE_ROUTER_PROMPTS + models + " --target-share 1.5",
       "error: --target-share: must be between 0 and 1"},
      {"router-eval --data " + temp_path("absent.jsonl") + models, "cannot open"},
      {"router-eval --data " + bad.path() + models, ":1: \"label\" must be \"easy\" or \"hard\""},
      {"router-eval --data " LLMSERVE_ROUTER_PROMPTS " --small " + temp_path("absent.gguf") + " --large " + small, "absent.gguf"},
      {"router-eval --data " LLMSERVE_ROUTER_PROMPTS " --small " + small, "--large is required"}};
  for (const auto& [args, message] : cases) expect_refused(args, message, false);
}

// serve's response-cache flags: a value that cannot work, a model name that
// is not served, or a semantic-only flag without --cache semantic is one
// "error: FLAG: ..." line and exit 1, before anything loads.
TEST(Cli, ServeRefusesBadCacheFlags) {
  const std::string m = "-m a=" + tiny_model();
  const std::pair<std::string, std::string> cases[] = {
      {"--cache semantic --cache-tau 1.5", "--cache-tau"},
      {"--cache semantic --cache-tau -0.1", "--cache-tau"},
      {"--cache semantic --cache-tau a=x", "--cache-tau"},
      {"--cache semantic --cache-tau =0.9", "--cache-tau"},
      {"--cache semantic --cache-tau a=0.9 --cache-tau a=0.8", "--cache-tau"},
      {"--cache semantic --cache-tau NOT_SERVED=0.9", "--cache-tau"},
      {"--cache exact --cache-ttl 0", "--cache-ttl"},
      {"--cache exact --cache-ttl -1", "--cache-ttl"},
      {"--cache exact --cache-ttl 0.0001", "--cache-ttl"},
      {"--cache exact --cache-mem 0", "--cache-mem"},
      {"--cache exact --cache-ttl 1e300", "--cache-ttl"},
      {"--cache exact --cache-mem 1e300", "--cache-mem"},
      {"--cache bogus", "--cache"},
      {"--cache semantic --cache-embedder NOT_SERVED", "--cache-embedder"},
      {"--cache semantic --cache-verify maybe", "--cache-verify"},
      {"--cache semantic --cache-verify-margin -1", "--cache-verify-margin"},
      {"--cache exact --cache-tau 0.9", "--cache-tau"},
      {"--cache exact --cache-embedder a", "--cache-embedder"},
      {"--cache-verify off", "--cache-verify"},
      {"--cache exact --cache-verify-margin 1", "--cache-verify-margin"},
      {"--cache exact --cache-embedder ngram", "--cache-embedder"},  // a default, given: still semantic-only
      {"--cache exact --cache-verify on", "--cache-verify"},
  };
  for (const auto& [args, flag] : cases) expect_refused("serve --port 0 -t 1 " + m + " " + args, "error: " + flag + ": ");
}

// serve's key flags: a key beside a key file, an empty key, a key file that
// cannot be read, or an admin key that is also an API key is one
// "error: FLAG: ..." line and exit 1, before anything loads.
TEST(Cli, ServeRefusesBadKeyFlags) {
  const TempFile keys("serve-keys.txt", [](const std::string& p) { write_file(p, "# keys\nshared\n"); });
  const std::string absent = temp_path("absent-keys.txt");
  const std::pair<std::string, std::string> cases[] = {
      {"--admin-key a --admin-key-file " + keys.path(), "--admin-key-file: cannot be given with --admin-key"},
      {"--api-key a --api-key-file " + keys.path(), "--api-key-file: cannot be given with --api-key"},
      {"--admin-key ''", "--admin-key: a key cannot be empty"},
      {"--admin-key a --admin-key ''", "--admin-key: a key cannot be empty"},
      {"--api-key ''", "--api-key: a key cannot be empty"},
      {"--admin-key-file " + absent, "--admin-key-file: " + absent + ": cannot read the key file"},
      {"--api-key x --admin-key x", "--admin-key: a key is also an API key (--api-key)"},
      {"--api-key shared --admin-key-file " + keys.path(), "--admin-key-file: a key is also an API key (--api-key)"},
      {"--api-key-file " + keys.path() + " --admin-key shared", "--admin-key: a key is also an API key (--api-key-file)"},
  };
  for (const auto& [args, message] : cases) expect_refused("serve --port 0 -t 1 -m " + tiny_model() + " " + args, "error: " + message);
}

// serve --admin-key: the start-up line counts the keys; DELETE /v1/cache
// takes the admin key and refuses the API key (403).
TEST(Cli, ServeAdminKeyClearsTheCache) {
  ServeProcess serve("-m " + tiny_model() + " --port 0 -t 1 --cache exact --api-key sk-user --admin-key sk-admin");
  const uint16_t port = serve.port();
  ASSERT_NE(port, 0) << serve.output();
  EXPECT_NE(serve.output().find("| 1 API key(s), 1 admin key(s)\n"), std::string::npos) << serve.output();
  auto clear = [port](const std::string& key) {
    llmserve::server::RawClient c(port);
    c.send("DELETE /v1/cache HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + key + "\r\nConnection: close\r\n\r\n");
    const std::string r = c.read_all();
    return r.substr(0, r.find("\r\n"));
  };
  EXPECT_EQ(clear("sk-admin"), "HTTP/1.1 200 OK");
  EXPECT_EQ(clear("sk-user"), "HTTP/1.1 403 Forbidden");
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.exit_code(), 0) << serve.output();
}

// bench-serve against `serve --cache exact`, one greedy prompt six times, one
// request at a time: the first is a miss, the other five exact hits, in the
// table and in the JSON.
TEST(Cli, BenchServeCountsRequestsPerCacheLayer) {
  ServeProcess serve("-m " + tiny_model() + " --port 0 -t 1 --cache exact");
  const uint16_t port = serve.port();
  ASSERT_NE(port, 0) << serve.output();
  const TempFile dataset("bench-serve-cache.jsonl", [](const std::string& p) {
    write_file(p, R"({"prompt": "Once upon a time", "temperature": 0, "output_len": 8})" "\n");
  });
  const TempFile json("bench-serve-cache.json");
  const Result r = run("bench-serve --url http://127.0.0.1:" + std::to_string(port) + " --dataset " + dataset.path() +
                       " --num-prompts 6 --concurrency 1 --json " + json.path());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("Response cache (x-llmserve-cache)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nexact             5   83.3% "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nmiss              1   16.7% "), std::string::npos) << r.out;

  const auto j = nlohmann::json::parse(read_file(json.path()));
  const auto& cache = j.at("cache");
  EXPECT_EQ(cache.at("exact").at("count"), 5);
  EXPECT_EQ(cache.at("miss").at("count"), 1);
  int total = 0;
  double shares = 0;
  for (const char* layer : {"exact", "semantic", "miss", "bypass"}) {
    total += cache.at(layer).at("count").get<int>();
    shares += cache.at(layer).at("share").get<double>();
    EXPECT_TRUE(cache.at(layer).contains("p99_ttft_ms")) << layer;
  }
  EXPECT_EQ(total, j.at("completed").get<int>());
  EXPECT_EQ(total, 6);
  EXPECT_NEAR(shares, 1.0, 1e-9);
  EXPECT_GT(cache.at("exact").at("mean_e2e_ms").get<double>(), 0);
}
