// Literals copied wrongly ("5432 became 543ql"), piece by piece as a BPE tokenizer cuts the
// futures: words, addresses and interfaces, known literals and cuts, text appended to a copy.
#include <gtest/gtest.h>

#include "branch/verdict.h"
#include "support/future_text.h"
#include "support/judge_context.h"

using namespace flipscope;
using flipscope::fixtures::Context;
using flipscope::fixtures::F;
using flipscope::fixtures::kSession;

TEST(Words, SplitAndLiteralLike) {
  auto w = SplitWords("on GigabitEthernet0/0/1.201, port 5432. Host db01.lab.example.net: up");
  std::vector<std::string> texts;
  for (auto& x : w) texts.push_back(x.text);
  EXPECT_EQ(texts, (std::vector<std::string>{"on", "GigabitEthernet0/0/1.201", "port", "5432", "Host",
                                             "db01.lab.example.net", "up"}));
  EXPECT_EQ(w[1].offset, 3u);
  EXPECT_TRUE(IsLiteralLike("5432"));
  EXPECT_TRUE(IsLiteralLike("core-sw1"));
  EXPECT_TRUE(IsLiteralLike("edge-router"));
  EXPECT_FALSE(IsLiteralLike("show"));
  EXPECT_FALSE(IsLiteralLike("201"));  // too short to copy-check
}

TEST(LiteralMutated, Port5432Becomes543ql) {
  auto ctx = Context(kSession);
  auto base = F({"Connecting", " to", " port", " ", "543", "2", " on", " db", "01"});
  auto cand = F({"Connecting", " to", " port", " ", "543", "ql", " on", " db", "01"});
  auto j = Judge(ctx, base, cand, base);
  EXPECT_EQ(j.verdict, Verdict::kLiteralMutated);
  EXPECT_EQ(j.reason, "cand copies 5432 as \"543ql\"");
  EXPECT_EQ(*j.first_difference, std::string("Connecting to port 543").size());
}

TEST(LiteralMutated, WordSplitAcrossTheBranchPoint) {
  // The branch point is inside the literal: the prefix already holds "54".
  auto ctx = Context(kSession + "Checking port 54");
  auto j = Judge(ctx, F({"32", " now"}), F({"3", "ql", " now"}), F({"32", " now"}));
  EXPECT_EQ(j.verdict, Verdict::kLiteralMutated);
  EXPECT_EQ(j.reason, "cand copies 5432 as \"543ql\"");
}

TEST(LiteralMutated, AddressesAndInterfaces) {
  auto ctx = Context(kSession);
  auto ok = F({"The", " mac", " is", " 00", ":1a", ":2b", ":3c", ":4d", ":5e", "."});
  auto bad = F({"The", " mac", " is", " 00", ":1a", ":2b", ":3c", ":4d", ":5f", "."});
  auto j = Judge(ctx, ok, bad, ok);
  EXPECT_EQ(j.verdict, Verdict::kLiteralMutated);
  EXPECT_EQ(j.reason, "cand copies 00:1a:2b:3c:4d:5e as \"00:1a:2b:3c:4d:5f\"");
  // An address extended by a digit.
  j = Judge(ctx, F({"ping", " 10", ".20", ".30", ".4", " now"}), F({"ping", " 10", ".20", ".30", ".41", " now"}),
            F({"ping"}));
  EXPECT_EQ(j.verdict, Verdict::kLiteralMutated);
  EXPECT_EQ(j.reason, "cand copies 10.20.30.4 as \"10.20.30.41\"");
  // The head of an address dropped: the reason names the address, not a shorter literal.
  ctx.literals.AddLiteral("20.3");  // e.g. a software version, sharing the copy's first bytes
  j = Judge(ctx, F({"10", ".20", ".30", ".4", " is", " at"}), F({"20", ".30", ".4", " is", " at"}), F({"x"}));
  EXPECT_EQ(j.verdict, Verdict::kLiteralMutated);
  EXPECT_EQ(j.reason, "cand copies 10.20.30.4 as \"20.30.4\"");
  // An interface the context never names, starting like one it does.
  j = Judge(ctx, F({" GigabitEthernet", "0", "/0", "/1", ".201"}), F({" GigabitEthernet", "0", "/0", "/3", " is"}),
            F({" GigabitEthernet0/0/1.201"}));
  EXPECT_EQ(j.verdict, Verdict::kLiteralMutated);
  EXPECT_EQ(j.reason, "cand copies GigabitEthernet0/0/1.201 as \"GigabitEthernet0/0/3\"");
}

TEST(LiteralMutated, KnownLiteralsAndCutsAreNotMutations) {
  auto ctx = Context(kSession);
  ctx.reconverge = 4;
  // Another interface the context holds: a different choice, not a mangled copy.
  auto j = Judge(ctx, F({" GigabitEthernet", "0", "/0", "/1", ".201", " first", " then", " the", " rest"}),
                 F({" GigabitEthernet", "0", "/1", "/4", " first", " then", " the", " rest", " of"}),
                 F({" GigabitEthernet0/0/1.201"}));
  EXPECT_EQ(j.verdict, Verdict::kBenign) << j.reason;  // reconverges after one token
  // host:port joined from two literals the context holds separately.
  j = Judge(ctx, F({"connect", " 10", ".20", ".30", ".4"}), F({"connect", " 10", ".20", ".30", ".4", ":", "5432"}),
            F({"x"}));
  EXPECT_NE(j.verdict, Verdict::kLiteralMutated) << j.reason;
  // Cut by the budget while still a prefix of a known literal: undecided, not a mutation
  // (also when the cut leaves a separator the word lost to trimming).
  j = Judge(ctx, F({" port", " 5432"}), F({" socket", " 543"}), F({" port"}));
  EXPECT_EQ(j.verdict, Verdict::kDivergent) << j.reason;
  j = Judge(ctx, F({" on", " GigabitEthernet", "0", "/0", "/1", ".201"}), F({" uplink", " GigabitEthernet", "0", "/"}),
            F({" on"}));
  EXPECT_EQ(j.verdict, Verdict::kDivergent) << j.reason;
  // ...but followed by a space it is a truncated copy.
  j = Judge(ctx, F({" port", " 5432", " ok"}), F({" port", " 543", " ok"}), F({" port"}));
  EXPECT_EQ(j.verdict, Verdict::kLiteralMutated) << j.reason;
  // Both futures enumerate the next switch: not the fork's doing.
  j = Judge(ctx, F({"- lab", "-sw", "02", " (Catalyst"}), F({"- lab", "-sw", "02", " (ISR"}), F({"x"}));
  EXPECT_NE(j.verdict, Verdict::kLiteralMutated) << j.reason;
  // A literal the session names later (known_words) is a real one, not a mangled copy.
  j = Judge(ctx, F({" core", "-sw", "1", " and"}), F({" core", "-sw", "2", " and"}), F({"x"}));
  EXPECT_EQ(j.verdict, Verdict::kLiteralMutated) << j.reason;
  EXPECT_EQ(j.reason, "cand copies core-sw1 as \"core-sw2\"");
  std::set<std::string, std::less<>> transcript = {"core-sw2"};
  ctx.known_words = &transcript;
  j = Judge(ctx, F({" core", "-sw", "1", " and"}), F({" core", "-sw", "2", " and"}), F({"x"}));
  EXPECT_NE(j.verdict, Verdict::kLiteralMutated) << j.reason;
  ctx.known_words = nullptr;
  // A word the reference continuation writes is correct by definition.
  j = Judge(ctx, F({" vlan", " 2011", " on"}), F({" vlan", " 2012", " on"}), F({" vlan", " 2012", " on"}));
  EXPECT_NE(j.verdict, Verdict::kLiteralMutated) << j.reason;
}

// A mutation changes the literal's own characters: text glued after an exact copy, an ordinary
// hyphenated word, or a count the transcript never uses as a literal is none.
TEST(LiteralMutated, OnlyTheLiteralsOwnCharacters) {
  auto ctx = Context(kSession +
                     "The firewall allows 5432/tcp from 10.20.0.0/20. The orders database has "
                     "user-defined types; the import processed 123 rows.\n");
  // 10.20.0.0/20 copied exactly, then ".ArgumentParser" glued on by the tokenizer's word.
  auto j = Judge(ctx, F({" subnet", " 10", ".20", ".0", ".0", "/20", ".Argument", "Parser", "("}),
                 F({" subnet", " 10", ".20", ".0", ".0", "/20", " is", " right"}), F({" x"}));
  EXPECT_NE(j.verdict, Verdict::kLiteralMutated) << j.reason;
  // A plain hyphenated word is no literal, so "user-defined-types" mangles nothing.
  j = Judge(ctx, F({" two", " user", "-defined", "-types", ":"}), F({" two", " user", "-defined", " types", ":"}),
            F({" x"}));
  EXPECT_NE(j.verdict, Verdict::kLiteralMutated) << j.reason;
  // 123 is a count in prose, not a literal: "12345" copies nothing.
  j = Judge(ctx, F({" id", " 123", "45", " ok"}), F({" id", " 9", " ok"}), F({" x"}));
  EXPECT_NE(j.verdict, Verdict::kLiteralMutated) << j.reason;
  // The same shapes on real literals are mutations: digits after a copy change the literal.
  j = Judge(ctx, F({" port", " 5432", " ok"}), F({" port", " 5432", "1", " ok"}), F({" x"}));
  EXPECT_EQ(j.reason, "cand copies 5432 as \"54321\"");
  j = Judge(ctx, F({" net", " 10", ".20", ".0", ".0", "/20", " ok"}),
            F({" net", " 10", ".20", ".0", ".0", "/24", " ok"}), F({" x"}));
  EXPECT_EQ(j.reason, "cand copies 10.20.0.0/20 as \"10.20.0.0/24\"");
  // Text appended after an exact copy by a separator: a file under a directory the context names.
  ctx = Context(kSession + "grep -rn 10.20.3.17 /etc/netplan/ /etc/docker/daemon.json\n");
  j = Judge(ctx, F({"/etc", "/net", "plan", "/60", "-static", "-routes", ".yaml", ":7"}),
            F({"/etc", "/net", "plan", "/60", "-static", "-daemon", ".json", ":7"}), F({" x"}));
  EXPECT_NE(j.verdict, Verdict::kLiteralMutated) << j.reason;
  // A port the transcript uses as such is one literal wherever it appears: 5432 of "5432/tcp".
  KnownLiterals known;
  known.AddText("ufw allow 5432/tcp and psql -p 5432");
  EXPECT_EQ(known.sources(), std::vector<std::string>{"5432"});
}

// An IPv4 address given more dotted numbers is a changed address, not a name under it.
TEST(LiteralMutated, AnAddressGivenMoreParts) {
  KnownLiterals known;
  known.AddText("replica 10.40.2.174 streams; the host db-east-02 and /etc/netplan");
  auto m = FindLiteralMutation(" \"client_addr\": \"10.40.2.174.2.174\"", 0, false, known, nullptr);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->copy, "10.40.2.174.2.174");
  EXPECT_FALSE(FindLiteralMutation(" 10.40.2.174:5432 and 10.40.2.174/32", 0, false, known, nullptr).has_value())
      << "a port or a prefix after an address is text after it";
  EXPECT_FALSE(FindLiteralMutation(" /etc/netplan/60-routes.yaml", 0, false, known, nullptr).has_value());
}

TEST(LiteralMutated, ThePartBeforeAJoinerIsKnown) {
  // The network of a prefix the context names, and the host of a host:port, are right.
  KnownLiterals known;
  known.AddText("VLAN 225 (10.20.225.0/24) and db01.lab:5432");
  EXPECT_FALSE(FindLiteralMutation(" route 10.20.225.0 via", 0, false, known, nullptr).has_value());
  EXPECT_FALSE(FindLiteralMutation(" host db01.lab now", 0, false, known, nullptr).has_value());
  auto m = FindLiteralMutation(" route 10.20.226.0 via", 0, false, known, nullptr);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->copy, "10.20.226.0");
}
