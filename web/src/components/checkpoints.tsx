// A run's checkpoints (GET /api/v1/snapshots?run=RUN) with a form that
// restores one into a directory (POST /api/v1/snapshots/{snap}/restore, body
// {to, force}); the daemon's error is shown at the directory's field.
import { useEffect, useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { useApi } from "../hooks";
import { bytes, time } from "../format";
import { has, t } from "../i18n";
import { ErrorBox } from "./status";
import { Table, type Column } from "./table";
import type { RunEvent } from "./run_events";

export interface Snapshot {
  id: string;
  time_ms: number;
  source: string;
  tags?: Record<string, string>;
  files: number;
  bytes: number;
  new_bytes: number;
  status: string;
  reason?: string;
}

// GET /snapshots answers an array; an object with `snapshots` is taken too.
export function snapshotList(data: unknown): Snapshot[] {
  if (Array.isArray(data)) return data as Snapshot[];
  const o = data as { snapshots?: Snapshot[] } | null;
  return o?.snapshots ?? [];
}

interface Restored {
  id: string;
  path: string;
  files: number;
  bytes: number;
}

// reload: a number that changes when a checkpoint event arrived.
export function Checkpoints({ run, events, reload }: { run: string; events: RunEvent[]; reload: number }) {
  // The API answers a JSON array of snapshots, newest first.
  const s = useApi<Snapshot[]>(`/snapshots?run=${encodeURIComponent(run)}`, 15_000);
  useEffect(() => {
    if (reload) s.reload();
  }, [reload]);
  const rows = snapshotList(s.data);
  const steps = new Map<string, number>();
  for (const e of events) {
    if (e.type === "checkpoint" && typeof e.data?.snapshot === "string" && typeof e.data?.step === "number") {
      steps.set(e.data.snapshot as string, e.data.step as number);
    }
  }
  const complete = rows.filter((x) => x.status === "complete");
  const [chosen, setChosen] = useState("");
  const snap = chosen || complete[0]?.id || "";
  const columns: Column<Snapshot>[] = [
    { id: "id", label: "web.col.id", cell: (x) => <code title={x.id}>{x.id.slice(0, 12)}</code> },
    { id: "time", label: "web.snap.time", cell: (x) => time(x.time_ms) },
    { id: "step", label: "web.snap.step", numeric: true, cell: (x) => steps.get(x.id) ?? "—" },
    { id: "files", label: "web.snap.files", numeric: true, cell: (x) => x.files },
    { id: "bytes", label: "web.snap.bytes", numeric: true, cell: (x) => bytes(x.bytes) },
    { id: "new", label: "web.snap.new_bytes", numeric: true, cell: (x) => bytes(x.new_bytes) },
    { id: "status", label: "web.snap.status",
      cell: (x) => (has(`web.snap.status.${x.status}`) ? t(`web.snap.status.${x.status}`) : x.status) },
    { id: "pick", label: "web.snap.restore",
      cell: (x) => x.status === "complete" ? (
        <button type="button" class="small" data-restore={x.id} aria-pressed={x.id === snap}
                aria-label={t("web.snap.choose_this", { id: x.id.slice(0, 12) })}
                onClick={() => {
                  setChosen(x.id);
                  document.getElementById("restore-to")?.focus();
                }}>
          {t("web.snap.choose")}
        </button>
      ) : "—" },
  ];
  return (
    <>
      <ErrorBox error={s.error} />
      <Table caption="web.run.checkpoints" columns={columns} rows={rows} rowKey={(x) => x.id + x.time_ms}
             empty={s.loading ? "web.loading" : "web.run.no_checkpoints"} />
      {complete.length ? <RestoreForm snaps={complete} snap={snap} onPick={setChosen} /> : null}
    </>
  );
}

function RestoreForm({ snaps, snap, onPick }: { snaps: Snapshot[]; snap: string; onPick: (id: string) => void }) {
  const [to, setTo] = useState("");
  const [force, setForce] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const [done, setDone] = useState<Restored | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setDone(null);
    try {
      const r = await api<Restored>(`/snapshots/${encodeURIComponent(snap)}/restore`, {
        method: "POST", body: { to, force },
      });
      setError(null);
      setDone(r);
    } catch (err) {
      setError(err instanceof ApiError ? err : null);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="restore-form run-form" onSubmit={submit} aria-labelledby="restore-h">
      <h3 id="restore-h">{t("web.snap.restore_title")}</h3>
      <div class="fields">
        <div class="field">
          <label for="restore-snap">{t("web.snap.snapshot")}</label>
          <select id="restore-snap" value={snap} onChange={(e) => onPick((e.target as HTMLSelectElement).value)}>
            {snaps.map((x) => (
              <option key={x.id} value={x.id}>{`${x.id.slice(0, 12)} · ${time(x.time_ms)}`}</option>
            ))}
          </select>
        </div>
        <div class={`field field-to${error ? " invalid" : ""}`}>
          <label for="restore-to">{t("web.snap.to")}</label>
          <input id="restore-to" value={to} required spellcheck={false} placeholder="/home/me/restored"
                 aria-invalid={error ? "true" : undefined}
                 aria-describedby={error ? "restore-to-error" : "restore-to-hint"}
                 onInput={(e) => setTo((e.target as HTMLInputElement).value)} />
          {error ? (
            <span id="restore-to-error" class="error" role="alert" data-error-id={error.id}>{error.text()}</span>
          ) : (
            <span id="restore-to-hint" class="muted">{t("web.snap.to_hint")}</span>
          )}
        </div>
        <div class="field field-force">
          <label>
            <input type="checkbox" id="restore-force" checked={force}
                   onChange={(e) => setForce((e.target as HTMLInputElement).checked)} />{" "}
            {t("web.snap.force")}
          </label>
        </div>
      </div>
      <button type="submit" class="primary" disabled={busy || !snap}>{t("web.snap.restore")}</button>
      {done ? (
        <p class="notice" role="status" data-restored={done.path}>
          {t("web.snap.restored", { path: done.path, files: done.files, size: bytes(done.bytes) })}
        </p>
      ) : null}
    </form>
  );
}
