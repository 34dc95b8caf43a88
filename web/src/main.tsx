import { render } from "preact";
import { App } from "./app";
import { applyLang, langStore } from "./i18n";
import { loadSession } from "./session";
import { applyTheme, themeStore } from "./theme";
import "./style.css";

applyLang(langStore.get());
applyTheme(themeStore.get());
render(<App />, document.getElementById("app")!);
void loadSession();
