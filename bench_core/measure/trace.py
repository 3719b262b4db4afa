"""One profiler trace, read once: the host's ops, the device's activities (kernels, copies, sets) on their
streams, the runtime calls that launched them, and every event name, demangled. Read from a finished
torch.profiler.profile or a saved Chrome (Kineto) trace; breakdown, gemms, idle and proof are functions over it,
as Holistic Trace Analysis reads one trace. No torch import but to demangle a live trace's names.

Correlation: a device activity and the runtime call that enqueued it share CUPTI's id (`correlation`); the
activity's `launched_by` is the id of the host op that made that call (a Chrome trace's "External id").
Times are integer nanoseconds from the trace's start: an epoch in float ns would keep only ~0.25 us.
"""
from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from bench_core.levers.kernels import GEMM_SHAPE_OPS

_DEVICE_ACTIVITIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})  # not gpu_user_annotation: ranges, not work
_OP_ACTIVITIES = frozenset({"cpu_op", "user_annotation"})
_RUNTIME_ACTIVITIES = frozenset({"cuda_runtime", "cuda_driver"})  # cudaLaunchKernel, cudaGraphLaunch, cuLaunch...
_EXPORT_SPAN = "Trace"  # the Chrome export's one event spanning the whole trace: no event the profiler recorded
# the names torch's own event list leaves out (torch.autograd.profiler_util._filter_name)
_FILTERED = frozenset({"[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
                       "profiler::_record_function_enter_new", "profiler::_record_function_exit",
                       "aten::is_leaf", "aten::output_nr", "aten::_version"})


class Source(StrEnum):
    KINETO = "kineto"                  # a live profiler's raw events
    FUNCTION_EVENTS = "function events"  # a live profiler's public event list: no runtime calls, no shapes
    CHROME = "chrome"                  # a saved Chrome trace


class HostOp(NamedTuple):
    """A synchronous op or range of the host's own (aten op, autograd node, record_function range)."""
    thread: int
    start_ns: float
    end_ns: float
    name: str
    correlation: int


class DeviceActivity(NamedTuple):
    """A kernel, memcpy or memset on a stream."""
    name: str
    start_ns: float
    dur_ns: float
    launched_by: int    # the host op's correlation id (0: none, e.g. a CUDA graph replay)
    stream: int
    correlation: int    # CUPTI's, shared with the runtime call that enqueued it


class ShapedOp(NamedTuple):
    """A GEMM-shaped op with its input shapes and dtypes. Only these ops' inputs are read: reading every op's
    costs more than the rest of a read."""
    name: str
    correlation: int
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]


@dataclass(frozen=True)
class Trace:
    source: Source
    ops: tuple[HostOp, ...] = ()
    activities: tuple[DeviceActivity, ...] = ()
    launches: Mapping[int, float] = field(default_factory=dict)  # CUPTI correlation id -> runtime call start, ns
    names: frozenset[str] = frozenset()   # every event's name, ProfilerStep#N as "ProfilerStep*"
    shaped_ops: tuple[ShapedOp, ...] = ()


def _kind(activity: str | None, device_type: Any, user_annotation: bool) -> str:
    if activity is not None:
        return "device" if activity in _DEVICE_ACTIVITIES else "op" if activity in _OP_ACTIVITIES else "other"
    if not str(device_type).endswith("CPU"):
        return "other" if user_annotation else "device"
    return "op"


def _is_frontend(is_async: bool, two_threads: bool, linked: int) -> bool:
    """A synchronous op or range of the host's own (linked id 0). Runtime calls (cudaLaunchKernel, ...) are
    linked to their op and carry CUPTI's correlation ids, another numbering than the ops' own: mixed in, they
    would tie kernels to unrelated ops. torch < 2.13 has no activity type to tell them apart by."""
    return not is_async and not two_threads and not linked


def _step_name(name: str) -> str:
    return "ProfilerStep*" if name.startswith("ProfilerStep#") else name


def from_profiler(prof: Any) -> Trace:
    """A finished torch.profiler.profile, from its raw events; from the public event list where those read
    differently (no runtime calls or shapes from it: no idle attribution or GEMM shapes)."""
    try:
        return _from_kineto(prof)
    except (AttributeError, TypeError, RuntimeError):
        return _from_function_events(prof)


def _from_kineto(prof: Any) -> Trace:
    """The raw events: about 20x faster than prof.events(), which builds a FunctionEvent (and searches memory
    records) for each of tens of thousands of events. The one place the profiler's events are read."""
    import torch
    demangle = getattr(torch._C, "_demangle", lambda s: s)
    cache: dict[str, str] = {}
    ops: list[HostOp] = []
    device: list[DeviceActivity] = []
    shaped: list[ShapedOp] = []
    names: set[str] = set()
    launches: dict[int, float] = {}
    results = prof.profiler.kineto_results
    base = results.trace_start_ns()
    for e in results.events():
        raw = e.name()
        if raw in GEMM_SHAPE_OPS and str(e.device_type()).endswith("CPU"):
            shaped.append(ShapedOp(raw, e.correlation_id(), tuple(tuple(int(d) for d in s) for s in e.shapes() or ()),
                                   tuple(e.dtypes() or ())))
        if raw in _FILTERED or (hasattr(e, "is_hidden_event") and e.is_hidden_event()):
            continue
        name = cache.get(raw)
        if name is None:
            name = cache[raw] = demangle(raw) if len(raw) > 1 else raw  # as torch's StringTable does
        names.add(_step_name(name))
        activity = e.activity_type() if hasattr(e, "activity_type") else None
        kind = _kind(activity, e.device_type(), e.is_user_annotation())
        if kind == "device":
            stream = e.device_resource_id() if hasattr(e, "device_resource_id") else 0
            device.append(DeviceActivity(name, e.start_ns() - base, e.duration_ns(), e.linked_correlation_id(),
                                         stream, e.correlation_id()))
        elif kind == "op" and _is_frontend(e.is_async(), e.start_thread_id() != e.end_thread_id(),
                                           e.linked_correlation_id()):
            ops.append(HostOp(e.start_thread_id(), e.start_ns() - base, e.end_ns() - base, name, e.correlation_id()))
        elif activity in _RUNTIME_ACTIVITIES or (activity is None and kind == "op"):  # torch < 2.13: non-frontend
            launches[e.correlation_id()] = e.start_ns() - base
    return Trace(Source.KINETO, tuple(ops), tuple(device), launches, frozenset(names), tuple(shaped))


def _from_function_events(prof: Any) -> Trace:
    ops: list[HostOp] = []
    device: list[DeviceActivity] = []
    names: set[str] = set()
    for e in prof.events():
        names.add(e.name)
        names.update(k.name for k in getattr(e, "kernels", None) or ())
        kind = _kind(getattr(e, "activity_type", None), e.device_type, bool(getattr(e, "is_user_annotation", 0)))
        start, end = e.time_range.start * 1e3, e.time_range.end * 1e3
        if kind == "device":
            device.append(DeviceActivity(e.name, start, end - start, getattr(e, "linked_correlation_id", 0) or 0,
                                         0, 0))
        elif kind == "op" and _is_frontend(e.is_async, False, getattr(e, "linked_correlation_id", 0)):
            ops.append(HostOp(e.thread, start, end, e.name, e.id))
    return Trace(Source.FUNCTION_EVENTS, tuple(ops), tuple(device), {}, frozenset(names))


def _ns(us: Any) -> int:
    """A Chrome trace writes microseconds with three decimals: whole nanoseconds, recovered exactly."""
    return round(float(us) * 1000)


def from_chrome(trace: Mapping[str, Any]) -> Trace:
    """A saved Kineto trace (`prof.export_chrome_trace`, loaded with json). Its names are as written (Kineto
    writes them demangled); its host ops are the `cpu_op`/`user_annotation` complete events."""
    ops: list[HostOp] = []
    device: list[DeviceActivity] = []
    shaped: list[ShapedOp] = []
    names: set[str] = set()
    launches: dict[int, float] = {}
    for e in trace.get("traceEvents", ()):
        if e.get("ph") != "X" or e.get("cat") == _EXPORT_SPAN:
            continue
        cat, args, name = e.get("cat"), e.get("args") or {}, str(e.get("name", ""))
        if name in GEMM_SHAPE_OPS and cat == "cpu_op":
            shaped.append(ShapedOp(name, int(args.get("External id", 0)),
                                   tuple(tuple(int(d) for d in s) for s in args.get("Input Dims") or ()),
                                   tuple(str(t) for t in args.get("Input type") or ())))
        if name in _FILTERED:
            continue
        names.add(_step_name(name))
        start = _ns(e["ts"])
        if cat in _DEVICE_ACTIVITIES and "correlation" in args:
            device.append(DeviceActivity(name, start, _ns(e["dur"]), int(args.get("External id", 0)),
                                         int(args.get("stream", e.get("tid", 0))), int(args["correlation"])))
        elif cat in _OP_ACTIVITIES:
            ops.append(HostOp(int(e.get("tid", 0)), start, start + _ns(e["dur"]), name,
                              int(args.get("External id", 0))))
        elif cat in _RUNTIME_ACTIVITIES and "correlation" in args:
            launches[int(args["correlation"])] = start
    return Trace(Source.CHROME, tuple(ops), tuple(device), launches, frozenset(names), tuple(shaped))


def load(path: str | Path) -> Trace:
    """A saved Chrome trace file, plain or gzipped (`run.step`'s BENCH_SAVE_TRACE writes .json.gz)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return from_chrome(json.load(f))
