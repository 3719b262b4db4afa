"""tests/e2e/live_server.py, loaded by path: the benchmarks start and drive the app exactly as the browser tests do.

By path because tests/ is not a package and nothing edits sys.path; a benchmark run as `python benchmarks/x.py`
imports this module because Python puts the script's own folder first on sys.path.
"""
import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "tests" / "e2e" / "live_server.py"
_spec = importlib.util.spec_from_file_location("live_server", _PATH)
if _spec is None or _spec.loader is None:
    raise ImportError(f"cannot load {_PATH}")
live_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(live_server)

CHROMIUM, CHROMIUM_ARGS = live_server.CHROMIUM, live_server.CHROMIUM_ARGS
free_port, start_server, stop_server = live_server.free_port, live_server.start_server, live_server.stop_server
