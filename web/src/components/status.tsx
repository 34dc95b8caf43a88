// Small pieces every page shows the same way.
import type { ComponentChildren } from "preact";
import type { ApiError } from "../api";
import { t } from "../i18n";
import { word } from "../format";

// An API error in the UI's language (role=alert: read out when it appears).
export function ErrorBox({ error }: { error: ApiError | null | undefined }) {
  if (!error) return null;
  return (
    <p class="error" role="alert" data-error-id={error.id}>
      {error.text()}
    </p>
  );
}

export function Loading({ when, children }: { when: boolean; children?: ComponentChildren }) {
  return when ? <p class="muted" aria-live="polite">{t("web.loading")}</p> : <>{children}</>;
}

export function StateBadge({ state }: { state: string }) {
  return <span class={`badge state-${state}`} data-state={state}>{word("state", state)}</span>;
}

export function Section(p: { title: string; children: ComponentChildren; id?: string }) {
  const id = p.id ?? p.title.replace(/\W/g, "-");
  return (
    <section aria-labelledby={id}>
      <h2 id={id}>{t(p.title)}</h2>
      {p.children}
    </section>
  );
}

// A credential just made (a token, a deployment key), shown this once under
// `note` (a catalog id); `mark` names it for tests (data-new-token, …).
export function ShownOnce({ note, value, mark }: { note: string; value: string; mark: string }) {
  if (!value) return null;
  return (
    <div class="notice" role="status">
      <p>{t(note)}</p>
      <code class="pre" {...{ [`data-${mark}`]: "1" }}>{value}</code>
    </div>
  );
}
