#include "lathe/doctor/report_format.h"

#include <fmt/format.h>

#include <sstream>

#include "lathe/doctor/text_match.h"

namespace lathe::doctor {
namespace {

constexpr const char* kReset = "\033[0m";
constexpr const char* kBold = "\033[1m";

const char* Symbol(Severity s) {
  switch (s) {
    case Severity::kOk:
      return "✓";
    case Severity::kWarn:
      return "⚠";
    case Severity::kFail:
      return "✗";
    case Severity::kSkipped:
      return "–";
  }
  return "?";
}

const char* Color(Severity s) {
  switch (s) {
    case Severity::kOk:
      return "\033[32m";
    case Severity::kWarn:
      return "\033[33m";
    case Severity::kFail:
      return "\033[31m";
    case Severity::kSkipped:
      return "\033[2m";
  }
  return "";
}

bool IsProblem(Severity s) { return s == Severity::kWarn || s == Severity::kFail; }

std::string FindingText(const CheckOutcome& c, Lang lang) {
  if (c.text == nullptr) return Tr("doctor.missing_text", lang, c.finding.args);
  return FillPlaceholders(c.text->finding.Get(lang), c.finding.args);
}

std::string Filled(const std::optional<BiText>& t, const CheckOutcome& c, Lang lang) {
  return t ? FillPlaceholders(t->Get(lang), c.finding.args) : "";
}

std::string Title(const CheckOutcome& c, Lang lang) {
  const BiText* t = CheckTexts::Default().Title(c.check->id);
  return t != nullptr ? t->Get(lang) : std::string(c.check->id);
}

void AppendDetails(std::string& out, const CheckOutcome& c, Lang lang) {
  if (c.text == nullptr || !IsProblem(c.severity)) return;
  auto line = [&](const char* label_id, const std::string& text) {
    out += fmt::format("      {} {}\n", Tr(label_id, lang), text);
  };
  line("doctor.label.scenario", Filled(c.text->scenario, c, lang));
  line("doctor.label.cause", Filled(c.text->cause, c, lang));
  line("doctor.label.verify", FillPlaceholders(c.text->verify, c.finding.args));
  line("doctor.label.fix", Filled(c.text->fix, c, lang));
}

size_t IdWidth(const Report& r) {
  size_t w = 0;
  for (const auto& c : r.checks) w = std::max(w, c.check->id.size());
  return w;
}

MsgArgs SummaryArgs(const Report& r) {
  return {{"ok", std::to_string(r.ok)},
          {"warn", std::to_string(r.warn)},
          {"fail", std::to_string(r.fail)},
          {"skipped", std::to_string(r.skipped)}};
}

}  // namespace

std::string FormatReportTable(const Report& r, const TableOptions& o) {
  std::string out;
  std::string_view group;
  size_t w = IdWidth(r);
  for (const auto& c : r.checks) {
    if (c.check->group != group) {
      group = c.check->group;
      std::string head = Tr(fmt::format("doctor.group.{}", group), o.lang);
      out += (out.empty() ? "" : "\n") + (o.color ? kBold + head + kReset : head) + "\n";
    }
    std::string sym = Symbol(c.severity);
    if (o.color) sym = Color(c.severity) + sym + kReset;
    std::string id(c.check->id);
    id.resize(w, ' ');
    out += fmt::format("  {} {}  {}\n", sym, id, FindingText(c, o.lang));
    if (o.details) AppendDetails(out, c, o.lang);
  }
  out += "\n" + Tr("doctor.summary", o.lang, SummaryArgs(r)) + "\n";
  return out;
}

Json ReportToJson(const Report& r, Lang lang, bool strict) {
  Json checks = Json::array();
  for (const auto& c : r.checks) {
    Json values = Json::object();
    for (const auto& a : c.finding.args) values[a.key] = SanitizeUtf8(a.value);
    bool problem = c.text != nullptr && IsProblem(c.severity);
    auto opt = [&](const std::optional<BiText>& t) {
      return problem ? Json(Filled(t, c, lang)) : Json(nullptr);
    };
    checks.push_back({{"id", c.check->id},
                      {"group", c.check->group},
                      {"title", Title(c, lang)},
                      {"severity", SeverityName(c.severity)},
                      {"outcome", c.finding.outcome},
                      {"finding", SanitizeUtf8(FindingText(c, lang))},
                      {"values", values},
                      {"scenario", opt(c.text ? c.text->scenario : std::nullopt)},
                      {"cause", opt(c.text ? c.text->cause : std::nullopt)},
                      {"verify", problem ? Json(FillPlaceholders(c.text->verify, c.finding.args))
                                         : Json(nullptr)},
                      {"fix", opt(c.text ? c.text->fix : std::nullopt)}});
  }
  return {{"lang", LangName(lang)},
          {"summary", {{"ok", r.ok}, {"warn", r.warn}, {"fail", r.fail}, {"skipped", r.skipped}}},
          {"exit_code", DoctorExitCode(r, strict)},
          {"checks", checks}};
}

std::string ShellQuote(std::string_view value) {
  std::string out = "'";
  for (char ch : value) {
    if (ch == '\'') {
      out += "'\\''";
    } else {
      out += ch;
    }
  }
  return out + "'";
}

namespace {

// Every line of `text` as a shell comment.
std::string Commented(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out += "# " + line + "\n";
  return out;
}

}  // namespace

std::string FormatFixScript(const Report& r, Lang lang) {
  std::string out = "#!/bin/sh\n" + Commented(Tr("doctor.fix_script.header", lang));
  int fixes = 0;
  for (const auto& c : r.checks) {
    if (c.text == nullptr || !IsProblem(c.severity)) continue;
    ++fixes;
    out += fmt::format("\n# {} {}: {}\n", Symbol(c.severity), c.check->id, FindingText(c, lang));
    out += Commented(Filled(c.text->fix, c, lang));
    MsgArgs quoted;
    for (const auto& a : c.finding.args) quoted.push_back({a.key, ShellQuote(a.value)});
    out += c.text->fix_script.empty() ? Commented(Tr("doctor.fix_script.manual", lang))
                                      : FillPlaceholders(c.text->fix_script, quoted);
    if (!out.ends_with("\n")) out += "\n";
  }
  if (fixes == 0) out += "\n" + Commented(Tr("doctor.fix_script.nothing", lang));
  return out;
}

}  // namespace lathe::doctor
