"""Submissions racing SIGKILLs of the daemon: `lathe run` sends an
Idempotency-Key and retries once with it when the daemon goes away mid-call,
so no submission may become two runs, and each one the CLI reported is there.

Imported by tests/integ/test_submit_race.py (a few kills, in `make test`) and
tests/slow/test_submit_race.py (many, ctest label `slow`).
"""
import collections
import random
import sys
import threading
import time

from harness import Daemon


def submit_race(test, submissions, kills, seed=5):
    rnd = random.Random(seed)
    d = Daemon(gpus="none").start()
    results = {}  # tag -> (exit code, printed id, whether the CLI retried)

    def submitter():
        for i in range(submissions):
            tag = f"race-{i}"
            r = d.cli("run", "--", "echo", tag, check=False)
            results[tag] = (r.returncode, r.stdout.strip(), "idempotency key" in r.stderr)
            if r.returncode != 0:
                time.sleep(0.1)  # the daemon is down: do not spend every submission on that

    try:
        t = threading.Thread(target=submitter)
        t.start()
        done = 0
        while t.is_alive() and done < kills:
            time.sleep(rnd.uniform(0.1, 1.0))
            d.kill9()
            time.sleep(rnd.uniform(0.0, 0.3))
            d.start()
            done += 1
        t.join()
        runs = d.runs(all_runs=True)
        count = collections.Counter(r["spec"]["command"][-1] for r in runs)
        duplicates = sum(n - 1 for n in count.values() if n > 1)
        ok = [tag for tag, (rc, _, _) in results.items() if rc == 0]
        retried = sum(1 for _, _, again in results.values() if again)
        print(f"submit race: {submissions} submissions, {done} kills, {len(ok)} answered, "
              f"{retried} retried, {duplicates} duplicate runs", file=sys.stderr)
        test.assertEqual(duplicates, 0, {t: n for t, n in count.items() if n > 1})
        ids = {r["id"]: r["spec"]["command"][-1] for r in runs}
        for tag in ok:
            rid = results[tag][1]
            test.assertEqual(count[tag], 1, tag)
            test.assertEqual(ids.get(rid), tag, (tag, rid))
        test.assertGreater(len(ok), 0)
        return done
    finally:
        d.cleanup()
