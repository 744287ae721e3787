#pragma once
// Each subcommand registers its flags on the app and runs when selected.
// Commands report failure by throwing llmserve::Error; main() turns that
// into one "error: ..." line and exit code 1.
#include <CLI/CLI.hpp>

namespace llmserve::cli {

void add_generate(CLI::App& app);
void add_inspect(CLI::App& app);
void add_tokenize(CLI::App& app);
void add_gen_model(CLI::App& app);
void add_bench(CLI::App& app);
void add_serve(CLI::App& app);
void add_bench_serve(CLI::App& app);
void add_cache_eval(CLI::App& app);
void add_router_eval(CLI::App& app);

}  // namespace llmserve::cli
