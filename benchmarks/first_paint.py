"""First paint of the Benchmark page vs a trivial one-line Streamlit app, in the same run, in Chromium.

First paint = from navigation until the app is connected and its script is idle.
    python benchmarks/first_paint.py --repeats 5
Target: the dashboard within 1.3x of the trivial app.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from playwright.sync_api import sync_playwright

from _live_server import CHROMIUM, CHROMIUM_ARGS, free_port, start_server, stop_server

IDLE = "[data-testid='stApp'][data-test-connection-state='CONNECTED'][data-test-script-state='notRunning']"


def first_paint(browser, url: str) -> float:
    context = browser.new_context()  # a new session each time, as a new visitor
    page = context.new_page()
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_selector(IDLE, timeout=60_000)
    elapsed = time.perf_counter() - start
    context.close()
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    trivial = os.path.join(tmp, "trivial.py")
    with open(trivial, "w") as fh:
        fh.write("import streamlit as st\nst.write('hello')\n")
    env = {**os.environ, "BENCH_DB": os.path.join(tmp, "runs.sqlite3")}
    servers = {"trivial": start_server(trivial, (p1 := free_port()), env),
               "dashboard": start_server("app.py", (p2 := free_port()), env)}
    urls = {"trivial": f"http://127.0.0.1:{p1}", "dashboard": f"http://127.0.0.1:{p2}"}
    times = {"trivial": [], "dashboard": []}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for name in urls:  # one untimed visit each: server-side module imports happen once per server
                first_paint(browser, urls[name])
            for _ in range(args.repeats):  # alternate, so drift hits both alike
                for name in urls:
                    times[name].append(first_paint(browser, urls[name]))
            browser.close()
    finally:
        for proc in servers.values():
            stop_server(proc)
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"{k:<10} median {med[k]:.2f} s  (runs: {', '.join(f'{t:.2f}' for t in v)})")
    print(f"ratio dashboard / trivial: {med['dashboard'] / med['trivial']:.2f} (target <= 1.3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
