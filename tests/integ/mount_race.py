"""A read-only workspace whose path a user flips between lookups.

The attacker names `<base>/a/x/etc` as a read-only workspace while, as
themselves, they swap `x` between a symlink to a directory of their own
(holding an `etc` with a marker file) and a symlink to `/`, as fast as they can. A root monitor
that mounted by path would resolve the source through one and the target
through the other, and bind the attacker's `etc` over the real `/etc` in the
run's namespace (then a set-user-ID `su` reading that `/etc` gives root). The
monitor must bind the one directory it opened as the user onto itself, and the
run must never gain privileges from a set-user-ID program.
"""
import os
import shutil
import subprocess
import tempfile

from harness import PY, ensure_user

ATTACKER = "lathe-attacker"
MARKER = "lathe-race-marker"

FLIPPER = r"""
import ctypes, os, sys
# renameat2(RENAME_EXCHANGE) swaps two names in one step, as fast as a loop can: `x` is the
# attacker's directory one moment and a symlink to / the next, never missing.
libc = ctypes.CDLL(None, use_errno=True)
exchange = libc.renameat2
AT_FDCWD, RENAME_EXCHANGE = -100, 2
os.chdir(sys.argv[1])
x, y = b"x", b"y"
while True:
    exchange(AT_FDCWD, x, AT_FDCWD, y, RENAME_EXCHANGE)
"""

COMMAND = ("grep NoNewPrivs /proc/self/status; "
           "if [ -e /etc/%s ]; then echo PWNED; else echo clean; fi" % MARKER)


def _as_attacker(pw, *cmd):
    return ["setpriv", "--reuid", str(pw.pw_uid), "--regid", str(pw.pw_gid), "--init-groups",
            *cmd]


def mount_race(test, daemon, runs, batch=20):
    """Submits `runs` read-only workspace runs as the attacker while the path flips."""
    pw = ensure_user(ATTACKER)
    base = tempfile.mkdtemp(prefix="lathe-race-")
    test.addCleanup(shutil.rmtree, base, True)
    os.chmod(base, 0o755)
    a = os.path.join(base, "a")
    os.makedirs(os.path.join(a, "fake", "etc"))
    with open(os.path.join(a, "fake", "etc", MARKER), "w") as f:
        f.write("attacker's\n")
    for root, dirs, files in os.walk(a):
        for n in [root] + [os.path.join(root, d) for d in dirs + files]:
            os.lchown(n, pw.pw_uid, pw.pw_gid)
    for name, target in (("x", "fake"), ("y", "/")):
        os.symlink(target, os.path.join(a, name))
        os.lchown(os.path.join(a, name), pw.pw_uid, pw.pw_gid)
    spec = os.path.join(base, "ro.yaml")
    with open(spec, "w") as f:
        f.write("command: [sh, -c, '%s']\nworkspace: {dir: '%s', readonly: true}\n"
                % (COMMAND, os.path.join(a, "x", "etc")))
    os.chmod(spec, 0o644)
    flipper = subprocess.Popen(_as_attacker(pw, PY, "-c", FLIPPER, a),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    test.addCleanup(lambda: (flipper.kill(), flipper.wait()))
    env = daemon.env(HOME=base)
    outcomes = {"clean": 0, "refused": 0, "failed": 0}
    for start in range(0, runs, batch):
        ids = []
        for _ in range(min(batch, runs - start)):
            r = daemon.cli("run", "-f", spec, check=False, user=ATTACKER, env=env)
            if r.returncode != 0:
                outcomes["refused"] += 1  # the path was the symlink to / at submission
                continue
            ids.append(r.stdout.strip())
        for run in ids:
            rec = daemon.wait_state(run, ["succeeded", "failed", "stopped", "lost"])
            log = daemon.cli("logs", run, user=ATTACKER, env=env, check=False).stdout
            test.assertNotIn("PWNED", log, "run %s saw the attacker's /etc:\n%s" % (run, log))
            if rec["state"] == "succeeded":
                test.assertIn("NoNewPrivs:\t1", log, log)
                outcomes["clean"] += 1
            else:
                outcomes["failed"] += 1
        daemon.cli("rm", "--finished", "--older-than", "0s", user=ATTACKER, env=env, check=False)
    test.assertGreater(outcomes["clean"], 0, outcomes)
    if os.environ.get("LATHE_RACE_VERBOSE"):
        print("outcomes:", outcomes)
    return outcomes
