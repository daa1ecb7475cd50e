// Response bodies shaped like the vLLM and SGLang documentation's examples (field names, nesting,
// null first entry, string keys, [logprob, id, text] triples), and the ways they can be wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine/http_internal.h"
#include "util/util.h"

using namespace flipscope;
using json = nlohmann::json;

namespace {

// vLLM /v1/completions with prompt_logprobs = 2 for a 3-token prompt [791, 6864, 315]: vLLM adds
// the prompt token itself when it is outside the top-k (entry 1: rank 120).
const char* kVllmBody = R"({
  "id": "cmpl-0f7e6d5c4b3a", "object": "text_completion", "created": 1736000000,
  "model": "Qwen/Qwen2.5-0.5B-Instruct",
  "choices": [{
    "index": 0, "text": " the", "logprobs": null, "finish_reason": "length", "stop_reason": null,
    "prompt_logprobs": [
      null,
      {"6864": {"logprob": -7.25, "rank": 120, "decoded_token": " capital"},
       "279": {"logprob": -1.5, "rank": 1, "decoded_token": " the"},
       "264": {"logprob": -2.0, "rank": 2, "decoded_token": " a"}},
      {"315": {"logprob": -0.125, "rank": 1, "decoded_token": " of"},
       "11": {"logprob": -3.0, "rank": 2, "decoded_token": ","}}
    ]
  }],
  "usage": {"prompt_tokens": 3, "total_tokens": 4, "completion_tokens": 1, "prompt_tokens_details": null}
})";

// SGLang /generate with return_logprob, logprob_start_len 0, top_logprobs_num 2, same prompt.
const char* kSglangBody = R"({
  "text": " Paris",
  "meta_info": {
    "id": "5b1c", "finish_reason": {"type": "length", "length": 1}, "prompt_tokens": 3,
    "completion_tokens": 1, "cached_tokens": 0,
    "input_token_logprobs": [[null, 791, null], [-7.25, 6864, null], [-0.125, 315, null]],
    "output_token_logprobs": [[-0.5, 12095, null]],
    "input_top_logprobs": [null, [[-1.5, 279, null], [-2.0, 264, null]], [[-0.125, 315, null], [-3.0, 11, null]]],
    "output_top_logprobs": [[[-0.5, 12095, null], [-1.0, 279, null]]],
    "e2e_latency": 0.05
  }
})";

json Parse(const std::string& s) {
  auto j = http::ParseLenient(s);
  EXPECT_TRUE(j.ok()) << j.status().message();
  return j.ok() ? *j : json();
}

void ExpectTable(const http::PromptTopK& t) {
  ASSERT_EQ(t.n_entries, 3u);
  ASSERT_EQ(t.k, 2);
  EXPECT_EQ(std::vector<int32_t>(t.ids.begin() + 2, t.ids.end()), (std::vector<int32_t>{279, 264, 315, 11}));
  EXPECT_EQ(std::vector<float>(t.logprobs.begin() + 2, t.logprobs.end()),
            (std::vector<float>{-1.5f, -2.0f, -0.125f, -3.0f}));
}

}  // namespace

TEST(HttpParse, VllmDocumentedShape) {
  auto t = http::ParseVllm(Parse(kVllmBody), 2, 151936);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ExpectTable(*t);
}

TEST(HttpParse, SglangDocumentedShape) {
  auto t = http::ParseSglang(Parse(kSglangBody), 2, 151936);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ExpectTable(*t);
  // A batch of one (a list around the object) reads the same.
  auto batch = http::ParseSglang(json::array({Parse(kSglangBody)}), 2, 151936);
  ASSERT_TRUE(batch.ok()) << batch.status().message();
  ExpectTable(*batch);
}

TEST(HttpParse, KeepsTheTopKAndBreaksTiesToTheLowerId) {
  std::string body = R"({"choices": [{"prompt_logprobs": [null,
    {"9": {"logprob": -1.0}, "4": {"logprob": -1.0}, "7": {"logprob": -0.5}, "2": {"logprob": -4.0}}]}]})";
  auto t = http::ParseVllm(Parse(body), 3, 10);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(std::vector<int32_t>(t->ids.begin() + 3, t->ids.end()), (std::vector<int32_t>{7, 4, 9}));
}

TEST(HttpParse, NonStandardInfinityFromPython) {
  // Python's json writes -inf as -Infinity; inside strings the word stays as it is.
  auto j = http::ParseLenient(R"({"a": -Infinity, "b": "-Infinity NaN", "c": NaN, "d": [Infinity]})");
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ((*j)["a"].get<double>(), -std::numeric_limits<double>::max());
  EXPECT_EQ((*j)["b"], "-Infinity NaN");
  EXPECT_TRUE((*j)["c"].is_null());
  EXPECT_EQ((*j)["d"][0].get<double>(), std::numeric_limits<double>::max());
  std::string body = R"({"choices": [{"prompt_logprobs": [null,
    {"1": {"logprob": 0.0}, "0": {"logprob": -Infinity}}]}]})";
  auto t = http::ParseVllm(Parse(body), 2, 10);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->ids[3], 0);
  EXPECT_TRUE(std::isinf(t->logprobs[3]));
}

TEST(HttpParse, FaultsNameTheEntryAndTheProblem) {
  struct Case {
    std::string body;
    int32_t k;
    std::string expect;
  };
  const std::vector<Case> vllm = {
      {R"({"object": "error", "message": "oops"})", 2, "no choices[0]"},
      {R"({"choices": [{"text": "x"}]})", 2, "prompt_logprobs is missing"},
      {R"({"choices": [{"prompt_logprobs": {}}]})", 2, "not a list"},
      {R"({"choices": [{"prompt_logprobs": [{"1": {"logprob": -1}}]}]})", 1, "prompt_logprobs[0] is not null"},
      {R"({"choices": [{"prompt_logprobs": [null, {"x1": {"logprob": -1}}]}]})", 1, "key 'x1' is not a token id"},
      {R"({"choices": [{"prompt_logprobs": [null, {"1": {"rank": 1}}]}]})", 1, "prompt_logprobs[1][\"1\"].logprob"},
      {R"({"choices": [{"prompt_logprobs": [null, {"1": {"logprob": -1}}]}]})", 2,
       "prompt_logprobs[1]: 1 distinct token ids, expected at least 2"},
      {R"({"choices": [{"prompt_logprobs": [null, {"50": {"logprob": -1}}]}]})", 1,
       "token id 50 outside the model's vocabulary of 10"},
      {R"({"choices": [{"prompt_logprobs": [null, {"5": {"logprob": 0.5}}]}]})", 1,
       "log-probability 0.5 of token 5 is not <= 0"},
      {R"({"choices": [{"prompt_logprobs": [null, [1, 2]]}]})", 1, "prompt_logprobs[1] is not an object"},
  };
  for (const auto& c : vllm) {
    auto t = http::ParseVllm(Parse(c.body), c.k, 10);
    ASSERT_FALSE(t.ok()) << c.body;
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << t.status().message();
  }
  const std::vector<Case> sglang = {
      {R"({"text": "x"})", 2, "meta_info is missing"},
      {R"({"meta_info": {"prompt_tokens": 2}})", 2, "input_top_logprobs is missing"},
      {R"({"meta_info": {"input_top_logprobs": [null, [[-1.0, "seven", null]]]}})", 1,
       "input_top_logprobs[1][0] is not [logprob, token_id, text]"},
      {R"({"meta_info": {"input_top_logprobs": [null, {"1": -1.0}]}})", 1, "input_top_logprobs[1] is not a list"},
      // Ids beyond int32_t (a cast would be undefined behaviour) are named as sent.
      {R"({"meta_info": {"input_top_logprobs": [null, [[-1.0, 3000000000, null]]]}})", 1,
       "input_top_logprobs[1]: token id 3000000000 outside the model's vocabulary of 10"},
      {R"({"meta_info": {"input_top_logprobs": [null, [[-1.0, -3000000000, null]]]}})", 1,
       "input_top_logprobs[1]: token id -3000000000 outside"},
      {R"({"meta_info": {"input_top_logprobs": [null, [[-1.0, 1e300, null]]]}})", 1,
       "token id 1.0000000000000001e+300 outside"},
  };
  for (const auto& c : sglang) {
    auto t = http::ParseSglang(Parse(c.body), c.k, 10);
    ASSERT_FALSE(t.ok()) << c.body;
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << t.status().message();
  }
  EXPECT_FALSE(http::ParseLenient("{\"choices\": [").ok());
}

TEST(HttpParse, ErrorTextAndRedaction) {
  EXPECT_EQ(
      http::ErrorText(
          R"({"object": "error", "message": "Requested prompt logprobs of 50, which is greater than max allowed: 20", "code": 400})"),
      "Requested prompt logprobs of 50, which is greater than max allowed: 20");
  EXPECT_EQ(http::ErrorText(R"({"error": {"message": "bad key"}})"), "bad key");
  EXPECT_EQ(http::ErrorText("line one\nline two"), "line one line two");
  EXPECT_EQ(http::ErrorText(std::string(1000, 'x')).size(), 300u);
  EXPECT_EQ(RedactUrl("http://user:secret@host:8000/v1"), "http://host:8000/v1");
  EXPECT_EQ(RedactUrl("https://host:8000"), "https://host:8000");
  EXPECT_EQ(RedactUrl("http://host/path@x"), "http://host/path@x");
  HttpOptions o;
  o.url = "http://127.0.0.1:1";
  http::Client client(o, "sk-secret");
  EXPECT_EQ(client.Scrub("Bearer sk-secret rejected; sk-secret"), "Bearer *** rejected; ***");
}

// A real body (tests/data/vllm/prompt-logprobs.json, vLLM 0.26.0 on an H200, 12 prompt tokens,
// prompt_logprobs = 5): each entry holds the top 5 and, when it ranks lower, the prompt token too.
// The parser keeps exactly the 5 most probable of each entry, recomputed here from the JSON.
TEST(HttpParse, RealVllmBody) {
  auto text = ReadFile(std::string(FLIPSCOPE_SOURCE_DIR) + "/tests/data/vllm/prompt-logprobs.json");
  ASSERT_TRUE(text.ok()) << text.status().message();
  json body = Parse(*text);
  auto t = http::ParseVllm(body, 5, 49152);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const json& entries = body["choices"][0]["prompt_logprobs"];
  ASSERT_EQ(t->n_entries, 12u);
  ASSERT_EQ(t->n_entries, entries.size());
  int with_prompt_token = 0;
  for (size_t i = 1; i < entries.size(); ++i) {
    std::vector<std::pair<double, int32_t>> all;  // (-logprob, id): ascending = most probable first
    for (const auto& [id, v] : entries[i].items()) all.emplace_back(-v["logprob"].get<double>(), std::stoi(id));
    with_prompt_token += all.size() > 5;
    std::sort(all.begin(), all.end());
    for (int r = 0; r < 5; ++r) {
      EXPECT_EQ(t->ids[i * 5 + r], all[r].second) << "entry " << i << " rank " << r;
      EXPECT_EQ(t->logprobs[i * 5 + r], static_cast<float>(-all[r].first)) << "entry " << i << " rank " << r;
    }
  }
  EXPECT_EQ(with_prompt_token, 10);  // 10 of the 11 prompt tokens rank below 5th
  // Asking for more than the server returned names the entry.
  auto more = http::ParseVllm(body, 6, 49152);
  ASSERT_FALSE(more.ok());
  EXPECT_NE(more.status().message().find("[11]: 5 distinct token ids, expected at least 6"), std::string::npos)
      << more.status().message();
}

// A fork's future: vLLM /v1/completions with max_tokens 3, logprobs 1 and
// return_tokens_as_token_ids (OpenAI's legacy completion logprobs: parallel lists per token).
TEST(HttpParse, VllmCompletionTokensAndProbabilities) {
  auto body = http::ParseLenient(R"({"id": "cmpl-1", "object": "text_completion", "model": "m",
    "choices": [{"index": 0, "text": " of France", "finish_reason": "length", "stop_reason": null,
      "logprobs": {"text_offset": [0, 3, 10], "token_logprobs": [-0.25, 0.0, -Infinity],
                   "tokens": ["token_id:315", "token_id:9625", "token_id:13"],
                   "top_logprobs": [{"token_id:315": -0.25}, {"token_id:9625": 0.0}, {"token_id:13": -Infinity}]}}],
    "usage": {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}})");
  ASSERT_TRUE(body.ok());
  auto f = http::ParseVllmCompletion(*body, 50000);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->tokens, (std::vector<int32_t>{315, 9625, 13}));
  ASSERT_EQ(f->probs.size(), 3u);
  EXPECT_FLOAT_EQ(f->probs[0], std::exp(-0.25f));
  EXPECT_FLOAT_EQ(f->probs[1], 1.0f);
  EXPECT_EQ(f->probs[2], 0.0f);  // -Infinity
  // Text instead of ids (return_tokens_as_token_ids ignored), an id outside the vocabulary, lists of unequal length.
  auto bad = [](const char* text) {
    auto j = http::ParseLenient(text);
    return http::ParseVllmCompletion(*j, 50000).status().message();
  };
  EXPECT_NE(bad(R"({"choices": [{"logprobs": {"tokens": [" of"], "token_logprobs": [-1]}}]})")
                .find("tokens[0]: ' of' is not \"token_id:N\""),
            std::string::npos);
  EXPECT_NE(bad(R"({"choices": [{"logprobs": {"tokens": ["token_id:50000"], "token_logprobs": [-1]}}]})")
                .find("outside the model's vocabulary of 50000"),
            std::string::npos);
  EXPECT_NE(bad(R"({"choices": [{"logprobs": {"tokens": ["token_id:1"], "token_logprobs": []}}]})")
                .find("1 tokens but 0 token_logprobs"),
            std::string::npos);
  EXPECT_NE(bad(R"({"choices": [{"text": "x", "logprobs": null}]})").find("logprobs.tokens"), std::string::npos);
}

// SGLang /generate with return_logprob: meta_info.output_token_logprobs = [[logprob, id, text], ...].
TEST(HttpParse, SglangCompletionTokensAndProbabilities) {
  auto body = http::ParseLenient(R"({"text": " of France", "meta_info": {"id": "a", "prompt_tokens": 4,
    "completion_tokens": 2, "finish_reason": {"type": "stop", "matched": 2},
    "output_token_logprobs": [[-0.5, 315, null], [-2.0, 2, null]]}})");
  ASSERT_TRUE(body.ok());
  auto f = http::ParseSglangCompletion(*body, 50000);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->tokens, (std::vector<int32_t>{315, 2}));
  EXPECT_FLOAT_EQ(f->probs[1], std::exp(-2.0f));
  auto j = http::ParseLenient(R"({"meta_info": {"output_token_logprobs": [[-0.5, 1.5, null]]}})");
  EXPECT_NE(http::ParseSglangCompletion(*j, 50000).status().message().find("output_token_logprobs[0]: token id 1.5"),
            std::string::npos);
  j = http::ParseLenient(R"({"meta_info": {}})");
  EXPECT_NE(http::ParseSglangCompletion(*j, 50000).status().message().find("output_token_logprobs is missing"),
            std::string::npos);
}
