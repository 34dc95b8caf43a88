#include "lathe/doctor/kb.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "lathe/common/embedded.h"
#include "lathe/doctor/regex_options.h"

namespace lathe::doctor {
namespace {

Status Missing(std::string_view file, std::string_view id, std::string_view field) {
  return Status::InvalidArgument(fmt::format(
      "{}: entry '{}' has no '{}' (required, with en and zh where bilingual)", file, id, field));
}

Result<BiText> NeedText(const DataEntry& e, std::string_view file, const std::string& field) {
  auto it = e.text.find(field);
  if (it == e.text.end()) return Missing(file, e.id, field);
  return it->second;
}

std::vector<std::string> ListOf(const DataEntry& e, const std::string& field) {
  auto it = e.lists.find(field);
  return it == e.lists.end() ? std::vector<std::string>{} : it->second;
}

Status CheckPatterns(const KbEntry& k, std::string_view file) {
  for (const auto* list : {&k.signatures, &k.hints}) {
    for (const auto& p : *list) {
      Status s = CheckPattern(p);
      if (!s.ok()) {
        return Status::InvalidArgument(fmt::format(
            "{}: entry '{}': pattern '{}' does not compile: {}", file, k.id, p, s.message()));
      }
    }
  }
  return Status::OK();
}

Result<int> ParsePriority(const DataEntry& e, std::string_view file) {
  auto it = e.plain.find("priority");
  if (it == e.plain.end()) return 0;
  char* end = nullptr;
  long v = std::strtol(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || v < -100 || v > 100) {
    return Status::InvalidArgument(
        fmt::format("{}: entry '{}' field 'priority': '{}' is not an integer in -100..100", file,
                    e.id, it->second));
  }
  return static_cast<int>(v);
}

Result<KbEntry> EntryFrom(const DataEntry& e, std::string_view file) {
  KbEntry k;
  k.id = e.id;
  ASSIGN_OR_RETURN(k.title, NeedText(e, file, "title"));
  ASSIGN_OR_RETURN(k.scenario, NeedText(e, file, "scenario"));
  ASSIGN_OR_RETURN(k.cause, NeedText(e, file, "cause"));
  ASSIGN_OR_RETURN(k.fix, NeedText(e, file, "fix"));
  auto verify = e.plain.find("verify");
  if (verify == e.plain.end() || verify->second.empty()) return Missing(file, e.id, "verify");
  k.verify = verify->second;
  k.signatures = ListOf(e, "signatures");
  if (k.signatures.empty()) return Missing(file, e.id, "signatures");
  k.hints = ListOf(e, "hints");
  k.terms = ListOf(e, "terms");
  k.checks = ListOf(e, "checks");
  ASSIGN_OR_RETURN(k.priority, ParsePriority(e, file));
  RETURN_IF_ERROR(CheckPatterns(k, file));
  if (auto x = e.plain.find("extract"); x != e.plain.end()) k.extract = x->second;
  if (auto d = e.text.find("detail"); d != e.text.end()) k.detail = d->second;
  const auto& known = KnownExtractors();
  if (!k.extract.empty() && std::find(known.begin(), known.end(), k.extract) == known.end()) {
    return Status::InvalidArgument(
        fmt::format("{}: entry '{}': unknown extract '{}'", file, k.id, k.extract));
  }
  if (k.extract.empty() != !k.detail.has_value()) {
    return Status::InvalidArgument(
        fmt::format("{}: entry '{}': 'extract' and 'detail' go together (en and zh)", file, k.id));
  }
  return k;
}

}  // namespace

const std::vector<std::string_view>& KnownExtractors() {
  static const std::vector<std::string_view> known = {"torchelastic_root_cause"};
  return known;
}

Status CheckPattern(std::string_view pattern) {
  RE2 re(re2::StringPiece(pattern.data(), pattern.size()), ExplainRegexOptions());
  if (!re.ok()) return Status::InvalidArgument(re.error());
  return Status::OK();
}

Result<KnowledgeBase> KnowledgeBase::FromYaml(std::string_view yaml, std::string_view file_name) {
  ASSIGN_OR_RETURN(std::vector<DataEntry> data, ParseDataFile(yaml, file_name));
  KnowledgeBase kb;
  for (const auto& e : data) {
    ASSIGN_OR_RETURN(KbEntry k, EntryFrom(e, file_name));
    kb.entries_.push_back(std::move(k));
  }
  return kb;
}

const KnowledgeBase& KnowledgeBase::Default() {
  static const KnowledgeBase* kb = [] {
    auto r = FromYaml(FindEmbedded("kb.yaml"), "data/kb.yaml");
    if (!r.ok()) {
      std::fprintf(stderr, "lathe: broken knowledge base: %s\n", r.status().message().c_str());
      std::abort();
    }
    return new KnowledgeBase(std::move(r).value());
  }();
  return *kb;
}

const KbEntry* KnowledgeBase::Find(std::string_view id) const {
  for (const auto& e : entries_) {
    if (e.id == id) return &e;
  }
  return nullptr;
}

}  // namespace lathe::doctor
