#!/usr/bin/env bash
# The lock annotations (GUARDED_BY, REQUIRES, ...: src/lathe/common/thread_annotations.h),
# checked by clang's -Wthread-safety; run by .ci/run through `make thread-safety-check`.
# gcc ignores them. This compiles, syntax only, each translation unit that implements a
# class of CLASSES with clang++ and the flags CMake gives that unit (from
# $BUILD_DIR/compile_commands.json, configured first as the Makefile does when missing),
# and fails on any thread-safety warning: a guarded member used without its mutex, a
# REQUIRES function called without it, an EXCLUDES one called with it, a lock left held.
#
#   scripts/check_thread_safety.sh              every such unit
#   scripts/check_thread_safety.sh FILE.cc...   those units only (src/lathe/..., while editing)
# Without clang++ it says so and passes: gcc builds need nothing of it.
#   CLANGXX    the compiler (default clang++)
#   BUILD_DIR  the CMake build directory (default build)
#   JOBS       units compiled at once (default nproc)
#   LATHE_THREAD_SAFETY_ROOT  another tree to check (the check's test plants a violation in a copy)
set -euo pipefail

ROOT="${LATHE_THREAD_SAFETY_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$ROOT"
CLANGXX="${CLANGXX:-clang++}"
BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${JOBS:-$(nproc)}"

# module:Class, the annotated classes: each is checked in every non-test .cc of its module
# that defines one of its members, so a new file of the class is checked without a change here.
CLASSES=(serve:Batcher deploy:Deployments daemon:Daemon)

if ! command -v "$CLANGXX" >/dev/null 2>&1; then
  echo "thread-safety: $CLANGXX not found, skipped"
  exit 0
fi

if [[ ! -f "$BUILD_DIR/compile_commands.json" ]]; then
  # A clean clone has not built yet (`make test` builds after the checks).
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi

units=()
if [[ $# -gt 0 ]]; then
  units=("$@")
else
  for entry in "${CLASSES[@]}"; do
    module="${entry%%:*}" class="${entry#*:}"
    # A member defined at the start of a line: `Type Class::Name(`, `Class::~Class(`.
    while IFS= read -r f; do
      units+=("$f")
    done < <(grep -lE "^[^ /#].*\\b${class}::[A-Za-z_~]" src/lathe/"$module"/*.cc |
      grep -v '_test\.cc$' || true)
  done
fi
if [[ ${#units[@]} -eq 0 ]]; then
  echo "thread-safety: no translation unit defines a member of ${CLASSES[*]}" >&2
  exit 1
fi

/usr/bin/python3 - "$BUILD_DIR/compile_commands.json" "$CLANGXX" "$JOBS" "${units[@]}" <<'EOF'
import concurrent.futures, json, os, shlex, subprocess, sys, time

db_path, clangxx, jobs, *units = sys.argv[1:]
entries = json.load(open(db_path))
CHECKS = ["-fsyntax-only", "-Wthread-safety", "-Wthread-safety-beta", "-Werror=thread-safety",
          "-Werror=thread-safety-beta"]


def keep(arg):
    # Dropped: the unit's own warnings (only the thread-safety ones are asked for here)
    # and what only code generation uses (debug info, sanitizers).
    return not (arg.startswith("-W") or arg.startswith("-fsanitize") or
                arg in ("-c", "-g", "-fno-omit-frame-pointer"))


def command(unit):
    path = os.path.abspath(unit)
    module = unit.split("/")[2]  # src/lathe/<module>/x.cc
    for e in entries:
        if os.path.abspath(os.path.join(e["directory"], e["file"])) != path:
            continue
        args = e.get("arguments") or shlex.split(e["command"])
        # The module library's object (a fuzzing or sanitizer target may compile it too).
        if not any(f"/lathe_{module}.dir/" in a for a in args):
            continue
        flags, skip = [], False
        for a in args[1:]:  # args[0]: the compiler
            if skip:
                skip = False
            elif a == "-o":
                skip = True
            elif os.path.abspath(os.path.join(e["directory"], a)) != path and keep(a):
                flags.append(a)
        return e["directory"], [clangxx, *CHECKS, *flags, path]
    sys.exit(f"thread-safety: {unit} is not in {db_path}: configure the build again")


def check(unit):
    directory, cmd = command(unit)
    r = subprocess.run(cmd, cwd=directory, capture_output=True, text=True)
    return unit, r.returncode, r.stdout + r.stderr


start = time.monotonic()
violated, broken = [], []
with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, int(jobs))) as pool:
    for unit, rc, out in pool.map(check, units):
        sys.stdout.write(out)
        if rc != 0:
            (violated if "-Wthread-safety" in out else broken).append(unit)
if broken:
    print(f"thread-safety: {clangxx} could not compile {', '.join(broken)} (see above)")
if violated:
    print(f"thread-safety: FAILED: a lock annotation is broken in {', '.join(violated)}: see "
          "clang's errors above, src/lathe/common/thread_annotations.h and CONTRIBUTING.md")
if broken or violated:
    sys.exit(1)
print(f"thread-safety: {len(units)} translation units clean under {clangxx} -Wthread-safety "
      f"-Wthread-safety-beta ({time.monotonic() - start:.1f}s)")
EOF
