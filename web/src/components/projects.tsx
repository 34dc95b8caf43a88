// The Overview's projects (docs/sharing.md#projects): those the signed-in user
// owns or is a member of (GET /api/v1/projects) with what each used (GET
// /api/v1/status "projects"), and for the one chosen its members. The owner
// and members with role manage add a member, change a member's role (PATCH
// /projects/{name} {add: ["USER:ROLE"]}: adding again changes the role) and
// remove one ({remove: ["USER"]}); the owner removes the project (DELETE). A
// project is created with a name and its members (POST /api/v1/projects).
// Only the controls the user may use are shown — an admin (GET /status
// "caller".admin) has the owner's on every project, as the daemon allows; the
// daemon's refusal is shown at its field, else above. Each project's limits
// (quotas.projects, docs/quotas.md#projects; /status "limits", null when
// unlimited) are shown beside what it uses, as `lathe project show` does.
import { useState } from "preact/hooks";
import { api, apiAction, ApiError } from "../api";
import { duration } from "../format";
import { useApi } from "../hooks";
import { t, useLang } from "../i18n";
import { currentUser } from "../session";
import { roleWord } from "./shared";
import { FormField, ROLES } from "./sharing";
import { ErrorBox, Section } from "./status";
import { Table, type Column } from "./table";

interface Member {
  user: string;
  uid: number;
  role: string;
}

interface Project {
  name: string;
  owner: string;
  created_at_ms: number;
  members: Member[];
}

interface Usage {
  gpu_hours: number;
  window_days: number;
  period_ms: number;
  period_gpu_hours: number;
  runs_active: number;
  notebooks_active: number;
  gpus_held: number;
}

interface Limits {
  gpus: number | null;
  runs: number | null;
  notebooks: number | null;
  gpu_hours: number | null;
  period_ms: number;
}

interface ProjectUsage {
  name: string;
  usage: Usage;
  limits?: Limits;
}

interface StatusJson {
  caller?: { user: string; admin: boolean };
  projects?: ProjectUsage[];
}

const USAGE_POLL_MS = 3000;
const LIST_POLL_MS = 10_000;

// The form's field an error is about: "name", "members" (or "add"), "role".
function fieldOf(e: ApiError): string {
  if (e.id === "project.bad_name" || e.id === "project.exists") return "name";
  if (e.id === "share.bad_role") return e.field === "role" ? "role" : "members";
  if (e.id === "project.bad_member" || e.id === "share.unknown_user" || e.id === "project.not_a_member") {
    return "members";
  }
  return "";
}

// What the daemon lets the signed-in user do: the owner's (an admin's too),
// a manager's (members), or nothing.
function accessOf(p: Project, me: string, admin: boolean): "owner" | "manage" | "none" {
  if (admin || p.owner === me) return "owner";
  return p.members.some((m) => m.user === me && m.role === "manage") ? "manage" : "none";
}

// "1 of 2", or "1 (no limit)": a count beside its limit.
function usedOf(used: number, limit: number | null | undefined): string {
  return limit == null ? t("web.project.unlimited", { used }) : t("web.project.used_of", { used, limit });
}

// The GPU-hours in the limit's period: "3.1 of 100 per 7d", or "(no limit)".
function hoursOf(u: Usage, l: Limits | undefined): string {
  if (l?.gpu_hours == null) return t("web.project.no_limit");
  return t("web.project.hours_of", { used: u.period_gpu_hours.toFixed(1), limit: l.gpu_hours, period: duration(l.period_ms) });
}

function Members({ p, admin, onChanged, onRemoved }:
  { p: Project; admin: boolean; onChanged: () => void; onRemoved: () => void }) {
  const me = currentUser();
  const access = accessOf(p, me, admin);
  const edit = access !== "none";
  const path = `/projects/${encodeURIComponent(p.name)}`;
  const [user, setUser] = useState("");
  const [role, setRole] = useState("use");
  const [error, setError] = useState<ApiError | null>(null);
  const at = error ? fieldOf(error) : "";
  const patch = (body: Record<string, string[]>, done = onChanged) =>
    apiAction(() => api(path, { method: "PATCH", body }), done, setError);
  const add = (e: Event) => {
    e.preventDefault();
    void patch({ add: [`${user.trim()}:${role}`] }, () => { setUser(""); onChanged(); });
  };
  const remove = () => apiAction(() => api(path, { method: "DELETE" }), onRemoved, setError);
  const columns: Column<Member>[] = [
    { id: "user", label: "web.col.user", cell: (m) => m.user },
    { id: "role", label: "web.sharing.role",
      cell: (m) => (edit ? (
        <select value={m.role} data-member-role={m.user} aria-label={t("web.project.role_of", { user: m.user })}
                onChange={(e) => void patch({ add: [`${m.user}:${(e.currentTarget as HTMLSelectElement).value}`] })}>
          {ROLES.map((r) => <option value={r} key={r}>{roleWord(r)}</option>)}
        </select>
      ) : <span data-role={m.role}>{roleWord(m.role)}</span>) },
  ];
  if (edit) {
    columns.push({ id: "act", label: "web.col.actions",
      cell: (m) => (
        <button type="button" class="small" data-remove-member={m.user} onClick={() => void patch({ remove: [m.user] })}
                aria-label={t("web.project.remove_member_named", { user: m.user, project: p.name })}>
          {t("web.project.remove_member")}
        </button>
      ) });
  }
  return (
    <div class="project-members" data-project={p.name} data-can-edit={edit ? "1" : "0"}>
      <h3 id="project-members-title">{t("web.project.members_of", { project: p.name, owner: p.owner })}</h3>
      {admin && p.owner !== me ? <p class="muted" data-as-admin="1">{t("web.project.as_admin")}</p> : null}
      {error && !at ? <ErrorBox error={error} /> : null}
      <Table caption="web.project.members" columns={columns} rows={p.members} rowKey={(m) => m.user}
             empty="web.project.no_members" />
      {edit ? (
        <form class="run-form project-add" onSubmit={add} noValidate aria-labelledby="project-add-title">
          <h4 id="project-add-title">{t("web.project.add_title")}</h4>
          <div class="fields">
            <FormField id="project-member" label="web.col.user" error={at === "members" ? error : null}>
              {(aria) => <input type="text" id="project-member" value={user} autocomplete="off" {...aria}
                                onInput={(e) => setUser((e.currentTarget as HTMLInputElement).value)} />}
            </FormField>
            <FormField id="project-member-role" label="web.sharing.role" error={at === "role" ? error : null}>
              {(aria) => (
                <select id="project-member-role" value={role} {...aria}
                        onInput={(e) => setRole((e.currentTarget as HTMLSelectElement).value)}>
                  {ROLES.map((r) => <option value={r} key={r}>{roleWord(r)}</option>)}
                </select>
              )}
            </FormField>
          </div>
          <button type="submit" class="primary" data-add-member="1">{t("web.project.add")}</button>
        </form>
      ) : <p class="muted" data-read-only="1">{t("web.project.read_only")}</p>}
      {access === "owner" ? (
        <p>
          <button type="button" class="stop" data-remove-project={p.name} onClick={() => void remove()}
                  aria-describedby="project-remove-hint">{t("web.project.delete")}</button>{" "}
          <small id="project-remove-hint" class="muted">{t("web.project.delete_hint")}</small>
        </p>
      ) : null}
    </div>
  );
}

function CreateProject({ onCreated }: { onCreated: (name: string) => void }) {
  const [name, setName] = useState("");
  const [members, setMembers] = useState("");
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const at = error ? fieldOf(error) : "";
  const create = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    const list = members.split(/[\s,]+/).filter(Boolean);
    await apiAction(() => api("/projects", { method: "POST", body: { name: name.trim(), members: list } }),
                    () => { onCreated(name.trim()); setName(""); setMembers(""); }, setError);
    setBusy(false);
  };
  return (
    <form class="run-form project-form" onSubmit={create} noValidate aria-labelledby="project-form-title">
      <h3 id="project-form-title">{t("web.project.create_title")}</h3>
      {error && !at ? <ErrorBox error={error} /> : null}
      <div class="fields">
        <FormField id="project-name" label="web.col.name" error={at === "name" ? error : null}>
          {(aria) => <input type="text" id="project-name" value={name} autocomplete="off" {...aria}
                            onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)} />}
        </FormField>
        <FormField id="project-members" label="web.project.members" error={at === "members" || at === "role" ? error : null}>
          {(aria) => (
            <>
              <input type="text" id="project-members" value={members} autocomplete="off" {...aria}
                     aria-describedby={[aria["aria-describedby"], "project-members-hint"].filter(Boolean).join(" ")}
                     onInput={(e) => setMembers((e.currentTarget as HTMLInputElement).value)} />
              <small id="project-members-hint" class="muted">{t("web.project.members_hint")}</small>
            </>
          )}
        </FormField>
      </div>
      <button type="submit" class="primary" disabled={busy} data-create-project="1">{t("web.project.create")}</button>
    </form>
  );
}

export function Projects() {
  useLang();
  const list = useApi<{ projects: Project[] }>("/projects", LIST_POLL_MS);
  const status = useApi<StatusJson>("/status", USAGE_POLL_MS);
  const admin = status.data?.caller?.admin ?? false;
  const [chosen, setChosen] = useState("");
  const [notice, setNotice] = useState<{ id: string; name: string } | null>(null);
  const usage = new Map((status.data?.projects ?? []).map((p) => [p.name, p]));
  const rows = list.data?.projects ?? [];
  const project = rows.find((p) => p.name === chosen);
  // A usage cell, marked with whether its limit is set (data-limit="gpus:2").
  const limited = (p: Project, key: keyof Limits, text: (u: Usage, l: Limits | undefined) => string) => {
    const x = usage.get(p.name);
    if (!x) return "—";
    return <span data-limit={`${key}:${x.limits?.[key] ?? "none"}`}>{text(x.usage, x.limits)}</span>;
  };
  const columns: Column<Project>[] = [
    { id: "name", label: "web.col.name",
      cell: (p) => (
        <button type="button" class="link" aria-pressed={p.name === chosen} data-project={p.name}
                onClick={() => setChosen(p.name === chosen ? "" : p.name)}>{p.name}</button>
      ) },
    { id: "owner", label: "web.project.owner", cell: (p) => p.owner },
    { id: "members", label: "web.project.members",
      cell: (p) => p.members.map((m) => t("web.project.member_role", { user: m.user, role: roleWord(m.role) })).join(", ") || "—" },
    { id: "hours", label: "web.project.gpu_hours", numeric: true,
      cell: (p) => {
        const u = usage.get(p.name)?.usage;
        return u ? t("web.project.hours_in", { hours: u.gpu_hours.toFixed(1), days: u.window_days }) : "—";
      } },
    // Each count beside its limit (quotas.projects), as `lathe project show`.
    { id: "runs", label: "web.project.runs_active", numeric: true,
      cell: (p) => limited(p, "runs", (u, l) => usedOf(u.runs_active, l?.runs)) },
    { id: "notebooks", label: "web.project.notebooks_active", numeric: true,
      cell: (p) => limited(p, "notebooks", (u, l) => usedOf(u.notebooks_active, l?.notebooks)) },
    { id: "gpus", label: "web.project.gpus_held", numeric: true,
      cell: (p) => limited(p, "gpus", (u, l) => usedOf(u.gpus_held, l?.gpus)) },
    { id: "quota", label: "web.project.gpu_hours_limit", numeric: true,
      cell: (p) => limited(p, "gpu_hours", hoursOf) },
  ];
  return (
    <Section title="web.overview.projects">
      <div class="projects" data-loaded={list.data ? "1" : "0"}>
        <ErrorBox error={list.error} />
        {notice ? <p class="notice" role="status" data-project-notice={notice.name}>{t(notice.id, { name: notice.name })}</p> : null}
        <Table caption="web.overview.projects" columns={columns} rows={rows} rowKey={(p) => p.name}
               empty={list.loading ? "web.loading" : "web.project.none"} />
        {project ? (
          <Members key={project.name} p={project} admin={admin} onChanged={list.reload}
                   onRemoved={() => {
                     setNotice({ id: "web.project.removed", name: project.name });
                     setChosen("");
                     list.reload();
                     status.reload();
                   }} />
        ) : null}
        <CreateProject onCreated={(n) => {
          setNotice({ id: "web.project.created", name: n });
          setChosen(n);
          list.reload();
          status.reload();
        }} />
      </div>
    </Section>
  );
}
