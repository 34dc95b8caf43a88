// One doctor check: an id, a group, and a function that looks at the system
// (through a SystemView and the probes' Facts, never directly) and says what
// it found as a Finding.
//
// A Finding names an *outcome*, an entry of data/doctor_checks.yaml such as
// "sys.shm.too_small", and carries the measured values that fill the
// placeholders of that entry's texts ({size}, {free}, …). The outcome entry,
// not the code, holds the severity and the bilingual finding, scenario,
// cause, verify command, fix and fix-script lines (check_texts.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"

namespace lathe::doctor {

enum class Severity { kOk, kWarn, kFail, kSkipped };

std::string_view SeverityName(Severity s);  // "ok" | "warn" | "fail" | "skipped"
std::optional<Severity> ParseSeverity(std::string_view name);

struct Finding {
  std::string outcome;  // an outcome id in data/doctor_checks.yaml
  MsgArgs args;         // measured values, already formatted ("64MiB", "12.1")
};

class SystemView;
struct Facts;

// A check never fails: what it cannot measure is an outcome too (usually a
// skipped one that says why).
using CheckFn = Finding (*)(const SystemView& view, const Facts& facts);
// A check that reports one finding per thing it looks at (per Slurm pool);
// never an empty list.
using MultiCheckFn = std::vector<Finding> (*)(const SystemView& view, const Facts& facts);

struct CheckDef {
  std::string_view id;     // "sys.shm"; also the id of its title in doctor_checks.yaml
  std::string_view group;  // "gpu" | "system" | "network" | "lathe" | "cluster"
  CheckFn fn;              // null for a multi check
  MultiCheckFn multi = nullptr;
};

// The check groups in display order.
const std::vector<std::string_view>& CheckGroups();

// Every check, in display order (grouped).
const std::vector<CheckDef>& AllChecks();

}  // namespace lathe::doctor
