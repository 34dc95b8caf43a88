// How numbers, sizes and times are shown (sizes in SI units, as the CLI: 16GB = 16×10⁹).
import { has, langStore, t } from "./i18n";

function locale() {
  return langStore.get() === "zh" ? "zh-CN" : "en";
}

export function bytes(n: number | null | undefined): string {
  if (n == null) return "—";
  const units = ["B", "kB", "MB", "GB", "TB", "PB"];
  let i = 0;
  let v = n;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${v >= 100 || i === 0 ? Math.round(v) : v.toFixed(1)}${units[i]}`;
}

export function time(ms: number | null | undefined): string {
  if (!ms) return "—";
  return new Intl.DateTimeFormat(locale(), { dateStyle: "short", timeStyle: "medium" }).format(
    new Date(ms),
  );
}

export function percent(n: number | null | undefined): string {
  return n == null ? "—" : `${n}%`;
}

// A run state, kind or priority word in the UI's language ("" stays a dash).
export function word(group: "state" | "kind" | "priority", value: string): string {
  if (!value) return "—";
  return has(`web.${group}.${value}`) ? t(`web.${group}.${value}`) : value;
}

// A duration as the CLI writes it: "2d", "1h30m", "45s" (days, hours, minutes, seconds).
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  const s = Math.floor(ms / 1000);
  const parts: [number, string][] = [[Math.floor(s / 86400), "d"], [Math.floor((s % 86400) / 3600), "h"],
    [Math.floor((s % 3600) / 60), "m"], [s % 60, "s"]];
  const out = parts.filter(([n]) => n > 0).map(([n, u]) => `${n}${u}`).join("");
  return out || "0s";
}
