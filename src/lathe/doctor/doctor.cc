#include "lathe/doctor/doctor.h"

#include <algorithm>

#include "lathe/common/exit_code.h"

namespace lathe::doctor {
namespace {

bool Selected(const CheckDef& c, const std::string& only) {
  return only.empty() || c.group == only;
}

void Count(Report& r, Severity s) {
  switch (s) {
    case Severity::kOk:
      ++r.ok;
      break;
    case Severity::kWarn:
      ++r.warn;
      break;
    case Severity::kFail:
      ++r.fail;
      break;
    case Severity::kSkipped:
      ++r.skipped;
      break;
  }
}

}  // namespace

Result<Report> RunDoctor(const SystemView& view, const DoctorOptions& o, const CheckTexts& texts) {
  const auto& groups = CheckGroups();
  if (!o.only.empty() && std::find(groups.begin(), groups.end(), o.only) == groups.end()) {
    return Status::Msg(Code::kInvalidArgument, "doctor.bad_group",
                       {{"group", o.only}, {"groups", "gpu, system, network, lathe, cluster"}});
  }
  ProbeOptions p = o.probes;
  p.fast = o.fast;
  p.gpu = o.only.empty() || o.only == "gpu";
  p.network = o.only.empty() || o.only == "network";
  p.lathe = o.only.empty() || o.only == "lathe";
  p.cluster = o.only.empty() || o.only == "cluster";
  Facts facts = GatherFacts(view, p);
  Report r;
  for (const auto& c : AllChecks()) {
    if (!Selected(c, o.only)) continue;
    std::vector<Finding> findings;
    if (c.multi != nullptr) {
      findings = c.multi(view, facts);
    } else {
      findings.push_back(c.fn(view, facts));
    }
    for (auto& f : findings) {
      CheckOutcome out{&c, std::move(f), nullptr, Severity::kFail};
      out.text = texts.Outcome(out.finding.outcome);
      if (out.text != nullptr) {
        out.severity = out.text->severity;
      } else {
        out.finding.args.push_back({"outcome", out.finding.outcome});
        out.finding.outcome = "doctor.missing_text";
      }
      Count(r, out.severity);
      r.checks.push_back(std::move(out));
    }
  }
  return r;
}

int DoctorExitCode(const Report& report, bool strict) {
  if (report.fail > 0 || (strict && report.warn > 0)) return kExitFailed;
  return kExitOk;
}

}  // namespace lathe::doctor
