// Fuzz target: the git output bisect reads (`git log --first-parent --reverse --format=%H%x09%s
// GOOD..BAD`, ParseCommitList), the files of a commit (`git show --name-only --format=`,
// ParseChangedFiles) and the criterion text it is given (ParseBisectCriterion). An
// accepted list prints back, line by line, to the same text; every id is lowercase hex of 40 or
// 64 digits and no subject holds a line break; errors are one line. A parsed criterion prints back
// to one that parses to the same criterion. Every changed file is a non-empty line of the text, with
// no line break or trailing carriage return, and they come in the text's order.
#include <cstdlib>
#include <string>

#include "history/history.h"

using namespace flipscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto list = ParseCommitList(text);
  if (!list.ok()) {
    if (list.status().message().find('\n') != std::string::npos) std::abort();
  } else {
    std::string again;
    for (const GitCommit& c : *list) {
      if (c.sha.size() != 40 && c.sha.size() != 64) std::abort();
      if (c.sha.find_first_not_of("0123456789abcdef") != std::string::npos) std::abort();
      if (c.subject.find_first_of("\r\n") != std::string::npos) std::abort();
      again += c.sha + "\t" + c.subject + "\n";
    }
    // The last line may lack its newline.
    if (again != text && again != text + "\n") std::abort();
  }
  size_t from = 0;
  for (const std::string& f : ParseChangedFiles(text)) {
    if (f.empty() || f.find('\n') != std::string::npos || f.back() == '\r') std::abort();
    size_t at = text.find(f, from);
    if (at == std::string::npos) std::abort();
    from = at + f.size();
  }
  auto c = ParseBisectCriterion(text);
  if (!c.ok()) {
    if (c.status().message().find('\n') != std::string::npos) std::abort();
    return 0;
  }
  auto back = ParseBisectCriterion(c->ToString());
  if (!back.ok() || back->kind != c->kind) std::abort();
  // A KL threshold prints with fmt's shortest round-trip form; a flip count exactly.
  if (back->threshold != c->threshold) std::abort();
  return 0;
}
