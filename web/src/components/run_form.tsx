// The form that submits a run (POST /api/v1/runs) with the spec's main fields.
// The API checks everything; its error is shown at the field it names
// (error.args.field), or above the form for one that names none.
import { useEffect, useState } from "preact/hooks";
import { api, ApiError } from "../api";
import { t } from "../i18n";
import type { Run } from "../types";

interface FieldDef {
  name: string;            // the spec field
  label: string;           // catalog id
  hint?: string;           // catalog id
  kind?: "text" | "number" | "textarea" | "priority" | "profile" | "image";
  required?: boolean;
}

const FIELDS: FieldDef[] = [
  { name: "command", label: "web.form.command", hint: "web.form.command_hint", required: true },
  { name: "name", label: "web.form.name" },
  { name: "profile", label: "web.form.profile", hint: "web.form.profile_hint", kind: "profile" },
  { name: "image", label: "web.form.image", hint: "web.form.image_hint", kind: "image" },
  { name: "gpus", label: "web.form.gpus", kind: "number" },
  { name: "cpus", label: "web.form.cpus", hint: "web.form.cpus_hint" },
  { name: "memory", label: "web.form.memory", hint: "web.form.memory_hint" },
  { name: "priority", label: "web.form.priority", kind: "priority" },
  { name: "max_duration", label: "web.form.max_duration", hint: "web.form.max_duration_hint" },
  { name: "workdir", label: "web.form.workdir", hint: "web.form.workdir_hint" },
  { name: "env", label: "web.form.env", hint: "web.form.env_hint", kind: "textarea" },
];

// The spec the values make: only the fields given; numbers where the API
// wants numbers, unless the text is not one (the API then names the field).
export function specOf(v: Record<string, string>): Record<string, unknown> {
  const spec: Record<string, unknown> = {};
  if (v.command?.trim()) spec.command = ["sh", "-c", v.command];
  for (const k of ["name", "profile", "image", "memory", "max_duration", "workdir", "priority"]) {
    if (v[k]?.trim()) spec[k] = v[k].trim();
  }
  for (const k of ["gpus", "cpus"]) {
    const s = v[k]?.trim();
    if (s) spec[k] = /^\d+(\.\d+)?$/.test(s) ? Number(s) : s;
  }
  const env: Record<string, string> = {};
  for (const line of (v.env ?? "").split("\n")) {
    const at = line.indexOf("=");
    if (line.trim() && at > 0) env[line.slice(0, at).trim()] = line.slice(at + 1);
    else if (line.trim()) env[line.trim()] = "";
  }
  if (Object.keys(env).length) spec.env = env;
  return spec;
}

// The form field an error belongs to: "env.FOO" and "env[FOO]" are env's.
function fieldOf(e: ApiError): string {
  const f = e.field.split(/[.[]/)[0];
  return FIELDS.some((d) => d.name === f) ? f : "";
}

export function RunForm({ onDone }: { onDone: (run: Run) => void }) {
  const [values, setValues] = useState<Record<string, string>>({ priority: "normal" });
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const at = error ? fieldOf(error) : "";
  // The daemon's resource profiles (GET /profiles), offered in a list.
  const [profiles, setProfiles] = useState<{ name: string; fits: string }[]>([]);
  // The user's own images (GET /images), offered in a list.
  const [images, setImages] = useState<{ name: string; id: string }[]>([]);
  useEffect(() => {
    api<{ profiles: { name: string; fits: string }[] }>("/profiles")
      .then((r) => setProfiles(r.profiles ?? []))
      .catch(() => setProfiles([]));
    api<{ images: { name: string; id: string }[] }>("/images")
      .then((r) => setImages(r.images ?? []))
      .catch(() => setImages([]));
  }, []);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const run = await api<Run>("/runs", { method: "POST", body: specOf(values) });
      setValues({ priority: "normal" });
      onDone(run);
    } catch (err) {
      if (err instanceof ApiError) setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="run-form" onSubmit={submit} noValidate aria-labelledby="run-form-title">
      <h2 id="run-form-title">{t("web.form.title")}</h2>
      {error && !at ? (
        <p class="error" role="alert" data-error-id={error.id}>{error.text()}</p>
      ) : null}
      <div class="fields">
        {FIELDS.map((f) => {
          const id = `run-${f.name}`;
          const bad = at === f.name;
          const described = [f.hint ? `${id}-hint` : "", bad ? `${id}-error` : ""].filter(Boolean).join(" ");
          const common = {
            id,
            name: f.name,
            value: values[f.name] ?? "",
            "aria-invalid": bad ? ("true" as const) : undefined,
            "aria-describedby": described || undefined,
            required: f.required,
            onInput: (ev: Event) =>
              setValues({ ...values, [f.name]: (ev.currentTarget as HTMLInputElement).value }),
          };
          return (
            <div class={`field field-${f.name}${bad ? " invalid" : ""}`} key={f.name}>
              <label for={id}>{t(f.label)}</label>
              {f.kind === "textarea" ? (
                <textarea rows={3} {...common} />
              ) : f.kind === "profile" ? (
                <select {...common}>
                  <option value="">{t("web.form.profile_none")}</option>
                  {profiles.map((p) => (
                    <option value={p.name} key={p.name}>{p.name}</option>
                  ))}
                </select>
              ) : f.kind === "image" ? (
                <select {...common}>
                  <option value="">{t("web.form.image_none")}</option>
                  {images.map((i) => (
                    <option value={i.name} key={i.name}>{`${i.name} (${i.id.slice(0, 12)})`}</option>
                  ))}
                </select>
              ) : f.kind === "priority" ? (
                <select {...common}>
                  {["low", "normal", "high"].map((p) => (
                    <option value={p} key={p}>{t(`web.priority.${p}`)}</option>
                  ))}
                </select>
              ) : (
                <input type="text" inputMode={f.kind === "number" ? "numeric" : undefined} {...common} />
              )}
              {f.hint ? <small id={`${id}-hint`} class="muted">{t(f.hint)}</small> : null}
              {bad ? (
                <small id={`${id}-error`} class="error" role="alert" data-error-id={error!.id}>
                  {error!.text()}
                </small>
              ) : null}
            </div>
          );
        })}
      </div>
      <button type="submit" class="primary" disabled={busy}>{t("web.form.submit")}</button>
    </form>
  );
}
