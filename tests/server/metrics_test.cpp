#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "server/metrics.h"

namespace llmserve::server {
namespace {

// Every non-comment line is "name{labels} value" or "name value" with a
// numeric value, and every sample's family has one HELP and one TYPE line
// before it.
void expect_valid_exposition(const std::string& text) {
  std::istringstream in(text);
  std::set<std::string> typed;
  for (std::string line; std::getline(in, line);) {
    ASSERT_FALSE(line.empty());
    if (line.starts_with("# HELP ")) continue;
    if (line.starts_with("# TYPE ")) {
      std::istringstream l(line.substr(7));
      std::string name, type;
      l >> name >> type;
      EXPECT_TRUE(type == "counter" || type == "gauge" || type == "histogram") << line;
      EXPECT_TRUE(typed.insert(name).second) << "a second TYPE for " << name;
      continue;
    }
    const size_t brace = line.find('{');
    const size_t value_at = brace == std::string::npos ? line.find(' ') + 1 : line.rfind('}') + 2;
    ASSERT_GT(value_at, 0u) << line;
    std::string name = line.substr(0, brace == std::string::npos ? value_at - 1 : brace);
    for (const char* suffix : {"_bucket", "_sum", "_count"})
      if (!typed.count(name) && name.ends_with(suffix)) name.resize(name.size() - std::string(suffix).size());
    EXPECT_TRUE(typed.count(name)) << "no TYPE for " << line;
    EXPECT_TRUE(name.starts_with("llmserve:")) << line;
    size_t pos = 0;
    std::stod(line.substr(value_at), &pos);
    EXPECT_GT(pos, 0u) << line;
  }
}

TEST(Histogram, CumulativeBucketsSumAndCount) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.1);  // bounds are inclusive ("le")
  h.observe(0.5);
  h.observe(5.0);
  const auto s = h.snapshot();
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.sum, 5.65);
}

TEST(ServerMetrics, RendersVllmStyleNames) {
  ModelMetrics m;
  m.time_to_first_token.observe(0.02);
  m.inter_token_latency.observe(0.004);
  m.count_outcome(Outcome::Stop);
  m.count_outcome(Outcome::Abort);
  ServerMetrics server;
  server.count_http_status(200);
  server.count_rejection("queue_full");
  engine::EngineMetrics e;
  e.scheduler.running = 2;
  e.scheduler.waiting = 1;
  e.scheduler.blocks_total = 100;
  e.scheduler.blocks_used = 25;
  e.scheduler.prefix_queried_tokens = 40;
  e.scheduler.prefix_hit_tokens = 16;
  e.prompt_tokens = 123;
  e.generated_tokens = 456;
  e.spec.drafts = 7;
  e.spec.draft_tokens = 28;
  e.spec.accepted_tokens = 19;
  e.spec.accepted_per_pos = {7, 6, 4, 2};
  const std::string text = server.render({{"my \"model\"", e, m, 3}}, {5, false});
  expect_valid_exposition(text);
  for (const char* needle : {
           "llmserve:num_requests_running{model_name=\"my \\\"model\\\"\"} 2\n",
           "llmserve:num_requests_waiting{model_name=\"my \\\"model\\\"\"} 1\n",
           "llmserve:kv_cache_usage_perc{model_name=\"my \\\"model\\\"\"} 0.25\n",
           "llmserve:kv_cache_blocks_used{model_name=\"my \\\"model\\\"\"} 25\n",
           "llmserve:prefix_cache_hits_total{model_name=\"my \\\"model\\\"\"} 16\n",
           "llmserve:prompt_tokens_total{model_name=\"my \\\"model\\\"\"} 123\n",
           "llmserve:generation_tokens_total{model_name=\"my \\\"model\\\"\"} 456\n",
           "llmserve:request_success_total{model_name=\"my \\\"model\\\"\",finished_reason=\"stop\"} 1\n",
           "llmserve:request_success_total{model_name=\"my \\\"model\\\"\",finished_reason=\"abort\"} 1\n",
           "llmserve:time_to_first_token_seconds_bucket{model_name=\"my \\\"model\\\"\",le=\"0.02\"} 1\n",
           "llmserve:time_to_first_token_seconds_count{model_name=\"my \\\"model\\\"\"} 1\n",
           "# TYPE llmserve:inter_token_latency_seconds histogram\n",
           "llmserve:inter_token_latency_seconds_count{model_name=\"my \\\"model\\\"\"} 1\n",
           "# TYPE llmserve:time_per_output_token_seconds histogram\n",
           "# TYPE llmserve:e2e_request_latency_seconds histogram\n",
           "# TYPE llmserve:request_queue_time_seconds histogram\n",
           "# TYPE llmserve:num_preemptions_total counter\n",
           "llmserve:num_requests_in_flight{model_name=\"my \\\"model\\\"\"} 3\n",
           "llmserve:request_rejected_total{reason=\"queue_full\"} 1\n",
           "llmserve:http_responses_total{status=\"200\"} 1\n",
           "llmserve:http_open_connections 5\n",
           "llmserve:spec_decode_num_drafts_total{model_name=\"my \\\"model\\\"\"} 7\n",
           "llmserve:spec_decode_num_draft_tokens_total{model_name=\"my \\\"model\\\"\"} 28\n",
           "llmserve:spec_decode_num_accepted_tokens_total{model_name=\"my \\\"model\\\"\"} 19\n",
           "llmserve:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"my \\\"model\\\"\",position=\"3\"} 2\n",
       })
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
}

// Several models: each family once, with a series per model.
TEST(ServerMetrics, RendersEveryModelsSeriesUnderOneFamily) {
  ModelMetrics a, b;
  a.count_outcome(Outcome::Stop);
  b.time_to_first_token.observe(0.5);
  engine::EngineMetrics ea, eb;
  ea.generated_tokens = 7;
  eb.generated_tokens = 9;
  eb.spec.accepted_per_pos = {1};
  const std::string text = ServerMetrics().render({{"a", ea, a, 1}, {"b", eb, b, 2}}, {0, false});
  expect_valid_exposition(text);
  for (const char* needle : {
           "llmserve:generation_tokens_total{model_name=\"a\"} 7\n",
           "llmserve:generation_tokens_total{model_name=\"b\"} 9\n",
           "llmserve:num_requests_in_flight{model_name=\"b\"} 2\n",
           "llmserve:request_success_total{model_name=\"a\",finished_reason=\"stop\"} 1\n",
           "llmserve:request_success_total{model_name=\"b\",finished_reason=\"stop\"} 0\n",
           "llmserve:time_to_first_token_seconds_count{model_name=\"a\"} 0\n",
           "llmserve:time_to_first_token_seconds_count{model_name=\"b\"} 1\n",
           "llmserve:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"b\",position=\"0\"} 1\n",
           "llmserve:server_draining 0\n",
       })
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
}

}  // namespace
}  // namespace llmserve::server
