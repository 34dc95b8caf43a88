// A run's ports and its notebook (the run JSON's `ports`, `url`, `notebook`):
// each port's address and state, and an Open button that asks the daemon for a
// one-time sign-in link to the run's origin (POST /api/v1/runs/{run}/open) and
// opens it in a new tab.
import { useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { has, t, useLang } from "../i18n";
import { ErrorBox } from "./status";

export interface Port {
  name: string;
  kind: string;
  address: string;
  env?: string;
  url?: string;
  declared_port?: number;
  state: string;
  listening?: string[];
  error?: { msg_id: string; en: string; zh: string };  // the one error body (types.ts ErrorBody)
}

export interface NotebookInfo {
  kernels?: number;
  ready?: boolean;
  open_kernels?: number;
  busy_kernels?: number;
  idle_for_ms?: number;
  idle_limit_ms?: number;
}

interface Opened {
  url: string;
  login_url: string;
}

function portState(s: string) {
  return has(`web.port.${s}`) ? t(`web.port.${s}`) : s;
}

export function Ports(p: { run: string; ports: Port[]; notebook?: NotebookInfo; active: boolean }) {
  const [error, setError] = useState<ApiError | null>(null);
  const [opened, setOpened] = useState<Opened | null>(null);
  const open = async (port?: string) => {
    // The tab is opened now, in the click, so that no pop-up blocker stops it.
    const tab = window.open("about:blank", "_blank");
    try {
      const r = await api<Opened>(`/runs/${encodeURIComponent(p.run)}/open`, {
        method: "POST", body: port ? { port } : {},
      });
      setError(null);
      setOpened(r);
      if (tab) {
        tab.opener = null;
        tab.location.href = r.login_url;
      }
    } catch (e) {
      tab?.close();
      setError(e instanceof ApiError ? e : null);
    }
  };
  const lang = useLang();
  const nb = p.notebook;
  return (
    <>
      <ErrorBox error={error} />
      {nb ? (
        <p class="notebook" data-notebook-ready={nb.ready ? "1" : "0"}>
          {t(nb.ready ? "web.notebook.ready" : "web.notebook.not_ready")}{" "}
          {nb.kernels !== undefined ? t("web.notebook.kernels", { open: nb.open_kernels ?? 0, busy: nb.busy_kernels ?? 0 }) : null}{" "}
          {p.active ? (
            <button type="button" class="primary" data-open="notebook" onClick={() => open()}>
              {t("web.notebook.open")}
            </button>
          ) : null}
        </p>
      ) : null}
      {p.ports.length ? (
        <div class="table-wrap">
          <table>
            <caption class="sr-only">{t("web.run.ports")}</caption>
            <thead>
              <tr>
                <th scope="col">{t("web.col.name")}</th>
                <th scope="col">{t("web.port.address")}</th>
                <th scope="col">{t("web.col.state")}</th>
                <th scope="col">{t("web.port.link")}</th>
              </tr>
            </thead>
            <tbody>
              {p.ports.map((x) => (
                <tr key={x.name} data-key={x.name}>
                  <td><code>{x.name}</code></td>
                  <td><code>{x.address || "—"}</code>{x.env ? <> <code class="muted">{`$${x.env}`}</code></> : null}</td>
                  <td>
                    {portState(x.state)}
                    {x.error ? <span class="error"> {(lang === "zh" ? x.error.zh : x.error.en) || x.error.en}</span> : null}
                  </td>
                  <td>
                    {p.active ? (
                      <button type="button" class="small" data-open={x.name}
                              aria-label={t("web.port.open_named", { port: x.name })}
                              onClick={() => open(x.name)}>{t("web.port.open")}</button>
                    ) : "—"}
                    {x.url ? <> <code class="muted">{x.url}</code></> : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : !nb ? (
        <p class="muted">{t("web.run.no_ports")}</p>
      ) : null}
      {opened ? (
        <p class="notice" role="status">
          {t("web.port.opened")} <a href={opened.url} target="_blank" rel="noopener noreferrer">{opened.url}</a>
        </p>
      ) : null}
    </>
  );
}
