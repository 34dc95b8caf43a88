#include "lathe/exec/slurm/slurm_rest.h"

#include <gtest/gtest.h>

#include "lathe/os/files.h"
#include "lathe/os/test_util/fake_clock.h"

// The golden file is in slurm/testdata/; LATHE_UPDATE_GOLDEN=1 rewrites it.
namespace lathe::exec {
namespace {

const std::string kTestdata = std::string(LATHE_SOURCE_DIR) + "/src/lathe/exec/slurm/testdata/";

TEST(SlurmTokens, MintsOncePerUserAndRenewsWithAThirdOfTheLifespanLeft) {
  os::FakeClock clock;
  std::vector<std::string> mints;
  SlurmTokens tokens(
      900'000,
      [&](const std::string& user, int64_t lifespan_s) -> Result<std::string> {
        mints.push_back(user + "/" + std::to_string(lifespan_s));
        return "t" + std::to_string(mints.size());
      },
      clock);
  EXPECT_EQ(tokens.Get("alice").value(), "t1");
  EXPECT_EQ(tokens.Get("bob").value(), "t2");
  EXPECT_EQ(tokens.Get("alice").value(), "t1");
  EXPECT_EQ(mints, (std::vector<std::string>{"alice/900", "bob/900"}));
  clock.Advance(599'999);  // a little more than a third left: still good
  EXPECT_EQ(tokens.Get("alice").value(), "t1");
  clock.Advance(1);                              // a third
  EXPECT_EQ(tokens.Get("alice").value(), "t3");  // renewed before it expires
  tokens.Forget("alice");
  EXPECT_EQ(tokens.Get("alice").value(), "t4");
  EXPECT_EQ(tokens.minted(), 4);
}

TEST(SlurmTokens, AFailedMintIsTheErrorAndNothingIsKept) {
  os::FakeClock clock;
  int calls = 0;
  SlurmTokens tokens(
      600'000,
      [&](const std::string&, int64_t) -> Result<std::string> {
        if (++calls == 1) return Status::Unavailable("slurmctld is down");
        return std::string("t");
      },
      clock);
  auto first = tokens.Get("alice");
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().message(), "slurmctld is down");
  EXPECT_EQ(tokens.Get("alice").value(), "t");
}

TEST(SlurmTokens, ParsesScontrolsAnswer) {
  EXPECT_EQ(ParseScontrolToken("SLURM_JWT=eyJhbGci.abc.def\n").value(), "eyJhbGci.abc.def");
  EXPECT_FALSE(ParseScontrolToken("").ok());
  EXPECT_FALSE(ParseScontrolToken("SLURM_JWT=\n").ok());
  EXPECT_FALSE(ParseScontrolToken("Error fetching token\n").ok());
}

TEST(SlurmRestSubmit, AnswersGiveTheJobIdOrWhyNot) {
  auto ok = ParseSlurmRestSubmit({200, R"({"job_id": 12, "step_id": "batch", "errors": []})"});
  EXPECT_EQ(ok.job_id, "12");
  EXPECT_EQ(ok.error, "");
  // Submitted, and held: still submitted.
  auto held = ParseSlurmRestSubmit(
      {200,
       R"({"job_id": 13, "errors": [{"error_code": 2042, "error": "Job is in held state"}]})"});
  EXPECT_EQ(held.job_id, "13");
  auto parse = ParseSlurmRestSubmit(
      {400, R"({"errors": [{"error": "Invalid SIGNAL specification", "error_code": -1},
                           {"description": "Unable to process key \"signal\"", "error_number": -1,
                            "error": "Unspecified error"}]})"});
  EXPECT_EQ(parse.job_id, "");
  EXPECT_FALSE(parse.auth_failed);
  EXPECT_EQ(parse.error,
            "HTTP 400: Invalid SIGNAL specification; Unspecified error: Unable to process key "
            "\"signal\"");
  auto auth = ParseSlurmRestSubmit(
      {500,
       R"({"errors": [{"error_code": 5005, "error": "Zero Bytes were transmitted or received"}]})"});
  EXPECT_TRUE(auth.auth_failed);
  EXPECT_TRUE(ParseSlurmRestSubmit({401, "Authentication failure"}).auth_failed);
  auto junk = ParseSlurmRestSubmit({502, "<html>Bad Gateway</html>"});
  EXPECT_EQ(junk.error, "HTTP 502: <html>Bad Gateway</html>");
  EXPECT_EQ(ParseSlurmRestSubmit({200, R"({"job_id": 0})"}).job_id, "");
}

TEST(SlurmRestSubmit, TheJobHasWhatSbatchWouldBeGivenAndHostileStringsStayData) {
  SlurmPoolOptions pool;
  pool.name = "cluster";
  pool.partition = "gpu";
  pool.account = "lab";
  pool.qos = "normal";
  pool.shared_dir = "/shared/lathe";
  pool.slurm_conf = "/etc/slurm/cluster.conf";
  LaunchRequest r;
  r.run_id = "r-7f3a";
  r.attempt = 2;
  r.user = RunUser{1001, 1001, {1001, 27}, "alice", "/home/alice", "/bin/bash"};
  r.argv = {"python3", "train.py", "$(id)", "`id`", "'q'"};
  r.workdir = "/shared/it's a $(dir) `x` %j/w\nd";
  r.gpu_count = 2;
  r.gpu_type = "A100";
  r.nodes = 2;
  r.cpus = 3.5;
  r.memory_bytes = (16ull << 30) + 1;
  r.time_limit_ms = 90 * 60 * 1000 + 1;
  const SlurmAttemptPaths p = SlurmPaths(pool.shared_dir, "alice", r.run_id, r.attempt);
  const Json body = SlurmRestJob(pool, "/opt/lathe/bin/lathe", r, p,
                                 {{"PATH", "/usr/bin:/bin"}, {"HOSTILE", "$(id) ` \n'"}});
  const std::string text = body.dump(2) + "\n";
  const std::string golden = kTestdata + "rest_job.json";
  if (const char* u = std::getenv("LATHE_UPDATE_GOLDEN"); u != nullptr && std::string(u) == "1") {
    ASSERT_TRUE(os::WriteFileAtomic(golden, text).ok());
  }
  EXPECT_EQ(text, os::ReadFile(golden).value_or("<missing>"));
  EXPECT_EQ(body["job"]["current_working_directory"], r.workdir);  // as it is, one value
  EXPECT_EQ(body["job"]["gres"], "gpu:A100:2");                    // per node
  EXPECT_EQ(body["job"]["nodes"], Json::array({2, 2}));
  EXPECT_EQ(body["job"]["time_limit"], 91);
  EXPECT_EQ(body["job"]["memory_per_node"], 16385);
  EXPECT_EQ(body["job"]["cpus_per_task"], 4);
  EXPECT_FALSE(body["job"].contains("signal"));  // the monitor keeps the time (slurm_rest.h)
  EXPECT_EQ(body["script"], SlurmBatchScript("/opt/lathe/bin/lathe", p.launch));
}

}  // namespace
}  // namespace lathe::exec
