"""`lathe snap` on a store directory (--store): capture, list, show, diff,
restore, prune, gc, fsck, exit codes, damage and a full disk.

Runs the real binary (LATHE_BIN). Checkpoint files are built in their real
formats with the standard library (zipfile for PyTorch-style zips; the
safetensors layout by hand). No test asserts a wall-clock bound.
"""
import hashlib
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import LATHE, snap_env as env  # noqa: E402


def rand_bytes(n, seed):
    return random.Random(seed).randbytes(n)


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def torch_zip(path, seed, size=300_000):
    """A zip laid out like torch.save's (stored entries under archive/)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", rand_bytes(200, seed))
        z.writestr("archive/data/0", rand_bytes(size, seed + 1))
        z.writestr("archive/version", "3\n")


def safetensors(path, tensors, seed):
    header, data = {}, b""
    for i, (name, count) in enumerate(tensors):
        blob = rand_bytes(4 * count, seed + i)
        header[name] = {"dtype": "F32", "shape": [count], "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    write(path, struct.pack("<Q", len(h)) + h + data)


def tree(root):
    """path -> (kind, mode, sha256 or link target) for everything under root."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if os.path.islink(p):
                out[rel] = ("l", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("d", st.st_mode & 0o7777)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("f", st.st_mode & 0o7777, hashlib.sha256(f.read()).hexdigest())
    return out


class SnapCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lathe-snap-integ-")
        self.store = os.path.join(self.tmp, "store")
        self.src = os.path.join(self.tmp, "ckpt")
        os.makedirs(self.src)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def snap(self, *args, check=True, store=None, lang=None):
        cmd = [LATHE] + (["--lang", lang] if lang else []) + ["snap", "--store", store or self.store, *args]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=300)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} -> {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}")
        return r

    def create(self, *args, **kw):
        return self.snap("create", self.src, *args, **kw).stdout.split()[0]

    def ls(self):
        return json.loads(self.snap("ls", "--json").stdout)

    def show(self, ref):
        return json.loads(self.snap("show", "--json", ref).stdout)

    def first_pack(self):
        packs = sorted(p for p in os.listdir(os.path.join(self.store, "packs")) if p.endswith(".pack"))
        return os.path.join(self.store, "packs", packs[0])


class SnapCli(SnapCase):
    def make_tree(self):
        torch_zip(os.path.join(self.src, "ckpt_100.pt"), 1)
        safetensors(os.path.join(self.src, "checkpoint-200", "model.safetensors"), [("a", 50_000), ("b", 70_000)], 2)
        write(os.path.join(self.src, "checkpoint-200", "trainer_state.json"), b'{"global_step": 200}')
        write(os.path.join(self.src, "log.txt"), b"step 1\n" * 10_000)
        os.symlink("checkpoint-200", os.path.join(self.src, "latest"))

    def test_capture_list_show_diff_restore(self):
        self.make_tree()
        a = self.create("--tag", "run=r1", "--tag", "step=200")
        self.assertEqual(len(a), 64)
        rows = self.ls()
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["id"], a)
        self.assertEqual(rows[0]["status"], "complete")
        self.assertEqual(rows[0]["tags"], {"run": "r1", "step": "200"})
        self.assertEqual(len(json.loads(self.snap("ls", "--json", "r1").stdout)), 1)
        self.assertEqual(json.loads(self.snap("ls", "--json", "r2").stdout), [])
        m = self.show(a[:10])
        self.assertEqual(m["id"], a)
        checks = {f["path"]: f.get("check") for f in m["files"]}
        self.assertEqual(checks["ckpt_100.pt"], "ok")
        self.assertEqual(checks["checkpoint-200/model.safetensors"], "ok")
        self.assertEqual({c["path"] for c in m["checkpoints"]}, {"ckpt_100.pt", "checkpoint-200"})
        human = self.snap("show", "latest").stdout
        self.assertIn("checkpoint-200", human)

        safetensors(os.path.join(self.src, "checkpoint-200", "model.safetensors"), [("a", 50_000), ("b", 70_000)], 9)
        b = self.create("--tag", "run=r1")
        self.assertEqual(self.show(b)["parent"], a)
        self.assertEqual(self.show(b)["stats"]["files_read"], 1)  # only the rewritten file
        diff = self.snap("diff", a, b).stdout
        self.assertIn("M checkpoint-200/model.safetensors", diff)
        self.assertEqual(json.loads(self.snap("diff", "--json", a, b).stdout)[0]["kind"], "modified")

        out = os.path.join(self.tmp, "out")
        r = self.snap("restore", b, "--to", out)
        self.assertIn("restored", r.stdout)
        self.assertEqual(tree(self.src), tree(out))

        r = self.snap("restore", a, "--to", out, check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("--force", r.stderr)
        self.snap("restore", a, "--to", out, "--force")
        self.assertNotEqual(tree(self.src), tree(out))
        self.snap("restore", b, "--to", out, "--force")
        self.assertEqual(tree(self.src), tree(out))
        leftovers = [n for n in os.listdir(self.tmp) if "lathe-" in n]
        self.assertEqual(leftovers, [])

    def test_exit_codes(self):
        self.make_tree()
        self.create()
        self.assertEqual(self.snap("show", "deadbeef", check=False).returncode, 3)
        self.assertEqual(self.snap("show", "zz", check=False).returncode, 2)
        self.assertEqual(self.snap("ls", store=os.path.join(self.tmp, "none"), check=False).returncode, 3)
        self.assertEqual(self.snap("create", os.path.join(self.tmp, "missing"), check=False).returncode, 3)
        self.assertEqual(self.snap("create", self.src, "--tag", "novalue", check=False).returncode, 2)
        self.assertEqual(self.snap("prune", check=False).returncode, 2)
        # No --store and no daemon: "unreachable", pointing at --store.
        r = subprocess.run([LATHE, "snap", "ls"], capture_output=True, text=True, env=env(), timeout=60)
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn("--store", r.stderr)
        e = env()
        e["LATHE_SNAP_STORE"] = self.store
        r = subprocess.run([LATHE, "snap", "ls", "--json"], capture_output=True, text=True, env=e, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_messages_in_chinese(self):
        r = self.snap("ls", check=False, lang="zh")
        self.assertEqual(r.returncode, 3)
        self.assertIn("没有快照仓库", r.stderr)
        write(os.path.join(self.src, "a.bin"), b"a")
        self.create()
        r = self.snap("show", "deadbeef", check=False, lang="zh")
        self.assertEqual(r.returncode, 3)
        self.assertIn("找不到快照", r.stderr)

    def test_truncated_checkpoint_is_incomplete(self):
        torch_zip(os.path.join(self.src, "ckpt_100.pt"), 1)
        torch_zip(os.path.join(self.tmp, "full.pt"), 2)
        with open(os.path.join(self.tmp, "full.pt"), "rb") as f:
            data = f.read()
        write(os.path.join(self.src, "ckpt_200.pt"), data[: len(data) // 2])  # killed mid torch.save
        a = self.create()
        row = self.ls()[0]
        self.assertEqual(row["status"], "incomplete")
        self.assertIn("ckpt_200.pt", row["reason"])
        files = {f["path"]: f for f in self.show(a)["files"]}
        self.assertEqual(files["ckpt_200.pt"]["check"], "incomplete")
        self.assertIn("resume:   ckpt_100.pt", self.snap("show", a).stdout)

    def test_flipped_byte_names_file_and_chunk(self):
        write(os.path.join(self.src, "weights.bin"), rand_bytes(400_000, 5))
        a = self.create()
        chunk = self.show(a)["files"][0]["chunks"][0][0]
        pack = self.first_pack()
        os.chmod(pack, 0o644)
        with open(pack, "r+b") as f:
            f.seek(16 + 48 + 1000)  # inside the first chunk's data
            byte = f.read(1)
            f.seek(16 + 48 + 1000)
            f.write(bytes([byte[0] ^ 0x01]))
        out = os.path.join(self.tmp, "out")
        r = self.snap("restore", a, "--to", out, check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("weights.bin", r.stderr)
        self.assertIn(chunk, r.stderr)
        self.assertFalse(os.path.exists(out))
        r = self.snap("fsck", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("weights.bin", r.stdout)
        self.assertIn(chunk, r.stdout)
        report = json.loads(self.snap("fsck", "--json", check=False).stdout)
        self.assertFalse(report["ok"])
        self.assertTrue(any(p["file"] == "weights.bin" and p["chunk"] == chunk for p in report["problems"]))

    def test_path_escape_is_refused(self):
        write(os.path.join(self.src, "a.txt"), b"a")
        os.symlink("/etc", os.path.join(self.src, "outside"))
        a = self.create()
        r = self.snap("restore", a, "--to", os.path.join(self.tmp, "out"), check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("outside", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "out")))

    def test_prune_gc_fsck(self):
        ids = []
        for i in range(4):
            write(os.path.join(self.src, "model.bin"), rand_bytes(1_500_000, 100 + i))
            ids.append(self.create("--tag", "run=r1"))
        dry = self.snap("prune", "--keep-last", "2", "--dry-run").stdout
        self.assertIn("would remove", dry)
        self.assertEqual(len(self.ls()), 4)
        self.snap("prune", "--keep-last", "2")
        self.assertEqual([r["id"] for r in self.ls()], [ids[3], ids[2]])
        gc = self.snap("gc").stdout
        self.assertIn("gc:", gc)
        fsck = json.loads(self.snap("fsck", "--json").stdout)
        self.assertTrue(fsck["ok"])
        self.assertEqual(fsck["unreferenced_packs"], 0)
        out = os.path.join(self.tmp, "out")
        self.snap("restore", ids[2], "--to", out)
        with open(os.path.join(out, "model.bin"), "rb") as f:
            self.assertEqual(f.read(), rand_bytes(1_500_000, 102))

    def test_rebuild_index(self):
        write(os.path.join(self.src, "model.bin"), rand_bytes(500_000, 1))
        a = self.create()
        for name in ("index.db", "index.db-wal", "index.db-shm"):
            try:
                os.remove(os.path.join(self.store, name))
            except FileNotFoundError:
                pass
        self.assertEqual(self.ls()[0]["id"], a)
        self.snap("rebuild-index")
        self.snap("restore", a, "--to", os.path.join(self.tmp, "out"))


class SnapRepair(SnapCase):
    """What a damaged or tampered store does: nothing is lost that can be kept."""

    def packs(self):
        return sorted(os.listdir(os.path.join(self.store, "packs")))

    def test_deleted_manifest_is_reported_and_gc_keeps_its_data(self):
        write(os.path.join(self.src, "model.bin"), rand_bytes(1_500_000, 1))
        a = self.create()
        write(os.path.join(self.src, "model.bin"), rand_bytes(1_500_000, 2))
        b = self.create()
        manifest = os.path.join(self.store, "snapshots", a + ".json.zst")
        with open(manifest, "rb") as f:
            saved = f.read()
        os.remove(manifest)
        packs = self.packs()

        r = self.snap("fsck", check=False)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("lost: snapshot " + a[:12], r.stdout)
        self.assertIn("rebuild-index", r.stdout)
        self.assertNotIn("gc` reclaims", r.stdout)  # the advice that would have deleted the data
        report = json.loads(self.snap("fsck", "--json", check=False).stdout)
        self.assertFalse(report["ok"])
        self.assertEqual(report["lost_snapshots"], [a])
        r = self.snap("gc", check=False)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("gc stopped before deleting anything", r.stderr)
        self.assertIn(a[:12], r.stderr)
        self.assertEqual(self.packs(), packs)
        self.assertEqual([x["id"] for x in self.ls()], [b])

        write(manifest, saved)  # back from a backup
        self.assertTrue(json.loads(self.snap("fsck", "--json").stdout)["ok"])
        out = os.path.join(self.tmp, "out")
        self.snap("restore", a, "--to", out)
        with open(os.path.join(out, "model.bin"), "rb") as f:
            self.assertEqual(f.read(), rand_bytes(1_500_000, 1))

    def test_garbage_in_the_index_is_moved_aside_and_rebuilt(self):
        write(os.path.join(self.src, "model.bin"), rand_bytes(800_000, 3))
        a = self.create()
        index = os.path.join(self.store, "index.db")

        def spoil(seed):
            with open(index, "r+b") as f:
                f.write(rand_bytes(4096, seed))

        spoil(10)
        r = self.snap("fsck")
        self.assertIn("rebuilt", r.stderr)
        self.assertIn("no damage", r.stdout)
        self.assertTrue(any(n.startswith("index.db.corrupt-") for n in os.listdir(self.store)))
        spoil(11)
        r = self.snap("fsck", "--json")
        self.assertIsNotNone(json.loads(r.stdout)["index_rebuilt"])
        spoil(12)
        r = self.snap("rebuild-index")
        self.assertIn("rebuilt", r.stderr)
        spoil(13)
        out = os.path.join(self.tmp, "out")
        r = self.snap("restore", a, "--to", out)
        self.assertIn("rebuilt", r.stderr)
        self.assertEqual(tree(self.src), tree(out))
        with open(index, "wb") as f:  # all garbage, no database left at all
            f.write(rand_bytes(10_000, 14))
        self.assertEqual([x["id"] for x in self.ls()], [a])

    def test_flipped_byte_in_a_pack_header_is_found(self):
        write(os.path.join(self.src, "weights.bin"), rand_bytes(400_000, 5))
        a = self.create()
        pack = self.first_pack()
        name = os.path.basename(pack)[: -len(".pack")]
        os.chmod(pack, 0o644)

        def flip(offset):
            with open(pack, "r+b") as f:
                f.seek(offset)
                byte = f.read(1)
                f.seek(offset)
                f.write(bytes([byte[0] ^ 0x10]))

        for offset in (3, 8, 15):  # the magic, the version, the reserved field
            with self.subTest(offset=offset):
                flip(offset)
                r = self.snap("fsck", check=False)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertIn(name, r.stdout)
                self.assertIn("header damaged", r.stdout)
                out = os.path.join(self.tmp, "out")
                shutil.rmtree(out, ignore_errors=True)
                r = self.snap("restore", a, "--to", out)  # every chunk verifies: the data is intact
                self.assertIn("header damaged", r.stderr)
                self.assertEqual(tree(self.src), tree(out))
                flip(offset)
                self.snap("fsck")

    def test_gc_counts_the_temporary_packs_it_removes(self):
        write(os.path.join(self.src, "a.bin"), rand_bytes(100_000, 6))
        self.create()
        for i in range(3):
            write(os.path.join(self.store, "packs", "tmp", f"p{i}.pack.tmp"), rand_bytes(1_000_000, 20 + i))
        r = self.snap("gc")
        self.assertIn("removed 3 temporary files", r.stdout)
        self.assertIn("freed 3MB", r.stdout)
        self.assertEqual(os.listdir(os.path.join(self.store, "packs", "tmp")), [])


class SnapFullDisk(SnapCase):
    """A store on a small tmpfs: the snapshot that does not fit is skipped."""

    def setUp(self):
        super().setUp()
        os.makedirs(self.store)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", self.store], capture_output=True)
        if r.returncode != 0:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.skipTest("cannot mount a tmpfs here (needs root): " + r.stderr.decode())

    def tearDown(self):
        subprocess.run(["umount", "-l", self.store], capture_output=True)
        super().tearDown()

    def check_skip(self, reserve_args, word):
        write(os.path.join(self.src, "small.bin"), rand_bytes(2_000_000, 1))
        a = self.create(*reserve_args)
        write(os.path.join(self.src, "big.bin"), rand_bytes(12_000_000, 2))
        r = self.snap("create", self.src, *reserve_args, check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(word, r.stderr)
        rows = self.ls()
        self.assertEqual([x["status"] for x in rows], ["skipped", "complete"])
        self.assertTrue(rows[0]["reason"])
        self.assertEqual(os.listdir(os.path.join(self.store, "packs", "tmp")), [])
        fsck = json.loads(self.snap("fsck", "--json").stdout)
        self.assertTrue(fsck["ok"], fsck)
        os.remove(os.path.join(self.src, "big.bin"))
        out = os.path.join(self.tmp, "out")
        self.snap("restore", a, "--to", out)
        self.assertEqual(tree(self.src), tree(out))
        return r

    def test_reserve_skips_the_snapshot(self):
        self.check_skip(["--reserve", "1M"], "reserve")

    def test_the_reserve_message_compares_in_one_unit(self):
        # Not "2.1MB free, below the reserve of 2MiB": what would be left and
        # the reserve are written in the same unit, the smaller one first.
        r = self.check_skip(["--reserve", "1Mi"], "reserve")
        m = re.search(r"leave ([0-9.]+)(\w+) free, below the reserve of ([0-9.]+)(\w+)", r.stderr)
        self.assertIsNotNone(m, r.stderr)
        self.assertEqual(m.group(2), m.group(4), r.stderr)
        self.assertLess(float(m.group(1)), float(m.group(3)), r.stderr)

    def test_disk_full_skips_the_snapshot(self):
        self.check_skip(["--reserve", "0"], "full")


if __name__ == "__main__":
    unittest.main()
