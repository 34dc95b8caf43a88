"""The README's tour as data: every command line of its ```sh blocks, so that a test can run
them as written (tests/integ/test_readme_tour.py, test_readme_serve.py) and fail when the
README gains a command no test runs or names as not runnable here.
"""
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
README = os.path.join(ROOT, "README.md")


def commands(path=README):
    """The command lines of the ```sh blocks, in order: continuation lines joined, the
    comment after two or more spaces and '#' dropped, whitespace collapsed."""
    with open(path) as f:
        text = f.read()
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.split(r"\s{2,}#\s", line, maxsplit=1)[0].strip()
            if line and not line.startswith("#"):
                out.append(" ".join(line.split()))
    return out


def prose(path=README):
    with open(path) as f:
        return f.read()


def bin_dir(base, lathe):
    """A directory with `lathe` in it, for PATH: the README's commands name it bare."""
    d = os.path.join(base, "bin")
    os.makedirs(d, exist_ok=True)
    link = os.path.join(d, "lathe")
    if not os.path.exists(link):
        os.symlink(os.path.abspath(lathe), link)
    return d


def start(test, prefix):
    """A daemon with four simulated GPUs and a work directory where the README's relative
    paths (examples/…) resolve, for `test`; (daemon, work directory, environment)."""
    from harness import LATHE, Daemon, shared_scratch
    base = shared_scratch(test, prefix)
    d = Daemon(gpus="sim:4x24GB")
    d.start()
    test.addCleanup(d.cleanup)
    work = os.path.join(base, "work")
    os.makedirs(work)
    os.symlink(os.path.join(ROOT, "examples"), os.path.join(work, "examples"))
    env = d.env(PATH=bin_dir(base, LATHE) + ":/usr/bin:/bin", HOME=work)
    return d, work, env


def sh(line, cwd, env, timeout=300, stdin=None):
    """One README line through bash, as a user would paste it."""
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, input=stdin)


# What the tour tests do with each README command: run it (in test_readme_tour.py or
# test_readme_serve.py) or say why it cannot run here. A README command in neither fails
# test_readme_tour.py's coverage check.
RUN_TOUR = [
    "lathe up",
    "lathe run --gpus 1 -- python3 train.py",
    "lathe ps",
    "lathe logs -f <run>",
    "lathe gpus",
    "lathe inspect --metrics <run>",
    "lathe run --checkpoint-dir ckpt --retry 2 -- /usr/bin/python3 examples/train_digits.py",
    "lathe inspect <run>",
    "lathe notebook start --gpus 1 --kernel python --kernel r --idle 30m --wait",
    "lathe notebook ls",
    "lathe token create --name laptop",
    "lathe secret set HF_TOKEN",
    "lathe rm --finished --older-than 30d",
    "lathe pools",
    "lathe explain --log train.log",
    "lathe term 抢占式实例",
    "lathe plan --params 7B --precision bf16 --optimizer adamw --gpus 8 --zero 2",
    "lathe snap ls <run>",
    "source <(lathe completion bash)",
]
RUN_SERVE = [
    "lathe run --checkpoint-dir ckpt -- /usr/bin/python3 examples/train_digits.py --handler "
    "examples/digits_inference.py",
    "lathe model create digits --from <run> --handler digits_inference.py",
    "lathe model alias digits prod 1",
    "lathe deploy create digits --model digits@prod --replicas 2 --wait",
    "[ -s digits.key ] || (umask 077; lathe deploy key create digits > digits.key)",
    "curl -H \"Authorization: Bearer $(cat digits.key)\" -d '{\"image\": [[0,0,5,13,9,1,0,0], "
    "…8 rows…]}' http://127.0.0.1:7733/d/digits/predict",
    "lathe model alias digits prod 2",
]
NOT_HERE = {
    "make run": "the daemon in the foreground: every integration test starts the built one",
    "make test": "this very suite",
    "sudo make install": "tests/integ/test_install.py installs into a staging directory",
    "lathe top": "a live screen; tests/integ/test_metrics.py runs `lathe top --once`",
    "lathe run --port 6006 -- sh -c 'exec tensorboard --logdir runs --host 127.0.0.1 --port "
    "\"$LATHE_PORT_6006\"'": "TensorBoard is not installed here; tests/integ/test_ports.py serves "
    "through $LATHE_PORT_*",
    "lathe open <run>": "the TensorBoard run above; tests/integ/test_ports.py opens run ports",
    "lathe login https://lab:8421 --ca ca.pem": "another machine; tests/integ/test_tls.py logs in",
    "lathe ui": "opens a browser; tests/integ/test_browser_open.py",
    "lathe run --pool cluster --gpus 2 -- python3 train.py": "a Slurm cluster; "
    "tests/integ/test_slurm*.py",
    "lathe image import torch ./rootfs.tar": "the Debian+torch image; "
    "tests/integ/test_image_torch.py",
    "lathe run --image torch --gpus 1 -- python3 train.py": "the same image; "
    "tests/integ/test_image_torch.py",
    "lathe notebook start --image torch --wait": "the Debian image with jupyter-notebook; "
    "tests/integ/test_image_notebook.py",
    "lathe run --profile a100x2 -- python3 train.py": "a profiles: entry of config.yaml; "
    "tests/integ/test_profiles.py",
    "lathe doctor": "its network checks wait on DNS; tests/integ/test_doctor.py",
    "lathe serve --repository examples/serve/models": "serves until stopped, on port 8000; "
    "tests/integ/test_serve*.py",
}
