#include "lathe/doctor/term_format.h"

#include <fmt/format.h>

namespace lathe::doctor {
namespace {

std::string RelatedNames(const GlossaryEntry& e, const Glossary& g) {
  std::string out;
  for (const auto& id : e.related) {
    const GlossaryEntry* r = g.Find(id);
    out += (out.empty() ? "" : ", ") + (r != nullptr ? r->term.en : id);
  }
  return out;
}

std::string MatchNote(const TermHit& h, Lang lang) {
  std::string kind = Tr(fmt::format("term.match.{}", TermMatchKindName(h.kind)), lang);
  return h.entry->category.empty() ? kind : kind + " · " + h.entry->category;
}

}  // namespace

std::string FormatTermResults(const TermResults& r, const Glossary& g, Lang lang, bool color) {
  std::string out;
  for (const auto& h : r.terms) {
    const GlossaryEntry& e = *h.entry;
    std::string head = fmt::format("{} ↔ {}", e.term.en, e.term.zh);
    out += (out.empty() ? "" : "\n") + (color ? "\033[1m" + head + "\033[0m" : head) + "  [" +
           MatchNote(h, lang) + "]\n";
    if (e.param) out += "  " + Tr("term.param_note", lang) + "\n";
    out += "  " + e.context.Get(lang) + "\n";
    out += "  " + Tr("term.label.usage", lang) + " " + e.usage.Get(lang) + "\n";
    if (!e.aliases.empty()) {
      std::string a;
      for (const auto& x : e.aliases) a += (a.empty() ? "" : ", ") + x;
      out += "  " + Tr("term.label.aliases", lang) + " " + a + "\n";
    }
    if (!e.related.empty()) {
      out += "  " + Tr("term.label.related", lang) + " " + RelatedNames(e, g) + "\n";
    }
  }
  if (!r.kb.empty()) {
    out += (out.empty() ? "" : "\n") + Tr("term.label.kb", lang) + "\n";
    for (const auto* k : r.kb) out += fmt::format("  {}  {}\n", k->id, k->title.Get(lang));
  }
  return out;
}

Json TermResultsToJson(const TermResults& r, std::string_view query, Lang lang) {
  Json terms = Json::array();
  for (const auto& h : r.terms) {
    const GlossaryEntry& e = *h.entry;
    terms.push_back({{"id", e.id},
                     {"en", e.term.en},
                     {"zh", e.term.zh},
                     {"heading", e.Heading(lang)},
                     {"kind", e.param ? "param" : "concept"},
                     {"category", e.category},
                     {"match", TermMatchKindName(h.kind)},
                     {"distance", h.distance},
                     {"context", e.context.Get(lang)},
                     {"usage", e.usage.Get(lang)},
                     {"aliases", e.aliases},
                     {"related", e.related},
                     {"kb", e.kb}});
  }
  Json kb = Json::array();
  for (const auto* k : r.kb) kb.push_back({{"id", k->id}, {"title", k->title.Get(lang)}});
  return {{"query", std::string(query)}, {"terms", terms}, {"kb", kb}};
}

}  // namespace lathe::doctor
