// The form that starts a notebook (POST /api/v1/runs, type notebook) and,
// once Jupyter answers, opens it in a new tab through its one-time sign-in
// link (POST /api/v1/runs/{run}/open): no link to copy from a terminal.
// While the notebook waits (a quota, busy GPUs, an image being pulled) the
// scheduler's reason is shown, live. The tab is opened when the button is
// pressed (a browser lets a page open one only then) and sent to Jupyter
// when it is ready; it is closed again if the notebook cannot start.
import { useEffect, useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { langStore, t } from "../i18n";
import type { Run } from "../types";

type NotebookRun = Run & { notebook?: { ready?: boolean } };

const ENDED = new Set(["succeeded", "failed", "stopped", "lost", "preempted"]);

function sleep(ms: number) {
  return new Promise((done) => setTimeout(done, ms));
}

// The spec the values make: only what was given (the daemon checks it).
export function notebookSpec(v: Record<string, string>, r: boolean): Record<string, unknown> {
  const spec: Record<string, unknown> = { type: "notebook", kernels: r ? ["python", "r"] : ["python"] };
  for (const k of ["name", "idle", "workdir", "image"]) {
    if (v[k]?.trim()) spec[k] = v[k].trim();
  }
  const g = v.gpus?.trim();
  if (g) spec.gpus = /^\d+$/.test(g) ? Number(g) : g;
  return spec;
}

export function NotebookForm({ onStarted }: { onStarted: () => void }) {
  const [values, setValues] = useState<Record<string, string>>({});
  const [withR, setWithR] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const [ended, setEnded] = useState("");
  const [status, setStatus] = useState("");
  const [busy, setBusy] = useState(false);
  const [images, setImages] = useState<{ name: string; id: string }[]>([]);
  useEffect(() => {
    api<{ images: { name: string; id: string }[] }>("/images")
      .then((r) => setImages(r.images ?? []))
      .catch(() => setImages([]));
  }, []);
  const set = (k: string) => (ev: Event) =>
    setValues({ ...values, [k]: (ev.currentTarget as HTMLInputElement).value });

  const start = async (e: Event) => {
    e.preventDefault();
    const tab = window.open("about:blank", "_blank");
    setBusy(true);
    setError(null);
    setEnded("");
    try {
      const run = await api<Run>("/runs", { method: "POST", body: notebookSpec(values, withR) });
      onStarted();
      const path = `/runs/${encodeURIComponent(run.id)}`;
      for (;;) {
        const x = await api<NotebookRun>(path);
        if (ENDED.has(x.state)) {
          const why = x.reason_text?.[langStore.get()] || x.reason || "";
          setEnded(t("web.notebook.ended", { run: x.id, state: t(`web.state.${x.state}`), reason: why }));
          tab?.close();
          return;
        }
        if (x.state === "running" && x.notebook?.ready) break;
        const waiting = x.waiting_text?.[langStore.get()] || x.waiting || "";
        setStatus(waiting ? t("web.notebook.waiting", { why: waiting }) : t("web.notebook.starting"));
        await sleep(500);
      }
      const o = await api<{ login_url: string }>(`${path}/open`, { method: "POST", body: {} });
      setStatus(t("web.notebook.opened", { run: run.id }));
      if (tab) {
        tab.opener = null;
        tab.location.href = o.login_url;
      }
    } catch (err) {
      tab?.close();
      setStatus("");
      if (err instanceof ApiError) setError(err);
    } finally {
      setBusy(false);
    }
  };

  const field = (k: string, label: string, hint?: string, input?: preact.JSX.Element) => (
    <div class={`field field-${k}${error?.field === k ? " invalid" : ""}`} key={k}>
      <label for={`nb-${k}`}>{t(label)}</label>
      {input ?? <input type="text" id={`nb-${k}`} name={k} value={values[k] ?? ""} onInput={set(k)}
                       aria-describedby={hint ? `nb-${k}-hint` : undefined} />}
      {hint ? <small id={`nb-${k}-hint`} class="muted">{t(hint)}</small> : null}
    </div>
  );

  return (
    <form class="run-form notebook-form" onSubmit={start} noValidate aria-labelledby="nb-form-title">
      <h2 id="nb-form-title">{t("web.notebook.form_title")}</h2>
      {error ? <p class="error" role="alert" data-error-id={error.id}>{error.text()}</p> : null}
      {ended ? <p class="error" role="alert" data-notebook-ended="1">{ended}</p> : null}
      <div class="fields">
        {field("name", "web.form.name")}
        {field("gpus", "web.form.gpus")}
        {field("idle", "web.notebook.idle", "web.notebook.idle_hint")}
        {field("workdir", "web.form.workdir", "web.notebook.workdir_hint")}
        {field("image", "web.form.image", "web.notebook.image_hint",
          <select id="nb-image" name="image" value={values.image ?? ""} onInput={set("image")}
                  aria-describedby="nb-image-hint">
            <option value="">{t("web.form.image_none")}</option>
            {images.map((i) => <option value={i.name} key={i.name}>{`${i.name} (${i.id.slice(0, 12)})`}</option>)}
          </select>)}
        <div class="field field-kernels">
          <span>{t("web.notebook.kernel_choice")}</span>
          <label><input type="checkbox" checked disabled /> Python</label>
          <label><input type="checkbox" name="r" checked={withR}
                        onChange={(ev) => setWithR((ev.currentTarget as HTMLInputElement).checked)} /> R</label>
        </div>
      </div>
      <button type="submit" class="primary" disabled={busy} data-start-notebook="1">{t("web.notebook.start")}</button>
      {status ? <p class="muted" role="status" data-notebook-status="1">{status}</p> : null}
    </form>
  );
}
