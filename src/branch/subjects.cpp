// Values tied to their subject: the tool's output gives each order (host, customer) its own
// tracking number, amount or date, each number its unit (121 passed, 6.37s) and each address its
// role (a ping's target, its source); prose that gives a value another's subject is wrong in a way
// no single word shows.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "branch/chars.h"
#include "branch/verdict.h"

namespace flipscope {
namespace {

using branch_chars::IsDigit;
using branch_chars::Lower;

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

// Words between a field's name and its value in prose ("tracking number is 1Z61...", "ETA: ...").
constexpr std::array<std::string_view, 6> kFieldFillers = {"number", "is", "was", "id", "of", "="};

// Whether the transcript's JSON has the key `key`.
bool IsJsonKey(const FactTable& facts, const std::string& key) {
  return std::any_of(facts.fields_of.begin(), facts.fields_of.end(),
                     [&](const auto& f) { return f.second.count(key) > 0; });
}

// A known value written as what kind of thing a record is (`a 2026-03-20 order`: the value, then
// a thing the transcript's JSON identifies by `order_id`), where the transcript gives the value
// only as fields of other names (`"eta": "2026-03-20"`): the ETA made the order's date.
std::optional<std::string> ValueBeforeAThing(std::string_view text, const std::vector<Word>& words, size_t i,
                                             const std::set<std::string>& fields, const FactTable& facts) {
  if (i + 1 >= words.size()) return std::nullopt;
  const Word &v = words[i], &next = words[i + 1];
  const std::string_view gap = text.substr(v.offset + v.text.size(), next.offset - v.offset - v.text.size());
  if (gap != " ") return std::nullopt;
  std::string thing = Lower(next.text);
  while (!thing.empty() && (thing.back() == '.' || thing.back() == ':')) thing.pop_back();
  if (thing.size() < 3 || !IsJsonKey(facts, thing + "_id")) return std::nullopt;
  if (std::any_of(fields.begin(), fields.end(), [&](const std::string& f) { return f.rfind(thing, 0) == 0; }))
    return std::nullopt;
  return fmt::format("calls {} a {} {}, which the transcript gives as {}", v.text, v.text, thing,
                     fmt::join(fields, ", "));
}

// A known value written right after the name of a field that the transcript's JSON gives other
// values only as other fields: `tracking number 2026-03-19` where the record has "tracking":
// "1Z61C2DF96", "eta": "2026-03-19".
std::optional<std::string> ValueOfAnotherField(std::string_view text, size_t from, const FactTable& facts) {
  const std::vector<Word> words = SplitWords(text);
  for (size_t i = 0; i < words.size(); ++i) {
    const Word& v = words[i];
    if (v.offset + v.text.size() <= from) continue;
    const auto fields = facts.fields_of.find(v.text);
    if (fields == facts.fields_of.end()) continue;
    // The field's name: the word before the value, past filler words, in the same sentence.
    auto bare = [&](size_t k) {
      std::string w = Lower(words[k].text);
      while (!w.empty() && (w.back() == ':' || w.back() == '.')) w.pop_back();
      return w;
    };
    if (auto wrong = ValueBeforeAThing(text, words, i, fields->second, facts)) return wrong;
    if (i == 0) continue;
    size_t n = i - 1;
    while (n > 0 && std::find(kFieldFillers.begin(), kFieldFillers.end(), bare(n)) != kFieldFillers.end()) --n;
    const std::string name = bare(n);
    const std::string_view gap = text.substr(words[n].offset, v.offset - words[n].offset);
    if (name.size() < 3 || gap.find_first_of(";\n") != std::string_view::npos ||
        gap.find(". ") != std::string_view::npos)
      continue;
    // A field of the transcript's JSON of that name, with values of its own.
    bool is_field = false;
    for (const auto& [value, keys] : facts.fields_of) is_field = is_field || keys.count(name);
    if (!is_field || fields->second.count(name)) continue;
    return fmt::format("gives {} the value {}, which the transcript gives as {}", name, v.text,
                       fmt::join(fields->second, ", "));
  }
  return std::nullopt;
}

// What a number measures, by the unit written with it (`6.37s`, `7.58%`) or the word after it (`121
// passed`, `4 segments`): the classes a reader tells apart. "" when it has none of them.
std::string QuantityOf(std::string_view unit) {
  static constexpr std::pair<std::string_view, std::string_view> kUnits[] = {{"s", "a time"},
                                                                             {"sec", "a time"},
                                                                             {"secs", "a time"},
                                                                             {"second", "a time"},
                                                                             {"seconds", "a time"},
                                                                             {"ms", "a time"},
                                                                             {"msec", "a time"},
                                                                             {"min", "a time"},
                                                                             {"mins", "a time"},
                                                                             {"minute", "a time"},
                                                                             {"minutes", "a time"},
                                                                             {"h", "a time"},
                                                                             {"hr", "a time"},
                                                                             {"hrs", "a time"},
                                                                             {"hour", "a time"},
                                                                             {"hours", "a time"},
                                                                             {"day", "a time"},
                                                                             {"days", "a time"},
                                                                             {"%", "a share"},
                                                                             {"percent", "a share"},
                                                                             {"x", "a factor"},
                                                                             {"times", "a factor"},
                                                                             {"b", "a size"},
                                                                             {"byte", "a size"},
                                                                             {"bytes", "a size"},
                                                                             {"kb", "a size"},
                                                                             {"kib", "a size"},
                                                                             {"mb", "a size"},
                                                                             {"mib", "a size"},
                                                                             {"g", "a size"},
                                                                             {"gb", "a size"},
                                                                             {"gib", "a size"},
                                                                             {"tb", "a size"},
                                                                             {"tib", "a size"},
                                                                             {"test", "a count of tests"},
                                                                             {"tests", "a count of tests"},
                                                                             {"passed", "a count of tests"},
                                                                             {"failed", "a count of tests"},
                                                                             {"skipped", "a count of tests"},
                                                                             {"row", "a count of rows"},
                                                                             {"rows", "a count of rows"},
                                                                             {"record", "a count of rows"},
                                                                             {"records", "a count of rows"},
                                                                             {"segment", "a count of segments"},
                                                                             {"segments", "a count of segments"},
                                                                             {"packet", "a count of packets"},
                                                                             {"packets", "a count of packets"}};
  const std::string low = Lower(unit);
  for (const auto& [u, q] : kUnits)
    if (low == u) return std::string(q);
  return "";
}

// The number a word states and what it measures: `6.37s` -> (6.37, time), `121` before `passed`
// -> (121, tests). Nullopt for a word that is no number of three digits or more with a unit.
std::optional<std::pair<std::string, std::string>> NumberWithUnit(std::string_view text, const Word& w) {
  size_t n = 0, dots = 0;
  while (n < w.text.size() && (IsDigit(w.text[n]) || (w.text[n] == '.' && n > 0 && dots++ == 0))) ++n;
  while (n > 0 && w.text[n - 1] == '.') --n;
  const std::string number(w.text.substr(0, n));
  if (std::count_if(number.begin(), number.end(), IsDigit) < 3) return std::nullopt;
  std::string_view unit = std::string_view(w.text).substr(n);
  const size_t end = w.offset + w.text.size();
  if (unit.empty() && end < text.size() && text[end] == '%') unit = "%";
  if (unit.empty() && end + 1 < text.size() && text[end] == ' ') {
    size_t e = end + 1;
    while (e < text.size() && std::isalpha(static_cast<unsigned char>(text[e]))) ++e;
    unit = text.substr(end + 1, e - end - 1);
  }
  std::string q = QuantityOf(unit);
  // `N times` is a factor only before a comparison (`121 times faster`); `run 240 times` counts runs.
  if (Lower(unit) == "times") {
    const size_t u = size_t(unit.data() - text.data()) + unit.size();
    size_t e = u + 1;
    while (e < text.size() && std::isalpha(static_cast<unsigned char>(text[e]))) ++e;
    const std::string next = u < text.size() && text[u] == ' ' ? Lower(text.substr(u + 1, e - u - 1)) : "";
    if (!(next.ends_with("er") || next == "more" || next == "less" || next == "as")) q.clear();
  }
  if (q.empty()) return std::nullopt;
  return std::make_pair(number, std::move(q));
}

// The role a sentence gives the value at `w`: the word before it, past fillers (`source address of
// 10.24.235.1`, `Echos to 10.24.235.112`): 's' a source, 't' a target, 0 none.
char EndpointRole(const std::vector<Word>& words, size_t i) {
  static constexpr std::string_view kFillers[] = {"address", "of", "the", "ip", "host", "a", "an", "is"};
  static constexpr std::string_view kSources[] = {"from", "source", "src", "sourced"};
  static constexpr std::string_view kTargets[] = {"to", "target", "destination", "dst", "dest"};
  for (size_t k = i, seen = 0; k > 0 && seen < 4; --k, ++seen) {
    const std::string w = Lower(words[k - 1].text);
    if (std::find(std::begin(kSources), std::end(kSources), w) != std::end(kSources)) return 's';
    if (std::find(std::begin(kTargets), std::end(kTargets), w) != std::end(kTargets)) return 't';
    if (std::find(std::begin(kFillers), std::end(kFillers), w) == std::end(kFillers)) return 0;
  }
  return 0;
}

// Whether a fact word names an endpoint (an address, a host, an interface, a path), not a number.
bool IsEndpoint(std::string_view w) {
  if (!IsFactWord(w)) return false;
  const auto letters =
      std::count_if(w.begin(), w.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
  return letters > 0 || w.find('/') != std::string_view::npos || std::count(w.begin(), w.end(), '.') == 3;
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

void ReadQuantitiesAndRoles(std::string_view transcript, FactTable* t) {
  const std::vector<Word> words = SplitWords(transcript);
  for (size_t i = 0; i < words.size(); ++i) {
    if (auto q = NumberWithUnit(transcript, words[i])) t->quantities_of[q->first].insert(q->second);
    if (!IsEndpoint(words[i].text)) continue;
    if (const char role = EndpointRole(words, i)) t->roles_of[words[i].text].insert(role);
  }
}

std::optional<std::string> ValueOfAnotherSubject(std::string_view text, size_t from, const FactTable& facts) {
  if (auto wrong = ValueOfAnotherField(text, from, facts)) return wrong;
  const std::vector<Word> words = SplitWords(text);
  for (size_t i = 0; i < words.size(); ++i) {
    const Word& w = words[i];
    if (w.offset + w.text.size() <= from) continue;
    // A number given another unit than every one the transcript writes it with: a test count as
    // a speed-up (121 passed -> 121 times faster), a duration as a share (7.58s -> 7.58%).
    if (auto q = NumberWithUnit(text, w)) {
      const auto given = facts.quantities_of.find(q->first);
      if (given != facts.quantities_of.end() && !given->second.count(q->second))
        return fmt::format("gives {} as {}, where the transcript gives it as {}", q->first, q->second,
                           fmt::join(given->second, ", "));
    }
    // An endpoint put in the other role than every one the transcript gives it: a ping's target
    // said to be its source.
    if (const char role = IsEndpoint(w.text) ? EndpointRole(words, i) : 0) {
      const auto given = facts.roles_of.find(w.text);
      if (given != facts.roles_of.end() && !given->second.count(role))
        return fmt::format("gives {} as the {}, where the transcript gives it as the {}", w.text,
                           role == 's' ? "source" : "target", role == 's' ? "target" : "source");
    }
  }
  return ValueOfAnotherRecord(text, from, facts);
}

}  // namespace flipscope
