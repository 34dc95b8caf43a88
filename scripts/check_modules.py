#!/usr/bin/python3
"""The module rules, held by a check (run by .ci/run and `make modules-check`).

1. CONTRIBUTING.md's module table names every module under src/lathe/ (and src/cmd/), and its
   "may use" column equals the DEPS of the module's lathe_module(...) in its CMakeLists.txt.
2. No source of a module (tests included) includes a header of a module that it may not use:
   its own, its DEPS, or what they use in turn (what it links).
3. The DEPS have no cycle.

`--fix` rewrites the table's "may use" column from the CMake files (the "holds" column is
written by hand; a module missing from the table gets a row to fill in).
"""
import os
import pathlib
import re
import sys


# LATHE_MODULES_ROOT: another tree to check (the check's own test plants violations in one).
ROOT = pathlib.Path(os.environ.get("LATHE_MODULES_ROOT") or pathlib.Path(__file__).resolve().parent.parent)
LATHE = ROOT / "src" / "lathe"
TABLE_FILE = ROOT / "CONTRIBUTING.md"
ROW = re.compile(r"^\| `([a-z_/]+)/` \| (.*) \| (.*) \|$")
INCLUDE = re.compile(r'^#include "lathe/([a-z_]+)/', re.M)


def cmake_deps():
    """module -> its DEPS, from src/lathe/*/CMakeLists.txt."""
    deps = {}
    for f in sorted(LATHE.glob("*/CMakeLists.txt")):
        m = re.search(r"lathe_module\((\w+)([^)]*)\)", f.read_text(), re.S)
        if not m:
            continue
        words = m.group(2).split()
        listed = []
        if "DEPS" in words:
            for w in words[words.index("DEPS") + 1:]:
                if w.isupper() and w in ("LIBS", "EXTRA_SOURCES"):
                    break
                listed.append(w)
        deps[m.group(1)] = listed
    return deps


def closure(deps, module):
    seen, todo = set(), list(deps.get(module, []))
    while todo:
        d = todo.pop()
        if d not in seen:
            seen.add(d)
            todo.extend(deps.get(d, []))
    return seen


def table_rows(text):
    """module -> (holds, may_use list), in table order."""
    rows = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m and m.group(1) != "module":
            uses = m.group(3).strip()
            rows[m.group(1)] = (m.group(2), [] if uses == "—" else [u.strip() for u in uses.split(",")])
    return rows


def fix(deps):
    text = TABLE_FILE.read_text()
    rows = table_rows(text)
    out = []
    for line in text.splitlines():
        m = ROW.match(line)
        if m and m.group(1) in deps:
            uses = ", ".join(deps[m.group(1)]) or "—"
            line = f"| `{m.group(1)}/` | {m.group(2)} | {uses} |"
        out.append(line)
    missing = [m for m in deps if m not in rows]
    if missing:
        last = max(i for i, l in enumerate(out) if ROW.match(l))
        for m in missing:
            out.insert(last + 1, f"| `{m}/` | (what it holds) | {', '.join(deps[m]) or '—'} |")
            last += 1
    TABLE_FILE.write_text("\n".join(out) + "\n")


def main():
    deps = cmake_deps()
    if "--fix" in sys.argv:
        fix(deps)
    problems = []
    rows = table_rows(TABLE_FILE.read_text())
    for m, listed in deps.items():
        if m not in rows:
            problems.append(f"CONTRIBUTING.md's module table has no row for `{m}/`")
        elif sorted(rows[m][1]) != sorted(listed):
            problems.append(f"`{m}/` may use {', '.join(rows[m][1]) or 'nothing'} in CONTRIBUTING.md "
                            f"but {', '.join(listed) or 'nothing'} in src/lathe/{m}/CMakeLists.txt")
    for m in rows:
        if m not in deps and m not in ("src/cmd",):
            problems.append(f"CONTRIBUTING.md's module table names `{m}/`, which has no CMakeLists.txt")
    for m in deps:
        if m in closure(deps, m):
            problems.append(f"`{m}/` depends on itself through its DEPS")
    for m in deps:
        allowed = closure(deps, m) | {m}
        for f in sorted((LATHE / m).rglob("*")):
            if f.suffix not in (".h", ".cc"):
                continue
            for used in sorted(set(INCLUDE.findall(f.read_text(errors="replace")))):
                if used in deps and used not in allowed:
                    problems.append(f"{f.relative_to(ROOT)} includes lathe/{used}/, which `{m}/` may not use "
                                    f"(its DEPS: {', '.join(deps[m]) or 'none'})")
    for p in problems:
        print("modules:", p)
    if problems:
        print("modules: see CONTRIBUTING.md; `scripts/check_modules.py --fix` rewrites the table's "
              "'may use' column from the CMake files")
        return 1
    print(f"modules: {len(deps)} modules, the table and CMake agree, every include is allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
