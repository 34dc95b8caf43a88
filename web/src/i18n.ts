// The UI's words: every text comes from data/messages_ui.yaml (ids "web.*",
// each in en and zh), in the language the person chose — or the browser's
// (navigator.language), zh for any zh-*, else en. The choice is remembered.
import catalog from "lathe:catalog";
import { createStore, useStore } from "./store";

export type Lang = "en" | "zh";
export type Args = Record<string, string | number>;

const KEY = "lathe.lang";

function initialLang(): Lang {
  const saved = localStorage.getItem(KEY);
  if (saved === "en" || saved === "zh") return saved;
  return navigator.language.toLowerCase().startsWith("zh") ? "zh" : "en";
}

export const langStore = createStore<Lang>(initialLang());

export function applyLang(l: Lang) {
  document.documentElement.lang = l === "zh" ? "zh-CN" : "en";
}

export function setLang(l: Lang) {
  localStorage.setItem(KEY, l);
  applyLang(l);
  langStore.set(l);
}

export function fill(text: string, args: Args = {}): string {
  return text.replace(/\{(\w+)\}/g, (all, k: string) => (k in args ? String(args[k]) : all));
}

// The text of `id` in the current language, {placeholders} filled from args.
// An id the catalog lacks shows as itself (and the browser test fails on it).
export function t(id: string, args?: Args): string {
  const e = catalog[id];
  if (!e) {
    console.error(`lathe: no catalog text ${id}`);
    return id;
  }
  return fill(e[langStore.get()], args);
}

// Re-renders the calling component when the language changes.
export function useLang(): Lang {
  return useStore(langStore);
}

export function has(id: string): boolean {
  return id in catalog;
}

export function catalogIds(): string[] {
  return Object.keys(catalog);
}
