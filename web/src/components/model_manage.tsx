// The actions on a model on the Models page: point an alias at a version
// (PUT /api/v1/models/{model}/aliases/{alias}: a deployment that follows the
// alias rolls out to it; role manage or the owner), and register a new
// version from a run's newest checkpoint (POST /api/v1/models {name,
// from_run, handler}; the owner's alone).
import { useState } from "preact/hooks";
import { api, apiAction, ApiError } from "../api";
import { ErrorBox } from "./status";
import { t } from "../i18n";

// `name`: the model's ref (or name) as the API's paths take it; `short`: its
// name, which a new version names; `register`: the caller owns it.
export function ModelManage({ name, short, versions, register: canRegister, onChanged }:
  { name: string; short: string; versions: number[]; register: boolean; onChanged: () => void }) {
  const [error, setError] = useState<ApiError | null>(null);
  const [alias, setAlias] = useState("");
  const [version, setVersion] = useState(versions.length ? String(Math.max(...versions)) : "");
  const [run, setRun] = useState("");
  const [handler, setHandler] = useState("");
  const act = (e: Event, call: () => Promise<unknown>) => {
    e.preventDefault();
    return apiAction(call, onChanged, setError);
  };
  const model = encodeURIComponent(name);
  const moveAlias = (e: Event) =>
    act(e, () => api(`/models/${model}/aliases/${encodeURIComponent(alias.trim())}`,
                     { method: "PUT", body: { version: Number(version) } }));
  const register = (e: Event) =>
    act(e, async () => {
      const body: Record<string, string> = { name: short, from_run: run.trim() };
      if (handler.trim()) body.handler = handler.trim();
      await api("/models", { method: "POST", body });
      setRun("");
    });
  const input = (id: string, value: string, set: (v: string) => void) => (
    <input type="text" id={id} value={value} onInput={(e) => set((e.currentTarget as HTMLInputElement).value)} />
  );
  return (
    <div class="model-manage">
      <ErrorBox error={error} />
      <form class="inline-form" onSubmit={moveAlias} aria-labelledby="alias-title">
        <h3 id="alias-title">{t("web.model.alias_title")}</h3>
        <label for="alias-name">{t("web.model.alias_name")}</label>
        {input("alias-name", alias, setAlias)}
        <label for="alias-version">{t("web.model.version")}</label>
        <select id="alias-version" value={version} onInput={(e) => setVersion((e.currentTarget as HTMLSelectElement).value)}>
          {[...versions].sort((a, b) => b - a).map((v) => <option value={String(v)} key={v}>{v}</option>)}
        </select>
        <button type="submit" class="small" data-move-alias="1">{t("web.model.alias_move")}</button>
      </form>
      {canRegister ? (
      <form class="inline-form" onSubmit={register} aria-labelledby="register-title">
        <h3 id="register-title">{t("web.model.register_title")}</h3>
        <label for="register-run">{t("web.model.run")}</label>
        {input("register-run", run, setRun)}
        <label for="register-handler">{t("web.model.handler")}</label>
        {input("register-handler", handler, setHandler)}
        <button type="submit" class="small" data-register="1">{t("web.model.register")}</button>
      </form>
      ) : null}
    </div>
  );
}
