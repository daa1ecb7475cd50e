// FindLiterals: which strings of device output and agent text are literals, and which are not.
#include <gtest/gtest.h>

#include "workload/workload.h"

namespace flipscope {
namespace {

// "type:text" for every literal found, in order.
std::vector<std::string> Found(std::string_view text) {
  std::vector<std::string> out;
  for (const auto& l : FindLiterals(text)) {
    EXPECT_EQ(text.substr(l.begin, l.end - l.begin), l.text) << "byte range must match the text";
    out.push_back(l.type + ":" + l.text);
  }
  return out;
}

using V = std::vector<std::string>;

TEST(Literals, Addresses) {
  EXPECT_EQ(Found("gateway 10.25.204.1 on GigabitEthernet0/0/1.204"),
            (V{"ipv4:10.25.204.1", "interface:GigabitEthernet0/0/1.204"}));
  EXPECT_EQ(Found("route 10.0.0.0/8, host 192.168.1.10."), (V{"ipv4:10.0.0.0/8", "ipv4:192.168.1.10"}));
  EXPECT_EQ(Found("not an address: 300.1.2.3 or 1.2.3"), V{});
  EXPECT_EQ(Found("v6 fe80::1 and 2001:db8:10::5/64"), (V{"ipv6:fe80::1", "ipv6:2001:db8:10::5/64"}));
}

TEST(Literals, Macs) {
  EXPECT_EQ(Found("Hardware Addr 0050.56a1.3c7e ARPA"), (V{"mac:0050.56a1.3c7e"}));
  EXPECT_EQ(Found("mac 00:1a:2b:3c:4d:5e and 00-1A-2B-3C-4D-5F"),
            (V{"mac:00:1a:2b:3c:4d:5e", "mac:00-1A-2B-3C-4D-5F"}));
}

TEST(Literals, Interfaces) {
  EXPECT_EQ(
      Found("Gi0/1 Te1/1/1 TenGigE0/0/0/1 Vlan201 Port-channel1 Po1 ge-0/0/1.0 eth0 Loopback0"),
      (V{"interface:Gi0/1", "interface:Te1/1/1", "interface:TenGigE0/0/0/1", "interface:Vlan201",
         "interface:Port-channel1", "interface:Po1", "interface:ge-0/0/1.0", "interface:eth0", "interface:Loopback0"}));
  // Words that merely start like an abbreviation are not interfaces.
  EXPECT_EQ(Found("Get the Total of Port counters"), V{});
}

TEST(Literals, HostnamesPortsNumbers) {
  EXPECT_EQ(Found("ssh lab-sw01.example.net then db01.fra.example.net:5432"),
            (V{"hostname:lab-sw01.example.net", "hostname:db01.fra.example.net", "port:5432"}));
  EXPECT_EQ(Found("tcp 10.25.248.238:5432 from lab-jump01"),
            (V{"ipv4:10.25.248.238", "port:5432", "identifier:lab-jump01"}));
  EXPECT_EQ(Found("listening on port 5432, PORT=8080, port: 22"), (V{"port:5432", "port:8080", "port:22"}));
  EXPECT_EQ(Found("localhost:6379"), (V{"port:6379"}));
  EXPECT_EQ(Found("VLAN 201 has 1843 matches, 12:30:45 is a time, 42 is short"), (V{"number:201", "number:1843"}));
  EXPECT_EQ(Found("rate 10.5 and 1234.56 bits"), (V{"number:1234.56"}));
  // A three-digit count in prose is not a literal; a VLAN id or a port of three digits is.
  EXPECT_EQ(Found("processed 123 rows in 250 ms"), V{});
  EXPECT_EQ(Found("VLANs: 206 and 225, dot1Q 230"), (V{"number:206", "number:230"}));
  // Files and identifiers are not hostnames; digits glued to letters are not numbers.
  EXPECT_EQ(Found("config.json os.path sw01 abc123def"), V{});
}

TEST(Literals, PathsAndIdentifiers) {
  EXPECT_EQ(Found("edit /etc/postgresql/14/main/pg_hba.conf and ~/.ssh/config."),
            (V{"path:/etc/postgresql/14/main/pg_hba.conf", "path:~/.ssh/config"}));
  EXPECT_EQ(Found("ssh db-east-02 then lab-sw01(config-if)# with -ctk q4_0"),
            (V{"identifier:db-east-02", "identifier:lab-sw01", "identifier:q4_0"}));
  // Plain hyphenated words, one-component paths and markup are not literals.
  EXPECT_EQ(Found("user-defined types, read-only, </tool_call> and/or /tmp"), V{});
  EXPECT_EQ(Found("172.17.0.0/16 dev docker0 proto kernel"), (V{"ipv4:172.17.0.0/16", "interface:docker0"}));
}

// A literal has one type wherever it appears: the port of `ss` output is a port in "5432/tcp",
// after "-p" and standing alone in prose too.
TEST(Literals, OneTypeWhereverItAppears) {
  EXPECT_EQ(Found("LISTEN 0 244 10.20.3.17:5432 users:((\"postgres\")) then ufw allow 5432/tcp; psql -p 5432; "
                  "5432 is open"),
            (V{"ipv4:10.20.3.17", "port:5432", "port:5432", "port:5432", "port:5432"}));
  // Without the ss line, "5432/tcp" and "-p 5432" are ports by themselves, and so is the prose one.
  EXPECT_EQ(Found("ufw allow 5432/tcp; psql -p 5432 and 5432"), (V{"port:5432", "port:5432", "port:5432"}));
  // A short number the transcript uses as a port is a literal wherever it stands alone, but not
  // inside another literal.
  EXPECT_EQ(Found("permit udp any host 10.25.248.214 eq 123; NTP is 123 here, not 10.20.123.4"),
            (V{"ipv4:10.25.248.214", "port:123", "port:123", "ipv4:10.20.123.4"}));
  // A number (4+ digits) is a port everywhere once it is a port somewhere, whichever comes first.
  EXPECT_EQ(Found("5432 rows then host:5432"), (V{"port:5432", "port:5432"}));
}

TEST(Literals, EmptyAndEdges) {
  EXPECT_TRUE(FindLiterals("").empty());
  EXPECT_EQ(Found("10.1.1.1"), (V{"ipv4:10.1.1.1"}));
  EXPECT_EQ(Found("(port 443)"), (V{"port:443"}));
}

}  // namespace
}  // namespace flipscope
