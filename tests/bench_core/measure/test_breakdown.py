import json
from types import SimpleNamespace

import pytest

from bench_core.measure.breakdown import (
    BUSY_THRESHOLD,
    CATEGORIES,
    KERNEL_RULES,
    StageProfile,
    bottleneck,
    busy_fraction,
    cpu_op_category,
    delta,
    from_trace,
    kernel_category,
    profile_from_cpu_ops,
    profile_from_kernels,
    union_us,
)
from bench_core.measure.trace import from_profiler
from helpers import TESTS

DATA = str(TESTS / "data" / "kernel_names.json")
with open(DATA) as fh:
    KERNEL_NAMES = json.load(fh)


# --- category rules ---------------------------------------------------------------------------------------------
def test_kernel_names_file_is_rich_enough():
    assert len(KERNEL_NAMES) >= 40
    assert {r["category"] for r in KERNEL_NAMES} == set(CATEGORIES)
    assert {c for c, _ in KERNEL_RULES} <= set(CATEGORIES)


@pytest.mark.parametrize("record", KERNEL_NAMES, ids=lambda r: r["name"][:70])
def test_kernel_category(record):
    assert kernel_category(record["name"]) == record["category"]


@pytest.mark.parametrize("name, category", [
    ("aten::mm", "gemm"), ("aten::addmm", "gemm"), ("aten::bmm", "gemm"), ("aten::linear", "gemm"),
    ("aten::matmul", "gemm"), ("AddmmBackward0", "gemm"), ("autograd::engine::evaluate_function: MmBackward0", "gemm"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
    ("aten::_scaled_dot_product_efficient_attention", "attention"), ("aten::scaled_dot_product_attention", "attention"),
    ("aten::native_layer_norm", "normalization"), ("aten::native_layer_norm_backward", "normalization"),
    ("aten::layer_norm", "normalization"), ("NativeLayerNormBackward0", "normalization"),
    ("aten::_fused_adam_", "optimizer"), ("aten::_foreach_add_", "optimizer"),
    ("Optimizer.step#Adam.step", "optimizer"), ("Optimizer.zero_grad#Adam.zero_grad", "optimizer"),
    ("aten::_amp_foreach_non_finite_check_and_unscale_", "optimizer"),
    ("aten::copy_", "cast/copy"), ("aten::to", "cast/copy"), ("aten::_to_copy", "cast/copy"),
    ("aten::clone", "cast/copy"),
    ("aten::contiguous", "cast/copy"), ("ToCopyBackward0", "cast/copy"),
    ("c10d::allreduce_", "communication"), ("gloo:all_reduce", "communication"), ("nccl:all_reduce", "communication"),
    ("record_param_comms", "communication"),
    ("aten::gelu", "elementwise/other"), ("aten::add_", "elementwise/other"), ("aten::to_dense", "elementwise/other"),
    ("aten::mm_foo", "elementwise/other"), ("aten::broadcast_tensors", "elementwise/other"),
    ("aten::linalg_vector_norm", "elementwise/other"), ("torch::autograd::AccumulateGrad", "elementwise/other"),
])
def test_cpu_op_category(name, category):
    assert cpu_op_category(name) == category


# --- busy fraction ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("intervals, union, busy", [
    ([(0, 10)], 10, 1.0),
    ([(0, 10), (5, 15)], 15, 1.0),                       # overlap
    ([(0, 20), (5, 10), (12, 13)], 20, 1.0),             # nesting
    ([(0, 10), (20, 30)], 20, 20 / 30),                  # gap
    ([(20, 30), (0, 10), (5, 8), (25, 40)], 30, 30 / 40),  # unsorted, nested, overlapping
    ([(0, 10), (10, 10), (30, 40)], 20, 20 / 40),        # zero-length in the middle
    ([(0, 10), (10, 20)], 20, 1.0),                      # touching
])
def test_union_and_busy(intervals, union, busy):
    assert union_us(intervals) == pytest.approx(union)
    assert busy_fraction(intervals) == pytest.approx(busy)


def test_busy_empty_and_zero_span():
    assert union_us([]) == 0.0
    assert busy_fraction([]) is None
    assert busy_fraction([(5, 5), (5, 5)]) is None


# --- profiles ---------------------------------------------------------------------------------------------------
GEMM, LN = "ampere_sgemm_128x64_tn", "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>"
COPY, NCCL = "Memcpy DtoD (Device -> Device)", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
TWO_STEPS = [  # (name, start_us, dur_us); the all-reduce runs on its own stream, overlapping compute
    (GEMM, 0, 10), (LN, 10, 4), (NCCL, 12, 18), (COPY, 20, 2),
    (GEMM, 40, 10), (LN, 50, 4), (COPY, 60, 2), (NCCL, 52, 18),
]


def test_profile_from_kernels_two_steps():
    p = profile_from_kernels(TWO_STEPS, steps=2)
    assert p.source == "cuda" and p.steps == 2
    assert p.gpu_kernel_ms == pytest.approx(0.030)      # union [0, 30] + [40, 70] = 60 us over 2 steps
    assert p.trace_busy == pytest.approx(60 / 70)
    assert p.kernels_per_step == 4
    assert p.breakdown_ms == pytest.approx({"gemm": 0.010, "attention": 0.0, "normalization": 0.004, "optimizer": 0.0,
                                            "cast/copy": 0.002, "elementwise/other": 0.0, "communication": 0.018})
    assert p.top[0] == (NCCL, "communication", pytest.approx(0.018), 1.0)
    assert [row[0] for row in p.top] == [NCCL, GEMM, LN, COPY]


def test_profile_category_override_and_top_limits():
    kernels = [(f"kernel_{i:02d}_" + "x" * 200, i * 10, i + 1) for i in range(30)]
    kernels.append(("vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", 400, 5, "optimizer"))
    p = profile_from_kernels(kernels, steps=1)
    assert len(p.top) == 25
    assert all(len(row[0]) == 160 for row in p.top if row[0].startswith("kernel_"))
    assert p.top[0][0].startswith("kernel_29_")
    assert p.breakdown_ms["optimizer"] == pytest.approx(0.005)


def test_profile_round_trips_through_json():
    p = profile_from_kernels(TWO_STEPS, steps=2)
    assert StageProfile.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    c = profile_from_cpu_ops([("aten::mm", 300.0), ("aten::add_", 50.0, "optimizer")], steps=1)
    assert StageProfile.from_dict(json.loads(json.dumps(c.to_dict()))) == c


def test_profile_from_cpu_ops():
    ops = [("aten::addmm", 400.0), ("aten::addmm", 200.0), ("aten::native_layer_norm", 100.0),
           ("aten::mul_", 60.0, "optimizer"), ("aten::mul_", 40.0), ("Optimizer.step#Adam.step", 20.0)]
    p = profile_from_cpu_ops(ops, steps=2)
    assert (p.source, p.gpu_kernel_ms, p.trace_busy, p.kernels_per_step) == ("cpu", None, None, None)
    assert p.breakdown_ms["gemm"] == pytest.approx(0.3)
    assert p.breakdown_ms["normalization"] == pytest.approx(0.05)
    assert p.breakdown_ms["optimizer"] == pytest.approx(0.04)
    assert p.breakdown_ms["elementwise/other"] == pytest.approx(0.02)
    assert p.top[0] == ("aten::addmm", "gemm", pytest.approx(0.3), 1.0)


def collect(prof, steps, cuda):
    """What the worker reads of a profiler: one trace, its profile and its event names."""
    trace = from_profiler(prof)
    return from_trace(trace, steps, cuda), set(trace.names)


# --- a trace read and its profile, on stand-in profiler objects ---------------------------------------------------
# (the real CUDA path ran on an H200; the CPU path is tested below)
class KinetoEvent:
    def __init__(self, name, activity, start, dur, thread=1, corr=0, linked=0, device="CPU"):
        self._d = dict(name=name, activity=activity, start=start, dur=dur, thread=thread, corr=corr, linked=linked,
                       device=device)

    def name(self): return self._d["name"]
    def activity_type(self): return self._d["activity"]
    def device_type(self): return "DeviceType." + self._d["device"]
    def is_user_annotation(self): return self._d["activity"].endswith("user_annotation")
    def is_async(self): return False
    def start_ns(self): return 10**18 + self._d["start"]
    def end_ns(self): return 10**18 + self._d["start"] + self._d["dur"]
    def duration_ns(self): return self._d["dur"]
    def start_thread_id(self): return self._d["thread"]
    def end_thread_id(self): return self._d["thread"]
    def correlation_id(self): return self._d["corr"]
    def linked_correlation_id(self): return self._d["linked"]
    def shapes(self): return [[2, 3], [3, 4]] if self._d["name"] == "aten::mm" else []
    def dtypes(self): return ["float", "float"] if self._d["name"] == "aten::mm" else []


class OldKinetoEvent(KinetoEvent):  # torch 2.11/2.12: no activity_type()
    def __getattribute__(self, item):
        if item == "activity_type":
            raise AttributeError(item)
        return super().__getattribute__(item)


ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"
TRACE = [  # one step: forward mm, then Optimizer.step with one add_, whose launch's CUPTI id collides with mm's id
    ("ProfilerStep#3", "user_annotation", 0, 5000, 1, 1, 0, "CPU"),
    ("aten::mm", "cpu_op", 100, 200, 1, 12, 0, "CPU"),
    ("Optimizer.step#Adam.step", "user_annotation", 1000, 1000, 1, 10, 0, "CPU"),
    ("aten::add_", "cpu_op", 1100, 100, 1, 11, 0, "CPU"),
    ("cudaLaunchKernel", "cuda_runtime", 1110, 40, 1, 12, 11, "CPU"),
    ("Optimizer.step#Adam.step", "gpu_user_annotation", 2400, 1600, 7, 10, 10, "CUDA"),
    (GEMM, "kernel", 2500, 400, 7, 20, 12, "CUDA"),
    (ADD, "kernel", 3000, 500, 7, 12, 11, "CUDA"),
    (NCCL, "kernel", 3000, 1000, 8, 21, 11, "CUDA"),
]


def fake_prof(event_cls):
    events = [event_cls(*row) for row in TRACE]
    results = SimpleNamespace(events=lambda: events, trace_start_ns=lambda: 10**18)
    return SimpleNamespace(profiler=SimpleNamespace(kineto_results=results))


@pytest.mark.parametrize("event_cls", [KinetoEvent, OldKinetoEvent])
def test_collect_cuda_links_kernels_to_the_optimizer(event_cls):
    profile, names = collect(fake_prof(event_cls), steps=1, cuda=True)
    assert profile.kernels_per_step == 3                  # the GPU-side annotation range is not a kernel
    assert profile.breakdown_ms["gemm"] == pytest.approx(0.0004)
    assert profile.breakdown_ms["optimizer"] == pytest.approx(0.0005)  # an add, launched inside Optimizer.step
    assert profile.breakdown_ms["communication"] == pytest.approx(0.001)
    assert profile.gpu_kernel_ms == pytest.approx(0.0014)   # [2500, 2900] + [3000, 4000] ns
    assert profile.trace_busy == pytest.approx(1.4 / 1.5)
    assert {"ProfilerStep*", "aten::mm", "cudaLaunchKernel", GEMM, ADD, NCCL} <= names


def test_collect_cpu_self_times_and_optimizer_context():
    profile, _ = collect(fake_prof(KinetoEvent), steps=1, cuda=False)
    assert profile.source == "cpu"
    assert profile.breakdown_ms["gemm"] == pytest.approx(0.0002)
    # Optimizer.step's self time (1000 - 100 ns) + the add_ inside it; the runtime call is no op
    assert profile.breakdown_ms["optimizer"] == pytest.approx(0.0009 + 0.0001)
    assert "ProfilerStep#3" not in [row[0] for row in profile.top]


def test_collect_falls_back_to_function_events():
    def fe(name, start, end, thread=1, corr=0, linked=0, device="CPU", annotation=False):
        return SimpleNamespace(name=name, kernels=[], device_type="DeviceType." + device, is_user_annotation=annotation,
                               time_range=SimpleNamespace(start=start, end=end), is_async=False, thread=thread,
                               id=corr, linked_correlation_id=linked)
    events = [fe("Optimizer.step#Adam.step", 1.0, 2.0, corr=10, annotation=True), fe("aten::add_", 1.1, 1.2, corr=11),
              fe(ADD, 3.0, 3.5, thread=7, linked=11, device="CUDA"), fe(GEMM, 2.5, 2.9, thread=7, linked=12,
                                                                        device="CUDA")]
    prof = SimpleNamespace(events=lambda: events)      # no .profiler: the raw-event path fails, this one is used
    profile, names = collect(prof, steps=1, cuda=True)
    assert profile.breakdown_ms["optimizer"] == pytest.approx(0.0005)
    assert profile.breakdown_ms["gemm"] == pytest.approx(0.0004)
    assert names == {"Optimizer.step#Adam.step", "aten::add_", ADD, GEMM}


def test_collect_real_cpu_training_step():
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.LayerNorm(64), torch.nn.GELU(),
                                torch.nn.Linear(64, 32))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(16, 32)

    def step():
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()

    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            step()
    result, names = collect(prof, steps=5, cuda=False)
    assert result.source == "cpu" and result.steps == 5 and result.gpu_kernel_ms is None
    for category in ("gemm", "normalization", "optimizer"):
        assert result.breakdown_ms[category] > 0, category
    assert "aten::native_layer_norm" in names
    legacy = set()  # what the worker's profile_names collects
    for evt in prof.events():
        legacy.add(evt.name)
        legacy.update(k.name for k in evt.kernels)
    assert names == legacy
    # the categories share out exactly the self CPU time of torch's own table
    table_us = sum(e.self_cpu_time_total for e in prof.key_averages())
    assert sum(result.breakdown_ms.values()) * 1e3 * 5 == pytest.approx(table_us, rel=1e-6)


# --- verdicts ---------------------------------------------------------------------------------------------------
def _cuda_profile(kernel_ms):
    return StageProfile("cuda", 3, kernel_ms, 0.4, 889.0, dict.fromkeys(CATEGORIES, 0.0))


def test_bottleneck_gpu_bound():
    b = bottleneck(_cuda_profile(24.5), median_ms=25.2, host_ms=10.0)
    assert b.verdict == "gpu-bound" and b.busy == pytest.approx(24.5 / 25.2)
    assert b.sentence == "GPU busy 97% of the step: kernels, not the host, set the pace."
    assert bottleneck(_cuda_profile(30.0), median_ms=25.0, host_ms=None).busy == 1.0   # capped
    assert bottleneck(_cuda_profile(BUSY_THRESHOLD * 10), median_ms=10.0).verdict == "gpu-bound"


def test_bottleneck_launch_bound():
    b = bottleneck(_cuda_profile(24.5), median_ms=70.0, host_ms=44.5)
    assert b.verdict == "launch-bound" and b.busy == pytest.approx(0.35)
    assert b.sentence == ("GPU busy 35%: the CPU cannot enqueue kernels as fast as the GPU runs them (host 44.5 ms to "
                          "enqueue a step of 24.5 ms of kernels); this stage's time depends on the host CPU. "
                          "CUDA graphs (the `graphs` lever) remove this.")
    assert "70.0 ms" in bottleneck(_cuda_profile(24.5), median_ms=70.0, host_ms=None).sentence


def test_bottleneck_unknown():
    cpu = profile_from_cpu_ops([("aten::mm", 10.0)], steps=1)
    b = bottleneck(cpu, median_ms=5.0, host_ms=5.0)
    assert (b.verdict, b.busy) == ("unknown", None)
    assert b.sentence == "No GPU: the step runs on the CPU, so there is no launch/GPU split."
    assert bottleneck(None, median_ms=5.0).verdict == "unknown"
    assert bottleneck(_cuda_profile(5.0), median_ms=None).verdict == "unknown"


def test_delta_text():
    prev = StageProfile("cuda", 3, 24.8, 0.57, 716.0, {**dict.fromkeys(CATEGORIES, 0.0), "gemm": 8.0,
                                                       "normalization": 2.0, "cast/copy": 1.0})
    cur = StageProfile("cuda", 3, 24.5, 0.35, 889.0, {**dict.fromkeys(CATEGORIES, 0.0), "gemm": 8.03,
                                                      "normalization": 1.6, "cast/copy": 4.1})
    d = delta(prev, cur, "Apex FusedLN")
    assert d.text == "Apex FusedLN: normalization \u22120.4 ms, cast/copy +3.1 ms, +173 kernels per step"
    assert d.kernels_per_step == 173
    assert d.ms_by_category["gemm"] == pytest.approx(0.03)
    same = delta(prev, prev, "Nothing")
    assert same.text == "Nothing: no change of 0.05 ms or more in any category"
    cpu = profile_from_cpu_ops([("aten::mm", 100.0)], 1)
    assert delta(cpu, profile_from_cpu_ops([("aten::mm", 40.0)], 1), "x").text == "x: gemm \u22120.06 ms"


def test_busy_text_never_crosses_the_launch_bound_line():
    """The verdict is busy >= BUSY_THRESHOLD; the shown percent must sit on the same side (0.896 is launch-bound,
    so it reads 89.6%, never 90%), and whole percents stay within half a point of the value."""
    from bench_core.measure.breakdown import BUSY_THRESHOLD, busy_text
    assert busy_text(0.896) == "89.6%" and busy_text(0.97) == "97%" and busy_text(BUSY_THRESHOLD) == "90%"
    for i in range(0, 100_001):
        busy = i / 100_000
        text = busy_text(busy)
        shown = float(text[:-1]) / 100
        assert (shown >= BUSY_THRESHOLD) == (busy >= BUSY_THRESHOLD), (busy, text)
        assert abs(shown - busy) <= 0.005 + 1e-12, (busy, text)


def test_bottleneck_verdicts_are_a_typed_enum_that_files_keep_as_words():
    from bench_core.measure.breakdown import Bound
    gpu = bottleneck(_cuda_profile(95.0), median_ms=100.0)
    launch = bottleneck(_cuda_profile(24.5), median_ms=70.0)
    unknown = bottleneck(None, median_ms=5.0)
    assert (gpu.verdict, launch.verdict, unknown.verdict) == (Bound.GPU, Bound.LAUNCH, Bound.UNKNOWN)
    assert all(type(b.verdict) is Bound for b in (gpu, launch, unknown))
    assert [str(b.verdict) for b in (gpu, launch, unknown)] == ["gpu-bound", "launch-bound", "unknown"]
    assert f"{launch.verdict}" == "launch-bound"
