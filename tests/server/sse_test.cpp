#include <gtest/gtest.h>

#include "server/openai_response.h"
#include "server/sse.h"

namespace llmserve::server {
namespace {

TEST(Sse, OneDataLinePerEventAndDone) {
  EXPECT_EQ(sse_event(R"({"a":1})"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST(Sse, TextWithNewlinesStaysOnOneLine) {
  const std::string e = sse_event(dump(Json{{"text", "line1\nline2\r\n"}}));
  EXPECT_EQ(e.find('\n'), e.size() - 2);  // only the terminator
  EXPECT_TRUE(e.ends_with("\n\n"));
}

}  // namespace
}  // namespace llmserve::server
