#include "lathe/run/profile.h"

#include <gtest/gtest.h>

#include "lathe/common/i18n.h"
#include "lathe/run/spec.h"

namespace lathe::run {
namespace {

const Json kA100x2 = {{"gpus", 2},
                      {"gpu_type", "A100"},
                      {"cpus", 16},
                      {"memory", "128GB"},
                      {"shm", "16GB"},
                      {"pool", "cluster"},
                      {"partition", "gpu-a100"}};

std::string Arg(const Status& s, const std::string& key) {
  for (const auto& a : s.args()) {
    if (a.key == key) return a.value;
  }
  return "";
}

TEST(Profile, ParsesEveryField) {
  auto p = ProfileFromJson("a100x2", kA100x2);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->name, "a100x2");
  EXPECT_EQ(p->gpus, 2);
  EXPECT_EQ(p->gpu_type, "A100");
  EXPECT_EQ(p->cpus, 16.0);
  EXPECT_EQ(p->memory_bytes, 128'000'000'000ull);
  EXPECT_EQ(p->shm_bytes, 16'000'000'000ull);
  EXPECT_EQ(p->pool, "cluster");
  EXPECT_EQ(p->partition, "gpu-a100");
}

TEST(Profile, FieldsLeftOutStayUnset) {
  auto p = ProfileFromJson("small", {{"gpus", 1}, {"memory", "24GB"}});
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->cpus);
  EXPECT_FALSE(p->shm_bytes);
  EXPECT_EQ(p->gpu_type, "");
  EXPECT_EQ(ProfileFieldsJson(*p), (Json{{"gpus", 1}, {"memory", 24'000'000'000ull}}));
}

TEST(Profile, ANumericGpuTypeIsTheNameItSpells) {
  auto p = ProfileFromJson("rtx", {{"gpus", 1}, {"gpu_type", 4090}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->gpu_type, "4090");
}

TEST(Profile, BadFieldsAreNamedWithWhatIsAllowed) {
  struct Case {
    Json fields;
    std::string field;
  };
  for (const Case& c : std::vector<Case>{
           {{{"gpus", -1}}, "gpus"},
           {{{"gpus", "two"}}, "gpus"},
           {{{"memory", "lots"}}, "memory"},
           {{{"shm", {{"a", 1}}}}, "shm"},
           {{{"cpus", 0}}, "cpus"},
           {{{"pool", "Not A Pool"}}, "pool"},
           {{{"gpu_type", "A100,H100"}}, "gpu_type"},
           {{{"gpu_type", "a b"}}, "gpu_type"},
           {{{"partition", "gpu;rm"}}, "partition"},
           {{{"nodes", 0}}, "nodes"},
           {{{"nodes", -2}}, "nodes"},
           {{{"nodes", 1.5}}, "nodes"},
           {{{"nodes", "two"}}, "nodes"},
           {{{"nodes", 1025}}, "nodes"},
           {{{"nodes", true}}, "nodes"},
           {{{"command", "x"}}, "(fields)"},
           {{{"gpuz", 1}}, "(fields)"},
       }) {
    auto p = ProfileFromJson("p", c.fields);
    ASSERT_FALSE(p.ok()) << c.fields.dump();
    EXPECT_EQ(p.status().msg_id(), "profile.bad_field") << c.fields.dump();
    EXPECT_EQ(Arg(p.status(), "field"), c.field) << c.fields.dump();
    EXPECT_EQ(Arg(p.status(), "profile"), "p");
    EXPECT_FALSE(Arg(p.status(), "allowed").empty());
  }
  EXPECT_EQ(ProfileFromJson("p", Json::array()).status().msg_id(), "profile.bad_field");
}

TEST(Profile, NodesIsAFieldAProfileSets) {
  Json fields = kA100x2;
  fields["nodes"] = 4;
  auto p = ProfileFromJson("a100x2x4", fields);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->nodes, 4);
  EXPECT_EQ(ProfileFieldsJson(*p)["nodes"], 4);
  EXPECT_FALSE(ProfileFromJson("small", {{"gpus", 1}})->nodes);
  EXPECT_FALSE(ProfileFieldsJson(*ProfileFromJson("small", {{"gpus", 1}})).contains("nodes"));
  EXPECT_EQ(ProfileFromJson("one", {{"nodes", 1}})->nodes, 1);
  EXPECT_EQ(ProfileFromJson("most", {{"nodes", kMaxNodes}})->nodes, kMaxNodes);
  // Applied: gpus stays per node; the spec's own nodes win.
  Json spec = {{"command", {"true"}}};
  ApplyProfile(*p, spec);
  auto s = SpecFromJson(spec);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->nodes, 4);
  EXPECT_EQ(s->gpus, 2);
  Json own = {{"command", {"true"}}, {"nodes", 2}};
  ApplyProfile(*p, own);
  EXPECT_EQ(SpecFromJson(own)->nodes, 2);
  Json one = {{"command", {"true"}}, {"nodes", 1}};
  ApplyProfile(*p, one);
  EXPECT_EQ(SpecFromJson(one)->nodes, 1);
}

TEST(Profile, ResolveFillsWhatTheSpecLeavesOutAndSaysWhich) {
  std::map<std::string, Profile> profiles;
  profiles["small"] = *ProfileFromJson("small", {{"gpus", 1}, {"memory", "24GB"}, {"nodes", 2}});
  profiles["big"] = *ProfileFromJson("big", {{"gpus", 8}});
  std::vector<std::string> filled;
  auto r =
      ResolveProfile(profiles, {{"command", {"true"}}, {"profile", "small"}, {"gpus", 0}}, filled);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["gpus"], 0);
  EXPECT_EQ((*r)["memory"], 24'000'000'000ull);
  EXPECT_EQ((*r)["nodes"], 2);
  EXPECT_EQ(filled, (std::vector<std::string>{"memory", "nodes"}));
  // No profile, or a name no profile could have: as it is.
  filled.clear();
  const Json plain = {{"command", {"true"}}};
  EXPECT_EQ(*ResolveProfile(profiles, plain, filled), plain);
  const Json odd = {{"command", {"true"}}, {"profile", "Not One"}};
  EXPECT_EQ(*ResolveProfile(profiles, odd, filled), odd);
  EXPECT_TRUE(filled.empty());
  // A name not configured: refused, naming the ones there are.
  auto unknown = ResolveProfile(profiles, {{"profile", "huge"}}, filled);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().msg_id(), "profile.unknown");
  EXPECT_EQ(Arg(unknown.status(), "profile"), "huge");
  EXPECT_EQ(Arg(unknown.status(), "allowed"), "big, small");
  EXPECT_EQ(Arg(ResolveProfile({}, {{"profile", "huge"}}, filled).status(), "allowed"), "-");
}

TEST(Profile, BadNamesAreRefused) {
  for (const char* name : {"", "A100", "1gpu", "has space", "x/y"}) {
    EXPECT_EQ(ProfileFromJson(name, Json::object()).status().msg_id(), "profile.bad_name") << name;
  }
}

TEST(Profile, TheSpecsOwnFieldsWin) {
  auto p = ProfileFromJson("a100x2", kA100x2);
  ASSERT_TRUE(p.ok());
  Json spec = {{"command", {"python3", "train.py"}}, {"gpus", 1}, {"memory", nullptr}};
  ApplyProfile(*p, spec);
  auto s = SpecFromJson(spec);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->profile, "a100x2");
  EXPECT_EQ(s->gpus, 1);                           // given
  EXPECT_EQ(s->memory_bytes, 128'000'000'000ull);  // null: left out
  EXPECT_EQ(s->gpu_type, "A100");
  EXPECT_EQ(s->cpus, 16.0);
  EXPECT_EQ(s->shm_bytes, 16'000'000'000ull);
  EXPECT_EQ(s->pool, "cluster");
  EXPECT_EQ(s->partition, "gpu-a100");
}

TEST(Profile, AnExplicitZeroOverridesTheProfile) {
  auto p = ProfileFromJson("small", {{"gpus", 1}});
  ASSERT_TRUE(p.ok());
  Json spec = {{"command", {"true"}}, {"gpus", 0}};
  ApplyProfile(*p, spec);
  EXPECT_EQ(spec["gpus"], 0);
}

TEST(Profile, SpecFieldsRoundTrip) {
  Json j = {{"command", {"true"}},
            {"profile", "a100x2"},
            {"gpu_type", "A100"},
            {"partition", "gpu-a100"}};
  auto s = SpecFromJson(j);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto back = SpecFromJson(SpecToJson(*s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *s);
  EXPECT_EQ(SpecToJson(*s)["gpu_type"], "A100");
  EXPECT_EQ(SpecFromJson({{"command", {"true"}}, {"profile", "Big One"}}).status().msg_id(),
            "spec.wrong_type");
}

TEST(Profile, EveryMessageIsInTheCatalogInBothLanguages) {
  for (const char* id :
       {"profile.bad_field", "profile.bad_name", "profile.unknown", "profile.unsatisfiable",
        "profile.gpu_type_unmatched", "spec.gpu_type_unmatched", "profile.nodes_not_supported",
        "profile.not_for_deployment", "profiles.col.nodes", "profiles.why.partition_nodes"}) {
    EXPECT_TRUE(Catalog::Default().Has(id)) << id;
    EXPECT_NE(Tr(id, Lang::kZh), Tr(id, Lang::kEn)) << id;
  }
}

}  // namespace
}  // namespace lathe::run

namespace lathe::run {
namespace {

TEST(Profile, AnImageFillsASpecWithoutOne) {
  auto p = ProfileFromJson("torch", {{"gpus", 1}, {"image", "pytorch:2.1"}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->image, "pytorch:2.1");
  Json spec = {{"command", {"python3"}}};
  ApplyProfile(*p, spec);
  EXPECT_EQ(spec["image"], "pytorch:2.1");
  Json own = {{"command", {"python3"}}, {"image", "mine"}};
  ApplyProfile(*p, own);
  EXPECT_EQ(own["image"], "mine");
  EXPECT_FALSE(ProfileFromJson("bad", {{"image", "-x"}}).ok());
}

}  // namespace
}  // namespace lathe::run
