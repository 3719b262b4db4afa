"""measure/trace.py: one trace, read once, and every figure read from it.

The saved traces' figures are compared with those the three separate readers gave before the one trace model
(tests/data/trace_figures.json, written by the commit its note names): a regression guard, exact to the bit.
"""
from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from pathlib import Path

import pytest

from bench_core.measure.breakdown import from_trace
from bench_core.measure.gemms import gemm_trace
from bench_core.measure.idle import idle_of
from bench_core.measure.trace import Source, Trace, from_chrome, from_profiler, load
from helpers import TESTS

DATA = TESTS / "data"
BEFORE = json.loads((DATA / "trace_figures.json").read_text())
CUDA = {"idle_trace.json": True, "cpu_step_trace.json": False}   # which saved trace is of a GPU run


def _plain(value):
    """As JSON keeps it: tuples become lists, floats keep every bit."""
    return json.loads(json.dumps(value))


def _gemm_figures(trace: Trace) -> dict:
    g = gemm_trace(trace)
    return {"dtypes": sorted(g.dtypes),
            "kernels": [[k.name, k.us, None if k.op is None else [k.op.name, [list(s) for s in k.op.shapes]]]
                        for k in g.kernels],
            "ops": [[o.name, [list(s) for s in o.shapes]] for o in g.ops]}


def test_fixture_covers_every_saved_trace():
    assert set(BEFORE["traces"]) == set(CUDA)


@pytest.mark.parametrize("name", sorted(CUDA))
def test_saved_trace_figures_as_before(name):
    trace = load(DATA / name)
    before = BEFORE["traces"][name]
    assert trace.source == Source.CHROME
    assert _plain(from_trace(trace, 1, CUDA[name]).to_dict()) == before["profile"]
    export_span = {e["name"] for e in json.loads((DATA / name).read_text())["traceEvents"] if e.get("cat") == "Trace"}
    assert trace.names == set(before["names"]) - export_span  # the old replay counted the export's span as an event
    assert _plain(_gemm_figures(trace)) == before["gemms"]
    idle = idle_of(trace, 1)
    assert (None if idle is None else _plain(idle.to_dict())) == before["idle_from_chrome"]


def test_saved_cpu_trace_has_gemm_shapes():
    """The fixture would pass on a reader that drops shapes if the old one had too: check there is one to keep."""
    ops = BEFORE["traces"]["cpu_step_trace.json"]["gemms"]["ops"]
    assert ops and all(shapes for _, shapes in ops)


def test_saved_trace_reads_as_the_live_profiler():
    """A real CPU training step read from the profiler and from its own Chrome export: the same figures."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 8))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(4, 8)

    def step():
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()

    step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    live = from_profiler(prof)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        prof.export_chrome_trace(str(path))
        saved = load(path)
    assert (live.source, saved.source) == (Source.KINETO, Source.CHROME)
    assert from_trace(saved, 1, False) == from_trace(live, 1, False)
    # thread ids and the time origin are numbered differently in the two; the ops and their lengths are the same
    assert [(o.name, o.end_ns - o.start_ns, o.correlation) for o in saved.ops] == \
        [(o.name, o.end_ns - o.start_ns, o.correlation) for o in live.ops]
    assert saved.names == live.names and saved.shaped_ops == live.shaped_ops
    assert gemm_trace(saved) == gemm_trace(live)


def test_kernel_tied_to_its_launch():
    trace = load(DATA / "idle_trace.json")
    by_corr = {op.correlation: op.name for op in trace.ops}
    gemm = next(a for a in trace.activities if a.name == "ampere_sgemm_128x64_tn")
    assert (gemm.stream, gemm.correlation, by_corr[gemm.launched_by]) == (7, 100, "aten::op0")
    assert trace.launches[gemm.correlation] == 90_000      # ns: the cudaLaunchKernel at 90 us


def test_load_reads_gzip(tmp_path):
    path = tmp_path / "trace.json.gz"
    with open(DATA / "idle_trace.json", "rb") as src, gzip.open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    assert load(path) == load(DATA / "idle_trace.json")


def test_chrome_microseconds_to_whole_nanoseconds():
    trace = from_chrome({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "tid": 1,
                                          "ts": 1.005, "dur": 0.003, "args": {"External id": 4}}]})
    assert trace.ops[0][1:3] == (1005, 1008)      # 1.005 * 1000 is 1004.9999999999999 in floats
