// Literal detection: the values an agent copies from tool output into its next command (IPs,
// MACs, interface names, hostnames, ports, numbers). A hand-written scanner rather than
// std::regex: one linear pass over transcripts of hundreds of kilobytes, and exact control over
// where a literal may start and end.
#include <array>
#include <cctype>
#include <cstring>

#include "workload/workload.h"

namespace flipscope {
namespace {

bool Alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool Digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool Hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
bool Alpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

class Scanner {
 public:
  explicit Scanner(std::string_view t) : t_(t) {}

  std::vector<Literal> Run() {
    size_t i = 0;
    while (i < t_.size()) {
      size_t end = 0;
      std::string type;
      if (t_[i] == ':' && PortAfterColon(i, &end)) {
        Emit("port", i + 1, end);
      } else if (WordStart(i) && Match(i, &end, &type)) {
        Emit(type, KeywordSkip(i, type), end);
      } else {
        ++i;
        continue;
      }
      i = end;
    }
    return std::move(out_);
  }

 private:
  char At(size_t i) const { return i < t_.size() ? t_[i] : '\0'; }
  bool WordStart(size_t i) const { return i == 0 || !(Alnum(t_[i - 1]) || t_[i - 1] == '_'); }
  // A literal ends at i when what follows is not part of a longer token; a ':', '.' or '-' that
  // continues with an alphanumeric would make it a piece of something else (port after an
  // address is the one allowed continuation, when allow_port).
  bool Ends(size_t i, bool allow_port = false) const {
    char c = At(i);
    if (c == '\0') return true;
    if (Alnum(c) || c == '_') return false;
    if ((c == ':' || c == '.' || c == '-') && Alnum(At(i + 1))) return allow_port && c == ':' && Digit(At(i + 1));
    return true;
  }
  size_t Run(size_t i, bool (*pred)(char), size_t max = 1 << 30) const {
    size_t j = i;
    while (j < t_.size() && j - i < max && pred(t_[j])) ++j;
    return j - i;
  }

  void Emit(const std::string& type, size_t b, size_t e) {
    out_.push_back({type, std::string(t_.substr(b, e - b)), b, e});
    last_addr_end_ = (type == "ipv4" || type == "hostname" || type == "ipv6") ? e : size_t(-1);
  }

  // "port 5432" / "port=5432" / "port: 5432" report only the digits.
  size_t KeywordSkip(size_t i, const std::string& type) const {
    if (type != "port") return i;
    size_t j = i + 4;
    while (!Digit(At(j))) ++j;
    return j;
  }

  bool Match(size_t i, size_t* end, std::string* type) const {
    using Fn = bool (Scanner::*)(size_t, size_t*) const;
    static constexpr std::array<std::pair<const char*, Fn>, 7> kOrder = {{{"mac", &Scanner::Mac},
                                                                          {"ipv4", &Scanner::Ipv4},
                                                                          {"ipv6", &Scanner::Ipv6},
                                                                          {"interface", &Scanner::Interface},
                                                                          {"hostname", &Scanner::Hostname},
                                                                          {"port", &Scanner::PortKeyword},
                                                                          {"number", &Scanner::Number}}};
    for (const auto& [name, fn] : kOrder) {
      if ((this->*fn)(i, end)) {
        *type = name;
        return true;
      }
    }
    return false;
  }

  // 00:1a:2b:3c:4d:5e, 00-1a-..., or Cisco's 001a.2b3c.4d5e.
  bool Mac(size_t i, size_t* end) const {
    for (char sep : {':', '-'}) {
      size_t j = i;
      int groups = 0;
      while (groups < 6 && Run(j, Hex, 2) == 2 && !Hex(At(j + 2))) {
        j += 2;
        if (++groups < 6) {
          if (At(j) != sep) break;
          ++j;
        }
      }
      if (groups == 6 && Ends(j)) return *end = j, true;
    }
    size_t j = i;
    for (int g = 0; g < 3; ++g) {
      if (Run(j, Hex, 4) != 4 || Hex(At(j + 4))) return false;
      j += 4;
      if (g < 2 && At(j++) != '.') return false;
    }
    return Ends(j) ? (*end = j, true) : false;
  }

  bool Ipv4(size_t i, size_t* end) const {
    size_t j = i;
    for (int g = 0; g < 4; ++g) {
      size_t n = Run(j, Digit, 4);
      if (n == 0 || n > 3 || std::stoi(std::string(t_.substr(j, n))) > 255) return false;
      j += n;
      if (g < 3 && At(j++) != '.') return false;
    }
    if (At(j) == '/' && Digit(At(j + 1))) {  // prefix length
      size_t n = Run(j + 1, Digit, 3);
      if (n <= 2 && std::stoi(std::string(t_.substr(j + 1, n))) <= 32) j += 1 + n;
    }
    return Ends(j, true) ? (*end = j, true) : false;
  }

  // Hex groups separated by ':', with "::" or all eight groups (so times like 12:30:45 are not).
  bool Ipv6(size_t i, size_t* end) const {
    size_t j = i;
    int groups = 0, colons = 0;
    bool compressed = false;
    while (true) {
      size_t n = Run(j, Hex, 5);
      if (n > 4) return false;
      j += n;
      groups += n > 0;
      if (At(j) != ':') break;
      if (At(j + 1) == ':') {
        if (compressed) return false;
        compressed = true;
        j += 2;
        colons += 2;
      } else if (Hex(At(j + 1))) {
        ++j;
        ++colons;
      } else {
        break;
      }
    }
    if (groups == 0 || !(compressed || groups == 8) || colons < 2) return false;
    if (At(j) == '/' && Digit(At(j + 1))) j += 1 + Run(j + 1, Digit, 3);
    return Ends(j) ? (*end = j, true) : false;
  }

  // A known interface prefix followed by a slot/port path: Gi0/1, GigabitEthernet0/0/1.201,
  // TenGigE0/0/0/1, Vlan201, Port-channel1, ge-0/0/1.0, eth0.
  bool Interface(size_t i, size_t* end) const {
    static constexpr const char* kLong[] = {"HundredGigabitEthernet",
                                            "FortyGigabitEthernet",
                                            "TwentyFiveGigE",
                                            "TenGigabitEthernet",
                                            "GigabitEthernet",
                                            "FastEthernet",
                                            "HundredGigE",
                                            "FortyGigE",
                                            "TenGigE",
                                            "Ethernet",
                                            "Port-channel",
                                            "Bundle-Ether",
                                            "Loopback",
                                            "Tunnel",
                                            "Management",
                                            "Serial",
                                            "Vlan",
                                            "Mgmt",
                                            "Eth"};
    static constexpr const char* kShort[] = {"Gi", "Te", "Fa",  "Fo",  "Hu",  "Tw", "Et",  "Po",   "Lo",  "Tu",
                                             "Vl", "BE", "ge-", "xe-", "et-", "ae", "eth", "bond", "vlan"};
    size_t plen = 0;
    for (const char* p : kLong) {
      size_t n = std::strlen(p);
      if (t_.size() - i >= n && strncasecmp(t_.data() + i, p, n) == 0 && Digit(At(i + n))) {
        plen = n;
        break;
      }
    }
    for (const char* p : kShort) {
      size_t n = std::strlen(p);
      if (plen == 0 && t_.substr(i, n) == p && Digit(At(i + n))) plen = n;
    }
    if (plen == 0) return false;
    size_t j = i + plen + Run(i + plen, Digit);
    while (At(j) == '/' && Digit(At(j + 1))) j += 1 + Run(j + 1, Digit);
    if (At(j) == '.' && Digit(At(j + 1))) j += 1 + Run(j + 1, Digit);  // subinterface
    return Ends(j) ? (*end = j, true) : false;
  }

  // Dotted names ending in a known top-level or lab domain: lab-sw01.example.net, db1.corp.
  bool Hostname(size_t i, size_t* end) const {
    static constexpr const char* kTlds[] = {"com",      "net",  "org",     "io",    "dev",  "local", "lan",
                                            "internal", "corp", "example", "test",  "arpa", "edu",   "gov",
                                            "int",      "info", "biz",     "cloud", "home", "intra", "lab",
                                            "de",       "uk",   "fr",      "nl",    "jp",   "us",    "eu"};
    auto label_char = [](char c) { return Alnum(c) || c == '-'; };
    size_t j = i, last_label = i;
    int labels = 0;
    while (true) {
      size_t n = 0;
      while (j + n < t_.size() && label_char(t_[j + n])) ++n;
      if (n == 0 || t_[j] == '-') return false;
      last_label = j;
      j += n;
      ++labels;
      if (!(At(j) == '.' && Alnum(At(j + 1)))) break;
      ++j;
    }
    std::string_view tld = t_.substr(last_label, j - last_label);
    bool known = false;
    for (const char* t : kTlds) known |= tld.size() == std::strlen(t) && strncasecmp(tld.data(), t, tld.size()) == 0;
    return labels >= 2 && known && Ends(j, true) ? (*end = j, true) : false;
  }

  // "port 5432", "port=5432", "port: 5432" (the keyword is not part of the literal).
  bool PortKeyword(size_t i, size_t* end) const {
    if (t_.size() - i < 5 || strncasecmp(t_.data() + i, "port", 4) != 0) return false;
    size_t j = i + 4;
    if (At(j) == ':' || At(j) == '=') ++j;
    if (At(j) == ' ') ++j;
    if (j == i + 4) return false;
    size_t n = Run(j, Digit, 6);
    if (n == 0 || n > 5 || std::stoi(std::string(t_.substr(j, n))) > 65535 || !Ends(j + n)) return false;
    return *end = j + n, true;
  }

  // ":5432" after an address or a name (not after a bare number: 12:30 is a time).
  bool PortAfterColon(size_t i, size_t* end) const {
    bool after_name = i > 0 && (Alpha(t_[i - 1]) || t_[i - 1] == ']' || last_addr_end_ == i);
    if (!after_name) return false;
    size_t n = Run(i + 1, Digit, 6);
    if (n == 0 || n > 5 || std::stoi(std::string(t_.substr(i + 1, n))) > 65535 || !Ends(i + 1 + n)) return false;
    return *end = i + 1 + n, true;
  }

  // 3+ digit integers (with a decimal fraction if one follows).
  bool Number(size_t i, size_t* end) const {
    size_t n = Run(i, Digit);
    if (n < 3 || (i > 0 && t_[i - 1] == '.' && Digit(At(i - 2)))) return false;
    size_t j = i + n;
    if (At(j) == '.' && Digit(At(j + 1))) j += 1 + Run(j + 1, Digit);
    return Ends(j) ? (*end = j, true) : false;
  }

  std::string_view t_;
  std::vector<Literal> out_;
  size_t last_addr_end_ = size_t(-1);
};

}  // namespace

std::vector<Literal> FindLiterals(std::string_view text) { return Scanner(text).Run(); }

}  // namespace flipscope
