// llmserve tokenize: text to token ids (and pieces) with a model's tokenizer.
#include <cstdio>
#include <iostream>
#include <iterator>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "gguf/file.h"
#include "tokenizer/tokenizer.h"

namespace llmserve::cli {

namespace {

struct TokenizeOptions {
  std::string model;
  std::string text;
  bool ids_only = false;
  bool no_bos = false;
  bool from_stdin = false;
};

// Pieces are printed quoted, with bytes that would break the line escaped.
std::string printable(const std::string& piece) {
  std::string out;
  for (unsigned char c : piece) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else out += static_cast<char>(c);
  }
  return out;
}

void run_tokenize(const TokenizeOptions& o) {
  // Vocab-only files work: only the tokenizer keys are read, no tensors.
  const gguf::File file = gguf::File::open(resolve_model(o.model));
  const auto tokenizer = tok::Tokenizer::from_gguf(file);
  std::string text = o.text;
  if (o.from_stdin) text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  const auto ids = tokenizer->encode(text, tokenizer->add_bos_by_default() && !o.no_bos);
  if (o.ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
    return;
  }
  for (const int32_t id : ids)
    std::printf("%6d  '%s'\n", id, printable(tokenizer->piece(id, /*render_special=*/true)).c_str());
  std::printf("%zu tokens\n", ids.size());
}

}  // namespace

void add_tokenize(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids (and pieces) of a text");
  cmd->add_option("-m,--model", o->model, "GGUF file with a tokenizer (vocab-only files work)");
  cmd->add_flag("--ids", o->ids_only, "Print only the ids, space-separated, on one line");
  cmd->add_flag("--no-bos", o->no_bos, "Do not add the BOS token");
  auto* in = cmd->add_flag("--stdin", o->from_stdin, "Read the text verbatim from standard input");
  cmd->add_option("text", o->text, "Text to tokenize")->excludes(in);
  cmd->callback([o] { run_tokenize(*o); });
}

}  // namespace llmserve::cli
