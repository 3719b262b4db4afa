"""Load on a real server while real jobs run on CPU: 20 websocket sessions + 2 Playwright browsers.

    python benchmarks/load.py --sessions 20 --renders 6
Reports page render p50/p95 (websocket rerun -> script_finished), queue correctness from the SQLite file
(jobs ran in submission order, stages never overlapped, each result stored once) and the server's memory.
Traffic goes to 127.0.0.1 only; every loop is bounded in count and time.
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time

import websockets
from playwright.sync_api import sync_playwright
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from _live_server import CHROMIUM, CHROMIUM_ARGS, free_port, start_server, stop_server

JOB = {"Width": "256", "Sequence length": "128", "Batch size": "8", "Timed iterations": "120"}
IDLE = "[data-testid='stApp'][data-test-connection-state='CONNECTED'][data-test-script-state='notRunning']"


async def one_session(url: str, renders: int, out: list[float], deadline: float) -> None:
    async with websockets.connect(url, subprotocols=["streamlit"], max_size=2**26,
                                  origin=url.replace("ws://", "http://").rsplit("/_stcore", 1)[0]) as ws:
        for _ in range(renders):
            if time.time() > deadline:
                return
            msg = BackMsg()
            msg.rerun_script.query_string = ""
            msg.rerun_script.page_script_hash = ""
            start = time.perf_counter()
            await ws.send(msg.SerializeToString())
            while True:
                fm = ForwardMsg()
                fm.ParseFromString(await asyncio.wait_for(ws.recv(), timeout=60))
                if fm.WhichOneof("type") == "script_finished":
                    break
            out.append(time.perf_counter() - start)
            await asyncio.sleep(1.0)  # a viewer's page refreshes about once a second during a run


async def sessions(url: str, count: int, renders: int, out: list[float], deadline: float) -> None:
    await asyncio.gather(*(one_session(url, renders, out, deadline) for _ in range(count)))


def jobs_done(db: str) -> int:
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT COUNT(*) FROM runs WHERE status='done'").fetchone()[0]
    except sqlite3.Error:
        return 0


def browsers_submit(base: str, db: str, submitted: list[float], messages: list[str], wait_s: float) -> None:
    with sync_playwright() as p:
        pages = []
        for _ in range(2):
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1300, "height": 1800})
            page.goto(base)
            page.wait_for_selector(IDLE, timeout=60_000)
            page.get_by_text("Machine:").wait_for(timeout=90_000)
            for label, value in JOB.items():
                box = page.get_by_label(label, exact=True)
                box.fill(value)
                box.press("Enter")
                page.wait_for_selector(IDLE, timeout=60_000)
            pages.append((browser, page))
        for _, page in pages:  # one click per browser: two jobs expected
            page.get_by_role("button", name="Run", exact=True).click()
            submitted.append(time.time())
            message = page.get_by_text("Submitted job")
            message.wait_for(timeout=60_000)
            messages.append(message.first.inner_text())
        deadline = time.time() + wait_s
        while time.time() < deadline and jobs_done(db) < 2:
            time.sleep(1)  # the browsers stay open and keep their live fragments refreshing
        time.sleep(3)
        for browser, _ in pages:
            browser.close()


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS")) / 1024


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--renders", type=int, default=6)
    ap.add_argument("--wait", type=float, default=600,
                    help="seconds the browsers wait, after their clicks, for both jobs to finish")
    args = ap.parse_args()
    db = os.path.join(tempfile.mkdtemp(), "runs.sqlite3")
    port = free_port()
    server = start_server("app.py", port, {**os.environ, "BENCH_DB": db})
    base, ws_url = f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}/_stcore/stream"
    renders: list[float] = []
    submitted: list[float] = []
    messages: list[str] = []
    rss: list[float] = []
    stop = threading.Event()

    def sample_rss() -> None:
        while not stop.is_set():
            rss.append(rss_mib(server.pid))
            time.sleep(0.5)

    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    try:
        driver = threading.Thread(target=browsers_submit, args=(base, db, submitted, messages, args.wait))
        driver.start()
        while len(submitted) < 2 and driver.is_alive():
            time.sleep(0.2)
        asyncio.run(sessions(ws_url, args.sessions, args.renders, renders, time.time() + 180))
        rendered_by = time.time()
        driver.join(timeout=args.wait + 60)
    finally:
        stop.set()
        stop_server(server)
    with sqlite3.connect(db) as conn:
        runs = conn.execute("SELECT run_id, created_at, status FROM runs ORDER BY created_at, rowid").fetchall()
        stages = [json.loads(r[1]) | {"run_id": r[0]} for r in
                  conn.execute("SELECT run_id, result_json FROM stages ORDER BY run_id, idx")]
        dup = conn.execute("SELECT COUNT(*) - COUNT(DISTINCT run_id || ':' || idx) FROM stages").fetchone()[0]
        iters = conn.execute("SELECT run_id, idx, COUNT(*) FROM iterations GROUP BY run_id, idx").fetchall()
    ran = sorted((s for s in stages if s.get("started_at")), key=lambda s: s["started_at"])
    overlaps = sum(1 for a, b in itertools.pairwise(ran) if b["started_at"] < a["finished_at"])
    order = [s["run_id"] for s in ran]
    in_order = order == sorted(order, key=lambda rid: [r[0] for r in runs].index(rid))
    print(f"renders: {len(renders)} from {args.sessions} websocket sessions while jobs ran; "
          f"p50 {statistics.median(renders):.2f} s, p95 {statistics.quantiles(renders, n=20)[-1]:.2f} s, "
          f"max {max(renders):.2f} s")
    print(f"jobs: {len(runs)} ({', '.join(r[2] for r in runs)}); stages run: {len(ran)}; overlapping stages: "
          f"{overlaps}; ran in submission order: {in_order}; duplicate stage rows: {dup}; "
          f"iteration rows per ok stage: {sorted({n for _, _, n in iters})}")
    print(f"Run pressed {len(submitted)} times (once per browser); messages: {messages}; "
          f"runs created: {len(runs)} at {', '.join(r[1] for r in runs)}")
    print(f"server RSS: start {rss[0]:.0f} MiB, peak {max(rss):.0f} MiB, end {rss[-1]:.0f} MiB")
    print(f"the websocket sessions ended {rendered_by - submitted[-1]:.0f} s after the second click; "
          f"the last job ended {max((s['finished_at'] for s in ran), default=submitted[-1]) - submitted[-1]:.0f} s "
          f"after it")
    checks = {"one run per click": len(runs) == len(submitted) == 2,
              f"every run done within --wait {args.wait:.0f} s": all(r[2] == "done" for r in runs),
              "no overlapping stages": overlaps == 0, "submission order": in_order, "no duplicate rows": dup == 0}
    failed = [name for name, good in checks.items() if not good]
    print("queue correctness:", "PASS" if not failed else f"FAIL ({'; '.join(failed)})")
    ok = not failed
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
