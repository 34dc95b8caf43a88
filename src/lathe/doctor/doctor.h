// `lathe doctor`: runs the checks and collects a Report. No daemon needed.
//
// Steps: (1) pick the checks of the selected group; (2) gather the Facts
// they need, slow probes in parallel under hard timeouts (probes.h);
// (3) run every check (fast, no I/O beyond the SystemView); (4) attach each
// finding's texts and severity from data/doctor_checks.yaml.
#pragma once

#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/doctor/check.h"
#include "lathe/doctor/check_texts.h"
#include "lathe/doctor/probes.h"
#include "lathe/doctor/system_view.h"

namespace lathe::doctor {

struct DoctorOptions {
  bool fast = false;    // skip the slow probes (torch import, DNS)
  std::string only;     // one group of CheckGroups(); empty = all
  ProbeOptions probes;  // timeouts and the DNS name; `fast` and the groups are set from above
};

struct CheckOutcome {
  const CheckDef* check = nullptr;  // points into AllChecks()
  Finding finding;
  const OutcomeText* text = nullptr;  // points into the CheckTexts used
  Severity severity = Severity::kOk;
};

struct Report {
  std::vector<CheckOutcome> checks;  // in AllChecks() order
  int ok = 0, warn = 0, fail = 0, skipped = 0;
};

// InvalidArgument (catalog id doctor.bad_group) when `only` names no group.
// A finding whose outcome has no text is a bug: it is reported as a failed
// check with outcome "doctor.missing_text" so it cannot hide. `texts` must
// outlive the report.
Result<Report> RunDoctor(const SystemView& view, const DoctorOptions& options,
                         const CheckTexts& texts = CheckTexts::Default());

// 0 when no check failed (and, with `strict`, none warned), else 1.
int DoctorExitCode(const Report& report, bool strict);

}  // namespace lathe::doctor
