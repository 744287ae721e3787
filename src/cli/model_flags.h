#pragma once
// serve's models from its flags: --model NAME=FILE, repeatable, or the
// one-model shorthand --model FILE, named by --model-name or else the
// file's stem (no --model: the built-in default model).
#include <string>
#include <vector>

#include "server/server.h"

namespace llmserve::cli {

// Throws Error naming the flag and value that is wrong: an empty name, one
// given twice, one with characters a URL path segment does not carry as
// they are (it is the {id} of /v1/models/{id}), a file that does not
// exist, a FILE without NAME= among several, --model-name beside NAME=FILE.
std::vector<server::ModelFile> served_models(const std::vector<std::string>& model_flags, const std::string& model_name);

}  // namespace llmserve::cli
