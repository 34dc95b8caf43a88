"""The daemon is killed with SIGKILL again and again while runs come and go;
no run record, exit status or log line may be lost.

Imported by tests/integ/test_crash_loop.py (a few kills, in `make test`) and
tests/slow/test_crash_loop.py (many kills, ctest label `slow`).
"""
import json
import random
import time

from harness import Daemon


def crash_loop(test, kills, runs_per_round=4, seed=7):
    rnd = random.Random(seed)
    d = Daemon(gpus="sim:2x24GB").start()
    expected = {}  # run id -> expected exit code
    try:
        for k in range(kills):
            for _ in range(runs_per_round):
                code = rnd.choice([0, 0, 0, 3])
                secs = rnd.choice(["0", "0.3", "1", "2"])
                gpus = rnd.choice(["0", "1"])
                rid = d.submit("--gpus", gpus, "--", "sh", "-c",
                               f'echo begin $LATHE_RUN_ID; sleep {secs}; echo end $LATHE_RUN_ID; exit {code}')
                expected[rid] = code
            time.sleep(rnd.uniform(0.0, 1.0))
            d.kill9()
            time.sleep(rnd.uniform(0.0, 1.5))
            d.start()
        for rid, code in expected.items():
            r = d.wait_state(rid, ["succeeded", "failed", "lost"], timeout=180)
            test.assertNotEqual(r["state"], "lost", json.dumps(r)[:3000])
            test.assertEqual(r["exit_code"], code, json.dumps(r)[:3000])
            test.assertEqual(r["state"], "succeeded" if code == 0 else "failed", json.dumps(r)[:3000])
            test.assertEqual(d.logs(rid), f"begin {rid}\nend {rid}\n")
        listed = {r["id"] for r in d.runs(all_runs=True)}
        test.assertEqual(set(expected), listed)
    finally:
        d.cleanup()


def exit_race_loop(test, rounds, seed=5):
    """Runs that end at once, the daemon killed 0-30 ms after their submission:
    their monitors write exit.json while the next daemon is recovering. Every
    run must end failed with its exit code, never `lost` (nor re-run)."""
    rnd = random.Random(seed)
    d = Daemon(gpus="none").start()
    ids = []
    try:
        for _ in range(rounds):
            for _ in range(4):
                ids.append(d.submit("--", "sh", "-c", "exit 1"))
            time.sleep(rnd.uniform(0.0, 0.03))
            d.kill9()
            d.start()
        for rid in ids:
            r = d.wait_state(rid, ["failed", "lost", "succeeded"], timeout=180)
            # (A run whose monitor never started is requeued without using a retry: attempt may be 2.)
            test.assertEqual((r["state"], r["exit_code"], r["retries_used"]), ("failed", 1, 0), json.dumps(r)[:3000])
            test.assertFalse([e for e in r["events"] if e["data"].get("to") == "lost"], json.dumps(r)[:3000])
    finally:
        d.cleanup()
