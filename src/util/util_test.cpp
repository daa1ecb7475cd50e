#include "util/util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <vector>

using namespace flipscope;

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string million(1000000, 'a');
  EXPECT_EQ(Sha256Hex(million), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalMatchesOneShot) {
  std::string s;
  for (int i = 0; i < 1000; ++i) s += char(i * 7);
  Sha256 h;
  for (size_t i = 0; i < s.size(); i += 13) h.Update(s.data() + i, std::min<size_t>(13, s.size() - i));
  EXPECT_EQ(h.HexDigest(), Sha256Hex(s));
}

TEST(AtomicFile, UncommittedLeavesNothing) {
  auto dir = std::filesystem::temp_directory_path() / "fs_atomic_test";
  std::filesystem::create_directories(dir);
  auto path = (dir / "out.bin").string();
  std::filesystem::remove(path);
  {
    AtomicFile f;
    ASSERT_TRUE(f.Open(path).ok());
    ASSERT_TRUE(f.WriteAt(0, "abc", 3).ok());
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  ASSERT_TRUE(WriteFileAtomic(path, "hello").ok());
  EXPECT_EQ(*ReadFile(path), "hello");
}

// A killed writer's temporary file goes at the next Open of the same path; a live one's stays,
// and so do other files that merely share the prefix.
TEST(AtomicFile, OpenRemovesTempsOfDeadWritersOnly) {
  auto dir = std::filesystem::temp_directory_path() / "fs_atomic_stale_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto path = (dir / "cap.safetensors").string();
  const std::string dead = path + ".tmp.999999999";  // above any pid_max: no such process
  const std::string live = path + ".tmp." + std::to_string(::getppid());
  const std::string other = path + ".tmp.notapid";
  for (const auto& f : {dead, live, other}) ASSERT_TRUE(WriteFileAtomic(f, "partial").ok());
  AtomicFile f;
  ASSERT_TRUE(f.Open(path).ok());
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_TRUE(std::filesystem::exists(other));
  ASSERT_TRUE(f.WriteAt(0, "done", 4).ok());
  ASSERT_TRUE(f.Commit().ok());
  EXPECT_EQ(*ReadFile(path), "done");
}

// A missing folder is said of the final path, never of the temporary name, and creates nothing;
// a folder that cannot be written to names the final path too.
TEST(AtomicFile, ErrorsNameTheFinalPath) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "fs_atomic_missing_test";
  fs::remove_all(dir);
  const std::string path = (dir / "sub" / "x.safetensors").string();
  AtomicFile f;
  const Status s = f.Open(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), path + ": cannot create: its folder " + (dir / "sub").string() + " does not exist");
  EXPECT_FALSE(fs::exists(dir));
  const Status w = WriteFileAtomic(path, "data");
  EXPECT_EQ(w.message(), s.message());
  EXPECT_EQ(w.message().find(".tmp"), std::string::npos);
  EXPECT_TRUE(CheckFolderOf("relative-name.json").ok());  // the working folder
  // A file where the folder should be.
  fs::create_directories(dir);
  ASSERT_TRUE(WriteFileAtomic((dir / "sub").string(), "a file").ok());
  EXPECT_EQ(WriteFileAtomic(path, "data").message(),
            path + ": cannot create: " + (dir / "sub").string() + " is not a folder");
  // A folder without write permission (root writes anywhere: then there is nothing to check).
  fs::create_directories(dir / "ro");
  fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  const std::string ro = (dir / "ro" / "y.json").string();
  if (::access((dir / "ro").c_str(), W_OK) != 0) {
    const Status r = WriteFileAtomic(ro, "data");
    EXPECT_EQ(r.message().rfind(ro + ": cannot create: ", 0), 0u) << r.message();
    EXPECT_EQ(r.message().find(".tmp"), std::string::npos) << r.message();
  }
  fs::permissions(dir / "ro", fs::perms::owner_all);
  fs::remove_all(dir);
}

// Errors quote user text; a newline or other control character in it must not break the
// one-line contract (a transcript role "x\ny", a TOML key with a tab).
// Callers branch on the code (a refused configuration is recorded, a failed one stops); a prefix
// keeps it.
TEST(Status, CodesSurvivePrefixes) {
  EXPECT_EQ(Status::Ok().code(), StatusCode::kOk);
  EXPECT_EQ(Status::Error("x").code(), StatusCode::kError);
  EXPECT_EQ(Status::Refused("x").Prefixed("m.gguf").code(), StatusCode::kRefused);
  EXPECT_EQ(Status::InvalidArgument("x").Prefixed("a").Prefixed("b").message(), "b: a: x");
  EXPECT_EQ(Status::InvalidArgument("x").Prefixed("a").code(), StatusCode::kInvalidArgument);
  Result<int> r = Status::Io("f: cannot open");
  EXPECT_EQ(r.status().code(), StatusCode::kIo);
  EXPECT_EQ(ReadFile("/nonexistent/flipscope-file").status().code(), StatusCode::kIo);
  // Naming the CLI's flags in place of the options keeps the code too.
  const Status flagged = Status::Refused(OptionName("max_flips") + " must be >= 0").WithOptionNames({{"max_flips", "--max-flips"}});
  EXPECT_EQ(flagged.code(), StatusCode::kRefused);
  EXPECT_EQ(flagged.message(), "--max-flips must be >= 0");
  EXPECT_TRUE(Status::Ok().WithOptionNames({{"x", "y"}}).ok());
}

TEST(Status, OptionNamesAreMarkedNotSearched) {
  // "at ranges needs ranges": the first "ranges" is a value of `at`, the second the option.
  const Status st = Status::InvalidArgument(OptionName("at") + " ranges needs " + OptionName("ranges") + " A-B");
  EXPECT_EQ(st.message(), "at ranges needs ranges A-B");
  EXPECT_EQ(st.OptionNames(), (std::vector<std::string>{"at", "ranges"}));
  const Status flags = st.Prefixed("b.safetensors").WithOptionNames({{"at", "--at"}, {"ranges", "--ranges"}});
  EXPECT_EQ(flags.message(), "b.safetensors: --at ranges needs --ranges A-B");
  EXPECT_EQ(flags.code(), StatusCode::kInvalidArgument);
  // A name with no flag stays; one in the prefix is kept marked too.
  const Status both = Status::Error(OptionName("load") + " needs " + OptionName("engine") + " llama")
                          .Prefixed(OptionName("replay") + " served")
                          .WithOptionNames({{"load", "--load"}, {"replay", "--replay"}});
  EXPECT_EQ(both.message(), "--replay served: --load needs engine llama");
  EXPECT_EQ(both.OptionNames(), (std::vector<std::string>{"--replay", "--load", "engine"}));
  // Text around the names is never rewritten: "device probe" is not an option here.
  EXPECT_EQ(Status::Error("device probe: " + OptionName("device") + " x").WithOptionNames({{"device", "-dev"}}).message(),
            "device probe: -dev x");
  // A stray mark from user data is escaped like any control character, never taken as a name.
  const Status stray = Status::Error("role '\x1dx' unknown");
  EXPECT_EQ(stray.message(), "role '\\x1dx' unknown");
  EXPECT_TRUE(stray.OptionNames().empty());
}

TEST(Status, MessagesStayOneLine) {
  EXPECT_EQ(Status::Error("f.json: message #2: unknown role 'x\ny'").message(),
            "f.json: message #2: unknown role 'x\\ny'");
  EXPECT_EQ(Status::Error(std::string("k\t\r\x01\x7f\0z", 7)).message(), "k\\t\\r\\x01\\x7f\\x00z");
  EXPECT_EQ(Status::Error("plain: unchanged").message(), "plain: unchanged");
  EXPECT_EQ(Status::Error("inner\n").Prefixed("outer\tfile").message(), "outer\\tfile: inner\\n");
  EXPECT_TRUE(Status::Ok().Prefixed("x").ok());
}

TEST(ReadFile, MissingNamesTheFile) {
  auto r = ReadFile("/nonexistent/x.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/x.gguf"), std::string::npos);
}

TEST(ParseBytes, Units) {
  EXPECT_EQ(*ParseBytes("8GiB"), 8ull << 30);
  EXPECT_EQ(*ParseBytes("512MiB"), 512ull << 20);
  EXPECT_EQ(*ParseBytes("100"), 100u);
  EXPECT_FALSE(ParseBytes("8 parsecs").ok());
}

TEST(VisibleToken, WhitespaceAndControlCharactersShow) {
  EXPECT_EQ(VisibleToken(" src"), "␠src");
  EXPECT_EQ(VisibleToken("a\n\tb\r"), "a↵⇥b␍");
  EXPECT_EQ(VisibleToken("  "), "␠␠");
  EXPECT_EQ(VisibleToken(std::string("\x1b[0m\x7f", 5)), "\\x1b[0m\\x7f");
  EXPECT_EQ(VisibleToken(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(VisibleToken("<|im_end|>"), "<|im_end|>");
  EXPECT_EQ(VisibleToken("é→"), "é→") << "UTF-8 is left as it is";
  EXPECT_EQ(VisibleToken(""), "");
}

namespace {
// A Log whose lines land in *lines, with bars asked for.
Log Collecting(std::vector<std::string>* lines) {
  return {[lines](std::string_view l) { lines->emplace_back(l); }, true};
}
}  // namespace

// Piped (stderr is not a terminal): no bar at all, but the stage still says in its log when it
// starts and how it ended, with its seconds and rate.
TEST(Progress, QuietWhenPipedButLogsEachStage) {
  std::vector<std::string> lines;
  testing::internal::CaptureStderr();
  {
    Progress p(Collecting(&lines), "prefill", 100, "tok");
    for (uint64_t i = 0; i <= 100; i += 10) p.Update(i);
    p.Note("2 forks decoded in 0.1 s");
  }
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "prefill: started, 100 tok");
  EXPECT_TRUE(std::regex_match(
      lines[1], std::regex(R"(prefill: 100 tok in [0-9]+\.[0-9] s \([0-9.]+ tok/s\), 2 forks decoded in 0\.1 s)")))
      << lines[1];
  // A stage that ends early says where; one made without a log says nothing.
  lines.clear();
  {
    Progress p(Collecting(&lines), "served replay", 50, "tok");
    p.Update(20);
  }
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].rfind("served replay: stopped at 20 of 50 tok in ", 0), 0u) << lines[1];
  {
    Progress bare("compare", 10, "probes");
    bare.Update(10);
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(lines.size(), 2u);
}

// On a terminal the bar is drawn (rate and ETA) instead of the start line; the end line stays.
TEST(Progress, OnATerminalDrawsTheBarAndLogsTheEnd) {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  const int slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(slave, 0);
  const char* no_bars = std::getenv("FLIPSCOPE_NO_PROGRESS");
  const std::string saved_env = no_bars ? no_bars : "";
  ::unsetenv("FLIPSCOPE_NO_PROGRESS");
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(slave, STDERR_FILENO);
  std::vector<std::string> lines;
  {
    Progress p(Collecting(&lines), "prefill", 10, "tok");
    p.Note("step 3 of 4");
    p.Update(10);
  }
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  if (no_bars) ::setenv("FLIPSCOPE_NO_PROGRESS", saved_env.c_str(), 1);
  std::string drawn;
  pollfd pfd{master, POLLIN, 0};
  char buf[512];
  while (::poll(&pfd, 1, 200) > 0) {
    const ssize_t n = ::read(master, buf, sizeof(buf));
    if (n <= 0) break;
    drawn.append(buf, size_t(n));
  }
  ::close(slave);
  ::close(master);
  EXPECT_NE(drawn.find("prefill [##############################] 10/10 tok"), std::string::npos) << drawn;
  EXPECT_NE(drawn.find("ETA 0s  step 3 of 4"), std::string::npos) << drawn;
  ASSERT_EQ(lines.size(), 1u) << "no start line beside a bar";
  EXPECT_EQ(lines[0].rfind("prefill: 10 tok in ", 0), 0u) << lines[0];
}
