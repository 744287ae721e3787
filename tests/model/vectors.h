#pragma once
// Reference test vectors shipped beside the models in ../shared/models.
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "test_models.h"

inline nlohmann::json load_vectors(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}
