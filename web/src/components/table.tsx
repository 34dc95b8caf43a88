// A table of rows with column headings from the catalog; a sortable column's
// heading is a button (aria-sort says the order), the rest is plain.
import type { ComponentChildren } from "preact";
import { t } from "../i18n";

export interface Column<R> {
  id: string;                        // the sort key the API takes, when sortable
  label: string;                     // catalog id
  cell: (row: R) => ComponentChildren;
  sortable?: boolean;
  numeric?: boolean;
}

interface Props<R> {
  caption: string;                   // catalog id, read by screen readers
  columns: Column<R>[];
  rows: R[];
  rowKey: (row: R) => string;
  sort?: string;                     // "name", "-created"
  onSort?: (sort: string) => void;
  empty?: string;                    // catalog id shown when there is no row
}

export function Table<R>(p: Props<R>) {
  const key = p.sort?.replace(/^-/, "");
  const desc = p.sort?.startsWith("-");
  return (
    <div class="table-wrap">
      <table>
        <caption class="sr-only">{t(p.caption)}</caption>
        <thead>
          <tr>
            {p.columns.map((c) => {
              const sorted = c.sortable && key === c.id;
              const aria = sorted ? (desc ? "descending" : "ascending") : undefined;
              return (
                <th scope="col" aria-sort={aria} class={c.numeric ? "num" : undefined} key={c.id}>
                  {c.sortable && p.onSort ? (
                    <button
                      type="button"
                      class="sort"
                      data-sort={c.id}
                      onClick={() => p.onSort!(sorted && !desc ? "-" + c.id : c.id)}
                    >
                      {t(c.label)}
                      <span aria-hidden="true">{sorted ? (desc ? " ▼" : " ▲") : ""}</span>
                    </button>
                  ) : (
                    t(c.label)
                  )}
                </th>
              );
            })}
          </tr>
        </thead>
        <tbody>
          {p.rows.length === 0 ? (
            <tr>
              <td colSpan={p.columns.length} class="empty">
                {t(p.empty ?? "web.table.empty")}
              </td>
            </tr>
          ) : (
            p.rows.map((r) => (
              <tr key={p.rowKey(r)} data-key={p.rowKey(r)}>
                {p.columns.map((c) => (
                  <td class={c.numeric ? "num" : undefined} data-col={c.id} key={c.id}>
                    {c.cell(r)}
                  </td>
                ))}
              </tr>
            ))
          )}
        </tbody>
      </table>
    </div>
  );
}
