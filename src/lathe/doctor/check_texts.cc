#include "lathe/doctor/check_texts.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "lathe/common/embedded.h"

namespace lathe::doctor {
namespace {

Status Bad(std::string_view file, std::string_view id, std::string_view field,
           std::string_view what) {
  return Status::InvalidArgument(
      fmt::format("{}: entry '{}' field '{}': {}", file, id, field, what));
}

std::optional<BiText> TextOf(const DataEntry& e, const std::string& field) {
  auto it = e.text.find(field);
  if (it == e.text.end()) return std::nullopt;
  return it->second;
}

std::string PlainOf(const DataEntry& e, const std::string& field) {
  auto it = e.plain.find(field);
  return it == e.plain.end() ? "" : it->second;
}

Result<OutcomeText> OutcomeFrom(const DataEntry& e, std::string_view file) {
  OutcomeText o;
  o.id = e.id;
  auto sev = ParseSeverity(PlainOf(e, "severity"));
  if (!sev) return Bad(file, e.id, "severity", "must be one of ok, warn, fail, skipped");
  o.severity = *sev;
  auto finding = TextOf(e, "finding");
  if (!finding) return Bad(file, e.id, "finding", "missing (en and zh are required)");
  o.finding = *finding;
  o.scenario = TextOf(e, "scenario");
  o.cause = TextOf(e, "cause");
  o.fix = TextOf(e, "fix");
  o.verify = PlainOf(e, "verify");
  o.fix_script = PlainOf(e, "fix_script");
  if (o.severity == Severity::kWarn || o.severity == Severity::kFail) {
    if (!o.scenario) return Bad(file, e.id, "scenario", "required for warn/fail outcomes");
    if (!o.cause) return Bad(file, e.id, "cause", "required for warn/fail outcomes");
    if (!o.fix) return Bad(file, e.id, "fix", "required for warn/fail outcomes");
    if (o.verify.empty()) return Bad(file, e.id, "verify", "required for warn/fail outcomes");
  }
  return o;
}

}  // namespace

Result<CheckTexts> CheckTexts::FromYaml(std::string_view yaml, std::string_view file_name) {
  ASSIGN_OR_RETURN(std::vector<DataEntry> data, ParseDataFile(yaml, file_name));
  CheckTexts t;
  for (const auto& e : data) {
    if (auto title = TextOf(e, "title")) {
      t.titles_.emplace(e.id, *title);
      continue;
    }
    ASSIGN_OR_RETURN(OutcomeText o, OutcomeFrom(e, file_name));
    t.outcomes_.emplace(e.id, std::move(o));
  }
  return t;
}

const CheckTexts& CheckTexts::Default() {
  static const CheckTexts* t = [] {
    auto r = FromYaml(FindEmbedded("doctor_checks.yaml"), "data/doctor_checks.yaml");
    if (!r.ok()) {
      std::fprintf(stderr, "lathe: broken doctor texts: %s\n", r.status().message().c_str());
      std::abort();
    }
    return new CheckTexts(std::move(r).value());
  }();
  return *t;
}

const OutcomeText* CheckTexts::Outcome(std::string_view id) const {
  auto it = outcomes_.find(id);
  return it == outcomes_.end() ? nullptr : &it->second;
}

const BiText* CheckTexts::Title(std::string_view check_id) const {
  auto it = titles_.find(check_id);
  return it == titles_.end() ? nullptr : &it->second;
}

}  // namespace lathe::doctor
