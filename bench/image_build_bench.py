#!/usr/bin/python3
"""`lathe image build` against root podman's own build (docs/environments.md,
docs/benchmarks.md).

On one daemon of its own (root), as an unprivileged user, the same Containerfile
(FROM the base, one RUN, one COPY) is built:
  (a) by `lathe image build`: the first build (the base is copied into the user's
      build store), a second one (every step cached), and one after the COPY's
      file changed (the last step again);
  (b) by root `podman build` on an overlay store of its own (the peer: what a
      root-run build would cost, with RUN steps as real root).
For the busybox base, and for the Debian+torch image (scripts/test-images.sh)
when it has been built. Also what the daemon's store grew by.

Usage: bench/image_build_bench.py [--json FILE]
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integ"))
from harness import Daemon, ensure_user  # noqa: E402
from image_fixture import busybox_tar, reset_store  # noqa: E402

USER = "lathe-bench-bld"


def timed(fn):
    t0 = time.time()
    fn()
    return round(time.time() - t0, 2)


def du(path):
    return int(subprocess.run(["du", "-sb", path], capture_output=True, text=True,
                              check=True).stdout.split()[0])


def context(scratch, pw, name, base):
    ctx = os.path.join(scratch, name)
    os.mkdir(ctx)
    with open(os.path.join(ctx, "Containerfile"), "w") as f:
        f.write("FROM %s\nRUN echo built > /built\nCOPY data /data\n" % base)
    with open(os.path.join(ctx, "data"), "w") as f:
        f.write("one\n")
    for p in (ctx, os.path.join(ctx, "Containerfile"), os.path.join(ctx, "data")):
        os.chown(p, pw.pw_uid, pw.pw_gid)
    return ctx


def peer(scratch, tar, ctx):
    """Root podman build on an overlay store of its own: import, then cold and cached builds."""
    store = os.path.join(scratch, "peer-store")
    os.makedirs(store, exist_ok=True)
    env = dict(os.environ, CONTAINERS_CONF=os.path.join(HOME_CONF, "containers.conf"))
    base = ["podman", "--root", store + "/graph", "--runroot", store + "/run",
            "--storage-driver", "overlay"]
    iid = subprocess.run(base + ["import", "--quiet", tar], env=env, check=True,
                         capture_output=True, text=True).stdout.strip()
    subprocess.run(base + ["tag", iid, "peerbase:latest"], env=env, check=True)
    with open(os.path.join(ctx, "Containerfile")) as f:
        rest = f.read().split("\n", 1)[1]
    with open(os.path.join(ctx, "Containerfile.peer"), "w") as f:
        f.write("FROM localhost/peerbase:latest\n" + rest)
    cmd = base + ["build", "--quiet", "--network", "host", "-f",
                  os.path.join(ctx, "Containerfile.peer"), ctx]
    cold = timed(lambda: subprocess.run(cmd, env=env, check=True, capture_output=True))
    warm = timed(lambda: subprocess.run(cmd, env=env, check=True, capture_output=True))
    subprocess.run(base + ["rmi", "--all", "--force"], env=env, capture_output=True)
    os.remove(os.path.join(ctx, "Containerfile.peer"))
    return {"cold_s": cold, "cached_s": warm}


HOME_CONF = ""


def bench(d, scratch, pw, name, tar, env):
    global HOME_CONF
    HOME_CONF = os.path.join(d.home, "images")
    cli = lambda *a, **kw: d.cli(*a, user=USER, env=env, timeout=1800, **kw)  # noqa: E731
    cli("image", "import", name, tar)
    graph = os.path.join(d.home, "images", "graph")
    before = du(graph)
    ctx = context(scratch, pw, "ctx-" + name, name)
    out = {"base_tar_bytes": os.path.getsize(tar)}
    out["lathe_cold_s"] = timed(lambda: cli("image", "build", name + "-app", ctx))
    out["store_grew_bytes"] = du(graph) - before
    out["lathe_cached_s"] = timed(lambda: cli("image", "build", name + "-app", ctx))
    with open(os.path.join(ctx, "data"), "w") as f:
        f.write("two\n")
    out["lathe_last_step_s"] = timed(lambda: cli("image", "build", name + "-app", ctx))
    out["user_build_store_bytes"] = du(os.path.join(d.home, "image-builds", str(pw.pw_uid)))
    out["peer_root_podman"] = peer(scratch, tar, ctx)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    a = ap.parse_args()
    pw = ensure_user(USER)
    d = Daemon(gpus="none").start()
    scratch = tempfile.mkdtemp(prefix="lathe-build-bench-")
    os.chmod(scratch, 0o755)
    env = d.env(HOME="/tmp")
    out = {}
    try:
        tar = busybox_tar(scratch)
        out["busybox"] = bench(d, scratch, pw, "bb", tar, env)
        torch_tars = glob.glob("/var/cache/lathe-test-images/debian-torch-*.tar")
        if torch_tars:
            os.chmod(torch_tars[0], 0o644)
            out["torch"] = bench(d, scratch, pw, "torch", torch_tars[0], env)
    finally:
        reset_store(d.home)
        d.cleanup()
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(out, indent=2))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
