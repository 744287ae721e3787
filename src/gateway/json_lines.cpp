#include "gateway/json_lines.h"

#include <fstream>

#include "core/error.h"

namespace llmserve::gateway {

void for_each_json_line(const std::string& path,
                        const std::function<void(const nlohmann::json& object, const std::string& where)>& fn) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open");
  std::string text;
  for (int line_no = 1; std::getline(in, text); ++line_no) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    const nlohmann::json line = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!line.is_object()) throw Error(where + "not a JSON object");
    fn(line, where);
  }
}

}  // namespace llmserve::gateway
