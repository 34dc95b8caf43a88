// A model deployment's owner rolls it out to another version or alias of its
// model (PATCH /api/v1/deployments/{name} {model}: the daemon starts the new
// version's replicas beside the old ones and moves the traffic as they become
// ready), and rolls it back to the version it served before (the same PATCH,
// naming that version). A command deployment rolls back to its previous
// revision ({revision: "rev-N"}: that revision's program, as a new one).
import { useState } from "preact/hooks";
import { api, apiAction, ApiError } from "../api";
import { t } from "../i18n";
import { modelOfRef, refOptions, useModelVersions } from "./model_ref";
import { ErrorBox } from "./status";

// What previousVersion reads of GET /deployments/{name} and its events.
export interface RolloutState {
  model?: string;    // what the spec names: NAME/N or NAME@ALIAS
  version: string;   // what serves
  wanted?: string;   // the version the spec resolves to now
}

export interface RolloutEvent {
  msg_id?: string;
  args?: Record<string, string>;
}

// The version to roll back to, "" when there is none: while the deployment
// wants another version than the one serving (a rollout under way, or one
// rolled back by the daemon), the serving one; else the version the last
// finished rollout replaced (deploy.rolled_out's `from`).
export function previousVersion(d: RolloutState, events: RolloutEvent[]): string {
  if (d.wanted && d.version && d.wanted !== d.version) return d.version;
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i];
    if (e.msg_id === "deploy.rolled_out" && e.args?.from && e.args.from !== d.version) return e.args.from;
  }
  return "";
}

export function DeployRollout({ name, state, events, onChanged }:
  { name: string; state: RolloutState; events: RolloutEvent[]; onChanged: () => void }) {
  const model = modelOfRef(state.model ?? "");
  const versions = useModelVersions(model);
  const [to, setTo] = useState("");
  const [error, setError] = useState<ApiError | null>(null);
  const back = previousVersion(state, events);
  const patch = (ref: string) =>
    apiAction(() => api(`/deployments/${encodeURIComponent(name)}`, { method: "PATCH", body: { model: ref } }),
              onChanged, setError);
  const rollOut = (e: Event) => {
    e.preventDefault();
    if (to) void patch(to);
  };
  return (
    <div class="deploy-rollout">
      <ErrorBox error={error} />
      <form class="inline-form" onSubmit={rollOut} aria-labelledby="rollout-title">
        <h3 id="rollout-title">{t("web.deploy.rollout_title")}</h3>
        <label for="deploy-rollout-to">{t("web.deploy.model_ref")}</label>
        <select id="deploy-rollout-to" value={to} aria-describedby="deploy-rollout-hint"
                onInput={(e) => setTo((e.currentTarget as HTMLSelectElement).value)}>
          <option value="">{t("web.deploy.choose_version")}</option>
          {refOptions(versions).map((o) => <option value={o.value} key={o.value}>{o.label}</option>)}
        </select>
        <button type="submit" class="small" data-rollout="1" disabled={!to}>{t("web.deploy.rollout")}</button>
        {back ? (
          <button type="button" class="small" data-rollback={back} onClick={() => void patch(back)}>
            {t("web.deploy.rollback", { version: back })}
          </button>
        ) : null}
        <small id="deploy-rollout-hint" class="muted">{t("web.deploy.rollout_hint")}</small>
      </form>
    </div>
  );
}

// A command deployment's way back: the revision it served before, its program
// rolled out again as a new revision.
export function DeployRevisionBack({ name, state, events, onChanged }:
  { name: string; state: RolloutState; events: RolloutEvent[]; onChanged: () => void }) {
  const [error, setError] = useState<ApiError | null>(null);
  const back = previousVersion(state, events);
  if (!back) return null;
  const restore = () =>
    apiAction(() => api(`/deployments/${encodeURIComponent(name)}`, { method: "PATCH", body: { revision: back } }),
              onChanged, setError);
  return (
    <div class="deploy-rollout">
      <ErrorBox error={error} />
      <div class="inline-form" role="group" aria-labelledby="revision-back-title">
        <h3 id="revision-back-title">{t("web.deploy.rollback_title")}</h3>
        <button type="button" class="small" data-rollback={back} aria-describedby="revision-back-hint"
                onClick={() => void restore()}>
          {t("web.deploy.rollback", { version: back })}
        </button>
        <small id="revision-back-hint" class="muted">{t("web.deploy.revision_hint")}</small>
      </div>
    </div>
  );
}
