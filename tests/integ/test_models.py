"""The model registry end to end: `lathe model` against the real daemon.

A run writes checkpoints (no torch needed: a process handler and two
checkpoint files); `model create --from RUN` registers version 1, which pins
its snapshot: `snap prune`, DELETE /api/v1/snapshots/S and `rm --snapshots`
keep it or refuse, naming the version, and gc keeps its chunks (the export
after it restores every byte). Aliases resolve and block `model rm`. The
export is a `lathe serve --repository` layout that `lathe serve` loads and
answers from. A second, unprivileged user gets their own EACCES for
`--from-dir` on a directory they cannot read, a 403 on a private model, and
can read (not change) a public one.
"""
import http.client
import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import unittest

from harness import PY, DaemonTest, second_user
from test_serve import Server

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")
HAVE_TORCH = subprocess.run([PY, "-c", "import torch, sklearn"],
                            capture_output=True).returncode == 0

# What the checkpoint predicts, computed by PyTorch directly.
PREDICT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
from sklearn.datasets import load_digits
from train_digits import Net
state = torch.load(sys.argv[2], map_location="cpu")
net = Net()
net.load_state_dict(state["model"])
net.eval()
images = load_digits().images[:8]
x = torch.tensor(images, dtype=torch.float32).unsqueeze(1) / 16.0
with torch.no_grad():
    p = torch.softmax(net(x), dim=1)
print(json.dumps({"images": images.tolist(), "digits": p.argmax(1).tolist(), "p": p.tolist()}))
"""

USER = "lathe-it-models"

HANDLER = r"""
import json, os

def load(model_dir):
    with open(os.path.join(model_dir, "ckpt_200.pt")) as f:
        return {"scale": int(f.readline())}

def predict(batch, model):
    return [{"y": [v * model["scale"] for v in req.get("x", [])]} for req in batch]
"""


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=30)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


class Models(DaemonTest):
    gpus = "none"

    def setUp(self):
        super().setUp()
        self.work = tempfile.mkdtemp(prefix="lathe-models-")
        os.chmod(self.work, 0o755)

    def tearDown(self):
        super().tearDown()
        shutil.rmtree(self.work, ignore_errors=True)

    def api(self, method, path, body=None):
        c = UnixHTTPConnection(os.path.join(self.d.home, "lathe.sock"))
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        out = r.status, json.loads(r.read() or b"null")
        c.close()
        return out

    def model(self, *args, user=None, check=True):
        env = self.d.env(HOME="/tmp") if user else None
        return self.d.cli("model", *args, user=user, env=env, check=check)

    def model_json(self, *args):
        return json.loads(self.model(*args, "--json").stdout)

    def model_dir(self, name, weights):
        """A directory <work>/<name> holding model.pt with `weights`; its path."""
        d = os.path.join(self.work, name)
        os.makedirs(d)
        with open(os.path.join(d, "model.pt"), "w") as f:
            f.write(weights)
        return d

    def snapshot_ids(self):
        return {s["id"] for s in json.loads(self.d.cli("snap", "ls", "--json").stdout) if "id" in s}

    def checkpointing_run(self):
        """A finished run whose checkpoint directory holds a handler and two checkpoints."""
        ckpt = os.path.join(self.work, "ckpt")
        script = (f"cat > \"$LATHE_CHECKPOINT_DIR/handler.py\" <<'EOF'\n{HANDLER}\nEOF\n"
                  # Checkpoints in no format Lathe checks ("unchecked": complete),
                  # long enough not to look truncated.
                  f'printf "2\\n%0200d\\n" 0 > "$LATHE_CHECKPOINT_DIR/ckpt_100.pt"; sleep 1.5; '
                  f'printf "3\\n%0200d\\n" 0 > "$LATHE_CHECKPOINT_DIR/ckpt_200.pt"; sleep 1.5; '
                  'echo done')
        run = self.d.submit("--name", "trainer", "--checkpoint-dir", ckpt, "--", "sh", "-c", script)
        self.d.wait_state(run, "succeeded")
        self.d.wait_for(lambda: any("ckpt_200.pt" in e.get("message", "")
                                    for e in self.d.inspect(run)["events"]
                                    if e["type"] == "checkpoint"),
                        "the snapshot of the second checkpoint")
        return run

    def test_a_version_pins_its_snapshot_and_aliases_resolve(self):
        run = self.checkpointing_run()
        v1 = self.model_json("create", "digits", "--from", run, "--handler", "handler.py",
                             "--note", "first")
        self.assertEqual(v1["version"], 1)
        self.assertEqual(v1["backend"], "process")
        self.assertEqual(v1["handler"], "handler.py")
        self.assertEqual(v1["file"], "ckpt_200.pt")
        lin = v1["lineage"]
        self.assertEqual(lin["run"], self.d.inspect(run)["id"])
        self.assertEqual(lin["step"], 200)
        self.assertEqual(lin["checkpoint_file"], "ckpt_200.pt")
        self.assertEqual(lin["attempt"], 1)
        self.assertIn("command", lin["spec"])
        snap = v1["snapshot"]
        # RUN@100: the newest snapshot holding step 100's checkpoint, that file.
        v2 = self.model_json("create", "digits", "--from", run + "@100", "--handler", "handler.py")
        self.assertEqual(v2["version"], 2)
        self.assertEqual(v2["lineage"]["step"], 100)
        self.assertEqual(v2["file"], "ckpt_100.pt")
        r = self.model("create", "digits", "--from", run + "@300", "--handler", "handler.py",
                       check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("step 300", r.stderr)

        # The pin: prune keeps it, a delete is refused naming the version, the
        # run's removal with its snapshots leaves it, gc keeps its chunks.
        # An older snapshot of the run, which only its pin keeps from prune.
        older = [s["id"] for s in json.loads(self.d.cli("snap", "ls", run, "--json").stdout)
                 if s.get("id") and s["id"] != snap][-1]
        self.model("create", "early", "--from-snapshot", older[:12], "--handler", "handler.py")
        out = self.d.cli("snap", "prune", "--keep-last", "1").stdout
        self.assertIn(f"kept {older[:12]}: pinned by model root/early/1", out)
        self.assertIn(snap, self.snapshot_ids())
        self.assertIn(older, self.snapshot_ids())
        status, body = self.api("DELETE", "/api/v1/snapshots/" + snap)
        self.assertEqual(status, 409, body)
        self.assertEqual(body["msg_id"], "snap.pinned")
        self.assertIn("model root/digits/1", body["error"])
        self.d.cli("rm", run, "--snapshots")
        self.assertIn(snap, self.snapshot_ids())
        self.assertIn(older, self.snapshot_ids())
        self.d.cli("snap", "gc")
        shown = self.model_json("show", "digits/1")
        self.assertEqual(shown["lineage"]["step"], 200)
        self.assertEqual(sorted(f["path"] for f in shown["files"]),
                         ["ckpt_100.pt", "ckpt_200.pt", "handler.py"])
        self.assertEqual(shown["size"], sum(f["size"] for f in shown["files"]))

        # Aliases: resolve, move, block removal naming themselves.
        self.model("alias", "digits", "prod", "1")
        self.assertEqual(self.model_json("show", "digits@prod")["version"], 1)
        self.assertEqual(self.model_json("show", "digits@latest")["version"], 2)
        r = self.model("rm", "digits/1", check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("digits@prod", r.stderr)
        out = self.model("alias", "digits", "prod", "2").stdout
        self.assertIn("1", out)
        self.assertEqual(self.model_json("show", "digits@prod")["version"], 2)
        whole = self.model_json("show", "digits")
        self.assertEqual([v["version"] for v in whole["versions"]], [1, 2])
        self.assertEqual(whole["aliases"], {"prod": 2})

        # Export (after gc): a serve repository, every byte there.
        repo = os.path.join(self.work, "repo")
        self.model("export", "digits/1", "--to", repo)
        with open(os.path.join(repo, "digits", "config.yaml")) as f:
            config = f.read()
        self.assertIn("backend: process", config)
        self.assertIn('default_model_filename: "handler.py"', config)
        with open(os.path.join(repo, "digits", "1", "ckpt_200.pt")) as f:
            self.assertEqual(f.read(), "3\n" + "0" * 200 + "\n")
        with open(os.path.join(repo, "digits", "1", "handler.py")) as f:
            self.assertIn("def predict", f.read())
        s = Server("--repository", repo)
        try:
            s.start()
            s.wait_for(lambda: s.request("GET", "/v2/models/digits/ready")[0] == 200,
                       "the exported model to be ready")
            self.assertEqual(s.json("POST", "/predict?model=digits", {"x": [1, 2]}), {"y": [3, 6]})
        finally:
            s.stop()

        # Once no version uses it, the snapshot can go: both versions pin it
        # (the newest snapshot holds step 100's checkpoint too).
        self.assertEqual(v2["snapshot"], snap)
        self.model("rm", "digits/1")
        status, body = self.api("DELETE", "/api/v1/snapshots/" + snap)
        self.assertEqual(status, 409, body)
        self.assertEqual(body["args"]["holders"], "model root/digits/2")
        status, body = self.api("DELETE", "/api/v1/models/digits/aliases/prod")
        self.assertEqual(status, 200, body)
        self.model("rm", "digits/2")
        status, body = self.api("DELETE", "/api/v1/snapshots/" + snap)
        self.assertEqual(status, 200, body)
        self.assertNotIn(snap, self.snapshot_ids())
        # Numbers are never given twice.
        v3 = self.model_json("create", "digits", "--from-dir", repo + "/digits/1",
                             "--handler", "handler.py")
        self.assertEqual(v3["version"], 3)

    def test_keep_checkpoints_skips_a_pinned_snapshot(self):
        ckpt = os.path.join(self.work, "ckpt")
        go = os.path.join(self.work, "go")
        body = 'printf "%d\\n%0200d\\n" {0} 0 > "$LATHE_CHECKPOINT_DIR/ckpt_{0}.pt"'
        script = "; ".join([body.format(100), f"while [ ! -e {go} ]; do sleep 0.05; done",
                            body.format(200), "sleep 1.5", body.format(300), "sleep 1.5"])
        run = self.d.submit("--checkpoint-dir", ckpt, "--keep-checkpoints", "1", "--",
                            "sh", "-c", script)

        def captured(name):
            return any(name in e.get("message", "") for e in self.d.inspect(run)["events"]
                       if e["type"] == "checkpoint")
        self.d.wait_for(lambda: captured("ckpt_100.pt"), "the first checkpoint's snapshot")
        v = self.model_json("create", "early", "--from", run)
        self.assertEqual((v["file"], v["backend"], v["lineage"]["step"]),
                         ("ckpt_100.pt", "torchscript", 100))
        open(go, "w").close()
        self.d.wait_state(run, "succeeded")
        self.d.wait_for(lambda: captured("ckpt_300.pt"), "the last checkpoint's snapshot")
        snaps = [s["id"] for s in json.loads(self.d.cli("snap", "ls", run, "--json").stdout)
                 if "id" in s]
        # The run keeps its newest, plus the one the model version pins.
        self.assertIn(v["snapshot"], snaps)
        self.assertEqual(len(snaps), 2, snaps)

    @unittest.skipUnless(HAVE_TORCH, "needs /usr/bin/python3 with torch and sklearn")
    def test_train_digits_to_a_served_version(self):
        """The bundled example's whole path: train, register the raw checkpoint
        with its process handler, export, serve; the answers are PyTorch's."""
        ckpt = os.path.join(self.work, "ckpt")
        run = self.d.submit("--checkpoint-dir", ckpt, "--", PY,
                            os.path.join(EXAMPLES, "train_digits.py"), "--steps", "40",
                            "--ckpt-every", "20",
                            "--handler", os.path.join(EXAMPLES, "digits_inference.py"))
        self.d.wait_state(run, "succeeded", timeout=240)
        v = self.model_json("create", "digits", "--from", run, "--handler", "digits_inference.py")
        self.assertEqual((v["backend"], v["file"], v["lineage"]["step"]),
                         ("process", "ckpt_000040.pt", 40))
        repo = os.path.join(self.work, "repo")
        self.model("export", "digits/1", "--to", repo)
        want = json.loads(subprocess.run(
            [PY, "-c", PREDICT, EXAMPLES, os.path.join(repo, "digits", "1", "ckpt_000040.pt")],
            check=True, capture_output=True, text=True, timeout=120).stdout)
        s = Server("--repository", repo)
        try:
            s.start()
            s.wait_for(lambda: s.request("GET", "/v2/models/digits/ready")[0] == 200,
                       "the digits model to be ready", timeout=120)
            for image, digit, p in zip(want["images"], want["digits"], want["p"]):
                got = s.json("POST", "/predict?model=digits", {"image": image})
                self.assertEqual(got["digit"], digit)
                for a, b in zip(got["probabilities"], p):
                    self.assertAlmostEqual(a, b, places=5)
        finally:
            s.stop()

    def test_bad_input_names_the_field(self):
        src = os.path.join(self.work, "src")
        os.makedirs(src)
        for name in ("a.pt", "b.pt"):
            with open(os.path.join(src, name), "w") as f:
                f.write("x")
        before = self.snapshot_ids()
        r = self.model("create", "m", "--from-dir", src, check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--file", r.stderr)
        r = self.model("create", "m", "--from-dir", src, "--file", "*.pt", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("a.pt, b.pt", r.stderr)
        r = self.model("create", "m", "--from-dir", src, "--from", "x", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        r = self.model("create", "bad/name/x", "--from-dir", src, check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        r = self.model("create", "2024", "--from-dir", src, check=False)  # NAME/2024 is a version
        self.assertEqual(r.returncode, 2, r.stderr)
        r = self.model("create", "m", "--from-dir", src, "--file", "b.pt", "--backend", "onnx",
                       check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("torchscript, process", r.stderr)
        # The snapshots taken for the refused versions went with them.
        self.assertEqual(self.snapshot_ids(), before)
        v = self.model_json("create", "m", "--from-dir", src, "--file", "b.pt")
        self.assertEqual((v["version"], v["backend"], v["file"]), (1, "torchscript", "b.pt"))
        self.assertEqual(v["lineage"]["source_dir"], src)
        r = self.model("alias", "m", "latest", "1", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        r = self.model("show", "m/9", check=False)
        self.assertEqual(r.returncode, 3, r.stderr)

    def test_a_source_directory_only_has_to_be_readable(self):
        pw = second_user(self, USER)
        src = self.model_dir("ro", "weights")
        os.chown(src, pw.pw_uid, pw.pw_gid)
        os.chmod(src, 0o555)  # their own, read-only
        v = json.loads(self.model("create", "ro", "--from-dir", src, "--json", user=USER).stdout)
        self.assertEqual(v["version"], 1)
        missing = os.path.join(self.work, "missing")
        r = self.model("create", "gone", "--from-dir", missing, user=USER, check=False)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn(missing + "' does not exist", r.stderr)
        self.assertNotIn("create it", r.stderr)

    def test_another_user(self):
        pw = second_user(self, USER)
        src = self.model_dir("src", "weights")
        self.model("create", "private", "--from-dir", src)
        self.model("create", "shared", "--from-dir", src, "--public")

        # Their --from-dir is read as them: /root is refused with their EACCES.
        secret = self.model_dir("secret", "root's")
        os.chmod(secret, 0o700)
        r = self.model("create", "theirs", "--from-dir", secret, user=USER, check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("ermission denied", r.stderr)
        self.assertNotIn("theirs", [m["name"] for m in self.model_json("ls")])

        # A private model is not theirs to see, nor a name they can add to.
        r = self.model("show", "private", user=USER, check=False)
        self.assertEqual(r.returncode, 3, r.stderr)  # as unknown as a name nobody holds
        self.assertIn("model private not found", r.stderr)
        self.assertNotIn("root", r.stderr)
        mine = self.model_dir("mine", "theirs")
        os.chown(mine, pw.pw_uid, pw.pw_gid)
        r = self.model("create", "root/private", "--from-dir", mine, user=USER, check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("exists already", r.stderr)
        r = self.model("create", "root/other", "--from-dir", mine, user=USER, check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("another user's", r.stderr)
        # Names are per owner: "private" is a name of their own too.
        made = json.loads(self.model("create", "private", "--from-dir", mine, "--json",
                                     user=USER).stdout)
        self.assertEqual(made["ref"], USER + "/private/1")
        self.assertEqual(json.loads(self.model("show", "private", "--json").stdout)["owner"],
                         "root")
        listed = json.loads(self.model("ls", "--json", user=USER).stdout)
        self.assertEqual(sorted((m["name"], m["owner"]) for m in listed),
                         [("private", USER), ("shared", "root")])
        self.model("rm", "private/1", user=USER)

        # A public one they read and export, but do not change.
        self.assertEqual(json.loads(self.model("show", "shared/1", "--json", user=USER).stdout)
                         ["file"], "model.pt")
        out = os.path.join(mine, "repo")
        self.model("export", "shared/1", "--to", out, user=USER)
        st = os.stat(os.path.join(out, "shared", "1", "model.pt"))
        self.assertEqual(st.st_uid, pw.pw_uid)
        for args in (("alias", "shared", "prod", "1"), ("rm", "shared/1")):
            r = self.model(*args, user=USER, check=False)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("belongs to root", r.stderr)
        # Their own model from their own directory works.
        v = json.loads(self.model("create", "theirs", "--from-dir", mine, "--file", "model.pt",
                                  "--json", user=USER).stdout)
        self.assertEqual(v["owner"], USER)
        # Exporting into root's directory is refused.
        r = self.model("export", "theirs/1", "--to", os.path.join(self.work, "x"), user=USER,
                       check=False)
        self.assertEqual(r.returncode, 1, r.stderr)


if __name__ == "__main__":
    unittest.main()
