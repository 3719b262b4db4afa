"""benchmarks/quiet_host.py's bare loop, on a tiny CPU model, in its own process as the benchmark runs it: unpinned,
and pinned as the engine pins its timed process (every core but the first, torch's threads capped to them)."""
import json
import os
import subprocess
import sys

import pytest

from helpers import TESTS

SCRIPT = TESTS.parent / "benchmarks" / "quiet_host.py"
TINY = ["--model", "gpt2-small", "--depth", "1", "--width", "64", "--heads", "2", "--seq-len", "16",
        "--batch-size", "2", "--vocab-size", "128"]


def _module():
    """benchmarks/quiet_host.py, imported from its path (benchmarks/ is not a package)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("quiet_host", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bare(*extra: str) -> dict:
    out = subprocess.run([sys.executable, str(SCRIPT), "bare", "--stage", "adam+layernorm+fp32", *extra, *TINY],
                         check=True, capture_output=True, text=True, timeout=300).stdout
    return json.loads(out)


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning away from the first core needs two")
def test_the_pinned_bare_loop_runs_where_the_engine_times_and_the_unpinned_one_anywhere():
    cores = sorted(os.sched_getaffinity(0))
    free, pinned = bare(), bare("--pinned")
    assert free["pinned_cores"] == [] and free["times_ms"] and free["median_ms"] > 0
    assert pinned["pinned_cores"] == cores[1:]
    assert pinned["torch_threads"] <= max(1, len(cores) - 1) and pinned["times_ms"]
    for loop, allowed in ((free, cores), (pinned, cores[1:])):  # what the engine's quiet window records, too
        assert loop["steal_s"] is not None and loop["steal_s"] >= 0
        main = [t for t in loop["timed_threads"] if t["main"]]
        assert len(main) == 1 and main[0]["cpu_s"] > 0 and main[0]["core"] in allowed


@pytest.mark.slow
def test_the_bare_loop_beside_siblings_times_while_they_are_stopped_and_leaves_none_behind():
    """Each stand-in for a look-ahead worker has built the stage (here on CPU; its CUDA context on a GPU) and is
    stopped (state T) through the timed steps, then ended."""
    loop = bare("--siblings", "2")
    assert loop["siblings"] == 2 and loop["sibling_states"] == ["T", "T"] and loop["times_ms"]
    left = subprocess.run(["pgrep", "-f", "quiet_host.py sibling"], capture_output=True, text=True).stdout.split()
    assert left == []


def test_the_unpinned_engine_run_turns_the_pinning_off_and_the_default_leaves_it(monkeypatch, tmp_path):
    module = _module()
    seen = []
    stage = {"key": "k", "rounds": [2], "times_ms": [1.0, 3.0], "quiet": [{"round": 0, "steal_s": 0.0}]}

    def fake_run(cmd, check, stdout, env, cwd):
        seen.append(env.get(module.PIN_TIMED_ENV))
        (tmp_path / "e.json").write_text(json.dumps({"stages": [stage]}))

    monkeypatch.setattr(module.subprocess, "run", fake_run)
    monkeypatch.setattr(module, "bound_of", lambda path, key: {"verdict": "gpu-bound"})
    pinned = module.engine("k", "k", [], tmp_path / "e.json")
    unpinned = module.engine("k", "k", [], tmp_path / "e.json", pinned=False)
    assert seen == [None, "0"]
    assert pinned["median_ms"] == unpinned["median_ms"] == 2.0 and pinned["windows"][0]["steal_s"] == 0.0


def test_each_engine_run_carries_the_engines_own_bound_verdict_the_target_is_judged_on():
    """Read from the run file by the engine's loader and summary, as the dashboard reads it: call 48's slow pair 2
    was launch-bound (11.8% host wait), call 53's pair 1 GPU-bound (BENCHMARKS)."""
    module = _module()
    data = TESTS.parent / "docs" / "data"
    key = "apex-fusedadam+apex-fusedln+bf16"
    slow = module.bound_of(data / "h100_2026-12-07_call48_quiet_engine_apex_bf16_gpt2_small_2.json", key)
    steady = module.bound_of(data / "h100_2026-12-07_call53_quiet_engine_apex_bf16_gpt2_small_1.json", key)
    assert slow["verdict"] == "launch-bound" and slow["host_wait_share"] > 0.03
    assert steady["verdict"] == "gpu-bound" and steady["host_wait_share"] == 0.0


def test_several_bare_processes_are_pooled_as_the_engine_pools_and_the_kinds_alternate_process_by_process(
        monkeypatch, tmp_path):
    module = _module()
    ran, medians = [], iter([10.0, 30.0, 11.0, 31.0, 12.0, 32.0])

    def fake_bare(key, shape, pinned, path, siblings=0):
        ran.append((path.name, siblings))
        m = next(medians)
        return {"times_ms": [m, m], "median_ms": m, "sibling_states": ["T"] * siblings, "steal_s": m / 100}

    def fake_engine(key, stages, shape, json_path, root=None, pinned=True):
        return {"median_ms": 11.0, "process_medians_ms": [11.0], "wall_s": 1.0, "bound": {"verdict": "launch-bound"},
                "tool_busy_s": {}, "windows": []}
    monkeypatch.setattr(module, "bare_process", fake_bare)
    monkeypatch.setattr(module, "engine", fake_engine)
    module.compare(1, tmp_path, ["apex_bf16_gpt2_small_b2"], None, siblings=2, processes=3)
    row = json.loads((tmp_path / "quiet_host.json").read_text())[0]
    assert [name for name, _ in ran] == [
        "bare_apex_bf16_gpt2_small_b2_1_1.json", "bare_siblings_apex_bf16_gpt2_small_b2_1_1.json",
        "bare_siblings_apex_bf16_gpt2_small_b2_1_2.json", "bare_apex_bf16_gpt2_small_b2_1_2.json",
        "bare_apex_bf16_gpt2_small_b2_1_3.json", "bare_siblings_apex_bf16_gpt2_small_b2_1_3.json"]
    assert row["bare_process_medians_ms"] == [10.0, 31.0, 12.0] and row["bare_ms"] == 12.0   # all six steps' median
    assert row["bare_siblings_process_medians_ms"] == [30.0, 11.0, 32.0] and row["bare_siblings_ms"] == 30.0
    assert row["ratio"] == 11.0 / 12.0 and row["sibling_states"] == ["T"] * 6
    assert row["bare_steal_s"] == round((10.0 + 31.0 + 12.0) / 100, 4)   # every process's steal, not the first's


def _rows(case, bare, engine, per_pair=3):
    return [{"case": case, "pair": i + 1, "bare_ms": bare[i], "bare_process_medians_ms": [bare[i]],
             "bare_wall_s": 20.0, "engine_process_medians_ms": engine[per_pair * i:per_pair * (i + 1)],
             "engine_wall_s": 45.0, "engine_bound": {"verdict": "launch-bound"}} for i in range(len(bare))]


def test_the_target_is_judged_on_every_process_of_a_case_met_missed_or_not_yet_told():
    """engine / bare over all pairs' processes: met when the interval lies at or below 1.03, missed when above, and
    otherwise how many processes a side would tell it (the fewest n with t(n-1) * sd * sqrt2 / sqrt n <= log 1.03)."""
    import math

    from bench_core.measure.stats import t_quantile
    module = _module()
    rows = (_rows("steady", [40.0, 40.1, 39.9], [40.0, 40.05, 39.95, 40.1, 39.9, 40.0, 40.02, 39.98, 40.0])
            + _rows("slow", [40.0, 40.1, 39.9], [44.0, 44.1, 43.9, 44.0, 44.05, 43.95, 44.0, 44.1, 43.9])
            + _rows("noisy", [38.0, 46.0, 42.0], [40.0, 44.0, 42.0, 39.0, 45.0, 42.0, 41.0, 43.0, 42.0]))
    steady, slow, noisy = module.judged(rows)
    assert steady.startswith("steady, all 3 pairs (3 bare processes, 9 engine processes; "
                             "engine launch-bound in 3 of 3)")
    assert steady.endswith("target (≤ 1.03) met") and slow.endswith("target (≤ 1.03) missed")
    assert "can't tell yet" in noisy
    logs = [[math.log(m) for m in g] for g in ([38.0, 46.0, 42.0], [40.0, 44.0, 42.0, 39.0, 45.0, 42.0, 41.0, 43.0,
                                                                   42.0])]
    sd = math.sqrt(sum(sum((x - sum(g) / len(g)) ** 2 for x in g) for g in logs) / (3 - 1 + 9 - 1))

    def narrow(n):
        return t_quantile(0.95, n - 1) * sd * math.sqrt(2) / math.sqrt(n) <= math.log(1.03)
    need = next(n for n in range(2, 10_000) if narrow(n))
    assert f"about {need} processes a side would tell it within 3%" in noisy
    assert f"≈ {(20.0 * 3 / 3 + 45.0 * 3 / 9) * (need - 3) / 60:.0f} min of device time more" in noisy
    assert module.judged(_rows("one", [40.0], [40.0, 41.0, 42.0]))[0].endswith("(2 each at least)")
