// llmserve: one binary, one subcommand per job.
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/error.h"
#include "kernels/cpu.h"

int main(int argc, char** argv) {
  CLI::App app{"llmserve: LLM inference and serving engine for GGUF models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "llmserve " LLMSERVE_VERSION);
  app.failure_message([](const CLI::App*, const CLI::Error& e) { return "error: " + std::string(e.what()) + "\n"; });
  llmserve::cli::add_generate(app);
  llmserve::cli::add_inspect(app);
  llmserve::cli::add_tokenize(app);
  llmserve::cli::add_gen_model(app);
  llmserve::cli::add_bench(app);
  llmserve::cli::add_serve(app);
  llmserve::cli::add_bench_serve(app);
  llmserve::cli::add_cache_eval(app);
  llmserve::cli::add_router_eval(app);
  try {
    // The kernels' environment settings (LLMSERVE_ISA, LLMSERVE_PREFETCH,
    // LLMSERVE_PREFETCH_NTA, LLMSERVE_AMX), read now: a bad value is then
    // one error at startup, not a server that starts and fails every request.
    llmserve::kernels::active_isa();
    llmserve::kernels::prefetch_weights();
    llmserve::kernels::prefetch_non_temporal();
    llmserve::kernels::use_amx();
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every bad flag or value exits 1, as every other error does.
    return app.exit(e) == 0 ? 0 : 1;
  } catch (const llmserve::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
