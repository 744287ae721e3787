#include <gtest/gtest.h>

#include "chat_templates_data.h"
#include "server/chat_template.h"

namespace llmserve::server {
namespace {

using jinja::Value;

class RenderFamilies : public ::testing::TestWithParam<RenderCase> {};

TEST_P(RenderFamilies, MatchesJinja2) {
  const RenderCase& c = GetParam();
  ChatTemplate t(c.source, c.bos, c.eos);
  EXPECT_EQ(t.render(Value::parse(c.messages_json), Value(), c.add_generation_prompt), c.expected);
}

INSTANTIATE_TEST_SUITE_P(ChatTemplates, RenderFamilies, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<RenderCase>& info) {
                           return std::string(info.param.family) + "_" + info.param.label;
                         });

TEST(ChatTemplate, Llama31WithToolCalls) {
  ChatTemplate t(kLlama31, "<|begin_of_text|>", "<|eot_id|>");
  EXPECT_EQ(t.render(Value::parse(kToolMessagesJson), Value::parse(kToolsJson), true), kToolsExpected);
}

TEST(ChatTemplate, RaiseExceptionBecomesTemplateError) {
  ChatTemplate t(kLlama2, "<s>", "</s>");
  const Value two_users = Value::parse(R"([{"role":"user","content":"a"},{"role":"user","content":"b"}])");
  try {
    t.render(two_users, Value(), true);
    FAIL() << "expected TemplateError";
  } catch (const jinja::TemplateError& e) {
    EXPECT_NE(std::string(e.what()).find("Conversation roles must alternate"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, FallbackIsChatMl) {
  ChatTemplate t("", "<s>", "</s>");
  EXPECT_TRUE(t.is_fallback());
  EXPECT_EQ(t.render(Value::parse(R"([{"role":"user","content":"Hi"}])"), Value(), true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

std::string render(const std::string& src, const Value& ctx = Value::object()) { return jinja::Template(src).render(ctx); }

TEST(Jinja, ExpressionsAndFilters) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ 2 ** 3 }}|{{ 1 / 2 }}"), "7|3|-4|1|8.0|0.5");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none }}|{{ 'ab' * 2 }}|{{ [1, 2] + [3] }}"), "a1None|abab|[1, 2, 3]");
  EXPECT_EQ(render("{{ '  x ' | trim }}|{{ 'aB' | upper }}|{{ 'aB' | lower }}|{{ [1,2,3] | length }}"), "x|AB|ab|3");
  EXPECT_EQ(render("{{ undefined_thing | default('d') }}|{{ '' | default('e', true) }}|{{ [1,2] | join('-') }}"), "d|e|1-2");
  EXPECT_EQ(render("{{ {'b': 1, 'a': [true, none, 'x\"']} | tojson }}"), R"({"b": 1, "a": [true, null, "x\""]})");
  EXPECT_EQ(render("{{ 'a,b' .split(',') }}|{{ 'Hello'[1:3] }}|{{ [1,2,3][::-1] }}|{{ [1,2,3][-1] }}"), "['a', 'b']|el|[3, 2, 1]|3");
  EXPECT_EQ(render("{{ 'x' if true else 'y' }}{{ 'z' if false }}|{{ 'b' in 'abc' }}|{{ 3 not in [1, 2] }}"), "x|True|True");
  EXPECT_EQ(render("{{ x is defined }}|{{ x is not defined }}|{{ none is none }}|{{ 4 is divisibleby 2 }}"), "False|True|True|True");
  EXPECT_EQ(render("{{ [{'r': 'a'}, {'r': 'b'}] | selectattr('r', 'equalto', 'b') | list | length }}"), "1");
  EXPECT_EQ(render("{{ [{'r': 'a'}, {'r': 'b'}] | map(attribute='r') | join }}"), "ab");
}

TEST(Jinja, StatementsAndScopes) {
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}"), "11,22,33");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ loop.length }}{% endfor %}"), "2242");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
  // A set inside a loop does not leak out of it; a namespace does.
  EXPECT_EQ(render("{% set n = 0 %}{% for x in [1, 2] %}{% set n = n + x %}{% endfor %}{{ n }}"), "0");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for x in [1, 2] %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}"), "3");
  EXPECT_EQ(render("{% set s %}in{{ 1 }}{% endset %}[{{ s }}]"), "[in1]");
  EXPECT_EQ(render("{% if false %}a{% elif 1 == 1 %}b{% else %}c{% endif %}"), "b");
  EXPECT_EQ(render("{# comment #}{{ range(3) | list }}"), "[0, 1, 2]");
}

TEST(Jinja, WhitespaceControl) {
  EXPECT_EQ(render("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(render("x\n  {% if true %}\n  y\n  {% endif %}\nz"), "x\n  y\nz");  // trim_blocks + lstrip_blocks
  EXPECT_EQ(render("{%- if true -%}  q  {%- endif -%}"), "q");
}

TEST(Jinja, ErrorsNameTheLine) {
  auto message = [](const std::string& src) {
    try {
      render(src);
    } catch (const jinja::TemplateError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("{% if x %}").find("missing endif"), std::string::npos);
  EXPECT_NE(message("line1\n{{ 1 + }}").find("line 2"), std::string::npos);
  EXPECT_NE(message("{{ 'a' + 1 }}").find("cannot add"), std::string::npos);
  EXPECT_NE(message("{{ 'x' | nosuchfilter }}").find("unknown filter"), std::string::npos);
  EXPECT_NE(message("{% macro m() %}{% endmacro %}").find("unsupported tag"), std::string::npos);
  EXPECT_NE(message("{{ 1 / 0 }}").find("division by zero"), std::string::npos);
}

TEST(Jinja, HostileTemplatesAreBounded) {
  EXPECT_THROW(render("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"), jinja::TemplateError);
  std::string nested;
  for (int i = 0; i < 300; ++i) nested = "{% if true %}" + nested + "{% endif %}";
  EXPECT_THROW(render(nested), jinja::TemplateError);
  EXPECT_THROW(render("{% for i in range(100000000) %}{% endfor %}"), jinja::TemplateError);
  EXPECT_THROW(render("{% set s = 'x' * 100000000 %}"), jinja::TemplateError);
  EXPECT_THROW(render("{% for a in range(2000) %}{% for b in range(2000) %}{% endfor %}{% endfor %}"), jinja::TemplateError);
}

}  // namespace
}  // namespace llmserve::server
