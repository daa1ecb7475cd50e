// support: a future's text as the verdict tests write it, piece by piece as a BPE tokenizer cuts it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "branch/verdict.h"

namespace flipscope::fixtures {

// The future of these pieces; `ended`: it stopped at an end of generation.
inline FutureText F(std::vector<std::string> pieces, bool ended = false) {
  return FutureText{std::move(pieces), ended};
}

}  // namespace flipscope::fixtures
