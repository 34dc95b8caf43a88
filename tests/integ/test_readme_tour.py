"""The README's short tour, run as written against a daemon with simulated GPUs, so that the
README cannot drift from what Lathe does: each command of its ```sh blocks that can run here
is pasted into bash (with `<run>` the run the tour made last), and the figures its prose gives
for the bundled example (test accuracy, steps, final loss) are the ones this run prints. Every
README command is either run here or in test_readme_serve.py, or named in
readme_tour.NOT_HERE with the test that covers it instead.
"""
import os
import re
import shutil
import unittest

import readme_tour

HAVE_JUPYTER = shutil.which("jupyter-notebook") is not None


class ReadmeTour(unittest.TestCase):
    def setUp(self):
        self.d, self.work, self.env = readme_tour.start(self, "lathe-it-tour-")
        with open(os.path.join(self.work, "train.py"), "w") as f:
            f.write("print('hello from the tour')\n")
        with open(os.path.join(self.work, "train.log"), "w") as f:
            f.write("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
        self.last_run = None
        self.ran = []

    def paste(self, line, check=True, stdin=None, timeout=300):
        """A README line, as written but for `<run>`, through bash in the work directory."""
        self.assertIn(line, readme_tour.commands(), "the README no longer has this line")
        shown = line.replace("<run>", self.last_run or "<run>")
        r = readme_tour.sh(shown, self.work, self.env, timeout=timeout, stdin=stdin)
        if check:
            self.assertEqual(r.returncode, 0, f"{shown}\n{r.stdout}\n{r.stderr}")
        if line.startswith("lathe run "):
            self.last_run = r.stdout.strip().splitlines()[-1]
        self.ran.append(line)
        return r

    def test_every_readme_command_is_run_or_said_why_not(self):
        planned = set(readme_tour.RUN_TOUR) | set(readme_tour.RUN_SERVE) | set(readme_tour.NOT_HERE)
        missing = [c for c in readme_tour.commands() if c not in planned]
        self.assertEqual(missing, [], "README commands no tour test runs or names (readme_tour.py)")
        gone = [c for c in planned if c not in readme_tour.commands()]
        self.assertEqual(gone, [], "tour entries the README no longer has")

    def test_the_tour_as_written(self):
        self.paste("lathe up")
        # The first block: a job, its log, the GPUs, its metrics.
        self.paste("lathe run --gpus 1 -- python3 train.py")
        self.paste("lathe ps")
        self.assertIn("hello from the tour", self.paste("lathe logs -f <run>").stdout)
        self.assertIn("simulated", self.paste("lathe gpus").stdout.lower())
        self.paste("lathe inspect --metrics <run>")
        # The bundled example, and what the README says of it.
        self.paste("lathe run --checkpoint-dir ckpt --retry 2 -- /usr/bin/python3 "
                   "examples/train_digits.py")
        end = self.d.wait_state(self.last_run, ["succeeded", "failed"], timeout=280)
        log = self.d.logs(self.last_run)
        self.assertEqual(end["state"], "succeeded", log)
        self.assertIn("checkpoint", self.paste("lathe inspect <run>").stdout)
        said = re.search(r"reaches ([\d.]+)% test accuracy after its (\d+) steps \(final loss "
                         r"([\d.]+e-\d+)\)", readme_tour.prose())
        self.assertIsNotNone(said, "the README's sentence on the example's figures")
        got = re.search(r"final step (\d+) loss ([\d.e-]+) .*test accuracy ([\d.]+)", log)
        self.assertIsNotNone(got, log[-2000:])
        self.assertEqual(int(said.group(2)), int(got.group(1)))
        self.assertEqual(float(said.group(1)), round(100 * float(got.group(3)), 1))
        self.assertEqual(float(said.group(3)), float(f"{float(got.group(2)):.2g}"),
                         "the README's final loss (2 significant digits) is the one printed")
        self.paste("lathe snap ls <run>")
        # Notebooks.
        if HAVE_JUPYTER:
            out = self.paste("lathe notebook start --gpus 1 --kernel python --kernel r --idle 30m "
                             "--wait", timeout=180).stdout
            self.assertRegex(out, r"http://\w+\.localhost:\d+/_lathe/login\?code=")
            self.assertIn("python,r", self.paste("lathe notebook ls").stdout)
        # The shared server's block, what runs here.
        self.assertTrue(self.paste("lathe token create --name laptop").stdout.startswith("lathe_"))
        self.paste("lathe secret set HF_TOKEN", stdin="hf_example\n")
        self.paste("lathe rm --finished --older-than 30d")
        self.paste("lathe pools")
        # The tools in the same binary.
        self.assertIn("out of memory", self.paste("lathe explain --log train.log").stdout.lower())
        self.assertIn("preempt", self.paste("lathe term 抢占式实例").stdout.lower())
        self.paste("lathe plan --params 7B --precision bf16 --optimizer adamw --gpus 8 --zero 2")
        self.paste("source <(lathe completion bash)")
        expected = [c for c in readme_tour.RUN_TOUR if HAVE_JUPYTER or "notebook" not in c]
        self.assertEqual(sorted(set(self.ran)), sorted(set(expected)))


if __name__ == "__main__":
    unittest.main()
