// Internal to the branch stage: what the run hands to the record builder.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "branch/branch.h"
#include "branch/verdict.h"
#include "capture/capture.h"
#include "workload/workload.h"

namespace flipscope::branch {

// A branch point: a probe position of both captures and each side's own choice there.
struct Point {
  int32_t position = 0;
  int32_t base_token = 0, cand_token = 0;
};

// The transcript as text, with what the judge needs to know about it.
struct Transcript {
  std::vector<int32_t> tokens;
  std::vector<std::string> vocab;  // token id -> its text (special tokens rendered)
  std::string text;                // every token's text concatenated
  std::vector<size_t> offsets;     // byte offset of each token in text (plus one past the end)
  std::vector<Span> spans;
  std::vector<ToolSpec> tools;  // empty when unknown
  ToolEnvelope envelope;        // empty markers: tool calls are not checked

  // Fills text and offsets from tokens and vocab.
  void Index();
  // The text of a token (empty for ids outside the vocabulary).
  const std::string& Piece(int32_t token) const;
};

// A capture's vocabulary size: its rows' width, or for a truncated capture the model's (manifest).

// The transcript of a capture: its tokens, spans, vocabulary texts, tools and tool-call markers
// (the workload file is read again for tools an older manifest lacks); problems that leave tool
// calls unchecked go to warnings. `given`: the spans, tools and tool-call form to use in place of
// the manifest's (BranchRequest::transcript); null: the manifest's.
Status ReadTranscript(const CaptureReader& cap, const std::string& model_path, Transcript* t,
                      std::vector<std::string>* warnings, const ManifestWorkload* given = nullptr);

// The "let calls finish" rule over one transcript (docs/branch.md): past max_tokens, a future
// decodes on while the tool call it is in (open at the point, or opened by the future) has not
// closed, has not run more than kCallCloseSlack bytes past the transcript's call, and is shorter
// than the hard cap max(max_tokens, max_call_tokens).
class CallBudget {
 public:
  // constrained: the futures decode under a tool-call grammar, which closes a call or lets it run
  // to the cap; running past the transcript's call then stops nothing.
  CallBudget(const Transcript& t, int max_tokens, int max_call_tokens, bool constrained = false);
  // Whether the future at `position` (its tokens so far, the budget used up) decodes one more.
  bool Extend(int32_t position, std::span<const int32_t> future) const;
  // How a decoded future stopped, from the decoder's own account (`stop`): sets f->ended (an
  // end-of-generation token, never the budget), f->cap_hit (the cap cut it inside an open call)
  // and f->stop_name.
  void Classify(int32_t position, std::span<const int32_t> future, FutureStop stop, FutureText* f) const;
  int cap() const { return cap_; }

 private:
  // Whether the future's call is still open and within the transcript call's length.
  bool CallOpen(int32_t position, std::span<const int32_t> future) const;
  const Transcript& t_;
  int cap_;  // max(max_tokens, max_call_tokens): no future decodes past it
  bool constrained_;
};

// The judged record of every point (docs/branch.md), in point order.
std::vector<ForkRecord> BuildRecords(const Transcript& t, const std::vector<Point>& points, const SidePass& base,
                                     const SidePass& cand, const BranchOptions& options, const CallBudget& budget);

}  // namespace flipscope::branch
