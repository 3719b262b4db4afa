"""Helpers shared by several test folders (and by a child process in tests/faults).

Imported as `helpers`: pytest puts tests/ on sys.path because tests/conftest.py lives there (rootdir-less
"prepend" import mode), so no folder needs to be a package and no test edits sys.path.
"""
import importlib.util
import os
import signal
import sys
import textwrap
import threading
import time
from dataclasses import replace
from pathlib import Path

from bench_core.config.bench_config import BenchConfig
from bench_core.levers.presets import PRESETS
from bench_core.machine.probe import Probe
from bench_core.results.records import RunResult, Status, initial_stage

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent   # the checkout: docs/data holds the measured runs tests read
CFG = BenchConfig(depth=1, width=32, heads=2, seq_len=16, batch_size=2, vocab_size=64, warmup=1, iters=3, device="cpu")
# A CPU machine without Apex, as the probe reports it (a partial dict: Probe.from_dict fills in the rest).
PROBE_DATA = {"cuda": {"available": False}, "cpu": {"available_bytes": 8 * 2**30}, "apex": {"status": "missing"},
              "adam_fused": {"cpu": True}, "bf16": {"cpu": True}, "fp16": {"cpu": True},
              "compile": {"cpu": {"usable": True}}}
PROBE = Probe.from_dict(PROBE_DATA)


def sample_runs():
    """tests/bench_core/sample_runs.py (its `gpu_run()`), from any test folder: loaded by path, once."""
    module = sys.modules.get("sample_runs")
    if module is None:
        spec = importlib.util.spec_from_file_location("sample_runs", TESTS / "bench_core" / "sample_runs.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["sample_runs"] = module
        spec.loader.exec_module(module)
    return module


class FakeRunner:
    """Stands in for runner.run_all (JobManager's `runner`): each stage takes `seconds` and ends ok, one after the
    other, reporting every iteration through the hooks. Records the order of stage runs and their overlap."""

    def __init__(self, seconds=0.05):
        self.seconds, self.calls, self.running, self.max_running = seconds, [], 0, 0
        self.lock = threading.Lock()

    def __call__(self, run, probe, hooks):
        for stage in run.stages:
            if hooks.cancel.is_set():
                break
            with self.lock:
                self.running += 1
                self.max_running = max(self.max_running, self.running)
                self.calls.append((run.config.seed, stage.index))
            result = replace(stage, status=Status.RUNNING)
            try:
                for _ in range(run.config.iters):
                    if hooks.cancel.is_set():
                        result = replace(result, status=Status.CANCELLED, reason="cancelled by user")
                        break
                    time.sleep(self.seconds / run.config.iters)
                    result = replace(result, times_ms=result.times_ms + (1.0,), losses=result.losses + (4.0,))
                    run = run.with_stage(result)
                    hooks.on_update(run)
                else:
                    result = replace(result, status=Status.OK, rounds=(len(result.times_ms),))
            finally:
                with self.lock:
                    self.running -= 1
            run = run.with_stage(result)
            hooks.on_update(run)
            hooks.on_stage_done(run, result)
        cancelled = hooks.cancel.is_set()
        for stage in run.stages:
            if not stage.finished:
                stage = replace(stage, status=Status.CANCELLED, reason="job cancelled")
                run = run.with_stage(stage)
                hooks.on_stage_done(run, stage)
        return replace(run, status=Status.CANCELLED if cancelled else Status.DONE)


def wait(manager, job_id, timeout=60):
    deadline = time.time() + timeout
    while manager.snapshot(job_id).active:
        assert time.time() < deadline, "job did not finish"
        time.sleep(0.02)
    return manager.snapshot(job_id)


def wait_for(predicate, timeout=60, what="condition"):
    deadline = time.time() + timeout
    while not predicate():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def fake_package(tmp_path, summary, version, ext_source=None):
    pkg = tmp_path / "apex"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    info = tmp_path / f"apex-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: apex\nVersion: {version}\nSummary: {summary}\n")
    if ext_source is not None:
        (tmp_path / "amp_C.py").write_text(textwrap.dedent(ext_source))
    return {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


# ---------------------------------------------------------------- worker processes, seen from /proc
# A pid names a process only together with its start time: pids wrap (pid_max may be 32768) and a busy machine
# reuses them within minutes. Linux never hands out a pid still in use as a process group id, so once a worker's pid
# belongs to another process, nothing is left of the worker's group either.
class WorkerSpy:
    """Records every stage worker the engine starts (WorkerHandle) as (pid, start time), for checks through /proc."""

    def __init__(self, monkeypatch):
        from bench_core.run import processes
        self.workers: list[tuple[int, int]] = []
        original = processes.WorkerHandle.__init__
        spy = self

        def init(handle, *args, **kwargs):
            original(handle, *args, **kwargs)
            spy.workers.append((handle.proc.pid, start_time(handle.proc.pid)))
        monkeypatch.setattr(processes.WorkerHandle, "__init__", init)

    @property
    def pids(self) -> list[int]:
        return [pid for pid, _ in self.workers]


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state is [0], ppid [1], pgrp [2], starttime [19]);
    None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def start_time(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[19]) if fields is not None else None


def alive(pid: int, started: int | None = None) -> bool:
    """Running or sleeping: neither gone nor a zombie waiting to be reaped (and, given `started`, the same process,
    not a later one that got its pid)."""
    fields = _stat(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return started is None or int(fields[19]) == started


def group_members(pgid: int, started: int | None = None) -> list[int]:
    """Live processes in the process group `pgid` (a worker leads its own group: start_new_session). Given the
    leader's start time: empty once `pgid` belongs to another process (then that group cannot be the worker's)."""
    if started is not None and start_time(pgid) not in (None, started):
        return []
    members = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        fields = _stat(int(name))
        if fields is not None and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            members.append(int(name))
    return members


def environ_of(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as fh:
        items = [item.split(b"=", 1) for item in fh.read().split(b"\0") if b"=" in item]
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in items}


def kill_group(pgid: int, started: int | None) -> None:
    """Clean-up after a failed assertion: only the group of a worker this test started (`started`: its leader's
    start time, so a pid handed to another process since is left alone)."""
    if not (alive(pgid, started) or group_members(pgid, started)):
        return
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def sample_run() -> RunResult:
    """The seed ladder on an H200: a verified baseline, an Apex stage that fell back, an unavailable stage whose
    reason is a spreadsheet formula, and an OOM."""
    cfg = BenchConfig(depth=2, width=64, heads=4, seq_len=32, batch_size=2, vocab_size=256, iters=4, device="cuda")
    stages = [initial_stage(i, s, 4) for i, s in enumerate(PRESETS["seed"])]
    stages[0] = replace(stages[0], status=Status.OK, times_ms=(10.0, 11.0, 10.5, 12.0), losses=(5.5, 5.4, 5.3, 5.2),
                        rounds=(4,), peak_allocated_mib=100.0, peak_reserved_mib=120.0, verdict="verified",
                        kernels={"aten_foreach": ["aten::_foreach_add_"]})
    stages[1] = replace(stages[1], status=Status.OK, times_ms=(5.0, 5.5, 5.2, 5.1), losses=(5.5, 5.4, 5.3, 5.2),
                        rounds=(4,), peak_allocated_mib=90.0, verdict="fallback",
                        warnings=("Apex FusedAdam fell back to PyTorch: trace shows aten::_fused_adam_",))
    stages[2] = replace(stages[2], status=Status.UNAVAILABLE,
                        reason="=HYPERLINK(\"x\") apex amp_C extension not built")
    stages[3] = replace(stages[3], status=Status.OOM, reason="OutOfMemoryError: Tried to allocate 20.00 GiB")
    machine = Probe.from_dict({"torch": "2.11.0", "cuda_runtime": "13.0", "driver": "580",
                               "cuda": {"available": True, "device_count": 1, "name": "NVIDIA H200"},
                               "apex": {"status": "genuine", "distribution": {"version": "0.1"}}})
    return RunResult(config=cfg, machine=machine, device="cuda", preset="seed", stages=tuple(stages),
                     status=Status.DONE)


def built_event(job, world: int = 1):
    """Start a real worker (torchrun when world > 1) for `job` and return its `built` event; the worker is then
    killed: what the job told it is known by then, before any measured step."""
    from bench_core.run import events as ev
    from bench_core.run.processes import WorkerHandle
    handle = WorkerHandle(job, dict(os.environ), world=world)
    handle.build()   # a gated worker builds only when told
    try:
        for line in iter(handle.lines.get, None):
            event = ev.decode(line)
            if isinstance(event, ev.Built):
                return event
        raise AssertionError(f"the worker sent no built event: {handle.stderr_text()}")
    finally:
        handle.kill()
        handle.close()


def step_timings(ms_by_key: dict[str, float]):
    """Fake sweep timings: each stage key's whole step takes the given ms at any depth (a block adds nothing), so
    a comparison's predicted speedup is the ratio of its two figures."""
    from bench_core.sweep.timing.timings import KernelTime, Part, PointTimings
    return PointTimings(tuple(KernelTime(part, key, ms, ms, ms, 0, 1) for key, ms in ms_by_key.items()
                              for part in (Part.STEP_1, Part.STEP_2)), 0.0, 1)


def adam_pair_timings(a_ms: float, b_ms: float):
    """A sweep of adam against adam-fused (fp32, layernorm): adam's step a_ms, adam-fused's b_ms, so the predicted
    speedup of adam-fused over adam is a_ms / b_ms."""
    return step_timings({"adam+layernorm+fp32": a_ms, "adam-fused+layernorm+fp32": b_ms})


def tiny_sweep_spec(budget: float | None = None, widths: tuple[int, ...] = (64, 128, 256, 512)):
    """That comparison along width on a one-block CPU model."""
    from bench_core.config.bench_config import BenchConfig
    from bench_core.sweep.core.spec import Axis, SweepSpec, parse_comparison
    base = BenchConfig(depth=1, width=64, heads=2, seq_len=16, batch_size=2, vocab_size=128, device="cpu")
    return SweepSpec(parse_comparison("adam+layernorm+fp32,adam-fused+layernorm+fp32", "gpt"), base,
                     (Axis("width", widths),), budget)


def tiny_sweep(two_axes: bool = False):
    """A finished sweep of `tiny_sweep_spec` (or of width x batch_size): point i predicted x0.5(i + 1) x 1.1, the
    odd points measured 10% under their prediction, with peaks."""
    from bench_core.results.records import Status
    from bench_core.sweep.core.records import PointMeasurement, PointPrediction, PointResult, SweepResult
    from bench_core.sweep.core.spec import Axis, SweepSpec, grid
    spec = tiny_sweep_spec()
    if two_axes:
        spec = SweepSpec(spec.comparison, spec.base, (Axis("width", (64, 128)), Axis("batch_size", (2, 4))), None)
    points = []
    for i, point in enumerate(grid(spec.axes, spec.base)):
        s = 0.5 * (i + 1)
        pred = PointPrediction(s * 1.1, s, s * 1.2, 2.0, 2.0 / s, "gpu-bound", adam_pair_timings(s, 1.0))
        meas = PointMeasurement(Status.OK, None, s, s * 0.9, s * 1.1, "within one process", 20.0, 20.0 / s,
                                "unknown", 100.0, 70.0, 12.5) if i % 2 else None
        points.append(PointResult(point.index, point.values, pred, None, meas))
    return SweepResult(spec, "cpu", "CPU", tuple(points), Status.DONE, notes=("a note",))


def load_benchmark(name: str):
    """A script of benchmarks/ as a module (they are scripts, not a package), registered so its dataclasses can
    look their module up while it loads."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[1] / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def plain_title(fig) -> str:
    """A chart's title as one line of text: its wrapped lines joined, the subtitle's size tags left out."""
    import re
    return re.sub(r"<[^>]+>", "", fig.layout.title.text.replace("<br>", " "))


# ---------------------------------------------------------------- Hugging Face models from tiny configs
class HFAdapter:
    """The engine's model contract around a Hugging Face causal LM, as bench_core/models/hf.py keeps it (`.hf`,
    `.model_type`, `lm_head`, forward(idx, targets) -> (logits | None, loss | None), labels passed, no cache): the
    surgery tests build their own until that adapter is merged. A factory, so torch is imported only when used."""

    def __new__(cls, hf):
        import torch

        class Adapter(torch.nn.Module):
            def __init__(self, hf):
                super().__init__()
                self.hf = hf
                self.model_type = hf.config.model_type
                self.lm_head = hf.get_output_embeddings()

            def forward(self, idx, targets=None):
                out = self.hf(input_ids=idx, labels=targets, use_cache=False)
                return out.logits, out.loss
        return Adapter(hf)


def tiny_hf(kind: str, depth: int = 2, width: int = 64, vocab: int = 256, **over):
    """A tiny random Hugging Face model (nothing downloaded, float32), its norm weights drawn away from 1 so a swap
    that dropped them would change the output. kind: llama, gpt2 or gemma; `over` sets Llama's config fields."""
    import torch
    import transformers
    torch.manual_seed(0)
    heads = width // 16
    if kind == "gpt2":
        cfg = transformers.GPT2Config(n_embd=width, n_layer=depth, n_head=heads, vocab_size=vocab, n_positions=512,
                                      bos_token_id=0, eos_token_id=0)
    elif kind == "gemma":
        cfg = transformers.GemmaConfig(hidden_size=width, intermediate_size=2 * width, num_hidden_layers=depth,
                                       num_attention_heads=heads, num_key_value_heads=heads // 2, head_dim=16,
                                       vocab_size=vocab, max_position_embeddings=512)
    else:
        cfg = transformers.LlamaConfig(**{"hidden_size": width, "intermediate_size": 2 * width,
                                          "num_hidden_layers": depth, "num_attention_heads": heads,
                                          "num_key_value_heads": heads // 2, "vocab_size": vocab,
                                          "max_position_embeddings": 512, **over})
    model = HFAdapter(transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or "ln_" in name:
                p.uniform_(0.5, 1.5)
    return model


# A short CPU run of a tiny model: enough steps to time, nothing to wait for.
TINY_RUN = {"seq_len": 16, "batch_size": 2, "warmup": 1, "iters": 2, "device": "cpu"}


def tiny_catalog_cfg(name: str, **run) -> BenchConfig:
    """A catalog architecture cut to 2 layers, vocabulary 256 and 16-wide heads, keeping its query-to-KV ratio."""
    from bench_core.config.settings import Limits
    from bench_core.models import hf_config
    source = hf_config.resolve_source(name, Limits())
    conf = hf_config._base_config(source)
    ratio = conf.num_attention_heads // hf_config.kv_heads_of(conf)
    heads = ratio * -(-4 // ratio)
    return hf_config.shape_from_source(source, BenchConfig(**{**TINY_RUN, **run}),
                                       {"depth": 2, "width": 16 * heads, "heads": heads, "vocab_size": 256})
