// One type per literal text (workload::UnifyLiterals), and the rule of where a literal ends that
// the scanner (literals.cpp) and this pass share.
#include <algorithm>
#include <map>
#include <set>

#include "workload/internal.h"

namespace flipscope::workload {
namespace {

// Whether a character may stand right before a literal that is not part of a longer word:
// not a word character, nor a separator that would make it a component ("206" in 10.20.206.0).
bool FreeBefore(std::string_view t, size_t i) {
  if (i == 0) return true;
  char c = t[i - 1];
  return !(Alnum(c) || c == '_' || c == '.' || c == ':' || c == '/' || c == '-' || c == '@');
}

}  // namespace

// A ':', '.' or '-' that continues with an alphanumeric would make the literal a piece of
// something else; a port after an address is the one allowed continuation, when allow_port.
bool LiteralEnds(std::string_view t, size_t i, bool allow_port) {
  auto at = [&](size_t j) { return j < t.size() ? t[j] : '\0'; };
  char c = at(i);
  if (c == '\0') return true;
  if (Alnum(c) || c == '_') return false;
  if ((c == ':' || c == '.' || c == '-') && Alnum(at(i + 1))) return allow_port && c == ':' && Digit(at(i + 1));
  return true;
}

// A text the scanner typed more specifically anywhere (a port, an interface) has that type
// everywhere it appears, and an occurrence the scanner did not see as a literal by itself (a
// three-digit VLAN id in prose, a port after "-p") is marked wherever the same text stands alone.
void UnifyLiterals(std::string_view t, std::vector<Literal>* found) {
  std::vector<Literal>& out = *found;
  std::map<std::string, std::string, std::less<>> type;
  for (const Literal& l : out) {
    auto [it, fresh] = type.emplace(l.text, l.type);
    if (!fresh && it->second == "number") it->second = l.type;  // any typed use beats "number"
  }
  std::vector<char> covered(t.size(), 0);
  std::set<size_t> lengths;
  for (Literal& l : out) {
    l.type = type.at(l.text);
    std::fill(covered.begin() + long(l.begin), covered.begin() + long(l.end), 1);
    lengths.insert(l.text.size());
  }
  std::vector<Literal> more;
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (covered[i] || !(Alnum(c) || c == '/' || c == '~' || c == '.') || !FreeBefore(t, i)) continue;
    for (auto n = lengths.rbegin(); n != lengths.rend(); ++n) {  // the longest text first
      if (i + *n > t.size() || !LiteralEnds(t, i + *n)) continue;
      auto it = type.find(t.substr(i, *n));
      if (it == type.end()) continue;
      size_t e = i + *n;
      if (std::find(covered.begin() + long(i), covered.begin() + long(e), 1) != covered.begin() + long(e)) continue;
      more.push_back({it->second, it->first, i, e});
      i = e - 1;
      break;
    }
  }
  if (more.empty()) return;
  out.insert(out.end(), more.begin(), more.end());
  std::sort(out.begin(), out.end(), [](const Literal& a, const Literal& b) { return a.begin < b.begin; });
}

}  // namespace flipscope::workload
