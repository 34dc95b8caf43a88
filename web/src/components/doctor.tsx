// The doctor's latest findings (GET /api/v1/doctor: {at_ms, en, zh}, each the
// report `lathe doctor --json` prints) in the UI's language: the problems
// first, each with its finding, cause and fix; a summary line; the checks
// that passed folded away.
import { useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { useApi } from "../hooks";
import { time } from "../format";
import { has, t, useLang } from "../i18n";
import { ErrorBox, Loading } from "./status";

interface Check {
  id: string;
  group: string;
  title: string;
  severity: string;         // ok | warn | fail | skipped
  finding: string;
  cause?: string | null;
  fix?: string | null;
  verify?: string | null;
}

interface Report {
  summary: { ok: number; warn: number; fail: number; skipped: number };
  checks: Check[];
}

interface Doctor {
  at_ms: number;
  en: Report;
  zh: Report;
}

const ORDER: Record<string, number> = { fail: 0, warn: 1, skipped: 2, ok: 3 };

function severity(s: string) {
  return has(`web.doctor.${s}`) ? t(`web.doctor.${s}`) : s;
}

export function DoctorFindings() {
  const lang = useLang();
  const d = useApi<Doctor>("/doctor", 60_000);
  const [refreshing, setRefreshing] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const refresh = async () => {
    setRefreshing(true);
    try {
      await api<Doctor>("/doctor?refresh=1");
      setError(null);
      d.reload();
    } catch (e) {
      setError(e instanceof ApiError ? e : null);
    } finally {
      setRefreshing(false);
    }
  };
  const report = d.data ? (lang === "zh" ? d.data.zh : d.data.en) : null;
  const checks = [...(report?.checks ?? [])].sort((a, b) => (ORDER[a.severity] ?? 9) - (ORDER[b.severity] ?? 9));
  const problems = checks.filter((c) => c.severity === "fail" || c.severity === "warn");
  const rest = checks.filter((c) => c.severity !== "fail" && c.severity !== "warn");
  return (
    <>
      <ErrorBox error={d.error ?? error} />
      <Loading when={d.loading && !d.data}>
        {report ? (
          <>
            <p class="doctor-summary" data-summary={JSON.stringify(report.summary)}>
              {t("web.doctor.summary", {
                ok: report.summary.ok, warn: report.summary.warn,
                fail: report.summary.fail, skipped: report.summary.skipped,
              })}{" "}
              <span class="muted">{t("web.doctor.at", { at: time(d.data!.at_ms) })}</span>{" "}
              <button type="button" class="small" onClick={refresh} disabled={refreshing}>
                {t("web.doctor.refresh")}
              </button>
            </p>
            {problems.length ? (
              <ul class="findings">
                {problems.map((c) => (
                  <li key={c.id} class={`finding sev-${c.severity}`} data-check={c.id} data-severity={c.severity}>
                    <p>
                      <span class={`badge sev-${c.severity}`}>{severity(c.severity)}</span>{" "}
                      <strong>{c.title}</strong> <code class="muted">{c.id}</code>
                    </p>
                    <p class="finding-text">{c.finding}</p>
                    <dl class="facts">
                      {c.cause ? (<><dt>{t("web.run.diag_cause")}</dt><dd>{c.cause}</dd></>) : null}
                      {c.fix ? (<><dt>{t("web.run.diag_fix")}</dt><dd>{c.fix}</dd></>) : null}
                      {c.verify ? (<><dt>{t("web.run.diag_verify")}</dt><dd><code>{c.verify}</code></dd></>) : null}
                    </dl>
                  </li>
                ))}
              </ul>
            ) : (
              <p class="notice">{t("web.doctor.no_problems")}</p>
            )}
            {rest.length ? (
              <details class="doctor-rest">
                <summary>{t("web.doctor.other_checks", { count: rest.length })}</summary>
                <ul>
                  {rest.map((c) => (
                    <li key={c.id} data-check={c.id} data-severity={c.severity}>
                      <span class={`badge sev-${c.severity}`}>{severity(c.severity)}</span> {c.title}: {c.finding}
                    </li>
                  ))}
                </ul>
              </details>
            ) : null}
          </>
        ) : null}
      </Loading>
    </>
  );
}
