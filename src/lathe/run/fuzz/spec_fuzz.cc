// libFuzzer target for the run spec: YAML files (`lathe run -f`) and JSON
// bodies (POST /api/v1/runs) into a RunSpec.
//
// Input layout: byte 0 chooses the form (bit 0 set: YAML, else JSON), the rest
// is the document. Checked on every input: no crash, no sanitizer report, no
// runaway memory (the alias and size bounds); every error has a catalog id
// that localizes in both languages; a spec that parses has no NUL byte in its
// command or environment and comes back equal through SpecToJson. Build with
// -DLATHE_FUZZ=ON and clang; run e.g.
//   build-fuzz/src/lathe/run/run_fuzz_spec -max_total_time=60
//       -dict=src/lathe/run/fuzz/spec.dict src/lathe/run/fuzz/corpus
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lathe/common/i18n.h"
#include "lathe/run/spec.h"

namespace {

void CheckError(const lathe::Status& s) {
  if (s.ok()) return;
  if (s.msg_id().empty() || !lathe::Catalog::Default().Has(s.msg_id())) __builtin_trap();
  if (lathe::Localize(s, lathe::Lang::kEn).empty() ||
      lathe::Localize(s, lathe::Lang::kZh).empty()) {
    __builtin_trap();
  }
}

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

void CheckSpec(const lathe::run::RunSpec& s) {
  for (const auto& a : s.command) {
    if (HasNul(a)) __builtin_trap();
  }
  for (const auto& [k, v] : s.env) {
    if (HasNul(k) || HasNul(v)) __builtin_trap();
  }
  if (HasNul(s.workdir) || HasNul(s.checkpoint_dir) || HasNul(s.name)) __builtin_trap();
  auto back = lathe::run::SpecFromJson(lathe::run::SpecToJson(s));
  if (!back.ok() || !(*back == s)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lathe::run;
  if (size < 1) return 0;
  std::string_view doc(reinterpret_cast<const char*>(data + 1), size - 1);
  auto j = (data[0] & 1) ? YamlSpecToJson(doc, "job.yaml") : ParseSpecJson(doc);
  if (!j.ok()) {
    CheckError(j.status());
    return 0;
  }
  auto spec = SpecFromJson(*j);
  if (!spec.ok()) {
    CheckError(spec.status());
    return 0;
  }
  CheckSpec(*spec);
  return 0;
}
