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
        "profile.gpu_type_unmatched", "spec.gpu_type_unmatched"}) {
    EXPECT_TRUE(Catalog::Default().Has(id)) << id;
    EXPECT_NE(Tr(id, Lang::kZh), Tr(id, Lang::kEn)) << id;
  }
}

}  // namespace
}  // namespace lathe::run
