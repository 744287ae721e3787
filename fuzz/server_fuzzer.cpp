// libFuzzer target for what the server does with untrusted bytes before
// any model work: request bodies (JSON depth pre-scan, parse, validation)
// and chat templates (from model files) rendered with validated messages.
// The first input byte picks the path:
//   even: the rest is a request body, for /v1/completions or (bit 1) /v1/chat/completions;
//         chat messages are rendered through the Llama 2 and Llama 3.1 templates;
//   odd:  the rest is a template source, rendered with a fixed conversation.
// Invariants: only ApiError / TemplateError escape, errors are 4xx with a
// message, validated values are in range, and stop strings never leak.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "server/api_error.h"
#include "server/chat_template.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/stop_strings.h"

namespace {

using namespace llmserve::server;

const char* const kLlama2 =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
    "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if "
    "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] "
    "== 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

// The parts of Llama 3.1's template that touch tools and message fields.
const char* const kToolsTemplate =
    "{{- bos_token }}{%- if tools is defined and tools is not none %}{%- for t in tools %}{{- t | tojson(indent=4) "
    "}}{%- endfor %}{%- endif %}{%- for message in messages %}{%- if 'tool_calls' in message and message.tool_calls "
    "is iterable %}{{- message.tool_calls | tojson }}{%- else %}{{- '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endif %}{%- endfor %}";

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "invariant broken: %s\n", what);
  std::abort();
}

void check_request(const GenerationRequest& r, const RequestLimits& limits) {
  if (r.n < 1 || r.n > limits.max_n) die("n out of range");
  if (r.max_tokens != -1 && (r.max_tokens < 1 || r.max_tokens > limits.max_tokens)) die("max_tokens out of range");
  if (r.stop.size() > static_cast<size_t>(limits.max_stop)) die("too many stop strings");
  if (r.top_logprobs < -1 || r.top_logprobs > 20) die("top_logprobs out of range");
  if (!(r.sampling.temperature >= 0 && r.sampling.temperature <= 2)) die("temperature out of range");
  if (r.include_usage && !r.stream) die("include_usage without stream");
  // Stop strings over the prompt text: what is released never holds one.
  StopMatcher m(r.stop);
  std::string out;
  for (size_t i = 0; i < r.prompt_text.size(); i += 3) out += m.push(r.prompt_text.substr(i, 3));
  out += m.flush();
  for (const auto& s : r.stop)
    if (out.find(s) != std::string::npos) die("a stop string leaked");
}

void request_path(uint8_t mode, const std::string& body) {
  static const ChatTemplate llama2(kLlama2, "<s>", "</s>");
  static const ChatTemplate tools(kToolsTemplate, "<|begin_of_text|>", "<|eot_id|>");
  RequestLimits limits;
  limits.max_json_depth = 16;
  const Endpoint ep = (mode & 2) ? Endpoint::Chat : Endpoint::Completions;
  try {
    const GenerationRequest r = parse_generation_request(ep, parse_json_body(body, limits.max_json_depth), limits);
    check_request(r, limits);
    if (ep == Endpoint::Chat) {
      for (const ChatTemplate* t : {&llama2, &tools}) {
        try {
          t->render(r.messages, nullptr, true);
        } catch (const llmserve::server::jinja::TemplateError&) {
        }
      }
    }
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status > 499 || std::string(e.what()).empty()) die("bad ApiError");
    dump(Json::parse(error_body(e)));  // the error body is valid JSON
  }
}

void template_path(const std::string& source) {
  static const jinja::Value messages = jinja::Value::parse(
      R"([{"role":"system","content":"s"},{"role":"user","content":"Hi"},{"role":"assistant","content":"Yo","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},{"role":"user","content":"More"}])");
  try {
    ChatTemplate t(source, "<s>", "</s>");
    const std::string out = t.render(messages, jinja::Value::array({{{"name", "f"}}}), true);
    if (out.size() > (16u << 20)) die("output beyond the size limit");
  } catch (const jinja::TemplateError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) template_path(rest);
  else request_path(data[0], rest);
  return 0;
}
