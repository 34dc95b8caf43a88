// The form that creates a deployment of a model version (POST
// /api/v1/deployments): its name, what it serves (one of the models the user
// may see, GET /models, and one of its versions or aliases), a fixed number
// of replicas or an autoscaling range, each replica's resources, and whether
// it is public. Only the fields filled are sent; the daemon checks them, and
// its error is shown at the field it names, else above the form.
import { useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { useApi } from "../hooks";
import { t } from "../i18n";
import { refOptions, useModelVersions } from "./model_ref";

type Values = Record<string, string>;

// The form's fields that an error may name (autoscale.min is "min").
const FIELDS = ["name", "model", "replicas", "min", "max", "target", "gpus", "cpus", "memory"];
// Errors that name no field but are about one.
const FIELD_OF_ID: Record<string, string> = {
  "deploy_key.bad_deployment": "name",
  "deploy.name_taken": "name",
  "deploy.model_needs_version": "model",
  "deploy.unknown_model": "model",
  "deploy.model_or_command": "model",
  "deploy.bad_range": "max",
  "deploy.bad_target": "target",
  "deploy.too_big": "gpus",
};

// A number where the text is one; else the text, for the daemon to name.
function numberOr(s: string): number | string {
  return /^\d+(\.\d+)?$/.test(s) ? Number(s) : s;
}

// The deployment the values ask for: only what was given.
export function deploySpecOf(v: Values, autoscale: boolean, isPublic: boolean): Record<string, unknown> {
  const spec: Record<string, unknown> = {};
  const given = (k: string) => v[k]?.trim() ?? "";
  if (given("name")) spec.name = given("name");
  if (given("model")) spec.model = given("model");
  if (autoscale) {
    const range: Record<string, unknown> = {};
    for (const k of ["min", "max", "target"]) if (given(k)) range[k] = numberOr(given(k));
    spec.autoscale = range;
  } else if (given("replicas")) {
    spec.replicas = numberOr(given("replicas"));
  }
  for (const k of ["gpus", "cpus"]) if (given(k)) spec[k] = numberOr(given(k));
  if (given("memory")) spec.memory = given("memory");
  if (isPublic) spec.public = true;
  return spec;
}

function fieldOf(e: ApiError): string {
  const f = e.field.replace(/^autoscale\./, "");
  return FIELDS.includes(f) ? f : FIELD_OF_ID[e.id] ?? "";
}

export function DeployForm({ onCreated }: { onCreated: (name: string) => void }) {
  const [values, setValues] = useState<Values>({});
  const [autoscale, setAutoscale] = useState(false);
  const [isPublic, setPublic] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const models = useApi<{ models: { name: string; ref?: string; owner: string }[] }>("/models");
  const versions = useModelVersions(values.model_name ?? "");
  const at = error ? fieldOf(error) : "";
  const set = (k: string) => (ev: Event) => {
    const value = (ev.currentTarget as HTMLInputElement).value;
    setValues(k === "model_name" ? { ...values, model_name: value, model: "" } : { ...values, [k]: value });
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const d = await api<{ name: string; ref?: string }>("/deployments",
        { method: "POST", body: deploySpecOf(values, autoscale, isPublic) });
      setValues({});
      onCreated(d.ref ?? d.name);
    } catch (err) {
      if (err instanceof ApiError) setError(err);
    } finally {
      setBusy(false);
    }
  };

  const field = (k: string, label: string, hint?: string, input?: preact.JSX.Element) => {
    const id = `dep-${k}`;
    const bad = at === k;
    const described = [hint ? `${id}-hint` : "", bad ? `${id}-error` : ""].filter(Boolean).join(" ");
    return (
      <div class={`field field-${k}${bad ? " invalid" : ""}`} key={k}>
        <label for={id}>{t(label)}</label>
        {input ?? <input type="text" id={id} name={k} value={values[k] ?? ""} onInput={set(k)}
                         inputMode={["replicas", "min", "max", "gpus"].includes(k) ? "numeric" : undefined}
                         aria-invalid={bad ? "true" : undefined} aria-describedby={described || undefined} />}
        {hint ? <small id={`${id}-hint`} class="muted">{t(hint)}</small> : null}
        {bad ? <small id={`${id}-error`} class="error" role="alert" data-error-id={error!.id}>{error!.text()}</small> : null}
      </div>
    );
  };
  const select = (k: string, first: string, options: { value: string; label: string }[], hint?: string) => (
    <select id={`dep-${k}`} name={k} value={values[k] ?? ""} onInput={set(k)}
            aria-invalid={at === k ? "true" : undefined}
            aria-describedby={[hint ? `dep-${k}-hint` : "", at === k ? `dep-${k}-error` : ""].filter(Boolean).join(" ") || undefined}>
      <option value="">{t(first)}</option>
      {options.map((o) => <option value={o.value} key={o.value}>{o.label}</option>)}
    </select>
  );

  return (
    <form class="run-form deploy-form" onSubmit={submit} noValidate aria-labelledby="dep-form-title">
      <h2 id="dep-form-title">{t("web.deploy.form_title")}</h2>
      {error && !at ? <p class="error" role="alert" data-error-id={error.id}>{error.text()}</p> : null}
      <div class="fields">
        {field("name", "web.form.name", "web.deploy.name_hint")}
        {field("model_name", "web.deploy.model_name", undefined,
          select("model_name", "web.deploy.choose_model",
                 (models.data?.models ?? []).map((m) => ({ value: m.ref ?? m.name, label: `${m.ref ?? m.name} (${m.owner})` }))))}
        {field("model", "web.deploy.model_ref", "web.deploy.model_ref_hint",
          select("model", "web.deploy.choose_version", refOptions(versions), "web.deploy.model_ref_hint"))}
        <fieldset class="field field-scaling">
          <legend>{t("web.deploy.scaling")}</legend>
          <label><input type="radio" name="scaling" id="dep-fixed" checked={!autoscale}
                        onChange={() => setAutoscale(false)} /> {t("web.deploy.scaling_fixed_choice")}</label>
          <label><input type="radio" name="scaling" id="dep-autoscale" checked={autoscale}
                        onChange={() => setAutoscale(true)} /> {t("web.deploy.scaling_auto_choice")}</label>
        </fieldset>
        {autoscale ? (
          <>
            {field("min", "web.deploy.min", "web.deploy.min_hint")}
            {field("max", "web.deploy.max")}
            {field("target", "web.deploy.target", "web.deploy.target_hint")}
          </>
        ) : field("replicas", "web.deploy.replicas_wanted", "web.deploy.replicas_hint")}
        {field("gpus", "web.form.gpus", "web.deploy.per_replica")}
        {field("cpus", "web.form.cpus", "web.form.cpus_hint")}
        {field("memory", "web.form.memory", "web.form.memory_hint")}
        <div class="field field-public">
          <label><input type="checkbox" id="dep-public" name="public" checked={isPublic}
                        onChange={(ev) => setPublic((ev.currentTarget as HTMLInputElement).checked)} /> {t("web.deploy.public_choice")}</label>
        </div>
      </div>
      <button type="submit" class="primary" disabled={busy} data-create-deployment="1">{t("web.deploy.create")}</button>
    </form>
  );
}
