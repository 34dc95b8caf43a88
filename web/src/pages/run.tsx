// One run: GET /api/v1/runs/{run} — its state, what it asked for and its
// events; another user's run is the API's 403, shown as it says. (The run
// detail page grows here: log viewer, checkpoints, charts.)
import { useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { ErrorBox, Loading, Section, StateBadge } from "../components/status";
import { useApi } from "../hooks";
import { t } from "../i18n";
import { bytes, time, word } from "../format";
import type { Page, PageProps } from "../page";
import { Link } from "../router";
import { currentUser } from "../session";
import { isStoppable, type Run } from "../types";

interface RunEvent {
  id: number;
  ts_ms: number;
  type: string;
  message: string;
}

type RunDetail = Run & { events?: RunEvent[]; spec?: Record<string, unknown> };

const POLL_MS = 3000;

function RunPage({ params }: PageProps) {
  const r = useApi<RunDetail>(`/runs/${encodeURIComponent(params.id)}`, POLL_MS);
  const [stopError, setStopError] = useState<ApiError | null>(null);
  const run = r.data;
  const stop = async () => {
    try {
      await api(`/runs/${encodeURIComponent(params.id)}/stop`, { method: "POST" });
      setStopError(null);
    } catch (e) {
      setStopError(e instanceof ApiError ? e : null);
    }
    r.reload();
  };
  const spec = (run?.spec ?? {}) as Record<string, unknown>;
  return (
    <>
      <p><Link href="/runs">{t("web.run.back")}</Link></p>
      <ErrorBox error={r.error} />
      <ErrorBox error={stopError} />
      <Loading when={r.loading && !run && !r.error}>
        {run ? (
          <>
            <dl class="facts">
              <dt>{t("web.col.id")}</dt><dd><code>{run.id}</code></dd>
              <dt>{t("web.col.name")}</dt><dd>{run.name || "—"}</dd>
              <dt>{t("web.col.user")}</dt><dd>{run.user}</dd>
              <dt>{t("web.col.kind")}</dt><dd>{word("kind", run.kind)}</dd>
              <dt>{t("web.col.state")}</dt><dd><StateBadge state={run.state} /></dd>
              <dt>{t("web.col.gpus")}</dt><dd>{run.gpus.length ? run.gpus.join(",") : String(spec.gpus ?? 0)}</dd>
              <dt>{t("web.form.memory")}</dt><dd>{typeof spec.memory === "number" ? bytes(spec.memory) : "—"}</dd>
              <dt>{t("web.col.created")}</dt><dd>{time(run.created_at_ms)}</dd>
              <dt>{t("web.col.ended")}</dt><dd>{time(run.finished_at_ms)}</dd>
              <dt>{t("web.form.command")}</dt>
              <dd><code>{Array.isArray(spec.command) ? (spec.command as string[]).join(" ") : "—"}</code></dd>
            </dl>
            {run.user === currentUser() && isStoppable(run.state) ? (
              <button type="button" onClick={stop}>{t("web.runs.stop")}</button>
            ) : null}
            <Section title="web.run.events">
              <ol class="events">
                {(run.events ?? []).map((e) => (
                  <li key={e.id}>
                    <time>{time(e.ts_ms)}</time> <span class="badge">{e.type}</span> {e.message}
                  </li>
                ))}
              </ol>
            </Section>
          </>
        ) : null}
      </Loading>
    </>
  );
}

const page: Page = { path: "/runs/:id", title: "web.run.title", component: RunPage };
export default page;
