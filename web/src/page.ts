// What a page of the UI is. Each lives in one module under pages/ that
// exports one Page; pages/index.ts lists them. Adding a page is one file and
// one line there (see web/README.md).
import type { FunctionComponent } from "preact";

export interface PageProps {
  params: Record<string, string>;  // from the path pattern: "/runs/:id" -> {id}
}

export interface Page {
  path: string;     // under /ui: "/runs", "/runs/:id"
  title: string;    // catalog id of its heading and the window title
  nav?: string;     // catalog id of its entry in the navigation; absent: not listed there
  component: FunctionComponent<PageProps>;
}
