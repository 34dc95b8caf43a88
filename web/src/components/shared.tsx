// What a page shows of an object shared with the caller (docs/sharing.md):
// the API puts "shared": {role, by} on it; the caller's role decides which
// actions the page offers (the daemon checks them again). And how a model or
// deployment is named: `ref` ("owner/name", unique machine-wide) where the API
// gives one, in paths and links; the short name for one's own.
import { t } from "../i18n";

export type Role = "view" | "use" | "manage" | "owner";

export interface SharedInfo {
  role: string;  // view | use | manage
  by: string;    // a user, "project NAME", or "public" (a public model)
}

export interface Named {
  name: string;
  ref?: string;
  owner?: string;
  shared?: SharedInfo;
}

const RANK: Record<string, number> = { view: 1, use: 2, manage: 3, owner: 4 };

// The caller's role on an object they reached: what `shared` says, else the
// owner's (the API marks everything reached through a share or a project;
// without the mark the caller owns it, or is an admin, who may do as much).
export function roleOn(o: { shared?: SharedInfo }): Role {
  if (!o.shared) return "owner";
  const r = o.shared.role;
  return r in RANK && r !== "owner" ? (r as Role) : "view";
}

export function atLeast(role: Role, needed: Role): boolean {
  return RANK[role] >= RANK[needed];
}

// The name to put into an API path or a link: the ref where there is one.
export function refOf(o: Named): string {
  return o.ref ?? o.name;
}

// refOf, percent-encoded ("alice/digits" is alice%2Fdigits).
export function pathOf(o: Named): string {
  return encodeURIComponent(refOf(o));
}

// The name shown: the short one for the caller's own, the ref for another's.
export function shownName(o: Named, me: string): string {
  return o.owner === undefined || o.owner === me ? o.name : refOf(o);
}

// A role word in the reader's language.
export function roleWord(role: string): string {
  return RANK[role] && role !== "owner" ? t(`web.role.${role}`) : role;
}

// Who gave the role: a user, a project, or everyone (a public model).
export function byWhom(by: string): string {
  const project = /^project (.+)$/.exec(by);
  if (project) return t("web.shared.by_project", { project: project[1] });
  if (by === "public") return t("web.shared.by_public");
  return by || "—";
}

// "(shared with you: ROLE, by WHO)", or nothing for the caller's own.
export function SharedMark({ shared }: { shared?: SharedInfo }) {
  if (!shared) return null;
  return (
    <span class="muted shared-mark" data-shared={shared.role}>
      {" "}{t("web.shared.mark", { role: roleWord(shared.role), by: byWhom(shared.by) })}
    </span>
  );
}
