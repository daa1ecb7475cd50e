// Letting tool calls finish: a future inside a call decodes past its token budget until the call
// closes, runs clearly past the transcript's call, or reaches the hard cap.
#include <algorithm>
#include <memory>

#include "branch/internal.h"

namespace flipscope {
namespace branch {

CallBudget::CallBudget(const Transcript& t, int max_tokens, int max_call_tokens, bool constrained)
    : t_(t), cap_(std::max(max_tokens, max_call_tokens)), constrained_(constrained) {}

bool CallBudget::CallOpen(int32_t position, std::span<const int32_t> future) const {
  const size_t next = size_t(position) + 1;
  if (next >= t_.offsets.size()) return false;
  const std::string_view prefix = std::string_view(t_.text).substr(0, t_.offsets[next]);
  std::string text;
  for (int32_t tok : future) text += t_.Piece(tok);
  const CallText c = ExtractCall(prefix, text, t_.envelope);
  if (!c.present || c.closed) return false;
  if (c.closing || constrained_) return true;  // a few more tokens finish the marker; a grammar closes the call
  // The transcript's own call, read as far as the cap reaches: a future that is longer than the
  // whole of it and still open has run past it, and decoding on would not close it in time.
  const size_t ref_end = t_.offsets[std::min(t_.tokens.size(), next + size_t(cap_))];
  const CallText ref =
      ExtractCall(prefix, std::string_view(t_.text).substr(t_.offsets[next], ref_end - t_.offsets[next]), t_.envelope);
  return !(ref.present && ref.closed && c.body.size() > ref.body.size() + kCallCloseSlack);
}

bool CallBudget::Extend(int32_t position, std::span<const int32_t> future) const {
  return int(future.size()) < cap_ && CallOpen(position, future);
}

void CallBudget::Classify(int32_t position, std::span<const int32_t> future, FutureStop stop, FutureText* f) const {
  f->ended = stop == FutureStop::kEnd;
  // A future the budget stopped at the cap with its call still open was cut there, not closed.
  f->cap_hit = stop == FutureStop::kBudget && int(future.size()) >= cap_ && CallOpen(position, future);
  f->stop = f->cap_hit ? "call_cap" : FutureStopName(stop);
}

}  // namespace branch

Result<ExtendFn> CallExtension(const std::string& capture_path, int max_tokens, int max_call_tokens, bool constrained) {
  FS_ASSIGN_OR_RETURN(auto cap, CaptureReader::Open(capture_path));
  const std::string& model_path = cap->manifest().model.path;
  if (model_path.empty()) return Status::Error(capture_path + ": the manifest names no model file");
  auto t = std::make_shared<branch::Transcript>();
  std::vector<std::string> warnings;  // the branch stage reports them; here they only disable checks
  FS_RETURN_IF_ERROR(branch::ReadTranscript(*cap, model_path, t.get(), &warnings));
  auto budget = std::make_shared<branch::CallBudget>(*t, max_tokens, max_call_tokens, constrained);
  return ExtendFn(
      [t, budget](int32_t position, std::span<const int32_t> future) { return budget->Extend(position, future); });
}

}  // namespace flipscope
