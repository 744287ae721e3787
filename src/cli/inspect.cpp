// llmserve inspect: metadata, tensors, parameter and byte counts of a GGUF file.
#include <cstdio>
#include <map>

#include "cli/commands.h"
#include "core/error.h"
#include "engine/engine.h"
#include "gguf/file.h"
#include "model/hparams.h"
#include "model/kv_sizing.h"

namespace llmserve::cli {

namespace {

std::string scalar_to_string(const gguf::Value& v) {
  if (const auto* u = std::get_if<uint64_t>(&v.data)) return std::to_string(*u);
  if (const auto* i = std::get_if<int64_t>(&v.data)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v.data)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", *d);
    return buf;
  }
  if (const auto* b = std::get_if<bool>(&v.data)) return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&v.data)) {
    // Long strings (chat templates) are shown by their start only.
    std::string shown = s->size() > 80 ? s->substr(0, 77) + "..." : *s;
    for (auto& c : shown)
      if (c == '\n') c = ' ';
    return "\"" + shown + "\"";
  }
  return "";
}

std::string value_to_string(const gguf::Value& v) {
  const auto* a = std::get_if<gguf::Array>(&v.data);
  if (!a) return scalar_to_string(v);
  std::string s = "[" + std::string(gguf::value_type_name(a->elem_type)) + " x " + std::to_string(a->items.size()) + "] ";
  for (size_t i = 0; i < a->items.size() && i < 5; ++i) s += (i ? ", " : "") + value_to_string(a->items[i]);
  if (a->items.size() > 5) s += ", ...";
  return s;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", b, units[u]);
  return buf;
}

// What `serve` with default flags would reserve for the KV cache, taking the
// weights out of the memory available now.
void print_kv_pool(const gguf::File& f, uint64_t weight_bytes) {
  try {
    const model::HParams hp = model::read_hparams(f);
    const int max_seqs = engine::EngineConfig{}.max_seqs;
    const size_t available = model::available_memory_bytes();
    const model::KvPoolRequest request{.max_context = hp.n_ctx_train, .max_seqs = max_seqs};
    const auto pool = model::size_kv_pool(hp, request, available > weight_bytes ? available - weight_bytes : 0);
    std::printf("\nKV cache, serve's default pool (--max-seqs %d): %s\n", max_seqs, model::describe(pool).c_str());
  } catch (const Error& e) {
    std::printf("\nKV cache: %s\n", e.what());
  }
}

void run_inspect(const std::string& path) {
  const gguf::File f = gguf::File::open(path);
  std::printf("file: %s\nGGUF version %u, %zu metadata keys, %zu tensors, alignment %lu, data at byte %lu\n\n",
              path.c_str(), f.version(), f.metadata().size(), f.tensors().size(),
              static_cast<unsigned long>(f.alignment()), static_cast<unsigned long>(f.data_offset()));
  std::printf("metadata:\n");
  for (const auto& [key, value] : f.metadata())
    std::printf("  %-45s %-8s %s\n", key.c_str(), std::string(gguf::value_type_name(value.type)).c_str(),
                value_to_string(value).c_str());

  std::printf("\ntensors:\n");
  uint64_t params = 0, bytes = 0;
  std::map<std::string, uint64_t> params_by_type;
  for (const auto& t : f.tensors()) {
    std::string dims;
    for (size_t i = 0; i < t.dims.size(); ++i) dims += (i ? " x " : "") + std::to_string(t.dims[i]);
    const std::string type(gguf::type_info(t.type)->name);
    std::printf("  %-32s %-5s %-20s %12s\n", t.name.c_str(), type.c_str(), dims.c_str(), human_bytes(double(t.n_bytes)).c_str());
    params += t.n_elems;
    bytes += t.n_bytes;
    params_by_type[type] += t.n_elems;
  }
  std::printf("\nparameters: %lu (%.3f M)\ntensor bytes: %lu (%s), %.3f bits per parameter\n",
              static_cast<unsigned long>(params), params / 1e6, static_cast<unsigned long>(bytes),
              human_bytes(double(bytes)).c_str(), params ? 8.0 * bytes / params : 0.0);
  for (const auto& [type, n] : params_by_type)
    std::printf("  %-5s %lu parameters\n", type.c_str(), static_cast<unsigned long>(n));
  print_kv_pool(f, bytes);
}

}  // namespace

void add_inspect(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("inspect", "Print a GGUF file's metadata, tensors and sizes");
  cmd->add_option("model", *path, "GGUF file")->required();
  cmd->callback([path] { run_inspect(*path); });
}

}  // namespace llmserve::cli
