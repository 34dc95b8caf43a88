#include "lathe/daemon/quotas.h"

#include <gtest/gtest.h>

#include "lathe/common/i18n.h"
#include "lathe/daemon/config.h"

namespace lathe::daemon {
namespace {

constexpr const char* kConfig = R"(
quotas:
  default: {gpus: 2, runs: 4, gpu_hours: 100, period: 7d, disk: 50GiB}
  alice: {gpus: 4, runs: unlimited, disk: unlimited}
  "@students": {gpus: 1, notebooks: 1, gpu_hours: 20, period: 1d}
  "@staff": {gpus: 3, notebooks: 2}
fair_share: {half_life: 3d}
)";

QuotaConfig Parsed() {
  auto c = ParseDaemonConfig(kConfig, "config.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() && c->quotas ? *c->quotas : QuotaConfig{};
}

TEST(Quotas, FieldsComeFromTheUserThenTheFirstGroupThenTheDefault) {
  QuotaConfig c = Parsed();
  EXPECT_EQ(c.half_life_ms, 3LL * 24 * 3600 * 1000);
  ResolvedQuota alice = ResolveQuota(c, "alice", {"students"});
  EXPECT_EQ(alice.limits.gpus, 4);
  EXPECT_FALSE(alice.limits.runs);  // unlimited, not the default's 4
  EXPECT_EQ(alice.limits.notebooks, 1);
  EXPECT_EQ(alice.limits.gpu_hours, 20);
  EXPECT_EQ(alice.limits.period_ms, 24LL * 3600 * 1000);  // with the gpu_hours it came with
  EXPECT_EQ(alice.source["gpus"], "alice");
  EXPECT_EQ(alice.source["notebooks"], "@students");
  EXPECT_FALSE(alice.disk_bytes);  // unlimited, not the default's
  ResolvedQuota bob = ResolveQuota(c, "bob", {"staff", "students"});  // file order decides
  EXPECT_EQ(bob.limits.gpus, 1);
  EXPECT_EQ(bob.limits.notebooks, 1);
  ResolvedQuota carol = ResolveQuota(c, "carol", {"staff"});
  EXPECT_EQ(carol.limits.gpus, 3);
  EXPECT_EQ(carol.limits.runs, 4);
  EXPECT_EQ(carol.limits.gpu_hours, 100);
  EXPECT_EQ(carol.limits.period_ms, 7LL * 24 * 3600 * 1000);
  EXPECT_EQ(carol.source["runs"], "default");
  EXPECT_EQ(carol.disk_bytes, 50ULL << 30);
  EXPECT_EQ(carol.source["disk"], "default");
  ResolvedQuota none = ResolveQuota(QuotaConfig{}, "dave", {});
  EXPECT_FALSE(none.limits.gpus || none.limits.runs || none.limits.notebooks ||
               none.limits.gpu_hours || none.disk_bytes);
}

TEST(Quotas, ProjectsHaveLimitsOfTheirOwnOnly) {
  auto c = ParseDaemonConfig(R"(
quotas:
  default: {gpus: 1, runs: 2}
  projects:
    vision: {gpus: 2, gpu_hours: 100}
    nlp: {runs: 3, notebooks: unlimited, gpu_hours: 5, period: 1d}
)",
                             "config.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->quotas);
  EXPECT_TRUE(c->quotas->HasLimits());
  EXPECT_FALSE(c->quotas->users.count("projects"));  // not a user
  sched::QuotaLimits vision = ProjectQuota(*c->quotas, "vision");
  EXPECT_EQ(vision.gpus, 2);
  EXPECT_FALSE(vision.runs);  // the default is the users', not the projects'
  EXPECT_EQ(vision.gpu_hours, 100);
  EXPECT_EQ(vision.period_ms, kDefaultQuotaPeriodMs);
  sched::QuotaLimits nlp = ProjectQuota(*c->quotas, "nlp");
  EXPECT_FALSE(nlp.gpus);
  EXPECT_EQ(nlp.runs, 3);
  EXPECT_FALSE(nlp.notebooks);  // unlimited
  EXPECT_EQ(nlp.period_ms, 24LL * 3600 * 1000);
  sched::QuotaLimits other = ProjectQuota(*c->quotas, "other");
  EXPECT_FALSE(other.gpus || other.runs || other.notebooks || other.gpu_hours);
  // Only projects: limits all the same.
  auto only = ParseDaemonConfig("quotas: {projects: {vision: {runs: 1}}}", "config.yaml");
  ASSERT_TRUE(only.ok());
  EXPECT_TRUE(only->quotas->HasLimits());
  EXPECT_FALSE(ResolveQuota(*only->quotas, "alice", {}).limits.runs);  // users unlimited
}

TEST(Quotas, DefaultsWithoutConfig) {
  auto c = ParseDaemonConfig("gpus: none\n", "config.yaml");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->quotas);
  EXPECT_FALSE(QuotaConfig{}.HasLimits());
  EXPECT_EQ(QuotaConfig{}.half_life_ms, kDefaultHalfLifeMs);
  auto off = ParseDaemonConfig("fair_share: {half_life: 0}\n", "config.yaml");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->quotas->half_life_ms, 0);
}

TEST(Quotas, BadValuesNameTheFieldInBothLanguages) {
  struct Case {
    const char* yaml;
    const char* id;
    const char* key;
  };
  for (const Case& k : std::vector<Case>{
           {"quotas: {default: {gpus: -1}}", "quota.bad_count", "quotas.default.gpus"},
           {"quotas: {default: {gpus: 1.5}}", "quota.bad_count", "quotas.default.gpus"},
           {"quotas: {alice: {runs: many}}", "quota.bad_count", "quotas.alice.runs"},
           {"quotas: {alice: {gpu: 1}}", "quota.bad_field", "quotas.alice.gpu"},
           {"quotas: {alice: {gpu_hours: -3}}", "quota.bad_hours", "quotas.alice.gpu_hours"},
           {"quotas: {alice: {gpu_hours: 3, period: soon}}", "quota.bad_period",
            "quotas.alice.period"},
           {"quotas: {alice: {period: 7d}}", "quota.period_alone", "quotas.alice.period"},
           {"quotas: {alice: {disk: lots}}", "quota.bad_size", "quotas.alice.disk"},
           {"quotas: {alice: {disk: -5GiB}}", "quota.bad_size", "quotas.alice.disk"},
           {"quotas: {alice: 4}", "quota.bad_entry", "quotas.alice"},
           {"quotas: [a]", "quota.bad_entry", "quotas"},
           {"quotas: {projects: {vision: {gpus: two}}}", "quota.bad_count",
            "quotas.projects.vision.gpus"},
           {"quotas: {projects: {vision: {disk: 5GiB}}}", "quota.bad_field",
            "quotas.projects.vision.disk"},
           {"quotas: {projects: {vision: {period: 1d}}}", "quota.period_alone",
            "quotas.projects.vision.period"},
           {"quotas: {projects: {Vision!: {gpus: 1}}}", "quota.bad_project",
            "quotas.projects.Vision!"},
           {"quotas: {projects: [vision]}", "quota.bad_entry", "quotas.projects"},
           {"quotas: {projects: {vision: 2}}", "quota.bad_entry", "quotas.projects.vision"},
           {"fair_share: {half_life: soon}", "quota.bad_half_life", "fair_share.half_life"},
           {"fair_share: {decay: 1d}", "quota.bad_field", "fair_share.decay"},
       }) {
    auto c = ParseDaemonConfig(k.yaml, "config.yaml");
    ASSERT_FALSE(c.ok()) << k.yaml;
    EXPECT_EQ(c.status().msg_id(), k.id) << k.yaml;
    EXPECT_NE(c.status().message().find(k.key), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("config.yaml"), std::string::npos);
    std::string zh = Tr(c.status().msg_id(), Lang::kZh, c.status().args());
    EXPECT_NE(zh.find(k.key), std::string::npos) << zh;
    EXPECT_NE(zh, c.status().message());
  }
}

}  // namespace
}  // namespace lathe::daemon
