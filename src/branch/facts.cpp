// Invented facts: words of prose that state what the transcript does not hold (addresses, paths,
// hosts, numbers), and ports given to a service the transcript's lines give other ports.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <set>
#include <vector>

#include "branch/chars.h"
#include "branch/verdict.h"

namespace flipscope {
namespace {

using branch_chars::IsDigit;
bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
using branch_chars::Lower;
using branch_chars::SentenceAround;

// Whether the word that ends at byte i is a path (`tests/test_totals.py` of
// `tests/test_totals.py:48`; not a URL's host): a number after it is a line, not a port.
bool AfterPath(std::string_view text, size_t i) {
  size_t a = i;
  while (a > 0 && !std::isspace(static_cast<unsigned char>(text[a - 1])) && text[a - 1] != '(' && text[a - 1] != '"')
    --a;
  const std::string_view word = text.substr(a, i - a);
  return word.find('/') != std::string_view::npos && word.find("://") == std::string_view::npos;  // a URL's host:port
}

// The ports a text names: the number after "port" or (`after_colon`) after a ':' that follows an
// address or name ("127.0.0.1:5432", "port 22"), each with its byte offset.
std::vector<std::pair<std::string, size_t>> PortsIn(std::string_view text, bool after_colon = true) {
  std::vector<std::pair<std::string, size_t>> out;
  const std::string low = Lower(text);
  for (size_t i = 0; i < low.size(); ++i) {
    size_t start = std::string::npos;
    if (low.compare(i, 5, "port ") == 0 && i + 5 < low.size() && IsDigit(low[i + 5]))
      start = i + 5;
    else if (after_colon && low[i] == ':' && i > 0 && IsAlnum(low[i - 1]) && i + 1 < low.size() &&
             IsDigit(low[i + 1]) && !AfterPath(low, i))
      start = i + 1;
    if (start == std::string::npos) continue;
    size_t end = start;
    while (end < low.size() && IsDigit(low[end])) ++end;
    // Not the start of an address ("port 172.17.0.1"): a port ends where a word ends.
    const bool address = end + 1 < low.size() && low[end] == '.' && IsDigit(low[end + 1]);
    if (end - start <= 5 && (end == low.size() || !IsAlnum(low[end])) && !address)
      out.emplace_back(low.substr(start, end - start), start);
  }
  return out;
}

// Words around a port that name no service.
constexpr std::array<std::string_view, 16> kPortWords = {"port",    "ports",  "listen", "listens", "listening", "local",
                                                         "address", "peer",   "users",  "state",   "recv",      "send",
                                                         "open",    "closed", "from",   "with"};

// The names on a line or in a sentence that a port can belong to: lower-case words of 4+ letters
// that are not the words of a socket listing.
std::vector<std::string> NamesIn(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && std::isalpha(static_cast<unsigned char>(text[j]))) ++j;
    std::string w = Lower(text.substr(i, j - i));
    if (w.size() >= 4 && std::find(kPortWords.begin(), kPortWords.end(), w) == kPortWords.end()) out.push_back(w);
    i = j + 1;
  }
  return out;
}

// Whether two service names are the same: equal, or one the other's start of 5+ letters
// (postgres, postgresql).
bool SameService(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  return a == b || (n >= 5 && a.compare(0, n, b, 0, n) == 0);
}

// Whether a word's digits only number it: line numbers or counts of 1-2 digits joined to words by
// '-' (grep's context lines `20-The`, `20-21-The`, `3-way`), or an ordinal `_1`/`_12` ending a snake_case name
// of words (test_function_1, the first of several made-up names). Such a word names nothing.
bool NumberedWording(std::string_view w) {
  auto letters = [](std::string_view s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
  };
  auto number = [](std::string_view s) {
    return !s.empty() && s.size() <= 2 && std::all_of(s.begin(), s.end(), IsDigit);
  };
  if (w.find('-') != std::string_view::npos) {  // numbers, then words, joined by '-' (not app-west-01)
    bool numbers = false, words = false;
    for (size_t a = 0; a <= w.size();) {
      const size_t b = std::min(w.find('-', a), w.size());
      const std::string_view part = w.substr(a, b - a);
      if (number(part) && !words)
        numbers = true;
      else if (letters(part))
        words = true;
      else
        return false;
      a = b + 1;
    }
    return numbers && words;
  }
  const size_t last = w.rfind('_');
  if (last == std::string_view::npos || !number(w.substr(last + 1))) return false;
  // Every part before the ordinal is a word of letters, and there are two or more.
  size_t parts = 0;
  for (size_t a = 0; a < last;) {
    const size_t b = std::min(w.find('_', a), last);
    if (!letters(w.substr(a, b - a))) return false;
    ++parts, a = b + 1;
  }
  return parts >= 2;
}

// Whether the number w, a word of text, is a percentage of a stock phrase, which states no measure:
// a belief's degree ("99% sure", "100 percent certain") or 100 as "wholly" ("100% correct",
// "100% of the time"). "100% full" or "73% complete" still measures something.
bool InStockPhrase(std::string_view text, const Word& w) {
  if (!std::all_of(w.text.begin(), w.text.end(), IsDigit)) return false;
  std::string after = Lower(text.substr(w.offset + w.text.size(), 40));
  for (std::string_view percent : {"%", " percent", " per cent"})
    if (after.rfind(percent, 0) == 0) {
      after.erase(0, percent.size());
      const size_t start = after.find_first_not_of(' ');
      const size_t end = after.find_first_not_of("abcdefghijklmnopqrstuvwxyz", start == std::string::npos ? 0 : start);
      const std::string next = start == std::string::npos ? "" : after.substr(start, end - start);
      static constexpr std::string_view kBelief[] = {"sure", "certain", "confident", "positive"};
      static constexpr std::string_view kWholly[] = {"correct", "accurate", "right",     "safe",   "fine",
                                                     "true",    "working",  "reliable",  "secure", "fixed",
                                                     "valid",   "clean",    "compatible"};
      if (std::find(std::begin(kBelief), std::end(kBelief), next) != std::end(kBelief)) return true;
      return w.text == "100" && (std::find(std::begin(kWholly), std::end(kWholly), next) != std::end(kWholly) ||
                                 after.compare(start == std::string::npos ? 0 : start, 11, "of the time") == 0);
    }
  return false;
}

}  // namespace

// Whether a word states a fact that must come from somewhere: an address, a path, a host or file
// name, a version, or a number of 3+ digits (a port, a count, an id).
bool IsFactWord(std::string_view w) {
  const size_t digits = size_t(std::count_if(w.begin(), w.end(), IsDigit));
  // One digit over and over (0000000000, or 00:00:00.000000000 with separators between) is
  // filler, no number anything holds; four of them dotted (0.0.0.0) are an address.
  const auto first = std::find_if(w.begin(), w.end(), IsDigit);
  if (first != w.end() && (digits == w.size() || digits > 4) &&
      std::all_of(w.begin(), w.end(), [&](char c) { return c == *first || (!IsDigit(c) && !IsAlnum(c)); }))
    return false;
  if (w.size() >= 2 && (w[0] == '/' || w[0] == '~') && std::any_of(w.begin() + 1, w.end(), IsAlnum)) return true;
  if (NumberedWording(w)) return false;
  // The name of a standard or an encoding is a word of the language, not a fact a transcript holds.
  static constexpr std::string_view kStandards[] = {"ipv4",     "ipv6",   "utf-8",  "utf8",   "utf-16", "sha256",
                                                    "sha-256",  "sha1",   "md5",    "base64", "x86_64", "http/2",
                                                    "http/1.1", "tls1.2", "tls1.3", "ext4",   "int64",  "int32"};
  if (std::find(std::begin(kStandards), std::end(kStandards), Lower(w)) != std::end(kStandards)) return false;
  if (digits >= 3) return true;
  if (digits > 0 && w.size() >= 4) return true;  // lab-sw01, eth0, v14
  // A dotted name with letters on both sides of a dot (db.example.com, postgresql.conf); a part of
  // one letter is code reaching into an object (a.name, f.read), no host or file.
  bool dotted = false;
  for (size_t i = 1; i + 1 < w.size(); ++i)
    dotted = dotted || (w[i] == '.' && std::isalpha(static_cast<unsigned char>(w[i - 1])) &&
                        std::isalpha(static_cast<unsigned char>(w[i + 1])));
  if (!dotted || w.size() < 6) return false;
  for (size_t a = 0; a <= w.size();) {
    const size_t b = std::min(w.find('.', a), w.size());
    if (b - a == 1) return false;
    a = b + 1;
  }
  return true;
}

namespace {

// The kinds of value a thing can be given on a line: one thing has one MAC, one pid, one uplink.
enum class FactKind { kNone, kAddress, kMac, kNumber, kPath, kInterface, kName };

FactKind KindOf(std::string_view w) {
  auto hex = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
  };
  if (w.empty()) return FactKind::kNone;
  if (w[0] == '/') return FactKind::kPath;
  if (std::all_of(w.begin(), w.end(), IsDigit)) return FactKind::kNumber;
  // A MAC: three groups of four hex digits joined by '.', or six of two joined by ':'.
  auto groups = [&](size_t n, size_t len, char sep) {
    if (w.size() != n * (len + 1) - 1) return false;
    for (size_t g = 0; g < n; ++g)
      if (!hex(w.substr(g * (len + 1), len)) || (g + 1 < n && w[g * (len + 1) + len] != sep)) return false;
    return true;
  };
  if (groups(3, 4, '.') || groups(6, 2, ':')) return FactKind::kMac;
  // An address: four dotted numbers first (10.20.3.17, 10.20.3.17/32, 0.0.0.0:22).
  size_t i = 0;
  for (int part = 0; part < 4; ++part) {
    const size_t start = i;
    while (i < w.size() && IsDigit(w[i])) ++i;
    if (i == start || i - start > 3 || (part < 3 && (i >= w.size() || w[i++] != '.'))) break;
    if (part == 3) return FactKind::kAddress;
  }
  // Letters (and '-') then a digit: an interface when it has a '/' (GigabitEthernet0/0/1), else a
  // name (lab-sw01, pg-east-02).
  size_t letters = 0;
  while (letters < w.size() && (std::isalpha(static_cast<unsigned char>(w[letters])) || w[letters] == '-')) ++letters;
  if (letters == 0 || letters == w.size() || !IsDigit(w[letters])) return FactKind::kNone;
  if (w.find('/') != std::string_view::npos) return FactKind::kInterface;
  return w.find_first_of(".:@") == std::string_view::npos ? FactKind::kName : FactKind::kNone;
}

// Whether the word at byte `at` of text is a markup tag's name (`</tool_response>`), no path.
bool InMarkupTag(std::string_view text, size_t at) { return at > 0 && text[at - 1] == '<'; }

// A value of one kind given to a thing on one line of `text` from byte `from` on, where the
// transcript's lines naming the thing give it only one or two other values of that kind and never
// this one: 10.25.251.178 with the MAC of another row, a socket's line with another process's pid.
std::optional<std::string> MisattributedFact(std::string_view text, size_t from, const FactTable& facts,
                                             const WordFilter& known) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    if (end > from) {
      std::vector<Word> words;
      for (Word& w : SplitWords(text.substr(start, end - start)))
        if (IsFactWord(w.text) && KindOf(w.text) != FactKind::kNone && (!known || known(w.text)) &&
            !InMarkupTag(text, start + w.offset))
          w.offset += start, words.push_back(std::move(w));
      for (const Word& v : words) {
        // The value is the future's (not the transcript's own words), of a kind a thing has one
        // of; the thing is named, not counted (a number is a value: a VLAN, a backlog, a pid).
        const FactKind kind = KindOf(v.text);
        if (v.offset + v.text.size() <= from || kind == FactKind::kName || kind == FactKind::kPath) continue;
        for (const Word& a : words) {
          const FactKind named = KindOf(a.text);
          const auto lines = facts.lines_of.find(a.text);
          if (named == kind || named == FactKind::kNumber || named == FactKind::kMac || lines == facts.lines_of.end())
            continue;
          std::set<std::string> given;  // what the transcript's lines naming `a` hold of v's kind
          for (size_t l : lines->second)
            for (const std::string& w : facts.line_facts[l])
              if (KindOf(w) == kind) given.insert(Lower(w));
          if (given.empty() || given.count(Lower(v.text)) || given.size() > 2) continue;
          return fmt::format("gives {} {}, where the transcript's lines give it {}", a.text, v.text,
                             fmt::join(given, ", "));
        }
      }
    }
    start = end + 1;
  }
  return std::nullopt;
}

// Per JSON field value of a text ("key": "value" or "key": 123), the key in lower case and the value.
std::vector<std::pair<std::string, std::string>> JsonFields(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t q = text.find("\":"); q != std::string_view::npos; q = text.find("\":", q + 2)) {
    const size_t open = text.rfind('"', q == 0 ? 0 : q - 1);
    if (open == std::string_view::npos || q - open > 40) continue;
    size_t v = q + 2;
    while (v < text.size() && text[v] == ' ') ++v;
    const bool quoted = v < text.size() && text[v] == '"';
    size_t end = v + quoted;
    while (end < text.size() && (quoted ? text[end] != '"' : IsWordChar(text[end]) && text[end] != ',')) ++end;
    if (end - v - quoted == 0 || end - v > 80) continue;
    out.emplace_back(Lower(text.substr(open + 1, q - open - 1)),
                     std::string(text.substr(v + quoted, end - v - quoted)));
  }
  return out;
}

// The file names inside a path or a test's id (split at '/' and ':'), each a fact word of its own.
void AddPathParts(std::string_view w, FactTable* t) {
  if (w.find_first_of("/:") == std::string_view::npos) return;
  for (size_t a = 0; a <= w.size();) {
    const size_t b = std::min(w.find_first_of("/:", a), w.size());
    const std::string_view part = w.substr(a, b - a);
    if (part.size() < w.size() && part.find('.') != std::string_view::npos && IsFactWord(part))
      t->path_parts.emplace(part);
    a = b + 1;
  }
}

// Per line of the transcript, the ports it gives the names beside them, and its fact words (with
// the lines that hold each).
void ReadLines(std::string_view transcript, FactTable* t) {
  size_t line_start = 0;
  while (line_start <= transcript.size()) {
    size_t end = transcript.find('\n', line_start);
    if (end == std::string_view::npos) end = transcript.size();
    const std::string_view line = transcript.substr(line_start, end - line_start);
    for (const auto& [port, at] : PortsIn(line))
      for (const std::string& name : NamesIn(line)) t->ports_of[name].insert(port);
    std::vector<std::string>& words = t->line_facts.emplace_back();
    for (Word& w : SplitWords(line))
      if (IsFactWord(w.text)) {
        auto& at = t->lines_of[w.text];
        if (at.empty() || at.back() != t->line_facts.size() - 1) at.push_back(t->line_facts.size() - 1);
        AddPathParts(w.text, t);
        words.push_back(std::move(w.text));
      }
    line_start = end + 1;
  }
}

// Every innermost JSON object (one without objects inside) holding two or more fact words: a
// record of a tool's output or a call's arguments, whose values belong together.
void ReadRecords(std::string_view transcript, FactTable* t) {
  for (size_t open = transcript.find('{'); open != std::string_view::npos; open = transcript.find('{', open + 1)) {
    const size_t close = transcript.find_first_of("{}", open + 1);
    if (close == std::string_view::npos || transcript[close] != '}') continue;
    std::map<std::string, std::string> record;
    for (auto& [key, value] : JsonFields(transcript.substr(open, close - open + 1)))
      if (IsFactWord(value)) record.emplace(std::move(key), std::move(value));
    if (record.size() < 2) continue;
    for (const auto& [key, value] : record) {
      auto& at = t->records_of[value];
      if (at.empty() || at.back() != t->records.size()) at.push_back(t->records.size());
    }
    t->records.push_back(std::move(record));
  }
}

}  // namespace

FactTable FactTable::FromText(std::string_view transcript) {
  FactTable t;
  ReadLines(transcript, &t);
  // What each fact word is, by the JSON fields that give it.
  for (auto& [key, value] : JsonFields(transcript))
    if (IsFactWord(value)) t.fields_of[value].insert(key);
  ReadRecords(transcript, &t);
  ReadQuantitiesAndRoles(transcript, &t);
  return t;
}

std::optional<std::string> FindInventedFact(std::string_view text, size_t from, const FactTable& facts,
                                            const WordFilter& known, size_t own) {
  for (const Word& w : SplitWords(text)) {
    if (w.offset + w.text.size() <= from || !IsFactWord(w.text)) continue;
    if (InMarkupTag(text, w.offset)) continue;
    if (InStockPhrase(text, w)) continue;
    // A word cut by the end of the text is known when it is the start of a known one: `known` says.
    if (known && known(w.text)) continue;
    return fmt::format("states \"{}\", which the transcript nowhere holds", w.text);
  }
  // A port the transcript names, given to a service whose lines name only other ports. "port N"
  // belongs to what its sentence names; an address's ":N" to what the future's own words of the
  // sentence name (a host route written before the point is no service of the port's).
  for (const auto& [port, at] : PortsIn(text)) {
    if (at < from) continue;
    const bool colon = at > 0 && text[at - 1] == ':';
    std::string_view sentence = SentenceAround(text, at);
    if (colon && sentence.data() < text.data() + own)
      sentence.remove_prefix(size_t(text.data() + own - sentence.data()));
    for (const std::string& name : NamesIn(sentence)) {
      std::set<std::string> ports;  // every port the transcript's lines give this service
      for (const auto& [service, given] : facts.ports_of)
        if (SameService(name, service)) ports.insert(given.begin(), given.end());
      if (ports.empty() || ports.count(port) || ports.size() > 2) continue;
      return fmt::format("gives {} port {}, where the transcript's lines give it {}", name, port,
                         fmt::join(ports, ", "));
    }
  }
  if (auto wrong = MisattributedFact(text, from, facts, known)) return wrong;
  return ValueOfAnotherSubject(text, from, facts);
}

}  // namespace flipscope
