#include <gtest/gtest.h>

#include "server/stop_strings.h"

namespace llmserve::server {
namespace {

// Feeds pieces and returns everything released.
std::string run(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += m.push(p);
  return out + m.flush();
}

TEST(StopMatcher, NoStopsPassesEverythingAtOnce) {
  StopMatcher m({});
  EXPECT_EQ(m.push("abc"), "abc");
  EXPECT_EQ(m.flush(), "");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, StopSplitAcrossPiecesNeverLeaks) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("hello S"), "hello ");  // "S" might begin STOP
  EXPECT_EQ(m.push("T"), "");
  EXPECT_EQ(m.push("O"), "");
  EXPECT_EQ(m.push("P and more"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.emitted(), 6u);
  EXPECT_EQ(m.push("later"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, FalseStartIsReleased) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("ST"), "");
  EXPECT_EQ(m.push("ART"), "START");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, HeldTailComesOutAtTheEnd) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("xSTO"), "x");
  EXPECT_EQ(m.flush(), "STO");
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  StopMatcher m({"world", "lo w"});
  EXPECT_EQ(run(m, {"hel", "lo wor", "ld"}), "hel");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, EveryByteSplitGivesTheSameText) {
  const std::string text = "one two <|end|> three";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    StopMatcher m({"<|end|>", "zzz"});
    EXPECT_EQ(run(m, {text.substr(0, cut), text.substr(cut)}), "one two ") << cut;
  }
  StopMatcher m({"<|end|>"});
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  EXPECT_EQ(run(m, bytes), "one two ");
}

TEST(StopMatcher, OverlappingPrefixes) {
  StopMatcher m({"aab"});
  EXPECT_EQ(run(m, {"a", "a", "a", "b", "c"}), "a");
}

}  // namespace
}  // namespace llmserve::server
