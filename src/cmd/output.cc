#include "cmd/output.h"

#include "lathe/api/browser_page.h"
#include "lathe/common/display_width.h"
#include "lathe/common/units.h"
#include "lathe/os/terminal.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <fmt/format.h>

namespace lathe::cmd {

size_t DisplayWidth(const std::string& s) { return lathe::DisplayWidth(s); }

std::string Label(const std::string& label, size_t width) {
  size_t w = DisplayWidth(label);
  return label + std::string(w < width ? width - w : 1, ' ');
}

void PrintTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& r : rows) {
    if (widths.size() < r.size()) widths.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) widths[i] = std::max(widths[i], DisplayWidth(r[i]));
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(widths[i] - DisplayWidth(r[i]) + 2, ' ');
    }
    std::printf("%s\n", line.c_str());
  }
}

namespace {
bool json_answered = false;
}  // namespace

void PrintJson(const Json& j) {
  std::printf("%s\n", j.dump(2).c_str());
  json_answered = true;
}

void PrintJsonError(const Status& s, const Json& extra) {
  Json j = StatusToJson(s);
  for (const auto& [k, v] : extra.items()) j[k] = v;
  std::printf("%s\n", j.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
  json_answered = true;
}

bool JsonAnswered() { return json_answered; }
void MarkJsonAnswered() { json_answered = true; }

bool JsonInArgs(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--") return false;
    if (a == "--json" || a.rfind("--json=", 0) == 0) return true;
  }
  return false;
}

void PrintJsonUsageError(const std::string& en, const std::string& zh) {
  // The first line alone (the second says where the help is).
  auto first = [](const std::string& s) { return s.substr(0, s.find('\n')); };
  PrintJsonError(Status::Msg(Code::kInvalidArgument, "cli.usage", {{"detail", first(en)}}),
                 Json{{"en", first(en)}, {"zh", first(zh)}});
}

bool JsonAsked(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) {
    const CLI::Option* json = sub->get_option_no_throw("--json");
    if ((json != nullptr && json->count() > 0) || JsonAsked(*sub)) return true;
  }
  return false;
}

std::string Age(int64_t ms, Lang lang) {
  if (ms <= 0) return "-";
  int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  int64_t s = std::max<int64_t>(0, (now - ms) / 1000);
  auto n = [&](int64_t v) { return MsgArgs{{"n", std::to_string(v)}}; };
  if (s < 60) return Tr("time.seconds", lang, n(s));
  if (s < 3600) return Tr("time.minutes", lang, n(s / 60));
  if (s < 86400) return Tr("time.hours", lang, n(s / 3600));
  return Tr("time.days", lang, n(s / 86400));
}

std::string AgeAgo(int64_t ms, Lang lang) {
  if (ms <= 0) return "-";
  return Tr("time.ago", lang, {{"age", Age(ms, lang)}});
}

bool IsTerminal() { return os::StdoutIsTerminal(); }

std::string OpenInBrowser(const std::string& url) {
  Status opened = api::OpenInBrowser(url);
  return opened.ok() ? "" : opened.message();
}

std::string QuotaUsageOf(const Json& used, const Json& limit, Lang lang) {
  std::string u = used.is_number_float() ? fmt::format("{:.1f}", used.get<double>()) : used.dump();
  if (limit.is_null()) return Tr("status.quota_unlimited", lang, {{"used", u}});
  return Tr("status.quota_of", lang,
            {{"used", u}, {"limit", fmt::format("{:g}", limit.get<double>())}});
}

std::string ProjectUsageLine(const std::string& msg_id, const Json& p, Lang lang) {
  const Json usage = p.value("usage", Json::object());
  return Tr(msg_id, lang,
            {{"project", p.value("name", "")},
             {"gpu_hours", fmt::format("{:.1f}", usage.value("gpu_hours", 0.0))},
             {"days", std::to_string(usage.value("window_days", 30))},
             {"runs", std::to_string(usage.value("runs_active", 0))},
             {"gpus", std::to_string(usage.value("gpus_held", 0))}});
}

std::string RoleText(const std::string& role, Lang lang) {
  return role == "owner" ? Tr("share.role_owner", lang) : role;
}

std::string SharedMark(const Json& obj, Lang lang) {
  const Json shared = obj.value("shared", Json());
  if (!shared.is_object()) return "";
  const std::string by = shared.value("by", "");
  const std::string role = RoleText(shared.value("role", ""), lang);
  constexpr std::string_view kProject = "project ";
  if (by.starts_with(kProject)) {
    return Tr("share.mark_project", lang,
              {{"project", by.substr(kProject.size())}, {"role", role}});
  }
  if (by == "public") return Tr("share.mark_public", lang, {{"role", role}});
  return Tr("share.mark_user", lang, {{"user", by}, {"role", role}});
}

void AddSharedColumn(std::vector<std::vector<std::string>>& rows, const Json& items, size_t at,
                     Lang lang) {
  if (!std::any_of(items.begin(), items.end(), [](const Json& o) { return o.contains("shared"); }))
    return;
  rows[0].insert(rows[0].begin() + static_cast<long>(at), Tr("share.col_shared", lang));
  for (size_t i = 0; i < items.size() && i + 1 < rows.size(); ++i) {
    const std::string mark = SharedMark(items[i], lang);
    auto& row = rows[i + 1];
    row.insert(row.begin() + static_cast<long>(at), mark.empty() ? "-" : mark);
  }
}

std::string ProjectLimitsLine(const Json& limits, const Json& usage, Lang lang) {
  if (!limits.is_object()) return "";
  bool any = false;
  for (const char* k : {"gpus", "runs", "notebooks", "gpu_hours"}) {
    any = any || (limits.contains(k) && !limits[k].is_null());
  }
  if (!any) return "";
  auto of = [&](const char* used, const char* limit) {
    return QuotaUsageOf(usage.value(used, Json(0)), limits.value(limit, Json(nullptr)), lang);
  };
  std::string hours = of("period_gpu_hours", "gpu_hours");
  if (!limits["gpu_hours"].is_null()) {
    hours =
        Tr("status.quota_hours_of", lang,
           {{"used", fmt::format("{:.1f}", usage.value("period_gpu_hours", 0.0))},
            {"limit", fmt::format("{:g}", limits["gpu_hours"].get<double>())},
            {"period",
             FormatDuration(std::chrono::milliseconds(limits.value("period_ms", int64_t{0})))}});
  }
  return Tr("status.project_limits", lang,
            {{"gpus", of("gpus_held", "gpus")},
             {"runs", of("runs_active", "runs")},
             {"notebooks", of("notebooks_active", "notebooks")},
             {"gpu_hours", hours}});
}

}  // namespace lathe::cmd
