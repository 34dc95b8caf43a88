#!/usr/bin/python3
"""Snapshot store benchmark: lathe snap vs restic and borg on the same files.

Measures, in one run:
  (b) ingest of a 1 GiB checkpoint from the page cache (MB/s, wall and CPU);
  (c) bytes added to the repository per snapshot for two sequences of 10
      checkpoints: a fine-tune with 90% of the tensors frozen, and 1% of the
      bytes rewritten in scattered 4 KiB blocks;
  (d) restore of the 1 GiB checkpoint (MB/s).
Every tool writes to a fresh repository on the same filesystem; restic and
borg run without encryption where they allow it (restic cannot: its AES is
part of its cost). Results go to bench/snap_results.json; docs/benchmarks.md
explains them. Usage (as root, from the repository root):

    bash scripts/deps.sh --bench
    /usr/bin/python3 bench/snap_bench.py [--lathe build/lathe] [--ingest-mib 1024] [--seq-mib 256]
"""
import argparse
import json
import os
import random
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ENV = dict(os.environ, RESTIC_PASSWORD="bench", BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK="yes",
           BORG_RELOCATED_REPO_ACCESS_IS_OK="yes", LANG="C.UTF-8")
MIB = 1 << 20


def run(cmd, **kw):
    """Runs cmd; returns (wall seconds, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, **kw)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def du(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except FileNotFoundError:
                pass
    return total


class Tool:
    def __init__(self, name, work):
        self.name = name
        self.repo = os.path.join(work, "repo-" + name)
        self.n = 0

    def reset(self):
        shutil.rmtree(self.repo, ignore_errors=True)
        self.n = 0
        self.init()


class Lathe(Tool):
    def __init__(self, work, binary):
        super().__init__("lathe", work)
        self.bin = binary

    def init(self):
        pass  # `create` makes the store

    def backup(self, src):
        return run([self.bin, "snap", "--store", self.repo, "create", src, "--reserve", "0"])

    def restore(self, target):
        return run([self.bin, "snap", "--store", self.repo, "restore", "latest", "--to", target])


class Restic(Tool):
    def init(self):
        run(["restic", "-r", self.repo, "init"])

    def backup(self, src):
        return run(["restic", "-r", self.repo, "backup", src])

    def restore(self, target):
        return run(["restic", "-r", self.repo, "restore", "latest", "--target", target])


class Borg(Tool):
    def init(self):
        run(["borg", "init", "--encryption=none", self.repo])

    def backup(self, src):
        self.n += 1
        return run(["borg", "create", f"{self.repo}::s{self.n}", src])

    def restore(self, target):
        os.makedirs(target, exist_ok=True)
        return run(["borg", "extract", f"{self.repo}::s{self.n}"], cwd=target)


def float_weights(n, rng):
    """Bytes that look like float32 weights: random mantissas, clustered exponents."""
    out = bytearray(rng.randbytes(n))
    for i in range(3, n, 4):
        out[i] = 0x3C + (out[i] & 0x03)  # sign 0, exponent near 2^-7..2^-4
    return bytes(out)


def write_safetensors(path, tensors):
    header, offset = {}, 0
    for name, blob in tensors:
        header[name] = {"dtype": "F32", "shape": [len(blob) // 4], "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, blob in tensors:
            f.write(blob)
    os.replace(tmp, path)


def ingest_and_restore(tools, work, mib, repeats):
    src = os.path.join(work, "ingest")
    os.makedirs(src, exist_ok=True)
    rng = random.Random(1)
    tensors = [(f"layer{i}", float_weights(16 * MIB, rng)) for i in range(mib // 16)]
    write_safetensors(os.path.join(src, "model.safetensors"), tensors)
    del tensors
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
        while f.read(64 * MIB):
            pass  # into the page cache
    size = du(src)
    res = {"bytes": size}
    for t in tools:
        ing, rst = [], []
        for _ in range(repeats):
            t.reset()
            wall, cpu = t.backup(src)
            ing.append({"wall_s": wall, "cpu_s": cpu, "MBps": size / 1e6 / wall})
            out = os.path.join(work, "restored")
            shutil.rmtree(out, ignore_errors=True)
            wall, cpu = t.restore(out)
            rst.append({"wall_s": wall, "cpu_s": cpu, "MBps": size / 1e6 / wall})
            shutil.rmtree(out, ignore_errors=True)
        res[t.name] = {"ingest": ing, "restore": rst, "repo_bytes": du(t.repo),
                       "ingest_MBps_median": statistics.median(x["MBps"] for x in ing),
                       "restore_MBps_median": statistics.median(x["MBps"] for x in rst)}
        print(t.name, "ingest MB/s", round(res[t.name]["ingest_MBps_median"]),
              "restore MB/s", round(res[t.name]["restore_MBps_median"]), flush=True)
        t.reset()
    shutil.rmtree(src)
    return res


def sequence(tools, work, mib, kind):
    """10 checkpoints; returns the repository growth of each snapshot, per tool."""
    src = os.path.join(work, "seq")
    shutil.rmtree(src, ignore_errors=True)
    os.makedirs(src)
    rng = random.Random(2)
    n_tensors = 64
    tensors = [(f"layer{i}", float_weights(mib * MIB // n_tensors, rng)) for i in range(n_tensors)]
    for t in tools:
        t.reset()
    growth = {t.name: [] for t in tools}
    for step in range(10):
        if step > 0 and kind == "frozen90":
            for i in rng.sample(range(n_tensors), n_tensors // 10):  # 10% of the tensors train
                tensors[i] = (tensors[i][0], float_weights(len(tensors[i][1]), rng))
        if step > 0 and kind == "scattered1pct":
            blob = bytearray(b"".join(b for _, b in tensors))
            for _ in range(len(blob) // 100 // 4096):  # 1% of the bytes, 4 KiB blocks
                off = rng.randrange(0, len(blob) // 4096) * 4096
                blob[off:off + 4096] = float_weights(4096, rng)
            per = len(blob) // n_tensors
            tensors = [(tensors[i][0], bytes(blob[i * per:(i + 1) * per])) for i in range(n_tensors)]
        write_safetensors(os.path.join(src, "model.safetensors"), tensors)
        for t in tools:
            before = du(t.repo)
            t.backup(src)
            growth[t.name].append(du(t.repo) - before)
    for t in tools:
        print(kind, t.name, "MiB per snapshot", [round(g / MIB, 1) for g in growth[t.name]], flush=True)
        t.reset()
    shutil.rmtree(src)
    return {"bytes": mib * MIB, "growth_bytes": growth}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lathe", default="build/lathe")
    ap.add_argument("--ingest-mib", type=int, default=1024)
    ap.add_argument("--seq-mib", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", default=None, help="scratch directory (default: a new one under /var/tmp)")
    ap.add_argument("--only", choices=["ingest", "sequences"], help="run one part (merged into --out)")
    ap.add_argument("--out", default="bench/snap_results.json")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="lathe-snap-bench-", dir="/var/tmp")
    tools = [Lathe(work, os.path.abspath(a.lathe)), Restic("restic", work), Borg("borg", work)]
    versions = {"restic": subprocess.run(["restic", "version"], capture_output=True, text=True).stdout.strip(),
                "borg": subprocess.run(["borg", "--version"], capture_output=True, text=True).stdout.strip()}
    result = {}
    if a.only and os.path.exists(a.out):
        with open(a.out) as f:
            result = json.load(f)
    result.update({"versions": versions, "load_before": os.getloadavg(), "nproc": os.cpu_count()})
    try:
        if a.only in (None, "ingest"):
            result["ingest_restore"] = ingest_and_restore(tools, work, a.ingest_mib, a.repeats)
        if a.only in (None, "sequences"):
            result["frozen90"] = sequence(tools, work, a.seq_mib, "frozen90")
            result["scattered1pct"] = sequence(tools, work, a.seq_mib, "scattered1pct")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["load_after"] = os.getloadavg()
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
