#!/usr/bin/env python3
# Regenerates tests/server/chat_templates_data.h: the chat templates of the
# model families llmserve serves (as published in each model's
# tokenizer_config.json), a few conversations, and the prompts Jinja2 renders
# from them the way Hugging Face transformers' apply_chat_template does
# (sandboxed environment, trim_blocks + lstrip_blocks, loopcontrols, a
# json.dumps-based tojson that keeps key order, raise_exception).
# chat_template_test.cpp checks llmserve's own renderer against those prompts.
#
# Run from the repository root (Debian's python3-jinja2; no pip packages):
#   apt-get install python3-jinja2
#   /usr/bin/python3 scripts/gen_chat_templates.py            # rewrite the header
#   /usr/bin/python3 scripts/gen_chat_templates.py --check    # exit 1 if it differs
# To add a family or a case, edit FAMILIES / CONVERSATIONS below and rerun.
import argparse
import difflib
import json
import pathlib
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "server" / "chat_templates_data.h"

# ---- the templates, verbatim --------------------------------------------------

LLAMA2 = r'''{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}'''

LLAMA3 = r'''{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>

'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>

' }}{% endif %}'''

MISTRAL = r'''{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}'''

QWEN2 = r'''{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system
You are a helpful assistant.<|im_end|>
' }}{% endif %}{{'<|im_start|>' + message['role'] + '
' + message['content'] + '<|im_end|>' + '
'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant
' }}{% endif %}'''

ZEPHYR = r'''{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>
'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}'''

SMOLLM = r'''{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system
You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>
' }}{% endif %}{{'<|im_start|>' + message['role'] + '
' + message['content'] + '<|im_end|>' + '
'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant
' }}{% endif %}'''

LLAMA31 = r'''{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {#- This means we're in ipython mode #}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
'''

TOOLMESSAGESJSON = r'''[{"role": "system", "content": "Use tools."}, {"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}, {"role": "tool", "content": "sunny, 21 C"}]'''

# (C++ name, template, bos, eos, conversations); conversations by name.
FAMILIES = [
    ("llama2", "kLlama2", LLAMA2, "<s>", "</s>", ["basic", "system", "no_generation_prompt"]),
    ("llama3", "kLlama3", LLAMA3, "<|begin_of_text|>", "<|eot_id|>", ["basic", "system", "no_generation_prompt"]),
    # Mistral's template rejects a system message.
    ("mistral", "kMistral", MISTRAL, "<s>", "</s>", ["basic", "no_generation_prompt"]),
    ("qwen2", "kQwen2", QWEN2, "", "<|im_end|>", ["basic", "system", "no_generation_prompt"]),
    ("zephyr", "kZephyr", ZEPHYR, "<s>", "</s>", ["basic", "system", "no_generation_prompt"]),
    ("tinyllama", "kTinyllama", ZEPHYR, "<s>", "</s>", ["basic", "system", "no_generation_prompt"]),
    ("smollm", "kSmollm", SMOLLM, "<|im_start|>", "<|im_end|>", ["basic", "system", "no_generation_prompt"]),
    ("llama31", "kLlama31", LLAMA31, "<|begin_of_text|>", "<|eot_id|>", ["basic", "system", "no_generation_prompt"]),
]
# Templates declared under their own name; the others alias the first family
# that declared the same text.
ALIASES = {"kTinyllama": ("kZephyr", "TinyLlama-1.1B-Chat-v1.0 ships Zephyr's template")}

BASIC = [
    {"role": "user", "content": "Hello!"},
    {"role": "assistant", "content": " Hi there. "},
    {"role": "user", "content": "Tell me a story."},
]
CONVERSATIONS = {
    "basic": (BASIC, True),
    "system": ([{"role": "system", "content": "You are terse."}] + BASIC, True),
    "no_generation_prompt": (BASIC, False),
}

# Llama 3.1 with a tool definition and a tool call, rendered with tools.
TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]
TOOL_MESSAGES = [
    {"role": "system", "content": "Use tools."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "sunny, 21 C"},
]

# ---- rendering, as transformers does it ----------------------------------------


def environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def render(env, source, bos, eos, messages, add_generation_prompt, tools=None):
    return env.from_string(source).render(messages=messages, tools=tools, bos_token=bos, eos_token=eos,
                                          add_generation_prompt=add_generation_prompt)


# ---- C++ output -----------------------------------------------------------------


def c_literal(text):
    """A C string literal of `text`, split after each newline, continuation lines indented 4."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    assert all(32 <= ord(c) < 127 or c == "\n" for c in escaped), "only printable ASCII is written"
    pieces = escaped.split("\n")
    return '\n    '.join('"' + p + ('\\n' if i + 1 < len(pieces) else '') + '"' for i, p in enumerate(pieces))


def header():
    env = environment()
    out = [
        "#pragma once",
        "// Public chat templates of the model families llmserve serves, as they",
        "// appear in each model's tokenizer_config.json (and so in GGUF",
        "// tokenizer.chat_template), with conversations and the prompts that",
        "// transformers' renderer (Jinja2, trim_blocks + lstrip_blocks) produces.",
        "#include <string>",
        "",
        "struct RenderCase {",
        "  const char* family;",
        "  const char* label;",
        "  const char* source;",
        "  const char* bos;",
        "  const char* eos;",
        "  const char* messages_json;",
        "  bool add_generation_prompt;",
        "  const char* expected;",
        "};",
        "",
        "// Generated by scripts/gen_chat_templates.py: expected renderings computed",
        f"// with Jinja2 {jinja2.__version__} (trim_blocks, lstrip_blocks). Do not edit by hand.",
    ]
    declared = set()
    for _, name, source, _, _, _ in FAMILIES:
        if name in declared:
            continue
        declared.add(name)
        if name in ALIASES:
            target, why = ALIASES[name]
            out.append(f"const char* const {name} = {target};  // {why}")
        else:
            out.append(f"const char* const {name} =\n    {c_literal(source)};")
    out += ["", "const RenderCase kCases[] = {"]
    for family, name, source, bos, eos, labels in FAMILIES:
        for label in labels:
            messages, gen = CONVERSATIONS[label]
            expected = render(env, source, bos, eos, messages, gen)
            out.append(f'    {{"{family}", "{label}", {name}, "{bos}", "{eos}", {c_literal(json.dumps(messages))}, '
                       f'{"true" if gen else "false"},\n     {c_literal(expected)}}},')
    out += ["};", ""]
    tools_expected = render(env, LLAMA31, "<|begin_of_text|>", "<|eot_id|>", TOOL_MESSAGES, True, tools=TOOLS)
    out.append(f"const char* const kToolsJson = {c_literal(json.dumps(TOOLS))};")
    out.append(f"const char* const kToolMessagesJson = {c_literal(json.dumps(TOOL_MESSAGES))};")
    out.append(f"const char* const kToolsExpected =\n    {c_literal(tools_expected)};")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description="Regenerate tests/server/chat_templates_data.h.")
    parser.add_argument("--check", action="store_true", help="compare with the checked-in header, write nothing")
    parser.add_argument("-o", "--output", type=pathlib.Path, default=OUT)
    args = parser.parse_args()
    text = header()
    if args.check:
        old = args.output.read_text()
        if old == text:
            print(f"{args.output}: up to date")
            return 0
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                   str(args.output), "generated"))
        return 1
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
