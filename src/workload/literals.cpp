// Literal detection: the values an agent copies from tool output into its next command (IPs,
// MACs, interface names, hostnames, paths, identifiers, ports, numbers). A hand-written scanner
// rather than std::regex: one linear pass over transcripts of hundreds of kilobytes, and exact
// control over where a literal may start and end. A literal has one type wherever it appears
// (5432 is a port in `ss` output, in "5432/tcp" and in "psql -p 5432" alike): see UnifyLiterals
// (literal_types.cpp).
#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <map>
#include <set>

#include "workload/internal.h"
#include "workload/workload.h"

namespace flipscope {
namespace {

using workload::Alnum;
using workload::Digit;
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
        Emit(type, KeywordSkip(i, end, type), end);
      } else {
        ++i;
        continue;
      }
      i = end;
    }
    workload::UnifyLiterals(t_, &out_);
    return std::move(out_);
  }

 private:
  char At(size_t i) const { return i < t_.size() ? t_[i] : '\0'; }
  bool WordStart(size_t i) const { return i == 0 || !(Alnum(t_[i - 1]) || t_[i - 1] == '_'); }
  bool Ends(size_t i, bool allow_port = false) const { return workload::LiteralEnds(t_, i, allow_port); }
  size_t Run(size_t i, bool (*pred)(char), size_t max = 1 << 30) const {
    size_t j = i;
    while (j < t_.size() && j - i < max && pred(t_[j])) ++j;
    return j - i;
  }

  void Emit(const std::string& type, size_t b, size_t e) {
    out_.push_back({type, std::string(t_.substr(b, e - b)), b, e});
    last_addr_end_ = (type == "ipv4" || type == "hostname" || type == "ipv6" || type == "identifier") ? e : size_t(-1);
  }

  // "port 5432", "eq 123", "-p 5432", "vlan 206", "dot1Q 206" report only the digits: the run of
  // digits the match ends with.
  size_t KeywordSkip(size_t i, size_t end, const std::string& type) const {
    if ((type != "port" && type != "number") || Digit(At(i))) return i;
    size_t j = end;
    while (j > i && Digit(t_[j - 1])) --j;
    return j;
  }

  bool Match(size_t i, size_t* end, std::string* type) const {
    using Fn = bool (Scanner::*)(size_t, size_t*) const;
    static constexpr std::array<std::pair<const char*, Fn>, 11> kOrder = {{{"mac", &Scanner::Mac},
                                                                           {"ipv4", &Scanner::Ipv4},
                                                                           {"ipv6", &Scanner::Ipv6},
                                                                           {"interface", &Scanner::Interface},
                                                                           {"hostname", &Scanner::Hostname},
                                                                           {"path", &Scanner::Path},
                                                                           {"identifier", &Scanner::Identifier},
                                                                           {"port", &Scanner::PortKeyword},
                                                                           {"port", &Scanner::PortWithProtocol},
                                                                           {"number", &Scanner::VlanId},
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
                                             "Vl", "BE", "ge-", "xe-", "et-", "ae", "eth", "bond", "vlan",
                                             // Linux: docker0, virbr0, veth1, wlan0, ens3, eno1, br0
                                             "docker", "virbr", "veth", "wlan", "ens", "eno", "br"};
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

  // The length of keyword k at i (case-insensitive) followed by ':', '=' and/or a space, then a
  // digit; 0 when there is none. "port 5432", "port=5432", "eq 123", "-p 5432", "vlan 206".
  size_t KeywordBefore(size_t i, const char* k) const {
    size_t n = std::strlen(k);
    if (t_.size() - i <= n || strncasecmp(t_.data() + i, k, n) != 0) return 0;
    size_t j = i + n;
    if (At(j) == ':' || At(j) == '=') ++j;
    while (At(j) == ' ') ++j;
    return j > i + n && Digit(At(j)) ? j - i : 0;
  }

  // A port number (1-5 digits, at most 65535) at j; sets *end.
  bool PortDigits(size_t j, size_t* end) const {
    size_t n = Run(j, Digit, 6);
    if (n == 0 || n > 5 || std::stoi(std::string(t_.substr(j, n))) > 65535 || !Ends(j + n)) return false;
    return *end = j + n, true;
  }

  // A port after its keyword: "port 5432" / "port=5432" / "port: 5432", an ACL's "eq 123", a
  // client's "-p 5432" (the keyword is not part of the literal).
  bool PortKeyword(size_t i, size_t* end) const {
    for (const char* k : {"port", "eq", "-p"})
      if (size_t n = KeywordBefore(i, k); n > 0) return PortDigits(i + n, end);
    return false;
  }

  // "5432/tcp", "123/udp": a port named with its protocol (the digits are the literal).
  bool PortWithProtocol(size_t i, size_t* end) const {
    size_t n = Run(i, Digit, 6);
    if (n == 0 || At(i + n) != '/') return false;
    std::string_view proto = t_.substr(i + n + 1, 3);
    if (proto.size() < 3 || !(strncasecmp(proto.data(), "tcp", 3) == 0 || strncasecmp(proto.data(), "udp", 3) == 0))
      return false;
    if (Alnum(At(i + n + 4)) || !PortDigits(i, end)) return false;
    *end = i + n;
    return true;
  }

  // A VLAN id after its keyword ("vlan 206", "VLANs: 206", "dot1Q 206"): a number the transcript
  // uses as a literal however short.
  bool VlanId(size_t i, size_t* end) const {
    for (const char* k : {"vlans", "vlan", "dot1q"}) {
      size_t n = KeywordBefore(i, k);
      if (n == 0) continue;
      size_t d = Run(i + n, Digit, 5);
      if (d == 0 || d > 4 || !Ends(i + n + d)) return false;
      return *end = i + n + d, true;
    }
    return false;
  }

  // An absolute, home or relative path of two components or more: /etc/postgresql/14/main,
  // ~/.ssh/config, ./run.sh/x. A trailing '.' (end of a sentence) is not part of it.
  bool Path(size_t i, size_t* end) const {
    size_t j = i;
    if ((At(j) == '~' || At(j) == '.') && At(j + 1) == '/') ++j;
    int parts = 0;
    auto path_char = [](char c) { return Alnum(c) || c == '.' || c == '_' || c == '-'; };
    while (At(j) == '/') {
      size_t n = 0;
      while (j + 1 + n < t_.size() && path_char(t_[j + 1 + n])) ++n;
      if (n == 0) break;
      j += 1 + n;
      ++parts;
    }
    while (j > i && At(j - 1) == '.') --j;
    return parts >= 2 && Ends(j) ? (*end = j, true) : false;
  }

  // A name of letters and digits joined by '-' or '_' that holds both (lab-sw01, db-east-02,
  // q4_0): a device, host or object the transcript names. Plain hyphenated words (user-defined)
  // and glued words (sw01, ipv4, sha256) are not identifiers.
  bool Identifier(size_t i, size_t* end) const {
    size_t j = i;
    int parts = 0;
    bool letter = false, digit = false;
    while (true) {
      size_t n = Run(j, Alnum);
      if (n == 0) return false;
      for (size_t k = j; k < j + n; ++k) (Digit(t_[k]) ? digit : letter) = true;
      j += n;
      ++parts;
      if ((At(j) == '-' || At(j) == '_') && Alnum(At(j + 1))) {
        ++j;
        continue;
      }
      break;
    }
    return parts >= 2 && letter && digit && j - i >= 4 && Ends(j, true) ? (*end = j, true) : false;
  }

  // ":5432" after an address or a name (not after a bare number: 12:30 is a time).
  bool PortAfterColon(size_t i, size_t* end) const {
    bool after_name = i > 0 && (Alpha(t_[i - 1]) || t_[i - 1] == ']' || last_addr_end_ == i);
    if (!after_name) return false;
    size_t n = Run(i + 1, Digit, 6);
    if (n == 0 || n > 5 || std::stoi(std::string(t_.substr(i + 1, n))) > 65535 || !Ends(i + 1 + n)) return false;
    return *end = i + 1 + n, true;
  }

  // 4+ digit integers (with a decimal fraction if one follows). Shorter numbers are counts and
  // sizes in prose ("123 rows"), too short to tell a copy from a coincidence; a short one the
  // transcript uses as a port or a VLAN id is a literal there, and by UnifyLiterals wherever it stands alone.
  bool Number(size_t i, size_t* end) const {
    size_t n = Run(i, Digit);
    if (n < 4 || (i > 0 && t_[i - 1] == '.' && Digit(At(i - 2)))) return false;
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
