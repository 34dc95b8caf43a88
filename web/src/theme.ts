// Light or dark: the system's (prefers-color-scheme) unless the person chose
// one, remembered in localStorage. The CSS reads <html data-theme>.
import { createStore } from "./store";

export type Theme = "system" | "light" | "dark";
const KEY = "lathe.theme";

function initialTheme(): Theme {
  const saved = localStorage.getItem(KEY);
  return saved === "light" || saved === "dark" ? saved : "system";
}

export const themeStore = createStore<Theme>(initialTheme());

export function applyTheme(th: Theme) {
  if (th === "system") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = th;
}

export function setTheme(th: Theme) {
  if (th === "system") localStorage.removeItem(KEY);
  else localStorage.setItem(KEY, th);
  applyTheme(th);
  themeStore.set(th);
}
