// Internal to the branch stage: what the run hands to the record builder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "branch/branch.h"
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
  std::vector<ToolSpec> tools;     // empty when unknown
  ToolEnvelope envelope;           // empty markers: tool calls are not checked

  // Fills text and offsets from tokens and vocab.
  void Index();
  // The text of a token (empty for ids outside the vocabulary).
  const std::string& Piece(int32_t token) const;
};

// The judged record of every point (docs/branch.md), in point order.
nlohmann::json BuildRecords(const Transcript& t, const std::vector<Point>& points, const SidePass& base,
                            const SidePass& cand, const BranchOptions& options);

}  // namespace flipscope::branch
