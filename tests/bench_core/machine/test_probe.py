"""The probe: collected in a fresh process, read into a typed, frozen Probe."""
import dataclasses
import json
import subprocess
import sys

import pytest

from bench_core.machine.probe import Probe, cached_probe, run_probe
from helpers import PROBE_DATA, fake_package


@pytest.mark.slow
def test_probe_without_apex(cpu_probe):
    assert isinstance(cpu_probe, Probe) and cpu_probe.error is None
    assert cpu_probe.torch and not cpu_probe.cuda_available and cpu_probe.gpu_name is None
    assert cpu_probe.apex.status == "missing" and cpu_probe.apex.label == "missing"
    assert cpu_probe.apex_reason("amp_C") == "NVIDIA apex is not installed" and not cpu_probe.apex_healthy
    assert cpu_probe.adam_fused["cpu"] is True and cpu_probe.bf16["cpu"] is True
    assert set(cpu_probe.raw["sdpa"]) >= {"flash", "mem_efficient", "math"}
    assert "cpu" in cpu_probe.compile and isinstance(cpu_probe.compile["cpu"][0], bool)
    assert cpu_probe.compile["cuda"] == (False, "no CUDA device")
    free = cpu_probe.free_bytes
    assert free["cuda"] is None and free["cpu"] > 0


@pytest.mark.slow
def test_probe_collect_prints_the_json_the_probe_reads():
    proc = subprocess.run([sys.executable, "-m", "bench_core.machine.probe_collect"], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    probe = Probe.from_dict(data)
    assert probe.to_dict() == data and probe.torch == data["torch"]


def test_partial_dicts_and_round_trip():
    probe = Probe.from_dict(PROBE_DATA)
    assert not probe.cuda_available and probe.cuda.device_count == 0 and probe.free_bytes == {
        "cuda": None, "cpu": 8 * 2**30}
    assert probe.compile == {"cpu": (True, "unknown")}  # no reason given: said so, not invented
    assert Probe.from_dict(probe.to_dict()) == probe
    empty = Probe.from_dict(None)
    assert empty.apex.status == "missing" and not empty.cuda_available and empty.torch is None
    gpu = Probe.from_dict({"cuda": {"available": True, "name": "NVIDIA H200", "capability": [9, 0],
                                    "free_bytes": 100}})
    assert gpu.gpu_name == "NVIDIA H200" and gpu.cuda.capability == (9, 0) and gpu.free_bytes["cuda"] == 100
    with pytest.raises(dataclasses.FrozenInstanceError):
        gpu.error = "x"


@pytest.mark.slow
def test_probe_detects_an_impostor(tmp_path):
    env = fake_package(tmp_path, "Rapid prototyping toolkit for Pyramid", "0.9.10dev")
    apex = run_probe(env=env).apex
    assert apex.status == "impostor"
    assert dict(apex.distribution) == {"name": "apex", "version": "0.9.10dev",
                                       "summary": "Rapid prototyping toolkit for Pyramid"}
    assert apex.label == "impostor 0.9.10dev"


@pytest.mark.slow
def test_probe_reports_a_broken_extension(tmp_path):
    env = fake_package(tmp_path, "PyTorch Extensions written by NVIDIA", "0.1",
                       ext_source="raise ImportError('undefined symbol: _ZN3c104cuda9SetDeviceEi')")
    probe = run_probe(env=env)
    apex = probe.apex
    assert apex.status == "genuine"
    amp = apex.extensions["amp_C"]
    assert amp.found and not amp.loadable and "undefined symbol" in amp.error
    assert apex.extensions["fused_layer_norm_cuda"].found is False
    assert probe.apex_reason("amp_C").startswith("apex amp_C extension fails to load: ImportError: undefined symbol")
    assert probe.apex_reason("fused_layer_norm_cuda") == \
        "apex fused_layer_norm_cuda extension not built (FusedLayerNorm needs --cuda_ext)"


def test_a_failing_probe_reports_instead_of_raising():
    probe = run_probe(env={"PATH": "/nonexistent", "PYTHONPATH": "/nonexistent"}, timeout=0.001)
    assert probe.error and probe.error.startswith("probe failed: ")
    assert not probe.cuda_available and probe.apex.status == "missing"


@pytest.mark.slow
def test_cached_probe_is_measured_once_per_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    first, was_cached = cached_probe()
    assert not was_cached and first.error is None and list(tmp_path.glob("probe-*.json"))
    second, was_cached = cached_probe()
    assert was_cached and second.torch == first.torch and second.apex == first.apex
    third, was_cached = cached_probe(refresh=True)
    assert not was_cached


CEILINGS = {"bf16_tflops": 700.0, "fp32_tflops": 50.0, "copy_gbps": 4000.0, "method": "m",
            "measured_at": "2026-01-01T00:00:00+00:00", "device_name": "GPU"}


def test_ceilings_are_typed_on_the_probe():
    from bench_core.machine.ceilings import Ceilings
    probe = Probe.from_dict({**PROBE_DATA, "ceilings": CEILINGS})
    assert probe.ceilings == Ceilings(**CEILINGS)
    assert Probe.from_dict(PROBE_DATA).ceilings is None
    assert Probe.from_dict({**PROBE_DATA, "ceilings": {"copy_gbps": 1.0}}).ceilings is None  # another shape
    later = Probe.from_dict(PROBE_DATA).with_ceilings(Ceilings(**CEILINGS))
    assert later.ceilings == probe.ceilings and Probe.from_dict(later.to_dict()) == later


def test_the_probe_measures_no_ceilings_unless_probed_again(tmp_path, monkeypatch):
    from bench_core.machine import cache as machine_cache
    from bench_core.machine import ceilings, probe_collect
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    measured = []
    monkeypatch.setattr(ceilings, "cached_or_measure", lambda torch, refresh=False: measured.append(refresh))
    assert probe_collect._ceilings(None) is None and measured == []   # nothing cached: none, and nothing measured
    machine_cache.save(ceilings.CACHE_KIND, machine_cache.environment_fingerprint(), CEILINGS)
    assert probe_collect._ceilings(None)["copy_gbps"] == 4000.0 and measured == []
    monkeypatch.setenv("BENCH_REFRESH_CEILINGS", "1")
    probe_collect._ceilings(None)
    assert measured == [True]                                         # probe again: measured again


@pytest.mark.slow
def test_a_cached_probe_gets_the_ceilings_measured_after_it(tmp_path, monkeypatch):
    from bench_core.machine import cache as machine_cache
    from bench_core.machine.ceilings import CACHE_KIND
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    key = machine_cache.environment_fingerprint()
    machine_cache.save("probe", key, {**PROBE_DATA, "ceilings": None})
    assert cached_probe()[0].ceilings is None
    machine_cache.save(CACHE_KIND, key, CEILINGS)                    # a run measured them since
    probe, was_cached = cached_probe()
    assert was_cached and probe.ceilings is not None and probe.ceilings.from_cache
    assert probe.ceilings.bf16_tflops == 700.0


@pytest.mark.slow
def test_the_fused_adam_check_runs_the_kernel_without_importing_dynamo():
    """The check calls the fused Adam kernel itself (building an optimizer imports torch._dynamo: 6.5 s of a cold
    probe on the H200), and it judges the kernel's arithmetic: a kernel that does nothing fails it."""
    code = ("import sys, torch; from bench_core.machine.probe_collect import _fused_adam_works as ok; "
            "works = ok(torch, 'cpu'); torch._fused_adam_ = lambda *a, **k: None; "
            "print(works, ok(torch, 'cpu'), 'torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["True", "False", "False"]
