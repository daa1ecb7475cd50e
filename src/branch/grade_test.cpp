// Graded failures: loops, calls a reviewer accepts or that only inspect, invented facts, and the
// outcome of two failing futures by their grades.
#include <gtest/gtest.h>

#include "branch/verdict.h"

using namespace flipscope;
using nlohmann::json;

namespace {

FutureText F(std::vector<std::string> pieces, bool ended = false) { return FutureText{std::move(pieces), ended}; }

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
  EXPECT_TRUE(IsReadOnlyCall(json{{"name", "get_ticket"}, {"arguments", {{"id", 7}}}}));
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

TEST(InventedFact, FactsTheTranscriptDoesNotHold) {
  const std::string transcript =
      "LISTEN 0 244 127.0.0.1:5432 0.0.0.0:* users:((\"postgres\",pid=812,fd=6))\n"
      "LISTEN 0 128 0.0.0.0:22 0.0.0.0:* users:((\"sshd\",pid=601,fd=3))\n"
      "db-east-02.corp.example.com is the replica.\n";
  const FactTable facts = FactTable::FromText(transcript);
  std::set<std::string, std::less<>> words;
  for (Word& w : SplitWords(transcript)) words.insert(std::move(w.text));
  WordFilter known = [&](std::string_view w) { return words.count(w) > 0; };
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

namespace {

const char* kTools = R"([{"type": "function", "function": {"name": "run_command", "parameters": {"type": "object",
   "properties": {"command": {"type": "string"}}, "required": ["command"]}}}])";

// A PostgreSQL session: the tools showed 5432 for postgres and 22 for sshd.
const char* kPrefix =
    "<|im_start|>tool\nLISTEN 0 244 127.0.0.1:5432 0.0.0.0:* users:((\"postgres\",pid=812,fd=6))\n"
    "LISTEN 0 128 0.0.0.0:22 0.0.0.0:* users:((\"sshd\",pid=601,fd=3))<|im_end|>\n<|im_start|>assistant\n";

struct Fork {
  JudgeContext ctx;
  FactTable facts;
  std::set<std::string, std::less<>> words;
  explicit Fork(const FutureText& ref) {
    ctx.prefix = kPrefix;
    ctx.literals.AddText(ctx.prefix);
    ctx.tools = *ParseToolSpecs(json::parse(kTools));
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

TEST(GradeNames, EveryGradeAndFailure) {
  EXPECT_STREQ(GradeName(Grade::kEquivalentCall), "equivalent_call");
  EXPECT_STREQ(GradeName(Grade::kRunaway), "runaway");
  for (Failure f : AllFailures()) EXPECT_STRNE(FailureName(f), "none");
  EXPECT_EQ(AllFailures().size(), 6u);
}
