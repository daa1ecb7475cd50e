// Invented facts: words prose states that the transcript does not hold, ports and values given to
// the wrong thing, and words whose digits state nothing.
#include <gtest/gtest.h>

#include "branch/verdict.h"

using namespace flipscope;

namespace {

std::set<std::string, std::less<>> WordsOf(const std::string& text) {
  std::set<std::string, std::less<>> words;
  for (Word& w : SplitWords(text)) words.insert(std::move(w.text));
  return words;
}

// A transcript as the judge reads it: its fact table and its words (known: a word it holds).
struct Read {
  explicit Read(const std::string& transcript) : facts(FactTable::FromText(transcript)), words(WordsOf(transcript)) {}
  Read(const Read&) = delete;  // `known` refers to this object's words
  FactTable facts;
  std::set<std::string, std::less<>> words;
  WordFilter known = [this](std::string_view w) { return words.count(w) > 0; };
};

}  // namespace

TEST(InventedFact, FactsTheTranscriptDoesNotHold) {
  const std::string transcript =
      "LISTEN 0 244 127.0.0.1:5432 0.0.0.0:* users:((\"postgres\",pid=812,fd=6))\n"
      "LISTEN 0 128 0.0.0.0:22 0.0.0.0:* users:((\"sshd\",pid=601,fd=3))\n"
      "db-east-02.corp.example.com is the replica.\n";
  const Read read(transcript);
  const FactTable& facts = read.facts;
  const WordFilter& known = read.known;
  EXPECT_FALSE(FindInventedFact("The replica is db-east-02.corp.example.com, as shown.", 0, facts, known));
  EXPECT_FALSE(FindInventedFact("PostgreSQL listens on 127.0.0.1:5432 only.", 0, facts, known));
  EXPECT_FALSE(FindInventedFact("I will check the replica next.", 0, facts, known)) << "plain words";
  EXPECT_FALSE(FindInventedFact("Then </tool_answer> closes it.", 0, facts, known)) << "a markup tag";
  auto host = FindInventedFact("The standby is db-west-07.corp.example.com.", 0, facts, known);
  ASSERT_TRUE(host.has_value());
  EXPECT_NE(host->find("db-west-07"), std::string::npos) << *host;
  auto port = FindInventedFact("PostgreSQL is listening on port 22, the default.", 0, facts, known);
  ASSERT_TRUE(port.has_value()) << "a port the transcript names, given to the wrong service";
  EXPECT_NE(port->find("5432"), std::string::npos) << *port;
  EXPECT_FALSE(FindInventedFact("sshd is listening on port 22.", 0, facts, known));
  // Only what the future writes from `from` on: the transcript's own words before it are not its.
  EXPECT_FALSE(FindInventedFact("db-west-07 was named. Done.", 12, facts, known));
}

// Words whose digits only number or order (grep's context lines, a made-up name's ordinal, code's
// one-letter objects) and filler zeros state no fact; hosts ending in a number still do; a word
// the text's end cuts is invented unless a known word starts with it; "port" before an address
// and a file's line number are no ports.
TEST(InventedFact, NumbersThatStateNothing) {
  const std::string transcript = "web-01 serves 10.9.8.7:8080 (nginx)\nsee app/main.py:12 and /srv/www\n";
  const FactTable facts = FactTable::FromText(transcript);
  const auto words = WordsOf(transcript);
  WordFilter known = [&](std::string_view w) {
    auto it = words.lower_bound(w);
    return it != words.end() && it->compare(0, w.size(), w) == 0;
  };
  EXPECT_FALSE(FindInventedFact("Lines:\n20-The limit\n21-22-Each user", 0, facts, known));
  EXPECT_FALSE(FindInventedFact("{\"name\": \"fetch_page_2\"}", 0, facts, known));
  EXPECT_FALSE(FindInventedFact("print(f\"{u.name} at {u.email}\")", 0, facts, known));
  EXPECT_FALSE(FindInventedFact("the counter reads 0000000000 now", 0, facts, known));
  EXPECT_FALSE(FindInventedFact("replays from 0.00.00.0000000000 and 00:00:00.000000000", 0, facts, known))
      << "one digit over and over with separators between: filler too";
  EXPECT_TRUE(FindInventedFact("it listens on 0.0.0.0 now", 0, facts, known)) << "four dotted zeros: an address";
  EXPECT_TRUE(FindInventedFact("replays from 0.00.00.0000000001", 0, facts, known)) << "another digit: a number";
  EXPECT_FALSE(FindInventedFact("nginx uses port 10.9.8.7 here", 0, facts, known)) << "an address, no port";
  EXPECT_FALSE(FindInventedFact("nginx fails in app/main.py:12 today", 0, facts, known)) << "a line, no port";
  EXPECT_TRUE(FindInventedFact("nginx runs on web-07 too", 0, facts, known)) << "a host, numbered";
  EXPECT_TRUE(FindInventedFact("it broke on 2023-04-1", 0, facts, known)) << "cut, and no known word starts so";
  EXPECT_FALSE(FindInventedFact("it runs on web-0", 0, facts, known)) << "cut, the start of web-01";
  EXPECT_TRUE(FindInventedFact("nginx listens on port 9090", 0, facts, known));
}

// A value of one kind (a MAC, a pid, an interface) written on a line beside a thing whose lines in
// the transcript give it another: a row of one address with another row's MAC, a socket with
// another process's pid, a host with another host's uplink. Values the transcript pairs with the
// thing, things with many values, and numbers as the thing are not read so.
TEST(InventedFact, AKnownValueGivenToAnotherThing) {
  const std::string transcript =
      "Internet  10.25.251.165   101   02c4.4269.da1c  ARPA   GigabitEthernet0/0/1.251\n"
      "Internet  10.25.251.178    37   8a96.e8a4.fef2  ARPA   GigabitEthernet0/0/1.251\n"
      "LISTEN 0 128 0.0.0.0:22 0.0.0.0:* users:((\"sshd\",pid=902,fd=3))\n"
      "LISTEN 0 244 10.20.3.17:5432 0.0.0.0:* users:((\"postgres\",pid=1187,fd=6))\n"
      "- lab-core01: uplinks GigabitEthernet0/0/1 (trunk)\n- lab-sw01: uplink TenGigabitEthernet1/1/1\n";
  const Read read(transcript);
  const FactTable& facts = read.facts;
  const WordFilter& known = read.known;
  auto mac = FindInventedFact("Internet  10.25.251.178   101   02c4.4269.da1c  ARPA", 25, facts, known);
  ASSERT_TRUE(mac.has_value()) << "the row of .178 with .165's MAC";
  EXPECT_NE(mac->find("8a96.e8a4.fef2"), std::string::npos) << *mac;
  EXPECT_TRUE(
      FindInventedFact("LISTEN 0 128 0.0.0.0:22 0.0.0.0:* users:((\"postgres\",pid=1187,fd=6))", 35, facts, known))
      << "sshd's socket with postgres's pid";
  EXPECT_TRUE(FindInventedFact("- lab-sw01: uplinks GigabitEthernet0/0/1 (trunk)", 10, facts, known))
      << "lab-core01's uplink given to lab-sw01";
  EXPECT_FALSE(FindInventedFact("Internet  10.25.251.178    37   8a96.e8a4.fef2  ARPA", 25, facts, known))
      << "the transcript's own row";
  EXPECT_FALSE(FindInventedFact("Internet  10.25.251.178    37   8a96.e8a4.fef2  ARPA", 48, facts, known))
      << "only values the future writes: here none of its words is a value";
  EXPECT_FALSE(FindInventedFact("LISTEN 0 128 10.20.3.17:5432 users:((\"postgres\",pid=1187", 20, facts, known));
  EXPECT_FALSE(FindInventedFact("an age of 101 for 8a96.e8a4.fef2", 0, facts, known))
      << "a number names no thing (an age, a VLAN, a backlog)";
}

// A markup tag's name is no path: `</tool_response>` beside a number gives no file a value.
TEST(InventedFact, AClosingTagIsNoPathOnAnyLine) {
  const Read read("/etc/app/config.py line 200\n/tool_response 200\nTIMEOUT_S = 120\n");
  EXPECT_FALSE(
      FindInventedFact("<tool_response>TIMEOUT_S = 120 seconds</tool_response> 120", 0, read.facts, read.known));
  EXPECT_TRUE(FindInventedFact("/tool_response 120", 0, read.facts, read.known)) << "the same path as a word";
}

// The name of a standard or an encoding holds a digit but states no fact of the transcript's.
TEST(InventedFact, StandardsAreWords) {
  const FactTable facts = FactTable::FromText("db-east-02 answers\n");
  WordFilter known = [](std::string_view w) { return w == "db-east-02"; };
  EXPECT_FALSE(FindInventedFact("`host` is not a valid IPv4 address in UTF-8 text", 0, facts, known));
  EXPECT_FALSE(FindInventedFact("compare the SHA256 of the base64 body", 0, facts, known));
  EXPECT_TRUE(FindInventedFact("db-east-07 answers", 0, facts, known));
}

// A transcript's fact word copied with a byte or two wrong (one edit per 8 bytes at most) is a
// mangled copy, whatever its kind: a WAL segment, a log file's name. A word far from every fact, a
// short one, or one starting differently is no copy of one.
TEST(NearCopy, AFactWordCopiedSlightlyWrong) {
  const std::string transcript =
      "-rw------- 1 postgres postgres 16777216 Mar 13 01:01 0000000100000000053BB1EF\n"
      "tail /var/log/postgresql/postgresql-15-main.log\n"
      "lab-sw03 uplink Te1/1/1\n";
  const Read read(transcript);
  const FactTable& facts = read.facts;
  const WordFilter& known = read.known;
  auto wal = FindNearCopy("pg_wal ends at 00000000000000000053BB1EF now", 0, facts, known);
  ASSERT_TRUE(wal.has_value());
  EXPECT_EQ(wal->literal, "0000000100000000053BB1EF");
  EXPECT_EQ(wal->copy, "00000000000000000053BB1EF");
  auto log = FindNearCopy("see /var/log/postgresql/postgresql-2015-main.log", 0, facts, known);
  ASSERT_TRUE(log.has_value());
  EXPECT_EQ(log->literal, "/var/log/postgresql/postgresql-15-main.log");
  EXPECT_FALSE(FindNearCopy("pg_wal ends at 0000000100000000053BB1EF now", 0, facts, known)) << "an exact copy";
  EXPECT_FALSE(FindNearCopy("pg_wal ends at 00000001000000000AAAAAAA", 0, facts, known)) << "too far";
  // A short name one byte off is a sibling (lab-sw04 beside lab-sw03), not a copy gone wrong.
  EXPECT_FALSE(FindNearCopy("lab-sw04 is down", 0, facts, known)) << "shorter than 12 bytes";
  EXPECT_FALSE(FindNearCopy("16777217 bytes", 0, facts, known)) << "shorter than 12 bytes";
  EXPECT_FALSE(FindNearCopy("/var/log/postgresql/postgresql-15-main.log.1", 0, facts, known)) << "the path, rotated";
  // A path put together anew from a known one's parts is no copy of it (FindInventedFact's matter).
  EXPECT_FALSE(FindNearCopy("in /var/log/postgresql.postgresql-15-main.log", 0, facts, known));
  EXPECT_TRUE(FindNearCopy("in /var/log/postgresql/postgresq1-15-main.log", 0, facts, known)) << "one part";
  // Only what is written from `from` on.
  EXPECT_FALSE(FindNearCopy("00000000000000000053BB1EF was before; now", 30, facts, known));
}

// A known value cut short is a mangled copy: an identifier's tail after a '-' or '_' (the order's
// number without its head), a decimal cut or rounded to fewer decimals or given more. The whole
// value, another number, a path's file name, a tail without a digit, the same number with zeros
// added, a word the text's end cuts are not.
TEST(NearCopy, AKnownValueCutShort) {
  const std::string transcript =
      "{\"order_id\": \"NW-2025-2974\", \"total\": 43.33, \"fee\": 17.26, \"net\": 28.70}\n"
      "see /srv/app/src/token_expiry.py on lab-sw01.fra.example.net\n";
  const Read read(transcript);
  const FactTable& facts = read.facts;
  const WordFilter& known = read.known;
  auto order = FindNearCopy("About order number 2974: it shipped.", 0, facts, known);
  ASSERT_TRUE(order.has_value());
  EXPECT_EQ(order->literal, "NW-2025-2974");
  EXPECT_EQ(order->copy, "2974");
  EXPECT_TRUE(FindNearCopy("order 2025-2974 shipped", 0, facts, known)) << "two parts of three";
  auto amount = FindNearCopy("{\"amount\": 43.3, \"reason\": \"late\"}", 0, facts, known);
  ASSERT_TRUE(amount.has_value());
  EXPECT_EQ(amount->literal, "43.33");
  EXPECT_TRUE(FindNearCopy("a fee of 17.3 is due", 0, facts, known)) << "17.26 rounded";
  EXPECT_FALSE(FindNearCopy("refund 43.4 now", 0, facts, known)) << "43.33 neither cut nor rounded";
  EXPECT_TRUE(FindNearCopy("the net is 28.7056 today", 0, facts, known)) << "decimals added";
  EXPECT_FALSE(FindNearCopy("the net is 28.7000 today", 0, facts, known)) << "the same number";
  EXPECT_FALSE(FindNearCopy("refund 43.33 now", 0, facts, known)) << "the whole value";
  EXPECT_FALSE(FindNearCopy("refund 44.3 now", 0, facts, known)) << "another whole part";
  EXPECT_FALSE(FindNearCopy("edit token_expiry.py next", 0, facts, known)) << "a path's file name";
  EXPECT_FALSE(FindNearCopy("ask fra.example.net next", 0, facts, known)) << "a tail without a digit";
  EXPECT_FALSE(FindNearCopy("it is 2974", 0, facts, known)) << "cut by the text's end: it may go on";
  // The word ends where the future leaves the transcript: the future ended it there.
  const std::string call = "{\"amount\": 43.3, \"reason\": \"late\"}";
  EXPECT_TRUE(FindNearCopy(call, call.find(','), facts, known));
}

// A copy wrong in its first byte alone is a mangled copy when the rest is long: the address with
// its first letter changed. A short rest, a capital (a sentence's first word) or a second change are not.
TEST(NearCopy, WrongInItsFirstByteAlone) {
  const Read read("{\"email\": \"omar.haddad@example.com\", \"host\": \"db-east-02\"}\n");
  const FactTable& facts = read.facts;
  const WordFilter& known = read.known;
  auto mail = FindNearCopy("send it to amar.haddad@example.com today", 0, facts, known);
  ASSERT_TRUE(mail.has_value());
  EXPECT_EQ(mail->literal, "omar.haddad@example.com");
  EXPECT_FALSE(FindNearCopy("send it to Omar.haddad@example.com today", 0, facts, known)) << "a capital";
  EXPECT_FALSE(FindNearCopy("ask db-east-02 or xb-east-02 now", 0, facts, known)) << "short";
  EXPECT_FALSE(FindNearCopy("send it to amar.haddad@exomple.com today", 0, facts, known)) << "two changes";
}

// A percentage in a stock phrase states no measure: a belief's degree, 100 as "wholly". A
// percentage of something, or 100 of another word, still does.
TEST(InventedFact, StockPhrasesAreWording) {
  const Read read("TIMEOUT_S = 30 in src/auth/config.py\n");
  const FactTable& facts = read.facts;
  const WordFilter& known = read.known;
  EXPECT_FALSE(FindInventedFact("The original code is now 100% correct.", 0, facts, known));
  EXPECT_FALSE(FindInventedFact("I am 100 percent sure of it.", 0, facts, known));
  EXPECT_FALSE(FindInventedFact("I am 99% certain it works.", 0, facts, known));
  EXPECT_FALSE(FindInventedFact("It fails 100% of the time.", 0, facts, known));
  EXPECT_TRUE(FindInventedFact("The disk is 100% full.", 0, facts, known)) << "a measure";
  EXPECT_TRUE(FindInventedFact("The rebuild is 730% correct.", 0, facts, known)) << "not 100";
  EXPECT_TRUE(FindInventedFact("It took 100 seconds.", 0, facts, known)) << "no percentage";
}

// A known value written after the name of a field that the transcript's records give it only as
// another field is given to the wrong field; the right field, a field the transcript does not
// have, or the value in another sentence is not.
TEST(InventedFact, AKnownValueGivenToAnotherField) {
  const std::string transcript =
      "{\"order_id\": \"NW-2025-3349\", \"carrier\": \"UPS\", \"tracking\": \"1Z61C2DF96\", \"eta\": \"2026-03-19\"}\n"
      "{\"order_id\": \"NW-2026-3175\", \"tracking\": \"1Z88A0B7E1\", \"eta\": \"2026-04-02\"}\n";
  const Read read(transcript);
  const FactTable& facts = read.facts;
  const WordFilter& known = read.known;
  auto wrong = FindInventedFact("Order NW-2025-3349 shipped, tracking number 2026-03-19.", 0, facts, known);
  ASSERT_TRUE(wrong.has_value());
  EXPECT_EQ(*wrong, "gives tracking the value 2026-03-19, which the transcript gives as eta");
  EXPECT_TRUE(FindInventedFact("Its ETA: 1Z61C2DF96", 0, facts, known)) << "the tracking number as the ETA";
  EXPECT_EQ(FindInventedFact("Order NW-2025-3349 shipped, tracking number 1Z88A0B7E1.", 0, facts, known),
            "gives NW-2025-3349 the value 1Z88A0B7E1, which the transcript's output gives order_id NW-2026-3175")
      << "another order's tracking number (ValueOfAnotherRecord)";
  EXPECT_FALSE(FindInventedFact("Tracking 1Z61C2DF96, ETA 2026-03-19.", 0, facts, known));
  EXPECT_FALSE(FindInventedFact("It arrives on 2026-03-19.", 0, facts, known)) << "no field named";
  EXPECT_FALSE(FindInventedFact("It is the tracking. 2026-03-19 is the ETA.", 0, facts, known)) << "another sentence";
}

// A value tied to its subject across a sentence: another order's tracking number, another
// customer's refund, given to the order the sentence names; the records are the transcript's
// JSON objects (tool outputs and calls' arguments).
TEST(InventedFact, AValueOfAnotherRecord) {
  const std::string transcript =
      "<tool_response>{\"order_id\": \"NW-2025-6100\", \"status\": \"shipped\", \"tracking\": \"1Z423EB1CB\"}"
      "</tool_response>\n"
      "{\"name\": \"issue_refund\", \"arguments\": {\"order_id\": \"NW-2025-1404\", \"amount\": 65.53}}\n"
      "<tool_response>{\"order_id\": \"NW-2025-1675\", \"tracking\": \"1ZF96347DA\", \"eta\": \"2026-03-01\"}"
      "</tool_response>\n";
  const FactTable facts = FactTable::FromText(transcript);
  EXPECT_EQ(ValueOfAnotherRecord("Order NW-2025-1675 shipped with UPS, tracking number 1Z423EB1CB.", 0, facts),
            "gives NW-2025-1675 the value 1Z423EB1CB, which the transcript's output gives order_id NW-2025-6100");
  EXPECT_TRUE(ValueOfAnotherRecord("I received 65.53 EUR for NW-2025-1675 and emailed her.", 0, facts).has_value());
  // Its own values, a sentence naming both subjects, values in separate sentences: none.
  EXPECT_FALSE(ValueOfAnotherRecord("Order NW-2025-1675 shipped, tracking 1ZF96347DA, ETA 2026-03-01.", 0, facts));
  EXPECT_FALSE(ValueOfAnotherRecord("NW-2025-1404 got 65.53 back and NW-2025-1675 shipped.", 0, facts));
  EXPECT_FALSE(ValueOfAnotherRecord("Order NW-2025-1675 shipped. I refunded 65.53 EUR earlier.", 0, facts));
  // A value written before `from` is the transcript's, not the future's.
  const std::string said = "I refunded 65.53 EUR for NW-2025-1675";
  EXPECT_FALSE(ValueOfAnotherRecord(said, said.size(), facts));
  // No subject of that key in the sentence: nothing to tie the value to.
  EXPECT_FALSE(ValueOfAnotherRecord("The tracking number is 1Z423EB1CB.", 0, facts));
}

// A known value given to a subject the transcript gives it no part of: a number with a unit of
// another quantity (a test count as a speed-up, a duration as a share), an address in the other
// role (a ping's target as its source), a date as what kind of order it is (the ETA as the
// order's date), a file named without its directory (the same file, known).
TEST(InventedFact, AKnownValueOfAnotherQuantityOrRole) {
  const std::string transcript =
      "<|im_start|>tool\n121 passed in 6.37s<|im_end|>\n"
      "Sending 5, 100-byte ICMP Echos to 10.24.235.112, timeout is 2 seconds:\n"
      "Packet sent with a source address of 10.24.235.1\n"
      "{\"order_id\": \"NW-2026-8162\", \"status\": \"shipped\", \"eta\": \"2026-03-20\"}\n"
      "tests/test_token_expiry.py::test_token_expiry PASSED and src/auth/token_expiry.py\n";
  const Read read(transcript);
  const FactTable& facts = read.facts;
  const WordFilter& known = read.known;
  EXPECT_EQ(FindInventedFact("The function is now 121 times faster.", 0, facts, known),
            "gives 121 as a factor, where the transcript gives it as a count of tests");
  EXPECT_TRUE(FindInventedFact("The suite passed 6.37% of the time.", 0, facts, known)) << "a duration as a share";
  EXPECT_EQ(FindInventedFact("All 121 tests passed in 6.37s.", 0, facts, known), std::nullopt) << "the same quantities";
  EXPECT_FALSE(FindInventedFact("It took 121 of them.", 0, facts, known)) << "no unit";
  EXPECT_FALSE(FindInventedFact("The check runs 121 times in a row.", 0, facts, known)) << "a count of runs";
  EXPECT_EQ(FindInventedFact("4 of 5 pings from 10.24.235.112 to 10.24.235.112 came back.", 0, facts, known),
            "gives 10.24.235.112 as the source, where the transcript gives it as the target");
  EXPECT_FALSE(FindInventedFact("4 of 5 pings from 10.24.235.1 to 10.24.235.112 came back.", 0, facts, known));
  EXPECT_FALSE(FindInventedFact("The host 10.24.235.112 answered.", 0, facts, known)) << "no role";
  EXPECT_EQ(FindInventedFact("Order NW-2026-8162 shipped, and it's a 2026-03-20 order.", 0, facts, known),
            "calls 2026-03-20 a 2026-03-20 order, which the transcript gives as eta");
  EXPECT_FALSE(FindInventedFact("It arrives 2026-03-20 at the latest.", 0, facts, known));
  EXPECT_FALSE(FindInventedFact("The NW-2026-8162 order shipped.", 0, facts, known)) << "the order's own id";
  EXPECT_FALSE(FindInventedFact("The NW-2026-8162 status is shipped.", 0, facts, known)) << "a field, not a thing";
  // The transcript writes these file names only inside longer words: as known as the paths.
  EXPECT_TRUE(facts.path_parts.count("test_token_expiry.py"));
  EXPECT_TRUE(facts.path_parts.count("token_expiry.py"));
  EXPECT_FALSE(facts.path_parts.count("src"));
}
