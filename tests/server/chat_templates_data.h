#pragma once
// Public chat templates of the model families llmserve serves, as they
// appear in each model's tokenizer_config.json (and so in GGUF
// tokenizer.chat_template), with conversations and the prompts that
// transformers' renderer (Jinja2, trim_blocks + lstrip_blocks) produces.
#include <string>

struct RenderCase {
  const char* family;
  const char* label;
  const char* source;
  const char* bos;
  const char* eos;
  const char* messages_json;
  bool add_generation_prompt;
  const char* expected;
};

// Generated: expected renderings computed with Jinja2 3.1.6 (trim_blocks, lstrip_blocks).
const char* const kLlama2 =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
const char* const kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n"
    "\n"
    "'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "' }}{% endif %}";
const char* const kMistral =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}";
const char* const kQwen2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n"
    "' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n"
    "' + message['content'] + '<|im_end|>' + '\n"
    "'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n"
    "' }}{% endif %}";
const char* const kZephyr =
    "{% for message in messages %}\n"
    "{% if message['role'] == 'user' %}\n"
    "{{ '<|user|>\n"
    "' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'system' %}\n"
    "{{ '<|system|>\n"
    "' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'assistant' %}\n"
    "{{ '<|assistant|>\n"
    "'  + message['content'] + eos_token }}\n"
    "{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n"
    "{{ '<|assistant|>' }}\n"
    "{% endif %}\n"
    "{% endfor %}";
const char* const kTinyllama = kZephyr;  // TinyLlama-1.1B-Chat-v1.0 ships Zephyr's template
const char* const kSmollm =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n"
    "' + message['content'] + '<|im_end|>' + '\n"
    "'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n"
    "' }}{% endif %}";
const char* const kLlama31 =
    "{{- bos_token }}\n"
    "{%- if custom_tools is defined %}\n"
    "    {%- set tools = custom_tools %}\n"
    "{%- endif %}\n"
    "{%- if not tools_in_user_message is defined %}\n"
    "    {%- set tools_in_user_message = true %}\n"
    "{%- endif %}\n"
    "{%- if not date_string is defined %}\n"
    "    {%- set date_string = \"26 Jul 2024\" %}\n"
    "{%- endif %}\n"
    "{%- if not tools is defined %}\n"
    "    {%- set tools = none %}\n"
    "{%- endif %}\n"
    "\n"
    "{#- This block extracts the system message, so we can slot it into the right place. #}\n"
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {%- set system_message = messages[0]['content']|trim %}\n"
    "    {%- set messages = messages[1:] %}\n"
    "{%- else %}\n"
    "    {%- set system_message = \"\" %}\n"
    "{%- endif %}\n"
    "\n"
    "{#- System message + builtin tools #}\n"
    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
    "{%- if builtin_tools is defined or tools is not none %}\n"
    "    {{- \"Environment: ipython\\n\" }}\n"
    "{%- endif %}\n"
    "{%- if builtin_tools is defined %}\n"
    "    {{- \"Tools: \" + builtin_tools | reject('equalto', 'code_interpreter') | join(\", \") + \"\\n\\n\"}}\n"
    "{%- endif %}\n"
    "{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n"
    "{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n"
    "{%- if tools is not none and not tools_in_user_message %}\n"
    "    {{- \"You have access to the following functions. To call a function, please respond with JSON for a function call.\" }}\n"
    "    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}\n"
    "    {{- \"Do not use variables.\\n\\n\" }}\n"
    "    {%- for t in tools %}\n"
    "        {{- t | tojson(indent=4) }}\n"
    "        {{- \"\\n\\n\" }}\n"
    "    {%- endfor %}\n"
    "{%- endif %}\n"
    "{{- system_message }}\n"
    "{{- \"<|eot_id|>\" }}\n"
    "\n"
    "{#- Custom tools are passed in a user message with some extra guidance #}\n"
    "{%- if tools_in_user_message and not tools is none %}\n"
    "    {#- Extract the first user message so we can plug it in here #}\n"
    "    {%- if messages | length != 0 %}\n"
    "        {%- set first_user_message = messages[0]['content']|trim %}\n"
    "        {%- set messages = messages[1:] %}\n"
    "    {%- else %}\n"
    "        {{- raise_exception(\"Cannot put tools in the first user message when there's no first user message!\") }}\n"
    "{%- endif %}\n"
    "    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}\n"
    "    {{- \"Given the following functions, please respond with a JSON for a function call \" }}\n"
    "    {{- \"with its proper arguments that best answers the given prompt.\\n\\n\" }}\n"
    "    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}\n"
    "    {{- \"Do not use variables.\\n\\n\" }}\n"
    "    {%- for t in tools %}\n"
    "        {{- t | tojson(indent=4) }}\n"
    "        {{- \"\\n\\n\" }}\n"
    "    {%- endfor %}\n"
    "    {{- first_user_message + \"<|eot_id|>\"}}\n"
    "{%- endif %}\n"
    "\n"
    "{%- for message in messages %}\n"
    "    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}\n"
    "        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}\n"
    "    {%- elif 'tool_calls' in message %}\n"
    "        {%- if not message.tool_calls|length == 1 %}\n"
    "            {{- raise_exception(\"This model only supports single tool-calls at once!\") }}\n"
    "        {%- endif %}\n"
    "        {%- set tool_call = message.tool_calls[0].function %}\n"
    "        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}\n"
    "            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
    "            {{- \"<|python_tag|>\" + tool_call.name + \".call(\" }}\n"
    "            {%- for arg_name, arg_val in tool_call.arguments | items %}\n"
    "                {{- arg_name + '=\"' + arg_val + '\"' }}\n"
    "                {%- if not loop.last %}\n"
    "                    {{- \", \" }}\n"
    "                {%- endif %}\n"
    "                {%- endfor %}\n"
    "            {{- \")\" }}\n"
    "        {%- else  %}\n"
    "            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
    "            {{- '{\"name\": \"' + tool_call.name + '\", ' }}\n"
    "            {{- '\"parameters\": ' }}\n"
    "            {{- tool_call.arguments | tojson }}\n"
    "            {{- \"}\" }}\n"
    "        {%- endif %}\n"
    "        {%- if builtin_tools is defined %}\n"
    "            {#- This means we're in ipython mode #}\n"
    "            {{- \"<|eom_id|>\" }}\n"
    "        {%- else %}\n"
    "            {{- \"<|eot_id|>\" }}\n"
    "        {%- endif %}\n"
    "    {%- elif message.role == \"tool\" or message.role == \"ipython\" %}\n"
    "        {{- \"<|start_header_id|>ipython<|end_header_id|>\\n\\n\" }}\n"
    "        {%- if message.content is mapping or message.content is iterable %}\n"
    "            {{- message.content | tojson }}\n"
    "        {%- else %}\n"
    "            {{- message.content }}\n"
    "        {%- endif %}\n"
    "        {{- \"<|eot_id|>\" }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
    "{%- endif %}\n"
    "";

const RenderCase kCases[] = {
    {"llama2", "basic", kLlama2, "<s>", "</s>", "[{\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", true,
     "<s>[INST] Hello! [/INST] Hi there. </s><s>[INST] Tell me a story. [/INST]"},
    {"llama2", "system", kLlama2, "<s>", "</s>", "[{\"role\": \"system\", \"content\": \"You are terse.\"}, {\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", true,
     "<s>[INST] <<SYS>>\n"
    "You are terse.\n"
    "<</SYS>>\n"
    "\n"
    "Hello! [/INST] Hi there. </s><s>[INST] Tell me a story. [/INST]"},
    {"llama2", "no_generation_prompt", kLlama2, "<s>", "</s>", "[{\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", false,
     "<s>[INST] Hello! [/INST] Hi there. </s><s>[INST] Tell me a story. [/INST]"},
    {"llama3", "basic", kLlama3, "<|begin_of_text|>", "<|eot_id|>", "[{\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", true,
     "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Hello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "Hi there.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Tell me a story.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    ""},
    {"llama3", "system", kLlama3, "<|begin_of_text|>", "<|eot_id|>", "[{\"role\": \"system\", \"content\": \"You are terse.\"}, {\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", true,
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
    "\n"
    "You are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Hello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "Hi there.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Tell me a story.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    ""},
    {"llama3", "no_generation_prompt", kLlama3, "<|begin_of_text|>", "<|eot_id|>", "[{\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", false,
     "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Hello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "Hi there.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Tell me a story.<|eot_id|>"},
    {"mistral", "basic", kMistral, "<s>", "</s>", "[{\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", true,
     "<s>[INST] Hello! [/INST] Hi there. </s>[INST] Tell me a story. [/INST]"},
    {"mistral", "no_generation_prompt", kMistral, "<s>", "</s>", "[{\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", false,
     "<s>[INST] Hello! [/INST] Hi there. </s>[INST] Tell me a story. [/INST]"},
    {"qwen2", "basic", kQwen2, "", "<|im_end|>", "[{\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", true,
     "<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n"
    "<|im_start|>user\n"
    "Hello!<|im_end|>\n"
    "<|im_start|>assistant\n"
    " Hi there. <|im_end|>\n"
    "<|im_start|>user\n"
    "Tell me a story.<|im_end|>\n"
    "<|im_start|>assistant\n"
    ""},
    {"qwen2", "system", kQwen2, "", "<|im_end|>", "[{\"role\": \"system\", \"content\": \"You are terse.\"}, {\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", true,
     "<|im_start|>system\n"
    "You are terse.<|im_end|>\n"
    "<|im_start|>user\n"
    "Hello!<|im_end|>\n"
    "<|im_start|>assistant\n"
    " Hi there. <|im_end|>\n"
    "<|im_start|>user\n"
    "Tell me a story.<|im_end|>\n"
    "<|im_start|>assistant\n"
    ""},
    {"qwen2", "no_generation_prompt", kQwen2, "", "<|im_end|>", "[{\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", false,
     "<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n"
    "<|im_start|>user\n"
    "Hello!<|im_end|>\n"
    "<|im_start|>assistant\n"
    " Hi there. <|im_end|>\n"
    "<|im_start|>user\n"
    "Tell me a story.<|im_end|>\n"
    ""},
    {"zephyr", "basic", kZephyr, "<s>", "</s>", "[{\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", true,
     "<|user|>\n"
    "Hello!</s>\n"
    "<|assistant|>\n"
    " Hi there. </s>\n"
    "<|user|>\n"
    "Tell me a story.</s>\n"
    "<|assistant|>\n"
    ""},
    {"zephyr", "system", kZephyr, "<s>", "</s>", "[{\"role\": \"system\", \"content\": \"You are terse.\"}, {\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", true,
     "<|system|>\n"
    "You are terse.</s>\n"
    "<|user|>\n"
    "Hello!</s>\n"
    "<|assistant|>\n"
    " Hi there. </s>\n"
    "<|user|>\n"
    "Tell me a story.</s>\n"
    "<|assistant|>\n"
    ""},
    {"zephyr", "no_generation_prompt", kZephyr, "<s>", "</s>", "[{\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", false,
     "<|user|>\n"
    "Hello!</s>\n"
    "<|assistant|>\n"
    " Hi there. </s>\n"
    "<|user|>\n"
    "Tell me a story.</s>\n"
    ""},
    {"tinyllama", "basic", kTinyllama, "<s>", "</s>", "[{\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", true,
     "<|user|>\n"
    "Hello!</s>\n"
    "<|assistant|>\n"
    " Hi there. </s>\n"
    "<|user|>\n"
    "Tell me a story.</s>\n"
    "<|assistant|>\n"
    ""},
    {"tinyllama", "system", kTinyllama, "<s>", "</s>", "[{\"role\": \"system\", \"content\": \"You are terse.\"}, {\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", true,
     "<|system|>\n"
    "You are terse.</s>\n"
    "<|user|>\n"
    "Hello!</s>\n"
    "<|assistant|>\n"
    " Hi there. </s>\n"
    "<|user|>\n"
    "Tell me a story.</s>\n"
    "<|assistant|>\n"
    ""},
    {"tinyllama", "no_generation_prompt", kTinyllama, "<s>", "</s>", "[{\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", false,
     "<|user|>\n"
    "Hello!</s>\n"
    "<|assistant|>\n"
    " Hi there. </s>\n"
    "<|user|>\n"
    "Tell me a story.</s>\n"
    ""},
    {"smollm", "basic", kSmollm, "<|im_start|>", "<|im_end|>", "[{\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", true,
     "<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\n"
    "Hello!<|im_end|>\n"
    "<|im_start|>assistant\n"
    " Hi there. <|im_end|>\n"
    "<|im_start|>user\n"
    "Tell me a story.<|im_end|>\n"
    "<|im_start|>assistant\n"
    ""},
    {"smollm", "system", kSmollm, "<|im_start|>", "<|im_end|>", "[{\"role\": \"system\", \"content\": \"You are terse.\"}, {\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", true,
     "<|im_start|>system\n"
    "You are terse.<|im_end|>\n"
    "<|im_start|>user\n"
    "Hello!<|im_end|>\n"
    "<|im_start|>assistant\n"
    " Hi there. <|im_end|>\n"
    "<|im_start|>user\n"
    "Tell me a story.<|im_end|>\n"
    "<|im_start|>assistant\n"
    ""},
    {"smollm", "no_generation_prompt", kSmollm, "<|im_start|>", "<|im_end|>", "[{\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", false,
     "<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\n"
    "Hello!<|im_end|>\n"
    "<|im_start|>assistant\n"
    " Hi there. <|im_end|>\n"
    "<|im_start|>user\n"
    "Tell me a story.<|im_end|>\n"
    ""},
    {"llama31", "basic", kLlama31, "<|begin_of_text|>", "<|eot_id|>", "[{\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", true,
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
    "\n"
    "Cutting Knowledge Date: December 2023\n"
    "Today Date: 26 Jul 2024\n"
    "\n"
    "<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Hello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "Hi there.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Tell me a story.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    ""},
    {"llama31", "system", kLlama31, "<|begin_of_text|>", "<|eot_id|>", "[{\"role\": \"system\", \"content\": \"You are terse.\"}, {\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", true,
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
    "\n"
    "Cutting Knowledge Date: December 2023\n"
    "Today Date: 26 Jul 2024\n"
    "\n"
    "You are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Hello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "Hi there.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Tell me a story.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    ""},
    {"llama31", "no_generation_prompt", kLlama31, "<|begin_of_text|>", "<|eot_id|>", "[{\"role\": \"user\", \"content\": \"Hello!\"}, {\"role\": \"assistant\", \"content\": \" Hi there. \"}, {\"role\": \"user\", \"content\": \"Tell me a story.\"}]", false,
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
    "\n"
    "Cutting Knowledge Date: December 2023\n"
    "Today Date: 26 Jul 2024\n"
    "\n"
    "<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Hello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "Hi there.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Tell me a story.<|eot_id|>"},
};

const char* const kToolsJson = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather for a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}]";
const char* const kToolMessagesJson = "[{\"role\": \"system\", \"content\": \"Use tools.\"}, {\"role\": \"user\", \"content\": \"Weather in Paris?\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}]}, {\"role\": \"tool\", \"content\": \"sunny, 21 C\"}]";
const char* const kToolsExpected =
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
    "\n"
    "Environment: ipython\n"
    "Cutting Knowledge Date: December 2023\n"
    "Today Date: 26 Jul 2024\n"
    "\n"
    "Use tools.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
    "\n"
    "Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n"
    "\n"
    "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n"
    "\n"
    "{\n"
    "    \"type\": \"function\",\n"
    "    \"function\": {\n"
    "        \"name\": \"get_weather\",\n"
    "        \"description\": \"Weather for a city\",\n"
    "        \"parameters\": {\n"
    "            \"type\": \"object\",\n"
    "            \"properties\": {\n"
    "                \"city\": {\n"
    "                    \"type\": \"string\"\n"
    "                }\n"
    "            },\n"
    "            \"required\": [\n"
    "                \"city\"\n"
    "            ]\n"
    "        }\n"
    "    }\n"
    "}\n"
    "\n"
    "Weather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n"
    "\n"
    "\"sunny, 21 C\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "";
