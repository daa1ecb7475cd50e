// LoadWorkload: format detection, the vocab-only model, rendering, tokenization, spans, info.
#include "workload/workload.h"

#include <fmt/format.h>
#include <llama.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <memory>

#include "runtime/runtime.h"
#include "util/util.h"
#include "workload/internal.h"

namespace flipscope {
namespace {

using workload::CharSpan;

// The format of the workload file at path: the requested one, else by its extension (a .json
// file by its content); an error when the extension tells none.
Result<WorkloadFormat> DetectFormat(const std::string& path, WorkloadFormat requested, const std::string& text) {
  if (requested != WorkloadFormat::kAuto) return requested;
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (ext == ".jsonl") return WorkloadFormat::kJsonl;
  if (ext == ".txt" || ext == ".text" || ext == ".md" || ext == ".log") return WorkloadFormat::kText;
  if (ext == ".ids" || ext == ".tokens") return WorkloadFormat::kTokens;
  if (ext == ".json") {
    // A JSON array of numbers is token ids; anything else a chat transcript.
    size_t a = text.find_first_not_of(" \t\r\n");
    size_t b = a == std::string::npos ? a : text.find_first_not_of(" \t\r\n", a + 1);
    bool ids = a != std::string::npos && text[a] == '[' && b != std::string::npos &&
               (std::isdigit(static_cast<unsigned char>(text[b])) || text[b] == '-');
    return ids ? WorkloadFormat::kTokens : WorkloadFormat::kChat;
  }
  return Status::Error(path + ": cannot tell the workload format from the extension '" + ext +
                       "'; pass --format chat|jsonl|text|tokens");
}

size_t CountCodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Which of two spans of equal length is the inner one: literals, then tool calls and results, then messages.
int KindRank(SpanKind kind) { return kind == SpanKind::kLiteral ? 2 : kind == SpanKind::kMessage ? 0 : 1; }

struct ModelDeleter {
  void operator()(llama_model* m) const { llama_model_free(m); }
};

}  // namespace

Result<WorkloadFormat> ParseWorkloadFormat(std::string_view name, std::string_view field) {
  if (auto f = FromName<WorkloadFormat>(name)) return *f;
  return Status::Error(fmt::format("{} {}: expected {}", field, name, Choices<WorkloadFormat>()));
}

namespace {

// The model's vocabulary alone (vocab_only); errors name the file and carry llama.cpp's reason.
Result<std::unique_ptr<llama_model, ModelDeleter>> LoadVocabOnly(const std::string& model_path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(model_path, ec)) return Status::Error(model_path + ": no such model file");
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  std::unique_ptr<llama_model, ModelDeleter> model(llama_model_load_from_file(model_path.c_str(), mp));
  if (!model) {
    std::string why = TakeLlamaLogTail();
    return Status::Error(model_path + ": llama.cpp could not load the vocabulary" +
                         (why.empty() ? "" : " (" + why + ")"));
  }
  return model;
}

// A workload read as text, rendered and tokenized: its text and tools in w, its message, tool-call
// and tool-result spans in *spans (bytes of the text), the rendering's facts in *info.
Result<workload::Tokenized> ReadAndTokenize(const std::string& raw, WorkloadFormat format,
                                            const std::string& workload_path, const llama_model* model,
                                            const std::string& model_path, const WorkloadOptions& options, Workload* w,
                                            std::vector<CharSpan>* spans, nlohmann::json* info) {
  const llama_vocab* vocab = llama_model_get_vocab(model);
  if (format == WorkloadFormat::kTokens) {
    FS_ASSIGN_OR_RETURN(auto ids, workload::ParseTokenIds(raw, workload_path, llama_vocab_n_tokens(vocab)));
    return workload::PiecesOf(vocab, std::move(ids), &w->text);
  }
  if (format == WorkloadFormat::kText) {
    w->text = raw;
    return workload::Tokenize(vocab, w->text, workload_path);
  }
  auto transcript = format == WorkloadFormat::kChat ? workload::ParseChatJson(raw, workload_path)
                                                    : workload::ParseChatJsonl(raw, workload_path);
  FS_RETURN_IF_ERROR(transcript.status());
  FS_ASSIGN_OR_RETURN(auto rendered,
                      workload::RenderChat(*transcript, model, model_path, options.chat_template, workload_path));
  w->text = std::move(rendered.text);
  *spans = std::move(rendered.spans);
  info->update(rendered.info);
  w->tools = nlohmann::json::parse(transcript->tools.dump());
  // The manifest's JSON sorts object keys; llama.cpp lays out a tool's arguments in its schema's
  // property order, so the tool-call grammar needs the transcript's own text of the tools.
  if (!transcript->tools.empty()) (*info)["tools_text"] = transcript->tools.dump();
  w->warnings = transcript->warnings;
  if (!w->warnings.empty()) (*info)["warnings"] = w->warnings;  // absent when none: older records stay as they were
  return workload::Tokenize(vocab, w->text, workload_path);
}

// Adds a span for every literal of text to spans; a literal belongs to the message it lies in.
void AddLiterals(const std::string& text, std::vector<CharSpan>* spans) {
  std::vector<CharSpan> messages;
  for (const auto& s : *spans)
    if (s.kind == SpanKind::kMessage) messages.push_back(s);
  for (const Literal& lit : FindLiterals(text)) {
    CharSpan s{SpanKind::kLiteral, lit.begin, lit.end, 0, "", lit.text, lit.type};
    auto it = std::upper_bound(messages.begin(), messages.end(), lit.begin,
                               [](size_t pos, const CharSpan& m) { return pos < m.begin; });
    if (it != messages.begin() && lit.begin < std::prev(it)->end) {
      s.index = std::prev(it)->index;
      s.role = std::prev(it)->role;
    }
    spans->push_back(std::move(s));
  }
}

// The spans over bytes as token ranges (tok's offsets), sorted by begin, then longer first, then
// by kind (messages outside calls and results, literals innermost).
std::vector<Span> TokenSpans(const std::vector<CharSpan>& spans, const workload::Tokenized& tok) {
  std::vector<Span> out;
  for (const auto& s : spans) {
    auto [b, e] = workload::TokenRange(tok.offsets, s.begin, s.end);
    out.push_back({s.kind, b, e, s.index, s.role, s.label, s.subkind});
    if (s.gen_end > s.gen_begin) {
      // The generated tokens, and the end-of-turn token right after them when the message holds one.
      auto [gb, ge] = workload::TokenRange(tok.offsets, s.gen_begin, s.gen_end);
      out.back().gen_begin = gb;
      out.back().gen_end = std::min(e, s.gen_end < s.end ? ge + 1 : ge);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Span& a, const Span& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end > b.end;
    return KindRank(a.kind) < KindRank(b.kind);
  });
  return out;
}

}  // namespace

Result<Workload> LoadWorkload(const std::string& workload_path, const std::string& model_path,
                              const WorkloadOptions& options) {
  FS_ASSIGN_OR_RETURN(std::string raw, ReadFile(workload_path));
  const std::string sha = Sha256Hex(raw);
  FS_ASSIGN_OR_RETURN(const WorkloadFormat format, DetectFormat(workload_path, options.format, raw));
  FS_ASSIGN_OR_RETURN(auto model, LoadVocabOnly(model_path));
  const llama_vocab* vocab = llama_model_get_vocab(model.get());

  Workload w;
  w.tools = nlohmann::json::array();
  std::vector<CharSpan> spans;
  nlohmann::json info = {{"template", nullptr},
                         {"tool_call_form", nullptr},
                         {"tool_result_form", nullptr},
                         {"tools_in_system", false},
                         {"merged_messages", 0}};
  FS_ASSIGN_OR_RETURN(workload::Tokenized tok,
                      ReadAndTokenize(raw, format, workload_path, model.get(), model_path, options, &w, &spans, &info));
  AddLiterals(w.text, &spans);
  w.spans = TokenSpans(spans, tok);
  w.tokens = std::move(tok.tokens);
  // Nothing to predict: e.g. a transcript of a system message alone under a template that folds
  // the system prompt into the first user turn (Gemma's) renders to no text at all.
  if (w.tokens.size() < 2)
    return Status::Error(
        fmt::format("{}: gives {} token(s) with this model and template ({} characters rendered); "
                    "a workload needs at least 2",
                    workload_path, w.tokens.size(), w.text.size()));

  std::map<std::string, int> counts;
  for (const auto& s : w.spans) counts[std::string(NameOf(s.kind))]++;
  info.update(nlohmann::json{{"path", workload_path},
                             {"sha256", sha},
                             {"format", std::string(NameOf(format))},
                             {"n_tokens", w.tokens.size()},
                             {"n_chars", CountCodePoints(w.text)},
                             {"n_bytes", w.text.size()},
                             {"add_bos", llama_vocab_get_add_bos(vocab)},
                             {"add_eos", llama_vocab_get_add_eos(vocab)},
                             {"text_sha256", Sha256Hex(w.text)},
                             {"span_mapping", tok.exact ? "exact" : "approximate"},
                             {"span_counts", counts}});
  w.format = format;
  w.tool_call_form = info["tool_call_form"].is_string() ? info["tool_call_form"].get<std::string>() : "";
  w.info = std::move(info);
  return w;
}

nlohmann::json SpansToJson(const std::vector<Span>& spans) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& s : spans)
    a.push_back({{"kind", std::string(NameOf(s.kind))},
                 {"begin", s.begin},
                 {"end", s.end},
                 {"index", s.index},
                 {"role", s.role},
                 {"label", s.label},
                 {"subkind", s.subkind}});
  for (size_t i = 0; i < spans.size(); ++i)
    if (spans[i].gen_begin >= 0) a[i]["generated"] = {spans[i].gen_begin, spans[i].gen_end};
  return a;
}

Result<std::vector<Span>> SpansFromJson(const nlohmann::json& j) {
  if (!j.is_array()) return Status::Error("spans: expected a JSON array");
  std::vector<Span> out;
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("kind") || !e["kind"].is_string() || !e.contains("begin") ||
        !e["begin"].is_number_integer() || !e.contains("end") || !e["end"].is_number_integer())
      return Status::Error(fmt::format("spans: entry {} needs kind, begin and end", out.size()));
    FS_ASSIGN_OR_RETURN(const SpanKind kind, ParseName<SpanKind>(e["kind"].get<std::string>(),
                                                                 fmt::format("spans: entry {}: kind", out.size())));
    try {  // a wrong-typed optional field (index, role, label, subkind) is a bad entry, not a crash
      out.push_back({kind, e["begin"].get<int32_t>(), e["end"].get<int32_t>(), e.value("index", 0), e.value("role", ""),
                     e.value("label", ""), e.value("subkind", "")});
    } catch (const nlohmann::json::exception&) {
      return Status::Error(fmt::format("spans: entry {}: index, role, label and subkind must be a number and strings",
                                       out.size()));
    }
    // "generated" is absent in captures written before the split: the whole message counts then.
    if (e.contains("generated")) {
      const auto& g = e["generated"];
      if (!g.is_array() || g.size() != 2 || !g[0].is_number_integer() || !g[1].is_number_integer() ||
          g[0].get<int64_t>() < out.back().begin || g[1].get<int64_t>() > out.back().end || g[0] > g[1])
        return Status::Error(fmt::format("spans: entry {}: generated must be [begin, end] inside the span", out.size() - 1));
      out.back().gen_begin = g[0].get<int32_t>();
      out.back().gen_end = g[1].get<int32_t>();
    }
  }
  return out;
}

const Span* InnermostSpan(const std::vector<Span>& spans, int32_t pos) {
  const Span* best = nullptr;
  for (const auto& s : spans) {
    if (pos < s.begin || pos >= s.end) continue;
    if (!best || s.end - s.begin < best->end - best->begin ||
        (s.end - s.begin == best->end - best->begin && KindRank(s.kind) > KindRank(best->kind)))
      best = &s;
  }
  return best;
}

std::string SpanLabelAt(const std::vector<Span>& spans, int32_t pos) {
  const Span* s = InnermostSpan(spans, pos);
  if (!s) return "";
  return s->kind == SpanKind::kLiteral ? "literal " + s->subkind + " " + s->label : s->label;
}

bool ModelWrites(const std::vector<Span>& spans, int32_t pos) {
  bool messages = false;
  const Span* inner = nullptr;  // the innermost message, tool call or tool result holding pos
  for (const Span& s : spans) {
    if (s.kind == SpanKind::kLiteral) continue;  // a literal is written or read as its message is
    messages |= s.kind == SpanKind::kMessage;
    if (pos < s.begin || pos >= s.end) continue;
    if (!inner || s.end - s.begin < inner->end - inner->begin ||
        (s.end - s.begin == inner->end - inner->begin && inner->kind == SpanKind::kMessage))
      inner = &s;
  }
  if (!messages) return true;
  if (!inner) return false;  // between messages: the template's own text
  if (inner->kind == SpanKind::kToolCall) return true;
  if (inner->kind == SpanKind::kToolResult) return false;
  if (inner->role != "assistant") return false;
  // The role header (the generation prompt) and the template's text after the end-of-turn token
  // were not generated; without the split (older captures) the whole message counts.
  return inner->gen_begin < 0 || (pos >= inner->gen_begin && pos < inner->gen_end);
}

}  // namespace flipscope
