// Served replay through the capture stage: the rows equal a llama.h loop written out by hand,
// what the manifest records, and what is refused.
#include <gtest/gtest.h>
#include <llama.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "capture/capture.h"
#include "runtime/runtime.h"
#include "testing/chats.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;
namespace fs = std::filesystem;

namespace {

struct ServedFiles {
  std::string dir, model;
};
ServedFiles MakeServed(const std::string& name) {
  ServedFiles f;
  f.dir = fixtures::TempPath("served-" + name);
  fs::remove_all(f.dir);
  fs::create_directories(f.dir);
  f.model = f.dir + "/tiny.gguf";
  fixtures::TinyModelOptions o;
  o.n_ctx_train = 2048;
  EXPECT_TRUE(fixtures::WriteTinyModel(f.model, o).ok());
  return f;
}

std::string Write(const ServedFiles& f, const std::string& name, const std::string& text) {
  std::string path = f.dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

const char* kChat = fixtures::kToolChat;  // testing/chats.h

CaptureRequest Request(const ServedFiles& f, const std::string& workload, const std::string& out, Replay replay) {
  CaptureRequest r;
  r.model_path = f.model;
  r.workload_path = workload;
  r.out_path = f.dir + "/" + out;
  r.knobs.n_threads = 1;
  r.knobs.n_batch = 16;
  r.knobs.n_ubatch = 8;
  r.knobs.replay = replay;
  r.plan.stride = 1;  // every position: every decode step's row is checked
  r.log = Log::Quiet();
  return r;
}

// The served replay written out with llama.h alone, from the capture's own tokens and effective
// knobs: a position whose token and next token the model wrote is one llama_decode call; every
// other stretch is prefilled in n_batch chunks from its own start. Every position's row.
std::vector<std::vector<float>> HandLoop(const std::string& model_path, const std::vector<int32_t>& tokens,
                                         const std::vector<bool>& wrote, const nlohmann::json& knobs) {
  EnsureLlamaInit();
  llama_model* model = llama_model_load_from_file(model_path.c_str(), llama_model_default_params());
  EXPECT_NE(model, nullptr);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = knobs["ctx_size"].get<uint32_t>();
  cp.n_batch = knobs["batch_size"].get<uint32_t>();
  cp.n_ubatch = knobs["ubatch_size"].get<uint32_t>();
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = knobs["threads"].get<int>();
  cp.flash_attn_type = knobs["flash_attn"] == "on" ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.kv_unified = true;
  cp.swa_full = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  EXPECT_NE(ctx, nullptr);
  const int32_t n = int32_t(tokens.size()), nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
  const int32_t nb = int32_t(cp.n_batch);
  std::vector<std::vector<float>> rows;
  auto decode = [&](int32_t begin, int32_t end) {
    llama_batch b = llama_batch_init(end - begin, 0, 1);
    for (int32_t p = begin; p < end; ++p) {
      const int32_t i = p - begin;
      b.token[i] = tokens[size_t(p)];
      b.pos[i] = p;
      b.n_seq_id[i] = 1;
      b.seq_id[i][0] = 0;
      b.logits[i] = true;
    }
    b.n_tokens = end - begin;
    EXPECT_EQ(llama_decode(ctx, b), 0) << begin;
    llama_batch_free(b);
    for (int32_t i = 0; i < end - begin; ++i) {
      const float* l = llama_get_logits_ith(ctx, i);
      rows.emplace_back(l, l + nv);
    }
  };
  auto decode_step = [&](int32_t p) { return wrote[size_t(p)] && p + 1 < n && wrote[size_t(p + 1)]; };
  int32_t p = 0;
  while (p < n) {
    if (decode_step(p)) {
      decode(p, p + 1);
      ++p;
      continue;
    }
    int32_t end = p;
    while (end < n && !decode_step(end)) ++end;
    for (int32_t b = p; b < end; b += nb) decode(b, std::min(end, b + nb));
    p = end;
  }
  llama_free(ctx);
  llama_model_free(model);
  return rows;
}

}  // namespace

TEST(ServedCapture, TinyChatEqualsAHandWrittenDecodeLoop) {
  ServedFiles f = MakeServed("hand");
  const std::string chat = Write(f, "chat.json", kChat);
  auto m = RunCapture(Request(f, chat, "served.safetensors", Replay::kServed));
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto cap = CaptureReader::Open(f.dir + "/served.safetensors");
  ASSERT_TRUE(cap.ok()) << cap.status().message();
  const auto& c = **cap;
  std::vector<int32_t> tokens(c.tokens().begin(), c.tokens().end());
  ASSERT_LT(tokens.size(), 2048u);
  auto spans = SpansFromJson(m->raw["workload"]["spans"]);
  ASSERT_TRUE(spans.ok());
  std::vector<bool> wrote;
  int64_t steps = 0, written = 0;
  for (int32_t p = 0; p < int32_t(tokens.size()); ++p) wrote.push_back(ModelWrites(*spans, p));
  for (size_t p = 0; p < wrote.size(); ++p) {
    written += wrote[p];
    steps += wrote[p] && p + 1 < wrote.size() && wrote[p + 1];
  }
  ASSERT_GT(steps, 10);
  auto rows = HandLoop(f.model, tokens, wrote, m->raw["knobs"]);
  ASSERT_EQ(rows.size(), tokens.size());
  ASSERT_EQ(int64_t(c.positions().size()), int64_t(tokens.size()) - 1);
  std::vector<float> row(size_t(c.n_vocab()));
  for (int64_t i = 0; i < int64_t(c.positions().size()); ++i) {
    ASSERT_TRUE(c.ReadRow(i, row).ok());
    ASSERT_EQ(0, std::memcmp(row.data(), rows[size_t(c.positions()[size_t(i)])].data(), row.size() * sizeof(float)))
        << "position " << c.positions()[size_t(i)];
  }
  // What ran, in the manifest: the replay among the knobs (not among llama.cpp's flags) and the
  // schedule's counts.
  EXPECT_EQ(m->raw["knobs"]["replay"], "served");
  EXPECT_EQ(m->raw["request"]["knobs"]["replay"], "served");
  EXPECT_EQ(m->raw["engine"]["flags"].get<std::string>().find("replay"), std::string::npos);
  const auto& s = m->raw["served"];
  EXPECT_EQ(s["fed_singly"], steps);
  EXPECT_EQ(s["written_tokens"], written);
  EXPECT_EQ(s["written_runs"], 3);
  EXPECT_EQ(s["prefill_segments"], 4);  // before, between and after the three written runs
  EXPECT_FALSE(s.contains("note"));
}

TEST(ServedCapture, NoAssistantMessageEqualsPrefillAndSaysSo) {
  ServedFiles f = MakeServed("noassistant");
  const std::string chat = Write(f, "chat.json", R"({"messages": [
    {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Port of db1? And of db2, and db3?"}]})");
  auto prefill = RunCapture(Request(f, chat, "prefill.safetensors", Replay::kPrefill));
  ASSERT_TRUE(prefill.ok()) << prefill.status().message();
  CaptureRequest req = Request(f, chat, "served.safetensors", Replay::kServed);
  std::vector<std::string> lines;
  req.log.line = [&](std::string_view l) { lines.emplace_back(l); };
  auto served = RunCapture(req);
  ASSERT_TRUE(served.ok()) << served.status().message();
  // One warning among the stage's own lines (its start and end, when stderr is no terminal).
  std::erase_if(lines, [](const std::string& l) { return l.rfind("served replay: ", 0) == 0; });
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("no assistant message"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("equals prefill"), std::string::npos) << lines[0];
  EXPECT_NE(served->raw["served"]["note"].get<std::string>().find("equals prefill"), std::string::npos);
  EXPECT_EQ(served->raw["served"]["fed_singly"], 0);
  EXPECT_FALSE(prefill->raw.contains("served"));
  auto a = CaptureReader::Open(f.dir + "/prefill.safetensors");
  auto b = CaptureReader::Open(f.dir + "/served.safetensors");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_GT((*a)->positions().size(), 10u);
  EXPECT_TRUE(std::ranges::equal((*a)->digest(), (*b)->digest()));
}

TEST(ServedCapture, RefusedInOneLineLeavingNoFile) {
  ServedFiles f = MakeServed("refused");
  const std::string chat = Write(f, "chat.json", kChat);
  const std::string text = Write(f, "plain.txt", "show the port 5432 on the interface, twice over.");
  const std::string ids = Write(f, "ids.tokens", "1 5 9 13 17 21 25 29");
  struct Case {
    std::string what, workload;
    std::function<void(CaptureRequest&)> edit;
    std::vector<std::string> expect;
  };
  std::vector<Case> cases = {
      {"plain text", text, [](CaptureRequest&) {}, {text, "plain-text workload", "no roles", "no assistant turns"}},
      {"token ids", ids, [](CaptureRequest&) {}, {ids, "token-id workload", "no roles"}},
      {"load", chat, [](CaptureRequest& r) { r.knobs.load = 1; }, {"replay served", "under load"}},
      {"exact engine",
       chat,
       [](CaptureRequest& r) { r.engine = EngineKind::kExact; },
       {"--replay served", "--engine llama"}},
  };
  for (auto& c : cases) {
    CaptureRequest r = Request(f, c.workload, "bad.safetensors", Replay::kServed);
    c.edit(r);
    auto m = RunCapture(r);
    ASSERT_FALSE(m.ok()) << c.what;
    const std::string msg = m.status().message();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << c.what << ": " << msg;
    for (const auto& e : c.expect) EXPECT_NE(msg.find(e), std::string::npos) << c.what << ": " << msg;
    EXPECT_FALSE(fs::exists(r.out_path)) << c.what;
  }
  for (auto& e : fs::directory_iterator(f.dir)) EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos);
}
