// The parser of llama-server's /completion answer (its requests are tested against a real
// llama-server in experiment/verify_recipe_test.cpp).
#include <gtest/gtest.h>

#include "engine/http_internal.h"

namespace flipscope {
namespace {

using nlohmann::json;

json Answer(json top) {
  return {{"content", " the"},
          {"completion_probabilities", {{{"id", 12}, {"token", " the"}, {"logprob", -0.25}, {"top_logprobs", top}}}}};
}

TEST(LlamaServerCompletion, ReadsTheChoiceAndItsTopLogprobs) {
  auto r = http::ParseLlamaServerCompletion(
      Answer({{{"id", 12}, {"logprob", -0.25}}, {{"id", 40}, {"logprob", -1.75}}}), 100);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->token, 12);
  EXPECT_EQ(r->ids, (std::vector<int32_t>{12, 40}));
  EXPECT_EQ(r->logprobs, (std::vector<double>{-0.25, -1.75}));
}

TEST(LlamaServerCompletion, AnIncompleteUtf8PieceHasItsTokenWithoutLogprobs) {
  // llama-server leaves completion_probabilities out for a byte that starts a UTF-8 character.
  auto r = http::ParseLlamaServerCompletion(json{{"content", ""}, {"tokens", {200}}}, 300);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->token, 200);
  EXPECT_TRUE(r->ids.empty());
}

TEST(LlamaServerCompletion, RefusesWhatIsNotAChoice) {
  auto expect_error = [](const json& body, const std::string& part) {
    auto r = http::ParseLlamaServerCompletion(body, 100);
    ASSERT_FALSE(r.ok()) << body.dump();
    EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  };
  expect_error(json{{"content", "x"}}, "neither tokens nor completion_probabilities");
  expect_error(json{{"completion_probabilities", json::array()}}, "neither tokens nor completion_probabilities");
  expect_error(json{{"tokens", {7}}, {"completion_probabilities", {{{"id", 8}, {"top_logprobs", json::array()}}}}},
               "tokens[0] is 7 but completion_probabilities[0] is 8");
  expect_error(json{{"tokens", {100}}}, "tokens[0]: token id 100 outside");
  expect_error(Answer({{{"id", 100}, {"logprob", -1.0}}}), "token id 100 outside the model's vocabulary of 100");
  expect_error(Answer({{{"id", 1}, {"logprob", 0.5}}}), "is not <= 0");
  expect_error(Answer({{{"id", 1}}}), "no numeric \"logprob\"");
  expect_error(json{{"completion_probabilities", {{{"id", 1}, {"top_probs", json::array()}}}}},
               "post_sampling_probs must be false");
}

}  // namespace
}  // namespace flipscope
