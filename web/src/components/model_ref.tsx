// What a deployment may serve of a model, as a select's options: its aliases
// (NAME@ALIAS, followed as the alias moves; NAME@latest, the newest) and its
// versions (NAME/N, newest first), read from GET /api/v1/models/{model}.
import { useApi } from "../hooks";

export interface ModelVersions {
  name: string;
  ref?: string;
  aliases?: Record<string, number>;
  versions: { version: number }[];
}

export interface RefOption {
  value: string;  // NAME@ALIAS or NAME/N
  label: string;
}

export function refOptions(m: ModelVersions | null): RefOption[] {
  if (!m) return [];
  const numbers = m.versions.map((v) => v.version).sort((a, b) => b - a);
  const aliases = { ...(m.aliases ?? {}) };
  if (numbers.length && !("latest" in aliases)) aliases.latest = numbers[0];
  return [
    ...Object.entries(aliases).sort(([a], [b]) => a.localeCompare(b))
      .map(([a, n]) => ({ value: `${m.name}@${a}`, label: `${m.name}@${a} → ${n}` })),
    ...numbers.map((n) => ({ value: `${m.name}/${n}`, label: `${m.name}/${n}` })),
  ];
}

// The model a reference names: "digits" of "digits@prod" and "digits/3",
// "alice/digits" of "alice/digits/3".
export function modelOfRef(ref: string): string {
  return ref.replace(/@[^@/]*$/, "").replace(/\/\d+$/, "");
}

// A model's name without its owner: "digits" of "alice/digits".
function shortOf(ref: string): string {
  return ref.slice(ref.lastIndexOf("/") + 1);
}

// The model's versions (null while none is chosen or the answer is not in);
// `ref`: the model's ref, or its name, as GET /models/{model} takes it.
export function useModelVersions(ref: string): ModelVersions | null {
  const m = useApi<ModelVersions>(ref ? `/models/${encodeURIComponent(ref)}` : null).data;
  // Not the answer for a model chosen before (which may name it by its ref or not).
  return m && shortOf(m.ref ?? m.name) === shortOf(ref) ? m : null;
}
