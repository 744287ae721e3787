#include "cli/model_flags.h"

#include <algorithm>
#include <filesystem>

#include "cli/default_model.h"
#include "core/error.h"

namespace llmserve::cli {

namespace {

// RFC 3986's unreserved characters, plus ':' (OpenAI's ids have it).
bool url_safe(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
         c == '~' || c == ':';
}

void check_name(const std::string& flag, const std::string& name) {
  if (name.empty()) throw Error("--model " + flag + ": the name before '=' is empty");
  if (!std::ranges::all_of(name, url_safe))
    throw Error("--model " + flag + ": the name '" + name + "' may hold only letters, digits and - . _ ~ : (it is a URL path segment)");
  if (name == "." || name == "..") throw Error("--model " + flag + ": the name '" + name + "' is a path segment URLs drop");
}

}  // namespace

std::vector<server::ModelFile> served_models(const std::vector<std::string>& model_flags, const std::string& model_name) {
  if (model_flags.size() <= 1 && (model_flags.empty() || model_flags[0].find('=') == std::string::npos)) {
    const std::string path = resolve_model(model_flags.empty() ? "" : model_flags[0]);
    if (!std::filesystem::exists(path)) throw Error("--model " + path + ": no such file");
    return {{model_name.empty() ? std::filesystem::path(path).stem().string() : model_name, path}};
  }
  if (!model_name.empty()) throw Error("--model-name: the models are named by --model NAME=FILE already");
  std::vector<server::ModelFile> models;
  for (const std::string& flag : model_flags) {
    const size_t eq = flag.find('=');
    if (eq == std::string::npos) throw Error("--model " + flag + ": with several models, give each as NAME=FILE");
    server::ModelFile m{flag.substr(0, eq), flag.substr(eq + 1)};
    check_name(flag, m.name);
    if (std::ranges::any_of(models, [&](const server::ModelFile& seen) { return seen.name == m.name; }))
      throw Error("--model " + flag + ": the name '" + m.name + "' is given twice");
    if (!std::filesystem::exists(m.path)) throw Error("--model " + flag + ": no such file");
    models.push_back(std::move(m));
  }
  return models;
}

}  // namespace llmserve::cli
