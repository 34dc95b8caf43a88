// The texts of the doctor's checks: data/doctor_checks.yaml, embedded, in
// the shared bilingual format of common/i18n.h. Two kinds of entries:
//
//   - id: sys.shm                  # a check: its title
//     title: {en: "/dev/shm size", zh: "/dev/shm 容量"}
//
//   - id: sys.shm.too_small        # an outcome of a check
//     severity: fail               # ok | warn | fail | skipped
//     finding: {en: "/dev/shm is {size} …", zh: "…"}   # one line, {placeholders}
//     scenario: {en, zh}           # required for warn and fail
//     cause:    {en, zh}           #   "
//     verify: "df -h /dev/shm"     #   " (a shell command)
//     fix:      {en, zh}           #   "
//     fix_script: |                # optional shell lines for --fix-script
//       sudo mount -o remount,size=16G /dev/shm
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/i18n.h"
#include "lathe/common/status.h"
#include "lathe/doctor/check.h"

namespace lathe::doctor {

struct OutcomeText {
  std::string id;
  Severity severity = Severity::kOk;
  BiText finding;
  std::optional<BiText> scenario, cause, fix;  // set for every warn/fail outcome
  std::string verify;                          // non-empty for every warn/fail outcome
  std::string fix_script;                      // may be empty
};

class CheckTexts {
 public:
  // Parses and validates: a known severity, a finding in both languages,
  // and for warn/fail outcomes scenario, cause, fix (both languages) and a
  // verify command. InvalidArgument names the file, entry and field.
  static Result<CheckTexts> FromYaml(std::string_view yaml, std::string_view file_name);

  // The embedded data/doctor_checks.yaml; aborts if broken (doctor_test
  // catches it first).
  static const CheckTexts& Default();

  // nullptr when unknown.
  const OutcomeText* Outcome(std::string_view id) const;
  const BiText* Title(std::string_view check_id) const;
  const std::map<std::string, OutcomeText, std::less<>>& outcomes() const { return outcomes_; }

 private:
  std::map<std::string, OutcomeText, std::less<>> outcomes_;
  std::map<std::string, BiText, std::less<>> titles_;
};

}  // namespace lathe::doctor
