"""How soon the verdict card shows after a run ends, in a real browser against a real server.

    python benchmarks/verdict_latency.py --runs 3
Each run: a tiny CPU seed job is started from the page; the job's end is the moment the history database
records the run as done; the card's appearance is the first poll (every 50 ms) that finds the final verdict
("Latest result" with `.st-key-verdict`). Prints each latency and the median. Target: within 1 s.
"""
from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time

from _live_server import CHROMIUM, CHROMIUM_ARGS, free_port, start_server, stop_server

TINY = {"Depth (layers)": "1", "Width": "64", "Heads": "2", "Sequence length": "32", "Batch size": "2",
        "Vocab size": "256", "Warm-up iterations": "1", "Timed iterations": "5"}


def done_at(db: str, known: set[str]) -> tuple[str, float] | None:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT run_id, status FROM runs").fetchall()
    fresh = [r for r, status in rows if r not in known and status == "done"]
    return (fresh[0], time.monotonic()) if fresh else None


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    from playwright.sync_api import sync_playwright
    folder = tempfile.mkdtemp()
    db = os.path.join(folder, "runs.sqlite3")
    env = {**os.environ, "BENCH_DB": db, "BENCH_WARMUP_MIN_S": "0.2"}
    env.pop("BENCH_OPERATOR_TOKEN", None)
    port = free_port()
    server = start_server("app.py", port, env)
    latencies = []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 2000})
            page.goto(f"http://127.0.0.1:{port}")
            page.get_by_text("Machine:").wait_for(timeout=120_000)
            for label, value in TINY.items():
                box = page.get_by_label(label, exact=True)
                box.fill(value)
                box.press("Tab")
                time.sleep(0.5)
            known: set[str] = set()
            for n in range(args.runs):
                page.get_by_role("button", name="Run", exact=True).click()
                end = None
                deadline = time.monotonic() + 300
                while end is None and time.monotonic() < deadline:
                    end = done_at(db, known)
                    time.sleep(0.02)
                assert end is not None, "the job did not finish"
                run_id, t_end = end
                known.add(run_id)
                while time.monotonic() < t_end + 30:
                    card = page.locator(".st-key-verdict")
                    if page.get_by_text("Running now").count() == 0 and card.count() and \
                            "so far" not in card.first.inner_text():
                        break
                    time.sleep(0.05)
                latency = time.monotonic() - t_end
                latencies.append(latency)
                print(f"run {n + 1} ({run_id}): verdict card {latency:.2f} s after the run was stored as done")
            browser.close()
    finally:
        stop_server(server)
    print(f"median {statistics.median(latencies):.2f} s, max {max(latencies):.2f} s over {len(latencies)} runs "
          "(target: within 1 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
