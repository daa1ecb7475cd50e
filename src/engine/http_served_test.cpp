// The answers of served-replay requests, as each server writes them, and which probes a served
// replay over HTTP can hand over.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/http_internal.h"

namespace flipscope {
namespace {

using json = nlohmann::json;

json Parse(const char* text) { return http::ParseLenient(text).value(); }

TEST(HttpServed, VllmCompletionWithCachedTokens) {
  // vLLM /v1/completions, logprobs 2, return_tokens_as_token_ids; the chosen token is listed beside
  // the top 2 when it is outside them; usage with --enable-prompt-tokens-details.
  auto a = http::ParseServedAnswer(Parse(R"({"choices": [{"index": 0, "text": "x", "logprobs": {
      "tokens": ["token_id:7", "token_id:3"], "token_logprobs": [-0.1, -2.5], "text_offset": [0, 1],
      "top_logprobs": [{"token_id:7": -0.1, "token_id:9": -2.4}, {"token_id:5": -0.5, "token_id:4": -1.0, "token_id:3": -2.5}]}}],
      "usage": {"prompt_tokens": 40, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 32}}})"),
                                   HttpApi::kVllm, 2, 100);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_EQ(a->steps.size(), 2u);
  EXPECT_EQ(a->steps[0].token, 7);
  EXPECT_EQ(a->steps[0].ids, (std::vector<int32_t>{7, 9}));
  EXPECT_EQ(a->steps[1].token, 3);
  EXPECT_EQ(a->steps[1].ids, (std::vector<int32_t>{5, 4})) << "the top 2, not the chosen token outside them";
  EXPECT_FLOAT_EQ(a->steps[1].logprobs[1], -1.0f);
  EXPECT_EQ(a->prompt_tokens, 40);
  EXPECT_EQ(a->cached_tokens, 32);
  EXPECT_EQ(a->computed_tokens, 8);

  // Without --enable-prompt-tokens-details the counts are unknown (the pass then refuses).
  auto bare = http::ParseServedAnswer(Parse(R"({"choices": [{"logprobs": {"tokens": ["token_id:1"],
      "top_logprobs": [{"token_id:1": -0.1}]}}], "usage": {"prompt_tokens": 3, "prompt_tokens_details": null}})"),
                                      HttpApi::kVllm, 1, 100);
  ASSERT_TRUE(bare.ok()) << bare.status().message();
  EXPECT_EQ(bare->cached_tokens, -1);
  EXPECT_EQ(bare->computed_tokens, -1);
}

TEST(HttpServed, SglangGenerate) {
  auto a = http::ParseServedAnswer(Parse(R"({"text": "", "meta_info": {"prompt_tokens": 10, "cached_tokens": 9,
      "output_token_logprobs": [[-0.2, 4, null]], "output_top_logprobs": [[[-0.2, 4, null], [-1.9, 8, null], [-Infinity, 2, null]]]}})"),
                                   HttpApi::kSglang, 3, 100);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->steps[0].token, 4);
  EXPECT_EQ(a->steps[0].ids, (std::vector<int32_t>{4, 8, 2}));
  EXPECT_TRUE(std::isinf(a->steps[0].logprobs[2]));
  EXPECT_EQ(a->computed_tokens, 1);
}

TEST(HttpServed, LlamaServerCompletion) {
  // llama-server /completion with n_probs, post_sampling_probs false, return_tokens.
  auto a = http::ParseServedAnswer(Parse(R"({"content": "x", "tokens": [12], "tokens_evaluated": 30,
      "tokens_cached": 30, "timings": {"cache_n": 29, "prompt_n": 1, "predicted_n": 1},
      "completion_probabilities": [{"id": 12, "token": "x", "logprob": -0.3, "bytes": [120],
        "top_logprobs": [{"id": 12, "token": "x", "logprob": -0.3, "bytes": [120]}, {"id": 40, "token": "y", "logprob": -1.6, "bytes": [121]}]}]})"),
                                   HttpApi::kLlamaServer, 2, 100);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->steps[0].token, 12);
  EXPECT_EQ(a->steps[0].ids, (std::vector<int32_t>{12, 40}));
  EXPECT_EQ(a->prompt_tokens, 30);
  EXPECT_EQ(a->cached_tokens, 29);
  EXPECT_EQ(a->computed_tokens, 1);
}

TEST(HttpServed, Refusals) {
  auto err = [](const char* body, HttpApi api, int32_t k) {
    auto a = http::ParseServedAnswer(http::ParseLenient(body).value(), api, k, 100);
    return a.ok() ? std::string("ok") : a.status().message();
  };
  EXPECT_NE(err(R"({"choices": []})", HttpApi::kVllm, 1).find("no choices[0]"), std::string::npos);
  EXPECT_NE(err(R"({"choices": [{"logprobs": {"tokens": ["token_id:1"], "top_logprobs": [{"token_id:1": -0.1}]}}]})",
                HttpApi::kVllm, 2)
                .find("1 distinct token ids, expected at least 2"),
            std::string::npos);
  EXPECT_NE(err(R"({"choices": [{"logprobs": {"tokens": ["token_id:1"], "top_logprobs": [{"token_id:500": -0.1}]}}]})",
                HttpApi::kVllm, 1)
                .find("outside the model's vocabulary of 100"),
            std::string::npos);
  EXPECT_NE(err(R"({"choices": [{"logprobs": {"tokens": ["hello"], "top_logprobs": [{"token_id:1": -0.1}]}}]})",
                HttpApi::kVllm, 1)
                .find("its id is missing"),
            std::string::npos);
  EXPECT_NE(err(R"({"choices": [{"logprobs": {"tokens": ["token_id:1"], "top_logprobs": [{"token_id:1": 0.5}]}}]})",
                HttpApi::kVllm, 1)
                .find("is not <= 0"),
            std::string::npos);
  EXPECT_NE(err(R"({"choices": [{"logprobs": {"tokens": [], "top_logprobs": []}}]})", HttpApi::kVllm, 1)
                .find("no generated token"),
            std::string::npos);
  EXPECT_NE(err(R"({"meta_info": {}})", HttpApi::kSglang, 1).find("output_top_logprobs"), std::string::npos);
  EXPECT_NE(err(R"({"tokens": [1]})", HttpApi::kLlamaServer, 1).find("completion_probabilities is missing"),
            std::string::npos);
  EXPECT_NE(err(R"({"completion_probabilities": [{"id": 1, "top_logprobs": [{"id": 1}]}]})", HttpApi::kLlamaServer, 1)
                .find("not {\"id\", \"logprob\"}"),
            std::string::npos);
  EXPECT_NE(err(R"({"tokens_evaluated": 3, "timings": {"cache_n": 5, "prompt_n": 0},
      "completion_probabilities": [{"id": 1, "top_logprobs": [{"id": 1, "logprob": -0.1}]}]})",
                HttpApi::kLlamaServer, 1)
                .find("5 cached tokens of a 3-token prompt"),
            std::string::npos);
}

TEST(HttpServed, PositionsAreDecodeStepsAndGenerationPrompts) {
  //                     0  1  2  3  4  5  6  7  8
  const std::vector<uint8_t> written = {0, 0, 1, 1, 1, 0, 0, 1, 1};
  const std::vector<int32_t> probes = {0, 1, 2, 3, 4, 5, 6, 7};
  // 1 and 6 end a generation prompt (they predict a message's first token); 2, 3 and 7 are decode
  // steps; 4 predicts what was read after the end of turn, 0 and 5 are prefill rows inside the prompt.
  EXPECT_EQ(ServedHttpPositions(probes, written), (std::vector<int32_t>{1, 2, 3, 6, 7}));
  EXPECT_TRUE(ServedHttpPositions(probes, std::vector<uint8_t>(9, 0)).empty());
}

}  // namespace
}  // namespace flipscope
