#include "lathe/doctor/explain_format.h"

#include <fmt/format.h>

#include "lathe/doctor/glossary.h"

namespace lathe::doctor {
namespace {

std::string TermNames(const KbEntry& e, Lang lang) {
  std::string out;
  for (const auto& id : e.terms) {
    const GlossaryEntry* g = Glossary::Default().Find(id);
    std::string name = g != nullptr ? g->Heading(lang) : id;
    out += (out.empty() ? "" : ", ") + name;
  }
  return out;
}

}  // namespace

std::string FormatMatches(const std::vector<KbMatch>& matches, Lang lang, bool color) {
  std::string out;
  for (size_t i = 0; i < matches.size(); ++i) {
    const KbMatch& m = matches[i];
    const KbEntry& e = *m.entry;
    std::string head = fmt::format("{}. [{}] {}", i + 1, e.id, e.title.Get(lang));
    out += (i ? "\n" : "") + (color ? "\033[1m" + head + "\033[0m" : head) + "\n";
    out += fmt::format("   {}\n      {}\n",
                       Tr("explain.matched_line", lang, {{"line", std::to_string(m.line_no)}}),
                       m.line);
    if (std::string d = MatchDetail(m, lang); !d.empty()) out += "   " + d + "\n";
    out += fmt::format("   {} {}\n", Tr("doctor.label.scenario", lang), e.scenario.Get(lang));
    out += fmt::format("   {} {}\n", Tr("doctor.label.cause", lang), e.cause.Get(lang));
    out += fmt::format("   {} {}\n", Tr("doctor.label.verify", lang), e.verify);
    out += fmt::format("   {} {}\n", Tr("doctor.label.fix", lang), e.fix.Get(lang));
    if (!e.terms.empty()) {
      out += fmt::format("   {} {}\n", Tr("explain.label.terms", lang), TermNames(e, lang));
    }
  }
  return out;
}

Json MatchesToJson(const std::vector<KbMatch>& matches, Lang lang) {
  Json out = Json::array();
  for (const auto& m : matches) {
    const KbEntry& e = *m.entry;
    out.push_back(
        {{"id", e.id},
         {"score", m.score},
         {"line_no", m.line_no},
         {"line", m.line},
         {"title", e.title.Get(lang)},
         {"scenario", e.scenario.Get(lang)},
         {"cause", e.cause.Get(lang)},
         {"verify", e.verify},
         {"fix", e.fix.Get(lang)},
         {"terms", e.terms},
         {"detail", MatchDetail(m, lang).empty() ? Json(nullptr) : Json(MatchDetail(m, lang))}});
  }
  return out;
}

}  // namespace lathe::doctor
