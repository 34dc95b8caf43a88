#include "lathe/common/i18n.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "lathe/common/embedded.h"

namespace lathe {
namespace {

std::map<std::string, std::string> g_env;
const char* FakeGetenv(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

TEST(DetectLang, Precedence) {
  g_env = {{"LANG", "zh_CN.UTF-8"}};
  EXPECT_EQ(DetectLang(std::nullopt, FakeGetenv), Lang::kZh);
  EXPECT_EQ(DetectLang("en", FakeGetenv), Lang::kEn);  // --lang wins
  g_env = {{"LANG", "zh_CN.UTF-8"}, {"LC_ALL", "en_US.UTF-8"}};
  EXPECT_EQ(DetectLang(std::nullopt, FakeGetenv), Lang::kEn);  // LC_ALL over LANG
  g_env = {{"LC_ALL", "en_US.UTF-8"}, {"LATHE_LANG", "zh"}};
  EXPECT_EQ(DetectLang(std::nullopt, FakeGetenv), Lang::kZh);  // LATHE_LANG over locale
  g_env = {};
  EXPECT_EQ(DetectLang(std::nullopt, FakeGetenv), Lang::kEn);
  g_env = {{"LANG", "C.UTF-8"}};
  EXPECT_EQ(DetectLang(std::nullopt, FakeGetenv), Lang::kEn);
}

TEST(DetectLang, PseudoLocaleBracketsEveryCatalogText) {
  g_env = {{"LATHE_LANG", "pseudo"}, {"LANG", "zh_CN.UTF-8"}};
  EXPECT_EQ(DetectLang(std::nullopt, FakeGetenv), Lang::kPseudo);
  EXPECT_EQ(DetectLang("pseudo", FakeGetenv), Lang::kPseudo);
  EXPECT_EQ(LangName(Lang::kPseudo), "pseudo");
  EXPECT_EQ(Tr("run.not_found", Lang::kPseudo, {{"run", "r-1"}}), "⟦no run with id or name 'r-1'⟧");
  EXPECT_EQ((BiText{"disk", "磁盘"}.Get(Lang::kPseudo)), "⟦disk⟧");
  EXPECT_EQ(PickText("disk", "磁盘", Lang::kZh), "磁盘");
}

TEST(DataFile, RejectsMissingLanguageNamingEntryAndField) {
  auto r = ParseDataFile("- id: a.b\n  text: {en: hello}\n", "x.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("a.b"), std::string::npos);
  EXPECT_NE(r.status().message().find("zh"), std::string::npos);
  r = ParseDataFile("- id: a.b\n  text: {zh: 你好}\n", "x.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("en"), std::string::npos);
}

TEST(DataFile, RejectsDuplicateAndMissingIds) {
  EXPECT_FALSE(
      ParseDataFile("- id: a\n  text: {en: x, zh: y}\n- id: a\n  text: {en: x, zh: y}\n", "x.yaml")
          .ok());
  EXPECT_FALSE(ParseDataFile("- text: {en: x, zh: y}\n", "x.yaml").ok());
  EXPECT_FALSE(ParseDataFile("{not: a list}", "x.yaml").ok());
  EXPECT_FALSE(ParseDataFile("- id: [unclosed\n", "x.yaml").ok());
}

TEST(DataFile, FieldKinds) {
  auto r = ParseDataFile(
      "- id: k\n  text: {en: a, zh: 甲}\n  sev: warn\n  tags: [x, y]\n"
      "  steps:\n    - {en: one, zh: 一}\n    - {en: two, zh: 二}\n",
      "x.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const DataEntry& e = r->at(0);
  EXPECT_EQ(e.text.at("text").zh, "甲");
  EXPECT_EQ(e.plain.at("sev"), "warn");
  EXPECT_EQ(e.lists.at("tags").size(), 2u);
  EXPECT_EQ(e.bilists.at("steps").at(1).en, "two");
}

TEST(Catalog, FillsPlaceholdersInBothLanguages) {
  auto c = Catalog::FromYaml("- id: t\n  text: {en: 'run {run} gone', zh: '运行 {run} 已消失'}\n",
                             "x.yaml");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->Format("t", Lang::kEn, {{"run", "r1"}}), "run r1 gone");
  EXPECT_EQ(c->Format("t", Lang::kZh, {{"run", "r1"}}), "运行 r1 已消失");
  EXPECT_EQ(c->Format("missing", Lang::kEn, {{"a", "b"}}), "missing a=b");
}

TEST(Catalog, EmbeddedFilesMergeWithoutDuplicates) {
  auto c = Catalog::FromEmbedded();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->entries().size(), Catalog::Default().entries().size());
}

// The default catalog is indexed by a line scan and parsed entry by entry;
// it must hold exactly what parsing the files whole gives, text for text.
TEST(Catalog, TheLazyIndexHoldsWhatAFullParseHolds) {
  auto full = Catalog::FromEmbedded();
  ASSERT_TRUE(full.ok()) << full.status().message();
  const Catalog& lazy = Catalog::Default();
  EXPECT_EQ(lazy.ids(), full->ids());
  for (const std::string& id : full->ids()) {
    ASSERT_NE(lazy.Find(id), nullptr) << id;
    for (Lang lang : {Lang::kEn, Lang::kZh}) {
      EXPECT_EQ(lazy.Format(id, lang, {{"x", "1"}}), full->Format(id, lang, {{"x", "1"}})) << id;
    }
  }
  EXPECT_EQ(lazy.Find("no.such.id"), nullptr);
  EXPECT_FALSE(lazy.Has("no.such.id"));
}

TEST(Catalog, EmbeddedCatalogIsCompleteAndMatchesSource) {
  // Every id has both languages (ParseDataFile enforces it), and the embedded
  // copy is the one in data/.
  const Catalog& c = Catalog::Default();
  EXPECT_GT(c.entries().size(), 5u);
  std::ifstream in(std::string(LATHE_SOURCE_DIR) + "/data/messages.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), std::string(FindEmbedded("messages.yaml")));
}

TEST(Catalog, EveryDataFileIsBilingual) {
  namespace fs = std::filesystem;
  int files = 0;
  for (const auto& f : fs::directory_iterator(std::string(LATHE_SOURCE_DIR) + "/data")) {
    if (f.path().extension() != ".yaml") continue;
    // The API's OpenAPI document (scripts/openapi.py): embedded, but no list of entries.
    if (f.path().filename() == "openapi.yaml") continue;
    std::ifstream in(f.path());
    std::stringstream ss;
    ss << in.rdbuf();
    auto r = ParseDataFile(ss.str(), f.path().filename().string());
    EXPECT_TRUE(r.ok()) << r.status().message();
    ++files;
  }
  EXPECT_GE(files, 1);
}

TEST(Catalog, StatusMsgRendersInEitherLanguage) {
  Status s = Status::Msg(Code::kInvalidArgument, "units.bad_bytes", {{"value", "16X"}});
  EXPECT_NE(s.message().find("'16X'"), std::string::npos);
  EXPECT_NE(Localize(s, Lang::kZh).find("“16X”"), std::string::npos);
}

TEST(Catalog, EveryIdUsedInSourcesExists) {
  // Scan src/ for Status::Msg(..., "id" and Tr("id" and check each id exists.
  namespace fs = std::filesystem;
  const Catalog& c = Catalog::Default();
  int checked = 0;
  for (const auto& f : fs::recursive_directory_iterator(std::string(LATHE_SOURCE_DIR) + "/src")) {
    if (f.path().extension() != ".cc" && f.path().extension() != ".h") continue;
    if (f.path().filename().string().find("_test") != std::string::npos) continue;
    std::ifstream in(f.path());
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    for (const char* marker : {"Status::Msg(Code::", "Tr(\"", "MsgStatus(\""}) {
      size_t pos = 0;
      while ((pos = text.find(marker, pos)) != std::string::npos) {
        size_t q1 = text.find('"', pos);
        size_t q2 = q1 == std::string::npos ? q1 : text.find('"', q1 + 1);
        pos += 1;
        if (q1 == std::string::npos || q2 == std::string::npos || q2 - q1 > 80) continue;
        std::string id = text.substr(q1 + 1, q2 - q1 - 1);
        if (id.find('.') == std::string::npos || id.find(' ') != std::string::npos) continue;
        if (id.back() == '_' || id.back() == '.') continue;  // a prefix completed at run time
        EXPECT_TRUE(c.Has(id)) << id << " used in " << f.path() << " is not in data/messages.yaml";
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 3);
}

}  // namespace
}  // namespace lathe
