// Graded failures: loops, calls a reviewer accepts or that only inspect, invented facts, and the
// outcome of two failing futures by their grades.
#include <gtest/gtest.h>

#include "branch/verdict.h"
#include "support/future_text.h"

using namespace flipscope;
using flipscope::fixtures::F;
using nlohmann::json;

namespace {

json Call(const std::string& command) { return {{"name", "run_command"}, {"arguments", {{"command", command}}}}; }

std::string Repeat(const std::string& unit, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += unit;
  return out;
}

}  // namespace

TEST(Runaway, ALoopThatNeverEnds) {
  const std::string loop = "{\"command\": \"" + Repeat("list --all --user=joe ", 9);
  auto r = FindRunaway(loop, false, "psql --help | head -40\"}}</tool_call>");
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->find("list --all --user=joe"), std::string::npos) << *r;
  // A loop that counts (.198, .199, ...) repeats the same shape.
  std::string counting = "allow ";
  for (int i = 198; i < 204; ++i) counting += "(10.22.214." + std::to_string(i) + ") ";
  EXPECT_TRUE(FindRunaway(counting, false, "").has_value());
}

TEST(Runaway, NotALoop) {
  const std::string loop = Repeat("list --all --user=joe ", 9);
  EXPECT_FALSE(FindRunaway(loop, true, "").has_value()) << "a future that ended is no runaway";
  EXPECT_FALSE(FindRunaway("ab ab ab ", false, "").has_value()) << "too short";
  EXPECT_TRUE(FindRunaway("| a | b |" + Repeat("  |", 12), false, "").has_value()) << "punctuation loops too";
  EXPECT_FALSE(FindRunaway("the port is closed on db01, so the client cannot connect", false, "").has_value());
  EXPECT_FALSE(FindRunaway(Repeat("    ", 20), false, "").has_value()) << "whitespace alone";
  EXPECT_TRUE(FindRunaway("VLAN " + Repeat("0", 30), false, "").has_value()) << "zeros to the budget";
  // The transcript's own text repeats so (a table of hosts): the future copies, it does not loop.
  const std::string table = Repeat("10.0.0.1 up\n", 6);
  EXPECT_FALSE(FindRunaway(table, false, table).has_value());
  // A loop in the middle of a future that then goes on is not one it ends in; one that fills less
  // than a quarter of it neither.
  const std::string prose =
      "then the service restarts and the replica catches up with the primary again, "
      "which takes a while on a busy cluster with many writes";
  EXPECT_FALSE(FindRunaway(Repeat("list --all ", 4) + prose + " and so on.", false, "").has_value());
  EXPECT_FALSE(FindRunaway(prose + prose + Repeat("ok ", 6), false, "").has_value());
}

// A unit inside one word must repeat in the transcript as often as in the future: six zeros
// inside a WAL segment's name do not excuse thirty; the whole run copied from the transcript does.
TEST(Runaway, ZerosInsideAKnownNameAreNoExcuse) {
  const std::string wal = "the last segment is 0000000300000000030600F4 and the ";
  EXPECT_TRUE(FindRunaway("up to 0." + Repeat("0", 40), false, wal).has_value());
  EXPECT_TRUE(FindRunaway("WHERE client_addr = 1" + Repeat("0", 40), false, wal).has_value());
  EXPECT_FALSE(FindRunaway("is 0000000300000000030600F4", false, wal).has_value()) << "a copy, no loop";
  const std::string zeros = "pad: " + Repeat("0", 48) + "\n";
  EXPECT_FALSE(FindRunaway("pad: " + Repeat("0", 40), false, zeros).has_value()) << "the transcript's own run";
}

// Digits are written a piece (token) at a time: nine zeros at the end of a 32-piece future are a
// quarter of it, though fewer than kRunawayBytes bytes. Only a word that began before the zeros
// counts so, and only when the transcript writes no such run itself.
TEST(Runaway, ZerosByThePiecesThatWriteThem) {
  std::vector<std::string> pieces = {" df",    " -h",   " /var", "/lib",  "/post", "gres",    "ql",    " |",
                                     " head",  " -",    "n",     " ",     "1",     " ok",     " then", " more",
                                     " words", " here", " to",   " fill", " the",  " future", " out"};
  auto judged = [&](std::vector<std::string> tail, std::string_view prefix) {
    std::vector<std::string> all = pieces;
    all.insert(all.end(), tail.begin(), tail.end());
    std::string text;
    for (const std::string& p : all) text += p;
    return FindRunaway(RunawayText{.text = text, .pieces = all, .reference = "\"}}</tool_call>", .prefix = prefix});
  };
  const std::vector<std::string> zeros(9, "0");
  EXPECT_TRUE(judged(zeros, "ls /var/lib/postgresql").has_value()) << "a number grown by nine zeros";
  EXPECT_FALSE(judged(std::vector<std::string>(6, "0"), "").has_value()) << "six of 29 pieces: under the floor";
  EXPECT_FALSE(judged(zeros, "segment 000000010000000000000003").has_value())
      << "the transcript writes such a run (a WAL segment's name)";
  std::vector<std::string> bare = {" "};  // a word that is all zeros so far may be a padded name
  bare.insert(bare.end(), zeros.begin(), zeros.end());
  EXPECT_FALSE(judged(bare, "").has_value());
  EXPECT_FALSE(judged({"\n", "  #", "\n", "  #", "\n", "  #", "\n", "  #"}, "").has_value())
      << "a line of marks, no word: the bytes' floor applies";
}

// A list whose every item grows the last by the same text runs away like a repeated one: the
// item on the transcript's line before the point counts, and it must grow three times.
TEST(Runaway, AListThatGrows) {
  const std::string prefix = "psql -c \"SELECT client_addr,";
  const std::string grows =
      " client_addr_state, client_addr_state_state, client_addr_state_state_state, client_addr_sta";
  auto r = FindRunaway(RunawayText{.text = grows, .reference = " state, sent_lsn", .prefix = prefix});
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->find("_state"), std::string::npos) << *r;
  EXPECT_FALSE(FindRunaway(RunawayText{.text = grows, .ended = true, .prefix = prefix}).has_value()) << "ended";
  EXPECT_FALSE(
      FindRunaway(RunawayText{.text = " state_lsn, state_lsn_hmac, state_lsn_hmac_hmac, x", .prefix = "SELECT "})
          .has_value())
      << "two growths are a list of made-up columns, not yet a loop";
  EXPECT_FALSE(FindRunaway(RunawayText{.text = grows + "xyz", .prefix = prefix}).has_value())
      << "the item being written left the pattern";
  EXPECT_FALSE(FindRunaway(RunawayText{.text = grows, .reference = grows, .prefix = prefix}).has_value())
      << "the transcript's own list";
}

TEST(EquivalentCalls, NormalizedCommands) {
  EXPECT_TRUE(EquivalentCalls(Call("psql --help"), Call("psql --help | head -40")));
  EXPECT_TRUE(EquivalentCalls(Call("ss  -tlnp | grep 5432 | sort"), Call("ss -tlnp")));
  EXPECT_TRUE(EquivalentCalls(Call("show ip route"), Call(" show   ip route ")));
  EXPECT_FALSE(EquivalentCalls(Call("psql -p 5433"), Call("psql -p 5432")));
  EXPECT_FALSE(EquivalentCalls(Call("cat x | sh"), Call("cat x"))) << "sh is no output filter";
  // A trailing command that only shows the result, after && or ;.
  EXPECT_TRUE(EquivalentCalls(Call("sudo mount /mnt/wal && df -h /mnt/wal"), Call("sudo mount /mnt/wal")));
  EXPECT_TRUE(EquivalentCalls(Call("systemctl restart pg; systemctl status pg"), Call("systemctl restart pg")));
  EXPECT_FALSE(EquivalentCalls(Call("sudo mount /mnt/wal && rm -rf /mnt/wal/x"), Call("sudo mount /mnt/wal")));
  json other = Call("psql --help");
  other["name"] = "check_port";
  EXPECT_FALSE(EquivalentCalls(other, Call("psql --help")));
}

TEST(ReadOnlyCall, InspectsOrChanges) {
  EXPECT_TRUE(IsReadOnlyCall(Call("psql --help")));
  EXPECT_TRUE(IsReadOnlyCall(Call("sudo ss -tlnp")));
  EXPECT_TRUE(IsReadOnlyCall(Call("psql -p 5432 -c \"SELECT pg_is_in_recovery()\"")));
  EXPECT_TRUE(IsReadOnlyCall(Call("show running-config interface Gi1/0/24")));
  EXPECT_TRUE(IsReadOnlyCall(Call("git log --oneline -n 5")));
  EXPECT_TRUE(IsReadOnlyCall(Call("grep -c ERROR /var/log/postgresql/postgresql-15-main.log"))) << "-c of grep";
  EXPECT_TRUE(IsReadOnlyCall(Call("sudo ufw status numbered")));
  EXPECT_TRUE(IsReadOnlyCall(Call("python -m pytest -q tests/")));
  EXPECT_FALSE(IsReadOnlyCall(Call("git push origin main")));
  // -h and -v mean help or the version only alone: psql's -h names a host, grep's -v inverts.
  EXPECT_FALSE(IsReadOnlyCall(Call("psql -h db-east-02 -U orders_rw -d orders"))) << "psql's -h is a host";
  EXPECT_FALSE(IsReadOnlyCall(Call("psql -h db01 -c \"DROP TABLE users\"")));
  EXPECT_TRUE(IsReadOnlyCall(Call("pg_ctlcluster -h"))) << "-h alone asks for help";
  EXPECT_TRUE(IsReadOnlyCall(Call("df -h /var/lib/postgresql"))) << "df reads whatever its options";
  EXPECT_TRUE(IsReadOnlyCall(json{{"name", "get_ticket"}, {"arguments", {{"id", 7}}}}));
  EXPECT_TRUE(IsReadOnlyCall(json{{"name", "lookup_order"}, {"arguments", {{"order_id", "NW-1"}}}})) << "a lookup";
  EXPECT_FALSE(IsReadOnlyCall(json{{"name", "refund_order"}, {"arguments", {{"order_id", "NW-1"}}}}));
  EXPECT_FALSE(IsReadOnlyCall(Call("systemctl restart postgresql")));
  EXPECT_FALSE(IsReadOnlyCall(Call("ip route add 10.0.0.0/8 via 10.20.0.1")));
  EXPECT_FALSE(IsReadOnlyCall(Call("psql -c \"DROP TABLE users\"")));
  EXPECT_FALSE(IsReadOnlyCall(Call("psql -p 5433 -c \"SELECT pg_drop_replication_slot('r')\"")));
  EXPECT_TRUE(
      IsReadOnlyCall(json{{"name", "run_sql"}, {"arguments", {{"sql", "SELECT * FROM pg_stat_replication;"}}}}));
  EXPECT_FALSE(
      IsReadOnlyCall(json{{"name", "run_sql"}, {"arguments", {{"sql", "SELECT pg_terminate_backend(812);"}}}}));
  EXPECT_FALSE(IsReadOnlyCall(Call("rm -rf /var/lib/postgresql/15/main")));
  EXPECT_FALSE(IsReadOnlyCall(json{{"name", "apply_config"}, {"arguments", {{"lines", "x"}}}}));
}

// A tool or a command that runs the test suite only inspects, whatever it filters on; a tool that
// writes tests does not.
TEST(ReadOnlyCall, RunningTheTestsOnlyInspects) {
  EXPECT_TRUE(IsReadOnlyCall(json{{"name", "run_tests"}, {"arguments", json::object()}})) << "the whole suite";
  EXPECT_TRUE(IsReadOnlyCall(json{{"name", "run_tests"}, {"arguments", {{"filter", "test_next_retry"}}}}));
  EXPECT_TRUE(IsReadOnlyCall(json{{"name", "execute-test-suite"}, {"arguments", json::object()}}));
  EXPECT_TRUE(IsReadOnlyCall(json{{"name", "Test"}, {"arguments", json::object()}}));
  EXPECT_FALSE(IsReadOnlyCall(json{{"name", "write_test"}, {"arguments", {{"path", "tests/test_a.py"}}}}));
  EXPECT_FALSE(IsReadOnlyCall(json{{"name", "delete_tests"}, {"arguments", json::object()}}));
  EXPECT_FALSE(IsReadOnlyCall(json{{"name", "run_migration"}, {"arguments", json::object()}}));
  EXPECT_TRUE(IsReadOnlyCall(Call("npm test -- --watch=false")));
  EXPECT_TRUE(IsReadOnlyCall(Call("go test ./...")));
  EXPECT_TRUE(IsReadOnlyCall(Call("cargo test -q")));
  EXPECT_TRUE(IsReadOnlyCall(Call("python3 -m unittest discover")));
  EXPECT_FALSE(IsReadOnlyCall(Call("npm install")));
  EXPECT_FALSE(IsReadOnlyCall(Call("make install")));
}

// A list that counts (three VLAN gateways in a row) is output, not yet a loop; identical copies
// are one at three.
TEST(Runaway, ACountingListIsNoLoopUntilItRunsOn) {
  std::string list = "the gateways are";
  for (int i = 1; i <= 3; ++i) list += " 10.30." + std::to_string(i) + ".1 on Vlan" + std::to_string(i) + ",";
  EXPECT_FALSE(FindRunaway(list, false, "").has_value()) << list;
  EXPECT_TRUE(FindRunaway("the gateways are" + Repeat(" 10.30.1.1 on Vlan1,", 3), false, "").has_value());
}

// Two commands with the same head that go on differently after && are two actions; only a
// trailing command that shows the result of the same action is accepted.
TEST(EquivalentCalls, TheSameHeadThenAnotherCommand) {
  EXPECT_FALSE(EquivalentCalls(Call("make -C src && ls build"), Call("make -C src && cat build/log.txt")));
  EXPECT_FALSE(EquivalentCalls(Call("make -C src; ls build"), Call("make -C src; du -sh build")));
  EXPECT_TRUE(EquivalentCalls(Call("make -C src && ls build | head -3"), Call("make -C src")));
}

// Each command of a list or pipeline must only inspect; ip's object needs a reading verb; mount
// with no operand lists; a program named like a read-only tool reads; a data file run as a
// program runs nothing.
TEST(ReadOnlyCall, EveryCommandOfTheLine) {
  EXPECT_FALSE(IsReadOnlyCall(Call("ls /srv; mount /dev/vdb1 /srv")));
  EXPECT_FALSE(IsReadOnlyCall(Call("df -h | sh")));
  EXPECT_TRUE(IsReadOnlyCall(Call("psql -c \"SELECT 1; SELECT 2\""))) << "a ';' inside quotes";
  EXPECT_TRUE(IsReadOnlyCall(Call("mount | grep srv; ls /srv | tail -n 2")));
  EXPECT_TRUE(IsReadOnlyCall(Call("mount -l")));
  EXPECT_FALSE(IsReadOnlyCall(Call("sudo mount -a"))) << "mounts everything fstab lists";
  EXPECT_TRUE(IsReadOnlyCall(Call("mount -t nfs4")));
  EXPECT_TRUE(IsReadOnlyCall(Call("ip route show table main")));
  EXPECT_TRUE(IsReadOnlyCall(Call("ip -4 addr")));
  EXPECT_FALSE(IsReadOnlyCall(Call("sudo ip route 10.9.0.0/16 via 10.1.0.1")));
  EXPECT_TRUE(IsReadOnlyCall(Call("show_vlan_brief")));
  EXPECT_TRUE(IsReadOnlyCall(Call("get-interfaces --all")));
  EXPECT_FALSE(IsReadOnlyCall(Call("showcase --install")));
  EXPECT_TRUE(IsReadOnlyCall(Call("tail -n 5 /srv/app.log; /srv/app.log")));
  EXPECT_FALSE(IsReadOnlyCall(Call("/srv/deploy.sh")));
}

// sed and awk print what they read; editing in place or redirecting writes.
TEST(ReadOnlyCall, SedAndAwkReadUnlessInPlace) {
  EXPECT_TRUE(IsReadOnlyCall(Call("sed -n 1,24p /opt/tools/dbcheck.py")));
  EXPECT_TRUE(IsReadOnlyCall(Call("awk '{print $1}' /etc/hosts | head -3")));
  EXPECT_FALSE(IsReadOnlyCall(Call("sed -i '13d' /opt/tools/dbcheck.py")));
  EXPECT_FALSE(IsReadOnlyCall(Call("sed -i.bak 's/5433/5432/' /etc/app.conf")));
  EXPECT_FALSE(IsReadOnlyCall(Call("sed -ni 's/a/b/p' x.conf"))) << "-i among joined flags";
  EXPECT_FALSE(IsReadOnlyCall(Call("sed 's/a/b/' x.conf > y.conf"))) << "a redirection writes";
}

namespace {

const char* kGradeTools = R"([{"type": "function", "function": {"name": "run_command", "parameters": {"type": "object",
   "properties": {"command": {"type": "string"}}, "required": ["command"]}}}])";

// A PostgreSQL session: the tools showed 5432 for postgres and 22 for sshd.
const char* kPrefix =
    "<|im_start|>tool\nLISTEN 0 244 127.0.0.1:5432 0.0.0.0:* users:((\"postgres\",pid=812,fd=6))\n"
    "LISTEN 0 128 0.0.0.0:22 0.0.0.0:* users:((\"sshd\",pid=601,fd=3))<|im_end|>\n<|im_start|>assistant\n";

struct Fork {
  JudgeContext ctx;
  FactTable facts;
  std::set<std::string, std::less<>> words;
  // `turn`: the assistant's text before the branch point.
  explicit Fork(const FutureText& ref, const std::string& turn = "") {
    ctx.prefix = kPrefix + turn;
    ctx.literals.AddText(ctx.prefix);
    ctx.tools = *ParseToolSpecs(json::parse(kGradeTools));
    facts = FactTable::FromText(ctx.prefix + ref.Text());
    for (Word& w : SplitWords(ctx.prefix + ref.Text())) words.insert(std::move(w.text));
    ctx.known_words = &words;
    ctx.facts = &facts;
  }
  Attribution Judge2(const FutureText& base, const FutureText& cand, const FutureText& ref, Grade* gb, Grade* gc) {
    const SideJudgement b = JudgeSide(ctx, base, ref), c = JudgeSide(ctx, cand, ref);
    *gb = GradeOf(b), *gc = GradeOf(c);
    return Attribute(b, c, Judge(ctx, base, cand, ref), ctx.reconverge);
  }
};

}  // namespace

// The transcript runs `psql --help | head -40`; the reference configuration runs `psql --help`
// (the same once its output filter is dropped), the candidate loops inside its call to the cap.
// Both differ from the transcript's call, so an ungraded judge said both fail; the candidate's
// damage is the loop.
TEST(GradedOutcome, ALoopAgainstAnEquivalentCallIsDamage) {
  const FutureText ref = F({"<tool_call>", "{\"name\": \"run_command\", \"arguments\": {\"command\": \"psql --help",
                            " | head -40\"}}", "</tool_call>", "<|im_end|>"},
                           true);
  const FutureText base =
      F({"<tool_call>", "{\"name\": \"run_command\", \"arguments\": {\"command\": \"psql --help\"}}", "</tool_call>",
         "<|im_end|>"},
        true);
  std::vector<std::string> loop = {"<tool_call>", "{\"name\": \"run_command\", \"arguments\": {\"command\": \""};
  for (int i = 0; i < 9; ++i) loop.insert(loop.end(), {"list", " --all", " --user=joe", " "});
  FutureText cand = F(loop);
  cand.cap_hit = true, cand.stop = "call_cap";
  Fork fork(ref);
  Grade gb, gc;
  const Attribution a = fork.Judge2(base, cand, ref, &gb, &gc);
  EXPECT_EQ(gb, Grade::kEquivalentCall);
  EXPECT_EQ(gc, Grade::kRunaway);
  EXPECT_EQ(a.outcome, Outcome::kDamage) << a.reason;
  EXPECT_EQ(a.kind, Failure::kRunaway);
  // The other way round it is a repair of the same kind.
  const Attribution r = fork.Judge2(cand, base, ref, &gb, &gc);
  EXPECT_EQ(r.outcome, Outcome::kRepair) << r.reason;
  EXPECT_EQ(r.kind, Failure::kRunaway);
}

// Prose where both futures invent: the base gives PostgreSQL port 22 (the tools showed 5432), the
// candidate names services the session never saw. An ungraded judge called the pair different
// but fine.
TEST(GradedOutcome, InventedFactsOnBothSidesFailAlike) {
  const FutureText ref = F({"PostgreSQL", " listens", " on", " 127.0.0.1:5432", " only,", " so", " remote", " clients",
                            " cannot", " reach", " it."},
                           false);
  const FutureText base =
      F({"PostgreSQL", " is", " listening", " on", " port", " 22,", " the", " default", " port", " for", " it."});
  const FutureText cand =
      F({"The", " services", " running", " are", " redis-cache", " on", " 6380", " and", " mongo-shard01", "."});
  Fork fork(ref);
  Grade gb, gc;
  const Attribution a = fork.Judge2(base, cand, ref, &gb, &gc);
  EXPECT_EQ(gb, Grade::kInventedFact);
  EXPECT_EQ(gc, Grade::kInventedFact);
  EXPECT_EQ(a.outcome, Outcome::kBothFail) << a.reason;
  EXPECT_EQ(a.kind, Failure::kInventedFact);
}

// Different failures are no longer both fail: the worse one is the change's doing.
TEST(GradedOutcome, ByGrade) {
  const FutureText ref = F({"<tool_call>", "{\"name\": \"run_command\", \"arguments\": {\"command\": ",
                            "\"systemctl restart postgresql\"}}", "</tool_call>", "<|im_end|>"},
                           true);
  auto call = [](const std::string& cmd) {
    return F({"<tool_call>", "{\"name\": \"run_command\", \"arguments\": {\"command\": \"" + cmd + "\"}}",
              "</tool_call>", "<|im_end|>"},
             true);
  };
  Fork fork(ref);
  Grade gb, gc;
  // A read-only call where the transcript restarts, against one that stops the server.
  Attribution a = fork.Judge2(call("systemctl status postgresql"), call("systemctl stop postgresql"), ref, &gb, &gc);
  EXPECT_EQ(gb, Grade::kHarmlessCall);
  EXPECT_EQ(gc, Grade::kWrongCommand);
  EXPECT_EQ(a.outcome, Outcome::kDamage) << a.reason;
  EXPECT_EQ(a.kind, Failure::kWrongCommand);
  // Two wrong commands: equal grades, both fail.
  a = fork.Judge2(call("systemctl stop postgresql"), call("systemctl reload nginx"), ref, &gb, &gc);
  EXPECT_EQ(a.outcome, Outcome::kBothFail) << a.reason;
  // An equivalent call against the transcript's: neither fails.
  a = fork.Judge2(call("systemctl restart postgresql | tail -5"), ref, ref, &gb, &gc);
  EXPECT_EQ(gb, Grade::kEquivalentCall);
  EXPECT_EQ(gc, Grade::kNone);
  EXPECT_EQ(a.outcome, Outcome::kDifferentButFine) << a.reason;
}

// Where the transcript makes no call, a future's call is an action nobody asked for; where the
// future's call ran past the transcript's unclosed, what it wrote decides before its length.
TEST(GradedOutcome, UnaskedAndOverlongCalls) {
  const FutureText prose = F({"The", " mount", " is", " missing", ".", " Shall", " I", " mount", " it", "?"}, true);
  auto call = [](const std::string& cmd) {
    return F({"<tool_call>", "{\"name\": \"run_command\", \"arguments\": {\"command\": \"" + cmd + "\"}}",
              "</tool_call>", "<|im_end|>"},
             true);
  };
  Fork fork(prose);
  EXPECT_EQ(GradeOf(JudgeSide(fork.ctx, call("df -h /mnt/wal"), prose)), Grade::kHarmlessCall);
  EXPECT_EQ(GradeOf(JudgeSide(fork.ctx, call("sudo umount /mnt/wal"), prose)), Grade::kWrongCommand);
  const FutureText ref = F({"<tool_call>", "{\"name\": \"run_command\", \"arguments\": {\"command\": \"ls /mnt\"}}",
                            "</tool_call>", "<|im_end|>"},
                           true);
  Fork fork2(ref);
  const FutureText overlong =
      F({"<tool_call>", "{\"name\": \"run_command\", \"arguments\": {\"command\": \"",
         "grep -E archive /etc/postgresql/15/main/postgresql.conf /etc/postgresql/15/main/pg_hba"});
  const SideJudgement s = JudgeSide(fork2.ctx, overlong, ref);
  EXPECT_EQ(s.failure, Failure::kWrongCommand) << s.reason;
  EXPECT_TRUE(s.call_problem.empty()) << s.call_problem;
}

namespace {

FutureText Envelope(const std::string& body, bool closed = true) {
  return closed ? F({"<tool_call>", body, "</tool_call>", "<|im_end|>"}, true) : F({"<tool_call>", body});
}
std::string Body(const std::string& command) {
  return "{\"name\": \"run_command\", \"arguments\": {\"command\": \"" + command + "\"}}";
}

}  // namespace

// Prose around a call is read for facts like prose alone, with the sentence the point is in: the
// port that follows "PostgreSQL listens on" belongs to PostgreSQL.
TEST(GradedSide, AFactStatedBeforeACall) {
  const std::string call = "\n<tool_call>" + Body("ss -tlnp") + "</tool_call>";
  const FutureText ref = F({" 127.0.0.1:5432.", call, "<|im_end|>"}, true);
  Fork fork(ref, "PostgreSQL listens on");
  const SideJudgement s = JudgeSide(fork.ctx, F({" port 22.", call, "<|im_end|>"}, true), ref);
  EXPECT_EQ(s.failure, Failure::kInventedFact) << s.reason;
  EXPECT_EQ(s.call_matches, true);
  // Capitalized at a sentence's start, a host the transcript names is the same host.
  const FutureText prose = F({"The", " replica", " is", " db-east-02."}, false);
  Fork named(prose, "db-east-02 is the replica. ");
  EXPECT_EQ(JudgeSide(named.ctx, F({"Db-east-02", " answers."}), prose).failure, Failure::kNone);
}

// The transcript asks first and calls only after the user's answer: the reference, cut, ends
// inside that later call, which is no call of the fork's turn. A future's complete call there is
// one nobody asked for.
TEST(GradedSide, ACallOfALaterTurnIsNotTheFuturesToMake) {
  const FutureText ref = F({"Shall I restart it?", "<|im_end|>", "\n<|im_start|>user\nYes.<|im_end|>\n",
                            "<|im_start|>assistant\n", "<tool_call>", "{\"name\": \"run_command\", \"argu"});
  Fork fork(ref);
  EXPECT_EQ(GradeOf(JudgeSide(fork.ctx, Envelope(Body("systemctl restart postgresql")), ref)), Grade::kWrongCommand);
  EXPECT_EQ(GradeOf(JudgeSide(fork.ctx, Envelope(Body("ss -tlnp")), ref)), Grade::kHarmlessCall);
}

// A call the budget cut right after its complete JSON, before its close marker, is the complete
// call it is; the markers named with nothing between them are words about calls, no call.
TEST(GradedSide, ACompleteBodyAndNamedMarkers) {
  const FutureText prose = F({"The", " server", " runs.", "<|im_end|>"}, true);
  Fork fork(prose);
  const SideJudgement cut = JudgeSide(fork.ctx, Envelope(Body("systemctl stop postgresql"), false), prose);
  EXPECT_EQ(cut.failure, Failure::kWrongCommand) << cut.reason;
  EXPECT_TRUE(ExtractCall("", "<tool_call>" + Body("x"), ToolEnvelope{}).closing);
  const SideJudgement named =
      JudgeSide(fork.ctx, F({"Calls", " go", " in", " <tool_call></tool_call>", " tags."}), prose);
  EXPECT_FALSE(named.call_present);
  EXPECT_EQ(named.failure, Failure::kNone) << named.reason;
}

// An unfinished call that goes on into a tool definition (`"type": "function"` in its arguments,
// a key beside its name and arguments) is no call any more, however short; one that is only a
// different value, or another function past the transcript's length, is a wrong command.
TEST(GradedSide, AnUnfinishedCallRunningIntoADefinition) {
  const FutureText ref = Envelope(Body("show running-config interface GigabitEthernet1/0/24"));
  Fork fork(ref);
  const std::string head = "{\"name\": \"run_command\", \"arguments\": {\"command\": \"show arp\"";
  // ... or writes its arguments a second time after they closed: no client reads that one way.
  for (const std::string& stray : {head + ", \"type\": \"function\", \"parameters\": {", head + "}, \"timeout\": {",
                                   head + "}, \"arguments\": {\"command\": \"show"}) {
    const SideJudgement s = JudgeSide(fork.ctx, Envelope(stray, false), ref);
    EXPECT_EQ(s.failure, Failure::kInvalidToolCall) << stray;
  }
  // Only a different value: a wrong command, unless the command it finished only inspects (graded
  // as the complete call of that tool would be: AnUnfinishedCallOfAToolThatOnlyInspects).
  const std::string changes = "{\"name\": \"run_command\", \"arguments\": {\"command\": \"reload\"";
  EXPECT_EQ(JudgeSide(fork.ctx, Envelope(changes + ", \"dev", false), ref).failure, Failure::kWrongCommand);
  EXPECT_EQ(JudgeSide(fork.ctx, Envelope(head + ", \"dev", false), ref).failure, Failure::kHarmlessCall);
  // A tool that takes "description" as an argument may be given one.
  fork.ctx.tools = *ParseToolSpecs(json::parse(R"([{"name": "run_command", "parameters": {"properties":
      {"command": {"type": "string"}, "description": {"type": "string"}}, "required": ["command"]}}])"));
  EXPECT_EQ(JudgeSide(fork.ctx, Envelope(changes + ", \"description\": \"arp", false), ref).failure,
            Failure::kWrongCommand);
  // Another function, running past the transcript's whole call unclosed: what it wrote is wrong.
  fork.ctx.tools.push_back(ToolSpec{"run_sql", {"sql"}, {"sql", "host"}});
  const SideJudgement other = JudgeSide(fork.ctx,
                                        Envelope("{\"name\": \"run_sql\", \"arguments\": {\"host\": \"db01\", \"sql\": "
                                                 "\"SELECT name, setting, unit, context, vartype, source, "
                                                 "min_val, max_val FROM pg_settings WHERE name LIKE 'wal%'",
                                                 false),
                                        ref);
  EXPECT_EQ(other.failure, Failure::kWrongCommand) << other.reason;
  EXPECT_TRUE(other.call_problem.empty()) << other.call_problem;
}

TEST(GradeNames, EveryGradeAndFailure) {
  EXPECT_STREQ(GradeName(Grade::kEquivalentCall), "equivalent_call");
  EXPECT_STREQ(GradeName(Grade::kRunaway), "runaway");
  for (Failure f : AllFailures()) EXPECT_STRNE(FailureName(f), "none");
  EXPECT_EQ(AllFailures().size(), 6u);
}
