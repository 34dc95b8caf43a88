#!/usr/bin/python3
"""Runs in container images against bare runs (docs/environments.md, docs/benchmarks.md).

On one daemon of its own (root, no GPUs), each run's first instruction touches a
file; the file's mtime minus the moment the CLI was called is "submit -> first
instruction":
  (a) start overhead: N bare runs and N runs in a busybox image, one at a time
      (p50, p90, and the difference of the medians);
  (b) first vs cached start of a new image: the first run right after
      `lathe image import`, then the next ones; for the Debian+torch image too
      (scripts/test-images.sh) when it has been built, with the import's time;
  (c) a pull of an image whose base layer the store already holds: what the
      store grows by, against the same pull into an empty store.

Usage: bench/image_bench.py [--runs N] [--json FILE]
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
from harness import Daemon, free_port  # noqa: E402
from image_fixture import Registry, busybox_tar, reset_store  # noqa: E402
from stats import pct  # noqa: E402


def start_ms(d, work, name, image=None, shell="sh"):
    """Submit -> the program's first instruction, in ms (the touched file's mtime)."""
    mark = os.path.join(work, name)
    args = ["run", "--workdir", work]
    if image:
        args += ["--image", image]
    t0 = time.time_ns()
    run = d.cli(*args, "--", shell, "-c", "touch " + mark).stdout.strip()
    d.wait_state(run, ["succeeded", "failed"])
    return (os.stat(mark).st_mtime_ns - t0) / 1e6


def du(path):
    return int(subprocess.run(["du", "-sb", path], capture_output=True, text=True,
                              check=True).stdout.split()[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    out = {}
    d = Daemon(gpus="none").start()
    scratch = tempfile.mkdtemp(prefix="lathe-img-bench-")
    os.chmod(scratch, 0o755)
    try:
        work = os.path.join(scratch, "w")
        os.mkdir(work)
        tar = busybox_tar(scratch)
        d.cli("image", "import", "bb", tar)
        start_ms(d, work, "warm", image="bb")
        bare = [start_ms(d, work, "b%d" % i) for i in range(a.runs)]
        img = [start_ms(d, work, "i%d" % i, image="bb") for i in range(a.runs)]
        out["start"] = {"bare_p50_ms": pct(bare, 50), "bare_p90_ms": pct(bare, 90),
                        "image_p50_ms": pct(img, 50), "image_p90_ms": pct(img, 90),
                        "overhead_p50_ms": pct(img, 50) - pct(bare, 50), "runs": a.runs}
        # (b) a new image: its first start, then cached ones.
        tar2 = busybox_tar(scratch, {"/new": "x\n"}, "bb2.tar")
        d.cli("image", "import", "bb2", tar2)
        first = start_ms(d, work, "n0", image="bb2")
        cached = [start_ms(d, work, "n%d" % i, image="bb2") for i in range(1, 6)]
        out["busybox_first_vs_cached"] = {"first_ms": first, "cached_p50_ms": pct(cached, 50)}
        torch_tars = glob.glob("/var/cache/lathe-test-images/debian-torch-*.tar")
        if torch_tars:
            t0 = time.time()
            d.cli("image", "import", "torch", torch_tars[0], timeout=900)
            imported = time.time() - t0
            first = start_ms(d, work, "t0", image="torch")
            cached = [start_ms(d, work, "t%d" % i, image="torch") for i in range(1, 6)]
            out["torch_first_vs_cached"] = {
                "tar_bytes": os.path.getsize(torch_tars[0]), "import_s": imported,
                "first_ms": first, "cached_p50_ms": pct(cached, 50)}
        # (c) shared layers: base, then an image of base + one more layer.
        reg = Registry(scratch, free_port())
        try:
            reg.push(tar, "team/base:1")
            blob = os.path.join(scratch, "blob")
            with open(blob, "wb") as f:
                f.write(os.urandom(8 << 20))
            with open(os.path.join(scratch, "Containerfile"), "w") as f:
                f.write("FROM %s/team/base:1\nCOPY blob /blob\n" % reg.host)
            reg.podman("build", "--quiet", "--tls-verify=false", "--creds", "u:p", "-t",
                       "derived:1", scratch)
            reg.podman("push", "--quiet", "--tls-verify=false", "--creds", "u:p", "derived:1",
                       "docker://%s/team/derived:1" % reg.host)
            d.cli("secret", "set", "reg", "--from-file", write(scratch, "cred", "u:p"))
            graph = os.path.join(d.home, "images", "graph")
            d.cli("image", "pull", reg.host + "/team/base:1", "--secret", "reg", "--insecure")
            before = du(graph)
            d.cli("image", "pull", reg.host + "/team/derived:1", "--secret", "reg", "--insecure")
            grown = du(graph) - before
            reset_store(d.home)
            empty = du(graph) if os.path.isdir(graph) else 0
            d.cli("image", "pull", reg.host + "/team/derived:1", "--secret", "reg", "--insecure")
            alone = du(graph) - empty
            out["shared_layers"] = {"added_layer_bytes": 8 << 20,
                                    "stored_with_base_present": grown,
                                    "stored_into_empty_store": alone}
        finally:
            reg.stop()
    finally:
        reset_store(d.home)
        d.cleanup()
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(out, indent=2))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


def write(dir_, name, text):
    p = os.path.join(dir_, name)
    with open(p, "w") as f:
        f.write(text)
    return p


if __name__ == "__main__":
    main()
