// Values tied to their subject across a sentence: the tool's output gives each order (host, customer)
// its own tracking number, amount or date, and prose that gives one order another's is wrong in a
// way no single word shows.
#include <fmt/format.h>

#include <algorithm>

#include "branch/chars.h"
#include "branch/verdict.h"

namespace flipscope {
namespace {

// Whether some record of the transcript holds both a and b.
bool ShareARecord(const FactTable& facts, const std::string& a, const std::string& b) {
  const auto ra = facts.records_of.find(a), rb = facts.records_of.find(b);
  if (ra == facts.records_of.end() || rb == facts.records_of.end()) return false;
  return std::any_of(ra->second.begin(), ra->second.end(),
                     [&](size_t r) { return std::find(rb->second.begin(), rb->second.end(), r) != rb->second.end(); });
}

// Whether some record gives `value` as its `key`.
bool GivenAs(const FactTable& facts, const std::string& value, const std::string& key) {
  const auto at = facts.records_of.find(value);
  if (at == facts.records_of.end()) return false;
  return std::any_of(at->second.begin(), at->second.end(), [&](size_t r) {
    const auto k = facts.records[r].find(key);
    return k != facts.records[r].end() && k->second == value;
  });
}

}  // namespace

std::optional<std::string> ValueOfAnotherRecord(std::string_view text, size_t from, const FactTable& facts) {
  if (facts.records.empty()) return std::nullopt;
  std::vector<Word> words;  // the text's words that some record holds
  for (Word& w : SplitWords(text))
    if (facts.records_of.count(w.text)) words.push_back(std::move(w));
  // Value v given to subject s in `sentence`: a record of v's whose subject, under a key that names
  // s elsewhere, is another one the sentence does not name, and no record holds both.
  auto given_to = [&](const Word& v, const Word& s, std::string_view sentence) -> std::optional<std::string> {
    if (v.offset + v.text.size() <= from || v.text == s.text || ShareARecord(facts, v.text, s.text)) return {};
    for (size_t r : facts.records_of.at(v.text))
      for (const auto& [key, owner] : facts.records[r]) {
        if (owner == v.text || owner == s.text || !GivenAs(facts, s.text, key)) continue;
        const bool named = std::any_of(words.begin(), words.end(), [&](const Word& w) {
          return w.text == owner && w.offset >= size_t(sentence.data() - text.data()) &&
                 w.offset < size_t(sentence.data() - text.data()) + sentence.size();
        });
        if (!named)
          return fmt::format("gives {} the value {}, which the transcript's output gives {} {}", s.text, v.text, key,
                             owner);
      }
    return {};
  };
  // Pairs in the order written, the later word read as the value first (a subject, then what is
  // said of it), then the earlier (`65.53 EUR for NW-2025-1675`).
  for (size_t j = 0; j < words.size(); ++j) {
    const std::string_view sentence = branch_chars::SentenceAround(text, words[j].offset);
    const size_t a = size_t(sentence.data() - text.data());
    for (size_t i = 0; i < j; ++i) {
      if (words[i].offset < a) continue;
      if (auto wrong = given_to(words[j], words[i], sentence)) return wrong;
      if (auto wrong = given_to(words[i], words[j], sentence)) return wrong;
    }
  }
  return std::nullopt;
}

}  // namespace flipscope
