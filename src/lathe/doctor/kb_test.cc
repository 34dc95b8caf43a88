// The knowledge base (data/kb.yaml) and `lathe explain`: validation, the
// cross-match over tests/data/explain, long lines, and both languages.
#include "lathe/doctor/kb.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "lathe/common/embedded.h"
#include "lathe/doctor/check.h"
#include "lathe/doctor/explain_format.h"
#include "lathe/doctor/explainer.h"
#include "lathe/doctor/glossary.h"

namespace lathe::doctor {
namespace {

namespace fs = std::filesystem;

const fs::path kExcerpts = fs::path(LATHE_SOURCE_DIR) / "tests/data/explain";

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

constexpr const char* kEntry = R"(- id: a.b
  title: {en: "T", zh: "题"}
  signatures: ['boom \d+']
  scenario: {en: "s", zh: "景"}
  cause: {en: "c", zh: "因"}
  verify: "echo"
  fix: {en: "f", zh: "修"}
)";

// ---- validation ------------------------------------------------------------------

TEST(KnowledgeBase, EmbeddedFileIsValidAndLargeEnough) {
  auto kb = KnowledgeBase::FromYaml(FindEmbedded("kb.yaml"), "data/kb.yaml");
  ASSERT_TRUE(kb.ok()) << kb.status().ToString();
  EXPECT_GE(kb->entries().size(), 40u);
  for (const auto& e : kb->entries()) {
    EXPECT_FALSE(e.verify.empty()) << e.id;
    EXPECT_FALSE(e.signatures.empty()) << e.id;
    for (const BiText* t : {&e.title, &e.scenario, &e.cause, &e.fix}) {
      EXPECT_FALSE(t->en.empty()) << e.id;
      EXPECT_FALSE(t->zh.empty()) << e.id;
    }
  }
}

TEST(KnowledgeBase, RejectsBrokenEntries) {
  EXPECT_TRUE(KnowledgeBase::FromYaml(kEntry, "t.yaml").ok());
  std::string no_zh = kEntry;
  no_zh.replace(no_zh.find(", zh: \"因\""), 11, "");
  auto r = KnowledgeBase::FromYaml(no_zh, "t.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("zh"), std::string::npos);

  auto dup = KnowledgeBase::FromYaml(std::string(kEntry) + kEntry, "t.yaml");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("duplicate"), std::string::npos);

  std::string bad_re = kEntry;
  bad_re.replace(bad_re.find("boom"), 4, "bo(om");
  auto re = KnowledgeBase::FromYaml(bad_re, "t.yaml");
  ASSERT_FALSE(re.ok());
  EXPECT_NE(re.status().message().find("does not compile"), std::string::npos);

  std::string no_verify = kEntry;
  no_verify.replace(no_verify.find("  verify: \"echo\"\n"), 17, "");
  auto v = KnowledgeBase::FromYaml(no_verify, "t.yaml");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("verify"), std::string::npos);

  std::string no_sig = kEntry;
  no_sig.replace(no_sig.find("  signatures: ['boom \\d+']\n"), 27, "");
  EXPECT_FALSE(KnowledgeBase::FromYaml(no_sig, "t.yaml").ok());
}

TEST(KnowledgeBase, LinksToTermsAndChecksExist) {
  const KnowledgeBase& kb = KnowledgeBase::Default();
  std::set<std::string_view> checks;
  for (const auto& c : AllChecks()) checks.insert(c.id);
  for (const auto& e : kb.entries()) {
    for (const auto& t : e.terms)
      EXPECT_NE(Glossary::Default().Find(t), nullptr) << e.id << " → " << t;
    for (const auto& c : e.checks) EXPECT_TRUE(checks.count(c)) << e.id << " → " << c;
  }
  for (const auto& g : Glossary::Default().entries()) {
    for (const auto& k : g.kb) EXPECT_NE(kb.Find(k), nullptr) << g.id << " → " << k;
  }
}

// ---- the cross-match ------------------------------------------------------------------

TEST(Explain, EveryExcerptRanksItsOwnEntryFirst) {
  const KnowledgeBase& kb = KnowledgeBase::Default();
  std::set<std::string> covered;
  int excerpts = 0;
  for (const auto& dir : fs::directory_iterator(kExcerpts)) {
    std::string id = dir.path().filename().string();
    if (id == "clean") continue;
    ASSERT_NE(kb.Find(id), nullptr) << "excerpt directory for unknown entry " << id;
    for (const auto& f : fs::directory_iterator(dir.path())) {
      auto m = Explainer::Default().Explain(Slurp(f.path()), 3);
      ASSERT_FALSE(m.empty()) << f.path() << " matched nothing";
      EXPECT_EQ(m[0].entry->id, id) << f.path() << " ranked " << m[0].entry->id << " first";
      ++excerpts;
      covered.insert(id);
    }
  }
  for (const auto& e : kb.entries()) EXPECT_TRUE(covered.count(e.id)) << "no excerpt for " << e.id;
  EXPECT_GE(excerpts, static_cast<int>(kb.entries().size()));
}

TEST(Explain, CleanLogsMatchNothing) {
  int logs = 0;
  for (const auto& f : fs::directory_iterator(kExcerpts / "clean")) {
    auto m = Explainer::Default().Explain(Slurp(f.path()));
    EXPECT_TRUE(m.empty()) << f.path() << " matched " << (m.empty() ? "" : m[0].entry->id) << ": "
                           << (m.empty() ? "" : m[0].line);
    ++logs;
  }
  EXPECT_GE(logs, 5);
}

// ---- matching details ---------------------------------------------------------------------

TEST(Explain, ReportsTheMatchedLine) {
  std::string log = "step 1 ok\nstep 2 ok\r\nRuntimeError: Torch not compiled with CUDA enabled\n";
  auto m = Explainer::Default().Explain(log);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].entry->id, "torch.cpu_build");
  EXPECT_EQ(m[0].line_no, 3u);
  EXPECT_EQ(m[0].line, "RuntimeError: Torch not compiled with CUDA enabled");
  EXPECT_EQ(m[0].score, 10);
}

TEST(Explain, HugeLinesDoNotCrashAndAreCutAroundTheMatch) {
  std::string line(1 << 20, 'x');  // 1 MiB without a newline, like a runaway tqdm bar
  for (size_t i = 0; i < line.size(); i += 97) line[i] = '|';
  line += " CUDA error: an illegal memory access was encountered ";
  line += std::string(200'000, 'z');
  auto m = Explainer::Default().Explain(line);
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(m[0].entry->id, "cuda.illegal_memory_access");
  EXPECT_LE(m[0].line.size(), kMaxShownLineBytes + 2 * std::string("…").size());
  EXPECT_NE(m[0].line.find("illegal memory access"), std::string::npos);
  // Adversarial input for backtracking engines: RE2 stays linear.
  std::string evil(100'000, 'a');
  EXPECT_TRUE(Explainer::Default().Explain(evil + "!").empty());
}

TEST(Explain, InvalidUtf8IsReplacedInTheShownLine) {
  std::string log = "\xff\xfe Too many open files \xc3\n";
  auto m = Explainer::Default().Explain(log);
  ASSERT_FALSE(m.empty());
  EXPECT_NE(m[0].line.find("\xEF\xBF\xBD"), std::string::npos);  // U+FFFD
  EXPECT_NO_THROW(MatchesToJson(m, Lang::kEn).dump());
}

TEST(Explain, ChineseOutput) {
  auto m = Explainer::Default().Explain("RuntimeError: No CUDA GPUs are available\n");
  ASSERT_FALSE(m.empty());
  std::string zh = FormatMatches(m, Lang::kZh, false);
  EXPECT_NE(zh.find("[cuda.no_device] CUDA 看不到任何 GPU"), std::string::npos) << zh;
  EXPECT_NE(zh.find("匹配的第 1 行："), std::string::npos);
  EXPECT_NE(zh.find("场景："), std::string::npos);
  EXPECT_NE(zh.find("CUDA_VISIBLE_DEVICES"), std::string::npos);  // parameter names stay English
  std::string en = FormatMatches(m, Lang::kEn, false);
  EXPECT_NE(en.find("scenario:"), std::string::npos);
  EXPECT_EQ(en.find("场景"), std::string::npos);
}

TEST(Explain, DaemonDiagnosisJsonHasBothLanguages) {
  Json j = DiagnoseLog("...\nnccl error\nWatchdog caught collective operation timeout: x\n");
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["id"], "nccl.watchdog_timeout");
  EXPECT_EQ(j[0]["line_no"], 3);
  EXPECT_FALSE(j[0]["title"]["zh"].get<std::string>().empty());
  EXPECT_FALSE(j[0]["fix"]["en"].get<std::string>().empty());
  EXPECT_TRUE(j[0]["verify"].is_string());
  EXPECT_TRUE(DiagnoseLog("all good\n").empty());
}

}  // namespace
}  // namespace lathe::doctor
