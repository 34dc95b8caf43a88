"""The README's path from training to a served endpoint, run as written (test_readme_tour.py
has the rest of the tour): train with the handler, register digits/1, alias it, deploy two
replicas, make a key with the README's line and call the endpoint with its curl line — each
pasted three times, as a user pasting the README again would (a deployment holds at most two
live keys, and a key must work the moment it is printed) — then digits/2 and the alias moved.
"""
import json
import os
import unittest

import readme_tour

# One 8x8 digit (sklearn's digits[0], a 0), for the curl line's "…8 rows…".
ZERO = [[0, 0, 5, 13, 9, 1, 0, 0], [0, 0, 13, 15, 10, 15, 5, 0], [0, 3, 15, 2, 0, 11, 8, 0],
        [0, 4, 12, 0, 0, 8, 8, 0], [0, 5, 8, 0, 0, 9, 8, 0], [0, 4, 11, 0, 1, 12, 7, 0],
        [0, 2, 14, 5, 10, 12, 0, 0], [0, 0, 6, 13, 10, 0, 0, 0]]


class ReadmeServe(unittest.TestCase):
    def setUp(self):
        self.d, self.work, self.env = readme_tour.start(self, "lathe-it-tour-serve-")
        self.last_run = None

    def paste(self, line, subst=(), timeout=300):
        self.assertIn(line, readme_tour.commands(), "the README no longer has this line")
        self.assertIn(line, readme_tour.RUN_SERVE)
        shown = line.replace("<run>", self.last_run or "<run>")
        for a, b in subst:
            shown = shown.replace(a, b)
        r = readme_tour.sh(shown, self.work, self.env, timeout=timeout)
        self.assertEqual(r.returncode, 0, f"{shown}\n{r.stdout}\n{r.stderr}")
        if line.startswith("lathe run "):
            self.last_run = r.stdout.strip().splitlines()[-1]
        return r

    def test_from_training_to_a_served_endpoint_as_written(self):
        train, create, alias1, deploy, key, curl, alias2 = readme_tour.RUN_SERVE
        self.paste(train)
        end = self.d.wait_state(self.last_run, ["succeeded", "failed"], timeout=280)
        self.assertEqual(end["state"], "succeeded", self.d.logs(self.last_run))
        self.assertIn("digits/1", self.paste(create).stdout + self.paste(alias1).stdout)
        # The endpoint is /d/OWNER/digits/; the README's /d/digits/ answers while it is the only digits.
        self.assertIn("/d/root/digits/", self.paste(deploy, timeout=280).stdout)
        show = json.loads(self.d.cli("deploy", "show", "digits", "--json").stdout)
        port = show["url"].split(":")[2].split("/")[0]
        payload = json.dumps({"image": ZERO})
        subst = [('{"image": [[0,0,5,13,9,1,0,0], …8 rows…]}', payload),
                 ("127.0.0.1:7733", "127.0.0.1:" + port), ("curl ", "curl -sS --fail ")]
        for _ in range(3):  # pasted again and again: one key, kept, working at once
            self.paste(key)
            answer = json.loads(self.paste(curl, subst).stdout)
            self.assertEqual(answer["digit"], 0, answer)
        keys = json.loads(self.d.cli("deploy", "key", "ls", "digits", "--json").stdout)
        self.assertEqual(len(keys), 1)
        self.assertEqual(os.stat(os.path.join(self.work, "digits.key")).st_mode & 0o077, 0)
        self.assertIn("digits/2", self.paste(create).stdout)
        self.paste(alias2)
        self.d.wait_for(lambda: json.loads(self.d.cli("deploy", "show", "digits", "--json")
                                           .stdout)["version"] == "root/digits/2" or None,
                        "the rollout to digits/2", 240)
        answer = json.loads(self.paste(curl, subst).stdout)
        self.assertEqual(answer["digit"], 0, answer)


if __name__ == "__main__":
    unittest.main()
