#include "lathe/doctor/glossary.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <set>

#include "lathe/common/embedded.h"

namespace lathe::doctor {
namespace {

Result<BiText> NeedText(const DataEntry& e, std::string_view file, const std::string& field) {
  auto it = e.text.find(field);
  if (it == e.text.end()) {
    return Status::InvalidArgument(
        fmt::format("{}: term '{}' has no '{}' (en and zh are required)", file, e.id, field));
  }
  return it->second;
}

std::vector<std::string> ListOf(const DataEntry& e, const std::string& field) {
  auto it = e.lists.find(field);
  return it == e.lists.end() ? std::vector<std::string>{} : it->second;
}

std::string PlainOf(const DataEntry& e, const std::string& field) {
  auto it = e.plain.find(field);
  return it == e.plain.end() ? "" : it->second;
}

Result<GlossaryEntry> EntryFrom(const DataEntry& e, std::string_view file) {
  GlossaryEntry g;
  g.id = e.id;
  ASSIGN_OR_RETURN(g.term, NeedText(e, file, "term"));
  ASSIGN_OR_RETURN(g.context, NeedText(e, file, "context"));
  ASSIGN_OR_RETURN(g.usage, NeedText(e, file, "usage"));
  std::string kind = PlainOf(e, "kind");
  if (kind != "concept" && kind != "param") {
    return Status::InvalidArgument(fmt::format(
        "{}: term '{}' field 'kind': '{}' is not one of concept, param", file, e.id, kind));
  }
  g.param = kind == "param";
  g.category = PlainOf(e, "category");
  g.aliases = ListOf(e, "aliases");
  g.related = ListOf(e, "related");
  g.kb = ListOf(e, "kb");
  return g;
}

Status CheckRelated(const std::vector<GlossaryEntry>& entries, std::string_view file) {
  std::set<std::string> ids;
  for (const auto& e : entries) ids.insert(e.id);
  for (const auto& e : entries) {
    for (const auto& r : e.related) {
      if (!ids.count(r)) {
        return Status::InvalidArgument(fmt::format(
            "{}: term '{}' lists related term '{}', which does not exist", file, e.id, r));
      }
    }
  }
  return Status::OK();
}

}  // namespace

std::string GlossaryEntry::Heading(Lang lang) const {
  if (!param) return term.Get(lang);
  // A parameter's name is what people type: it stays English, glossed in Chinese.
  return lang == Lang::kZh ? fmt::format("{}（{}）", term.en, term.zh) : term.Get(lang);
}

Result<Glossary> Glossary::FromYaml(std::string_view yaml, std::string_view file_name) {
  ASSIGN_OR_RETURN(std::vector<DataEntry> data, ParseDataFile(yaml, file_name));
  Glossary g;
  for (const auto& e : data) {
    ASSIGN_OR_RETURN(GlossaryEntry entry, EntryFrom(e, file_name));
    g.entries_.push_back(std::move(entry));
  }
  RETURN_IF_ERROR(CheckRelated(g.entries_, file_name));
  return g;
}

const Glossary& Glossary::Default() {
  static const Glossary* g = [] {
    auto r = FromYaml(FindEmbedded("glossary.yaml"), "data/glossary.yaml");
    if (!r.ok()) {
      std::fprintf(stderr, "lathe: broken glossary: %s\n", r.status().message().c_str());
      std::abort();
    }
    return new Glossary(std::move(r).value());
  }();
  return *g;
}

const GlossaryEntry* Glossary::Find(std::string_view id) const {
  for (const auto& e : entries_) {
    if (e.id == id) return &e;
  }
  return nullptr;
}

}  // namespace lathe::doctor
