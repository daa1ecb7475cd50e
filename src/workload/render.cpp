// Rendering a transcript with its chat template and finding where each message and tool call
// landed in the text (docs/workloads.md, "How message ranges are found").
//
// A message's range is what it appends to the rendering of the messages before it. Rendering
// every prefix of a long transcript is quadratic (llama.cpp's Jinja engine walks every message of
// every prefix: minutes for 1,000 messages), so ranges are measured on short windows: the first
// message(s), then the turn of the message. Window results are accepted only if, laid end to
// end, they reproduce the full rendering byte for byte. Windows render a copy whose contents are
// short placeholders when putting the contents back reproduces the real rendering. Fallbacks, in
// order: windows on the real contents, full prefixes, the same closed by a sentinel message (for
// templates that render the last message differently), and (approximate) a content search.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string_view>

#include "util/util.h"
#include "workload/internal.h"

namespace flipscope::workload {
namespace {

using Ranges = std::vector<std::pair<size_t, size_t>>;
constexpr size_t kMaxPrefixMessages = 256;

std::vector<RenderMessage> Messages(const std::vector<Planned>& plan) {
  std::vector<RenderMessage> msgs;
  for (const auto& p : plan) msgs.push_back(p.msg);
  return msgs;
}

// The conversation whose renderings locate the ranges, its full rendering, and the map from
// positions in that rendering to the real one.
struct Locator {
  std::vector<RenderMessage> msgs;
  std::string full;
  bool fast = false;  // ChatTemplate::Render's fast mode
  bool placeholders = false;
  // Windows keep messages [0, head) (a system prompt that a template merges into the first user
  // message, say), then the turn of message k; head >= the message count: full prefixes.
  size_t head = 1;
  // Every window ends with a sentinel user message, so that message k is never rendered as the
  // last one (Qwen3 opens a think block in the last assistant message only); the last message's
  // range is then the rest of the full rendering.
  bool sentinel = false;
  std::vector<std::pair<size_t, size_t>> shifts;  // (end of a placeholder, bytes added up to there)
  std::vector<size_t> window_base;                // per message: where it starts in its window's rendering
  std::vector<size_t> anchor;                     // per message: where that point is in the full rendering
  int failures = 0;                               // windows the template refused (see MessageRanges)

  size_t Map(size_t pos) const {
    auto it = std::upper_bound(shifts.begin(), shifts.end(), pos,
                               [](size_t p, const std::pair<size_t, size_t>& s) { return p < s.first; });
    return it == shifts.begin() ? pos : pos + std::prev(it)->second;  // unsigned wrap-around cancels
  }
  // The first message of message k's turn: the last one at or before it with message head's role.
  size_t Start(size_t k) const {
    if (k < head) return head;
    size_t s = k;
    while (s > head && msgs[s].role != msgs[head].role) --s;
    return s;
  }
  // Messages [0, min(head, end)) + [start, end) (+ the sentinel).
  std::vector<RenderMessage> Window(size_t start, size_t end) const {
    std::vector<RenderMessage> w(msgs.begin(), msgs.begin() + ptrdiff_t(std::min(head, end)));
    for (size_t i = start; i < end; ++i) w.push_back(msgs[i]);
    if (sentinel) w.push_back({"user", "@fsend@", {}, "", ""});
    return w;
  }
  std::string Name() const {
    return (head >= msgs.size() ? std::string("prefixes") : fmt::format("windows/{}", head)) +
           (placeholders ? "/placeholders" : "") + (sentinel ? "/sentinel" : "");
  }
};

class Renderer {
 public:
  Renderer(const Transcript& t, const ChatTemplate& tmpl, const std::string& path) : t_(t), tmpl_(tmpl), path_(path) {}

  Result<std::string> Render(const std::vector<RenderMessage>& msgs, bool fast = false) const {
    if (msgs.empty()) return std::string();
    auto r = tmpl_.Render(msgs, t_.tools, fast);
    if (!r.ok())
      return Status::Error(path_ + ": the chat template " + tmpl_.display_name() +
                           " failed to render the transcript: " + r.status().message());
    return r;
  }

  // The placeholder copy, or nullopt when the template's output depends on the contents.
  std::optional<Locator> Placeholders(const std::vector<Planned>& plan, const std::string& full) const {
    Locator loc{Messages(plan), "", true, true, 1, false, {}, {}, {}};
    std::vector<std::string> keys(plan.size());
    for (size_t k = 0; k < plan.size(); ++k)
      if (!loc.msgs[k].content.empty()) loc.msgs[k].content = keys[k] = fmt::format("@fsph{}@", k);
    auto rp = Render(loc.msgs, true);
    if (!rp.ok()) return std::nullopt;
    std::string back;
    size_t cur = 0, added = 0;
    for (size_t k = 0; k < plan.size(); ++k) {
      if (keys[k].empty()) continue;
      size_t at = rp->find(keys[k], cur);
      if (at == std::string::npos) return std::nullopt;
      back.append(*rp, cur, at - cur).append(plan[k].msg.content);
      cur = at + keys[k].size();
      added += plan[k].msg.content.size() - keys[k].size();
      loc.shifts.push_back({cur, added});
    }
    back.append(*rp, cur, std::string::npos);
    if (back != full) return std::nullopt;
    loc.full = std::move(*rp);
    return loc;
  }

  // Message ranges in the locator's text, or empty. Without a sentinel, each message's window
  // rendering must extend the previous one by exactly the next bytes of the full rendering. With
  // one, each message is what its window inserts before the sentinel, found in the full
  // rendering after the previous message; it starts there and ends where the next one starts
  // (text a template renders between messages, such as a tool list, stays with the message
  // before). A window the template refuses to render (Llama 3.1's puts the tools into the first
  // user message and throws without one) gives its message an empty range, so that it is
  // counted with the next one; loc.failures counts these.
  Ranges MessageRanges(Locator& loc) const {
    const size_t count = loc.msgs.size();
    std::vector<size_t> starts;
    size_t from = 0, cached_start = size_t(-1);
    std::string before;  // rendering of the window without message k
    loc.window_base.clear();
    loc.anchor.clear();
    loc.failures = 0;
    Progress bar("locating messages", count, "msg");
    for (size_t k = 0; k < count; ++k) {
      bar.Update(k);
      size_t s = loc.Start(k);
      if (s != cached_start) {
        auto b = Render(loc.Window(s, k), loc.fast);
        if (!b.ok()) return {};
        before = std::move(*b);
        cached_start = s;
      }
      auto cur = Render(loc.Window(s, k + 1), loc.fast);
      size_t at = before.size(), q = from, n = 0;
      if (!cur.ok()) {
        ++loc.failures;  // `before` stays: the next message's delta covers both
      } else if (cur->size() < before.size()) {
        return {};
      } else if (n = cur->size() - before.size(); !loc.sentinel) {
        if (cur->compare(0, before.size(), before) != 0 || loc.full.compare(from, n, *cur, at, n) != 0) return {};
      } else {
        std::tie(at, q) = LocateInsertion(before, *cur, loc.full, from, k + 1 < count);
        if (q == std::string::npos) return {};
      }
      starts.push_back(k == 0 ? 0 : q);
      loc.window_base.push_back(at);
      loc.anchor.push_back(q);
      if (cur.ok()) from = q + n, before = std::move(*cur);
    }
    if (!loc.sentinel && from != loc.full.size()) return {};
    Ranges ranges;
    for (size_t k = 0; k < count; ++k) ranges.push_back({starts[k], k + 1 < count ? starts[k + 1] : loc.full.size()});
    return ranges;
  }

  // Approximation: a message starts where its content (or its first call's name) is found.
  Ranges SearchRanges(const std::vector<Planned>& plan, const std::string& full) const {
    std::vector<size_t> starts;
    size_t cursor = 0;
    for (const auto& p : plan) {
      std::string key = p.msg.content.substr(0, 64);
      if (key.empty() && !p.msg.calls.empty()) key = p.msg.calls.front()->name;
      size_t at = key.empty() ? std::string::npos : full.find(key, cursor);
      starts.push_back(at == std::string::npos ? cursor : at);
      cursor = starts.back();
    }
    if (!starts.empty()) starts.front() = 0;
    Ranges ranges;
    for (size_t i = 0; i < starts.size(); ++i)
      ranges.push_back({starts[i], i + 1 < starts.size() ? starts[i + 1] : full.size()});
    return ranges;
  }

  // Tool calls rendered by the template: call j is the text that rendering it inserts into
  // message k with calls 0..j-1, in real-text positions. Empty when a rendering fails or is not
  // an insertion found in the full rendering (the calls then get the message's range).
  Ranges NativeCallRanges(const Locator& loc, size_t k) const {
    std::vector<RenderMessage> msgs = loc.Window(loc.Start(k), k + 1);
    const size_t m = msgs.size() - (loc.sentinel ? 2 : 1);  // message k in its window
    std::vector<const ToolCall*> calls = msgs[m].calls;
    msgs[m].calls.clear();
    auto in_full = [&](size_t p) { return loc.anchor[k] + p - loc.window_base[k]; };
    auto first = Render(msgs, loc.fast);
    if (!first.ok()) return {};
    std::string before = std::move(*first);
    Ranges out;
    for (const ToolCall* c : calls) {
      msgs[m].calls.push_back(c);
      auto next = Render(msgs, loc.fast);
      if (!next.ok() || next->size() <= before.size()) return {};
      size_t at = InsertionPoint(before, *next), n = next->size() - before.size();
      if (at == std::string::npos || at < loc.window_base[k] || loc.full.compare(in_full(at), n, *next, at, n) != 0)
        return {};
      out.push_back({loc.Map(in_full(at)), loc.Map(in_full(at + n))});
      before = std::move(*next);
    }
    return out;
  }

 private:
  const Transcript& t_;
  const ChatTemplate& tmpl_;
  const std::string& path_;
};

// Where each planned message landed in the rendered text, and how that was found.
struct Located {
  std::optional<Locator> loc;  // none: the contents were searched for in the text
  Ranges ranges;               // per planned message, in the rendered text
};

// Locators, best first: windows on placeholders, windows on the real contents, full prefixes,
// then the same with a sentinel message closing every window; records the method in info.
Located LocateMessages(Renderer& r, const std::vector<Planned>& plan, const std::string& text, nlohmann::json& info) {
  std::optional<Locator> ph = r.Placeholders(plan, text);
  std::vector<Locator> tries;
  // Real contents render fast first (the windows are checked against the text anyway), then
  // the normal way, in case the fast mode renders differently.
  for (bool sentinel : {false, true}) {
    for (size_t head : {size_t(1), size_t(3), plan.size()}) {
      if (ph && head < plan.size()) tries.push_back(*ph), tries.back().head = head, tries.back().sentinel = sentinel;
      for (bool fast : {true, false})
        tries.push_back(Locator{Messages(plan), text, fast, false, head, sentinel, {}, {}, {}});
    }
  }
  // The first locator whose windows all render wins; else the one with the fewest refusals.
  std::optional<Locator> loc;
  Ranges ranges;
  for (auto& l : tries) {
    if (loc && l.sentinel && !loc->sentinel) break;  // a plain locator that worked beats sentinels
    // Full prefixes are quadratic: only when no window worked, and for at most 256 messages.
    if (l.head >= plan.size() && plan.size() > 3 && (loc || plan.size() > kMaxPrefixMessages)) continue;
    // The normal-mode twin of a fast locator that worked would find the same ranges.
    if (loc && !l.fast && loc->head == l.head && loc->sentinel == l.sentinel) continue;
    Ranges got = r.MessageRanges(l);
    if (got.empty() || (loc && l.failures >= loc->failures)) continue;
    ranges = std::move(got);
    loc = std::move(l);
    if (loc->failures == 0) break;
  }
  info["span_method"] = loc ? loc->Name() : "content-search";
  info["span_refused_windows"] = loc ? loc->failures : 0;
  if (loc) {
    for (auto& [b, e] : ranges) std::tie(b, e) = std::pair(loc->Map(b), loc->Map(e));
  } else {
    ranges = r.SearchRanges(plan, text);
  }
  return {std::move(loc), std::move(ranges)};
}

// The characters of assistant message out.spans[at] that the model generated: from the first
// character of its content or of its first tool call (the spans after it) to the end of the last
// one. The role header before them was the generation prompt; what follows them is the end-of-turn
// marker (its first token is the model's last) and the template's own text. Left unknown when
// neither content nor a call is found inside the message.
void MarkGenerated(Rendered& out, size_t at, const std::string& content) {
  CharSpan& m = out.spans[at];
  size_t b = std::string::npos, e = 0;
  const size_t lead = content.find_first_not_of(" \t\r\n");
  if (lead != std::string::npos) {
    // Templates often trim the content: look for it without its surrounding whitespace.
    const std::string core = content.substr(lead, content.find_last_not_of(" \t\r\n") + 1 - lead);
    const size_t found = out.text.find(core, m.begin);
    if (found != std::string::npos && found + core.size() <= m.end) b = found, e = found + core.size();
  }
  for (size_t i = at + 1; i < out.spans.size(); ++i) {
    const CharSpan& c = out.spans[i];
    if (c.kind != SpanKind::kToolCall || (c.begin == m.begin && c.end == m.end)) continue;  // a call not found
    b = std::min(b, c.begin);
    e = std::max(e, c.end);
  }
  if (b == std::string::npos || e <= b) return;
  m.gen_begin = b;
  m.gen_end = e;
}

// Appends the message, tool-call and tool-result spans of every planned message to out.spans.
void AppendSpans(const Transcript& t, const std::vector<Planned>& plan, const Located& where, Renderer& r,
                 Rendered& out) {
  // A message that rendered to nothing (merged into the next by the template, or its window
  // refused) is carried into the next message's span, with its tool calls and results.
  std::vector<int> carried;
  std::vector<std::pair<const Marked*, std::pair<size_t, size_t>>> marks;  // native: the call's range
  for (size_t k = 0; k < plan.size(); ++k) {
    const Planned& p = plan[k];
    auto [mb, me] = where.ranges[k];
    carried.insert(carried.end(), p.origins.begin(), p.origins.end());
    Ranges native;
    if (!p.msg.calls.empty() && where.loc) native = r.NativeCallRanges(*where.loc, k);
    size_t next_native = 0;
    for (const Marked& m : p.marks) {
      bool rendered = m.text.empty() && next_native < native.size();
      marks.push_back({&m, rendered ? native[next_native++] : std::pair<size_t, size_t>{0, 0}});
    }
    if (mb == me && k + 1 < plan.size()) continue;
    std::string label = carried.size() > p.origins.size()
                            ? fmt::format("messages #{}-#{} (merged by the template)", carried.front(), carried.back())
                            : p.label;
    int first = carried.front();
    std::string role = first > 0 ? t.messages[size_t(first - 1)].role : p.msg.role;
    out.spans.push_back({SpanKind::kMessage, mb, me, first, role, label, ""});
    const size_t message_span = out.spans.size() - 1;
    carried.clear();

    size_t cursor = mb;
    for (const auto& [m, range] : marks) {
      size_t b = mb, e = me;  // a call or result that cannot be found gets the message's range
      if (range.second > range.first) {
        std::tie(b, e) = range;
      } else if (size_t at = m->text.empty() ? std::string::npos : out.text.find(m->text, cursor);
                 at != std::string::npos && at + m->text.size() <= me) {
        b = at;
        e = cursor = at + m->text.size();
      }
      const bool call = m->kind == SpanKind::kToolCall;
      std::string what = call ? "tool call" : "tool result";
      out.spans.push_back({m->kind, b, e, m->index, call ? "assistant" : "tool",
                           fmt::format("{} #{} {}", what, m->index, m->name), m->name});
    }
    marks.clear();
    if (role == "assistant") MarkGenerated(out, message_span, p.msg.content);
  }
}

}  // namespace

Result<Rendered> RenderChat(const Transcript& t, const llama_model* model, const std::string& model_path,
                            const std::string& chat_template, const std::string& workload_path) {
  FS_ASSIGN_OR_RETURN(auto tmpl, ChatTemplate::Load(model, model_path, chat_template));
  Rendered out;
  out.info["template"] = tmpl->Info();
  std::vector<Planned> plan = Plan(t, *tmpl, &out.info);
  Renderer r(t, *tmpl, workload_path);
  FS_ASSIGN_OR_RETURN(out.text, r.Render(Messages(plan)));
  AppendSpans(t, plan, LocateMessages(r, plan, out.text, out.info), r, out);
  out.info["n_messages"] = t.messages.size();
  out.info["n_tool_calls"] = t.n_calls;
  return out;
}

}  // namespace flipscope::workload
