#include "engine/sequence.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace llmserve::engine {
namespace {

TEST(Sequence, KeepsPromptAndGeneratedTokensInOrder) {
  Sequence s(1, {0, 1, 2}, 8);
  s.append(7);
  EXPECT_EQ(std::vector<int32_t>(s.all_tokens().begin(), s.all_tokens().end()), (std::vector<int32_t>{0, 1, 2, 7}));
  EXPECT_EQ(s.num_prompt_tokens(), 3);
  EXPECT_EQ(s.num_generated_tokens(), 1);
  EXPECT_EQ(s.prompt().size(), 3u);
  EXPECT_EQ(s.generated()[0], 7);
  EXPECT_EQ(s.num_uncomputed_tokens(), 4);
}

TEST(Sequence, BranchesOnlyRightAfterSampling) {
  Sequence s(1, {0, 1, 2}, 8, {5});
  EXPECT_THROW(s.branch(2, 8), Error);  // nothing sampled yet
  s.append(7);
  EXPECT_THROW(s.branch(2, 8), Error);  // the prompt is not computed yet
  s.num_computed_tokens = 3;
  const Sequence child = s.branch(2, 8);
  EXPECT_EQ(child.id(), 2u);
  EXPECT_EQ(child.num_prompt_tokens(), 3);
  EXPECT_EQ(child.generated()[0], 8);
  EXPECT_EQ(child.num_computed_tokens, 3);
  EXPECT_EQ(child.max_new_tokens(), 8);
  EXPECT_EQ(child.stop_token_ids()[0], 5);
  EXPECT_TRUE(child.block_table.empty());
}

TEST(Sequence, NamesFinishReasonsAsOpenAiDoes) {
  EXPECT_STREQ(to_string(FinishReason::Stop), "stop");
  EXPECT_STREQ(to_string(FinishReason::Length), "length");
}

}  // namespace
}  // namespace llmserve::engine
