"""CSV and JSON out, and the strict reader that imports them back (bench_core.results.formats)."""
import csv
import io
import json
from dataclasses import replace

import pytest

from bench_core.config.bench_config import INT_FIELDS
from bench_core.results.formats import (
    CSV_COLUMNS,
    ImportRejected,
    neutralise,
    parse_csv,
    parse_json,
    parse_upload,
    summary_rows,
    to_csv,
    to_json,
)
from bench_core.results.records import StageResult, Status
from bench_core.results.summary import summarize
from helpers import sample_run, sample_runs

gpu_run = sample_runs().gpu_run


def csv_rows(text):
    return list(csv.DictReader(io.StringIO(text)))


def test_csv_has_the_required_columns_and_rows():
    text = to_csv(sample_run())
    header = text.splitlines()[0].split(",")
    for col in ["stage", "optimizer", "norm", "precision", "compile", "gpus", "status", "reason", "verdict",
                "baseline_stage", "partial", "median_ms", "p10_ms", "p90_ms", "noisy", "noise_reason", "tokens_per_s",
                "speedup", "speedup_ci_low", "speedup_ci_high", "scaling_efficiency", "peak_mem_mib", "tflops", "mfu",
                "loss_first", "loss_last", "host_ms", "gpu_kernel_ms", "kernel_share", "kernels_per_step", "bottleneck",
                "energy_j_per_token", "skipped_steps", "kernels_seen", "device", "gpu", "torch", "apex", *INT_FIELDS]:
        assert col in header, col
    assert header == CSV_COLUMNS and len(text.strip().splitlines()) == 5


def test_csv_figures_are_the_summary_figures():
    """Every value in the file comes from the run's summary: hand-checked for the round-figure GPU run."""
    rows = csv_rows(to_csv(gpu_run()))
    base, apex, failed, bf16 = rows
    assert {r["baseline_stage"] for r in rows} == {"adam+layernorm+fp32"}
    assert float(apex["speedup"]) == 2.0 and float(bf16["speedup"]) == 5.0 and base["speedup"] == "1.0"
    assert base["speedup_ci_low"] == base["speedup_ci_high"] == ""  # the baseline is the reference, no interval
    assert float(apex["speedup_ci_low"]) == float(apex["speedup_ci_high"]) == 2.0  # constant series
    assert float(bf16["tokens_per_s"]) == pytest.approx(64 / 0.020)
    assert float(bf16["host_ms"]) == 19.5 and float(bf16["gpu_kernel_ms"]) == 10.0
    assert float(bf16["kernel_share"]) == 0.5 and float(bf16["kernels_per_step"]) == 870
    assert bf16["bottleneck"] == "launch-bound" and base["bottleneck"] == "gpu-bound"
    assert failed["partial"] == "True" and failed["speedup"] == "" and failed["tokens_per_s"] == ""
    assert failed["bottleneck"] == "unknown"
    assert base["energy_j_per_token"] == "" and base["skipped_steps"] == ""  # not measured: empty, never 0
    assert base["repeats"] == "2" and base["noisy"] == "False" and base["noise_reason"] == ""
    assert bf16["kernels_seen"] == "apex_adam;apex_layernorm;gemm_bf16"


def test_csv_round_trip():
    run = sample_run()
    [back] = parse_csv(to_csv(run).encode())
    assert back.imported and back.machine.imported and back.run_id == run.run_id
    before, after = summary_rows(summarize(run)), summary_rows(summarize(back))
    for a, b in zip(before, after, strict=True):
        for col in ("stage", "status", "reason", "median_ms", "p10_ms", "p90_ms", "speedup", "speedup_ci_low",
                    "speedup_ci_high", "mfu", "peak_mem_mib", "kernels_seen", "gpu", "depth", "iters", "warnings",
                    "noise_reason", "baseline_stage", "partial"):
            assert a[col] == pytest.approx(b[col]) if isinstance(a[col], float) else a[col] == b[col], col
        # the proof was seen on the machine that measured it, not here
        assert b["verdict"] == (f"imported: {a['verdict']} on NVIDIA H200" if a["verdict"] else ""), b["verdict"]
    assert after[1]["speedup"] == pytest.approx(10.75 / 5.15)


def test_csv_and_json_carry_processes_and_what_each_interval_covers():
    rows = csv_rows(to_csv(gpu_run()))                 # two rounds a stage: two processes
    assert [r["processes"] for r in rows] == ["2", "2", "1", "2"]
    assert [r["interval_scope"] for r in rows] == ["", "across processes", "", "across processes"]
    one = gpu_run()
    one = replace(one, stages=tuple(replace(s, rounds=(len(s.times_ms),) if s.rounds else ()) for s in one.stages))
    doc = json.loads(to_json(one))
    assert [r["processes"] for r in doc["summary"]] == [1, 1, 1, 1]
    assert doc["summary"][1]["interval_scope"] == "within one process"


def test_imported_csv_keeps_the_scope_and_an_older_file_says_it_was_not_recorded():
    text = to_csv(gpu_run())
    [back] = parse_csv(text.encode())
    apex = summarize(back).stages[1]
    assert apex.processes == 2 and apex.interval_text == "across 2 processes"
    header, *lines = text.splitlines()
    names = header.split(",")
    keep = [i for i, n in enumerate(names) if n not in ("processes", "interval_scope")]
    old = "\n".join(",".join(line.split(",")[i] for i in keep) for line in [header, *lines[:2]])
    [older] = parse_csv(old.encode())
    assert summarize(older).stages[1].interval_text == "scope not recorded"
    assert summarize(older).stages[1].speedup_text == "×2.00 (2.00–2.00, scope not recorded)"


def test_csv_with_an_unknown_interval_scope_is_rejected():
    text = to_csv(gpu_run()).replace("across processes", "across the universe", 1)
    with pytest.raises(ImportRejected, match="row 3, column interval_scope: 'across the universe' is not one of"):
        parse_csv(text.encode())


def test_csv_round_trip_keeps_a_noisy_stage_noisy():
    run = sample_run()
    assert summarize(run).stages[0].noisy  # p10-p90 spread 14.4% of the median
    [back] = parse_csv(to_csv(run).encode())
    assert summarize(back).stages[0].noise_reason == summarize(run).stages[0].noise_reason
    assert summarize(back).stages[0].noisy is True


def test_reimporting_an_imported_csv_keeps_one_imported_prefix():
    [once] = parse_csv(to_csv(sample_run()).encode())
    [twice] = parse_csv(to_csv(once).encode())
    assert summarize(twice).stages[0].verdict == "imported: verified on NVIDIA H200"


def test_csv_neutralises_formulas():
    text = to_csv(sample_run())
    assert "'=HYPERLINK" in text and ",=HYPERLINK" not in text
    assert neutralise("=1+1") == "'=1+1" and neutralise("-3") == "'-3" and neutralise("ok") == "ok"
    # our own guard is undone on import: the reason comes back as it was
    [back] = parse_csv(text.encode())
    assert back.stages[2].reason == sample_run().stages[2].reason


def test_json_round_trip():
    run = sample_run()
    [back] = parse_json(to_json(run).encode())
    assert back.stages == run.stages and back.config == run.config and back.run_id == run.run_id
    assert back.imported and back.machine.imported and back.machine.gpu_name == "NVIDIA H200"
    doc = json.loads(to_json(run))
    assert doc["stages"][0]["times_ms"] == [10.0, 11.0, 10.5, 12.0]
    assert doc["stages"][2]["reason"].startswith("'=HYPERLINK")  # guarded in the file, restored on import


def test_json_carries_breakdown_and_delta():
    doc = json.loads(to_json(gpu_run()))
    base, apex, failed, bf16 = doc["summary"]
    assert base["breakdown_ms"]["gemm"] == 60.0 and failed["breakdown_ms"] is None
    assert base["delta_vs_previous"] is None  # nothing before the first stage
    assert apex["delta_vs_previous"]["kernels_per_step"] == -50 and apex["delta_vs_previous"]["ms_by_category"][
        "gemm"] == -20.0
    assert bf16["delta_vs_previous"] is None  # the stage before it has no profile
    assert bf16["bottleneck_sentence"].startswith("GPU busy 50%")


@pytest.mark.parametrize("payload,message", [
    (b"a,b\n1,2\n", "missing columns: stage"),
    (b"\x89PNG\x00\x00binary", "binary"),
    (b"{\"schema\": \"other\"}", "not a bench_core run"),
    (b"{not json", "not valid JSON"),
    (b"\xff\xfe,x", "not UTF-8 text"),
])
def test_bad_files_are_rejected(payload, message):
    parse = parse_json if payload.startswith(b"{") else parse_csv
    with pytest.raises(ImportRejected, match=message):
        parse(payload)


def _csv_with(column, value, row=1):
    lines = to_csv(sample_run()).splitlines()
    cells = list(csv.reader([lines[row]]))[0]
    cells[lines[0].split(",").index(column)] = value
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(cells)
    return "\n".join([lines[0], buf.getvalue().rstrip("\n")]).encode()


@pytest.mark.parametrize("column,value,message", [
    ("depth", "deep", "row 2, column depth: 'deep' is not an integer"),
    ("median_ms", "nan", "row 2, column median_ms: 'nan' is not a finite number"),
    ("median_ms", "inf", "row 2, column median_ms: 'inf' is not a finite number"),
    ("speedup", "fast", "row 2, column speedup: 'fast' is not a number"),
    ("partial", "yes", "row 2, column partial: 'yes' is not True or False"),
    ("stage", "=cmd|'/c calc'!A1",
     "row 2, column stage: \"=cmd|'/c calc'!A1\" starts with '=' (a spreadsheet formula)"),
    ("optimizer", "sgd", "row 2, column optimizer: unknown lever 'sgd'"),
    ("status", "great", "row 2, column status: unknown status 'great'"),
    ("device", "tpu", "row 2, column device: 'tpu' is not cuda or cpu"),
    ("iters", "", "row 2, column iters: empty, expected an integer"),
    ("width", "66", ": width=66: must be divisible by heads (4)"),
])
def test_csv_with_wrong_types_or_formulas_is_rejected(column, value, message):
    """Refused whole, on the first bad value, naming the row, the column and the value (literal messages)."""
    with pytest.raises(ImportRejected) as info:
        parse_csv(_csv_with(column, value))
    assert message in str(info.value), str(info.value)


def _json_with(change):
    doc = json.loads(to_json(sample_run()))
    change(doc)
    return json.dumps(doc).encode()


@pytest.mark.parametrize("change,message", [
    (lambda d: d["stages"][0]["times_ms"].__setitem__(1, float("nan")), "NaN is not a finite number"),
    (lambda d: d["stages"][0].__setitem__("peak_allocated_mib", float("inf")), "Infinity is not a finite number"),
    (lambda d: d["stages"][0]["times_ms"].__setitem__(2, True),
     "stage 0, field times_ms[2]: True is not a non-negative number"),
    (lambda d: d["stages"][1].__setitem__("wall_s", False),
     "stage 1, field wall_s: False is not a non-negative number"),
    (lambda d: d["stages"][0]["losses"].__setitem__(0, -1.0), "stage 0, field losses[0]: -1.0 is not a non-negative"),
    (lambda d: d["stages"][1].__setitem__("label", "=HYPERLINK(\"x\")"),
     "stage 1, field label: '=HYPERLINK(\"x\")' starts with '=' (a spreadsheet formula)"),
    (lambda d: d["stages"][1].__setitem__("warnings", ["@SUM(A1)"]),
     "stage 1, field warnings: '@SUM(A1)' starts with '@' (a spreadsheet formula)"),
    (lambda d: d["stages"][3].__setitem__("status", "great"), "stage 3, field status: unknown status 'great'"),
    (lambda d: d["stages"][0].__setitem__("norm", "groupnorm"), "stage 0, field norm: unknown lever 'groupnorm'"),
    (lambda d: d["config"].__setitem__("depth", True), "config field depth: True is not an integer"),
    (lambda d: d["config"].__setitem__("iters", 2.5), "config field iters: 2.5 is not an integer"),
    (lambda d: d["config"].__setitem__("heads", 3), "config: width=64: must be divisible by heads (3)"),
    (lambda d: d.__setitem__("device", "tpu"), "field device: 'tpu' is not cuda or cpu"),
    (lambda d: d.pop("run_id"), "field 'run_id' missing or not a str"),
])
def test_json_with_bad_values_is_rejected_naming_field_and_row(change, message):
    with pytest.raises(ImportRejected) as info:
        parse_json(_json_with(change))
    assert message in str(info.value), str(info.value)


def test_oversized_file_is_rejected():
    with pytest.raises(ImportRejected, match="above the 1 MiB limit"):
        parse_csv(b"x" * (2 * 2**20), max_bytes=2**20)


def test_upload_is_read_by_its_extension():
    run = sample_run()
    assert parse_upload("r.JSON", to_json(run).encode())[0].run_id == run.run_id
    assert parse_upload("r.csv", to_csv(run).encode())[0].run_id == run.run_id
    with pytest.raises(ImportRejected, match="expected a .csv or .json file"):
        parse_upload("r.xlsx", b"x")


def test_several_runs_in_one_csv_come_back_as_several_runs():
    a, b = sample_run(), replace(gpu_run(), run_id="second")
    runs = parse_csv(to_csv([a, b]).encode())
    assert [r.run_id for r in runs] == [a.run_id, "second"]
    assert [len(r.stages) for r in runs] == [4, 4]


def test_stage_result_dict_round_trip():
    stage = gpu_run().stages[3]
    assert StageResult.from_dict(json.loads(json.dumps(stage.to_dict()))) == stage
    assert StageResult.from_dict({**stage.to_dict(), "status": "oom"}).status is Status.OOM


def test_an_imported_fallback_is_never_ranked():
    run = gpu_run()
    run = run.with_stage(replace(run.stages[3], verdict="fallback"))  # the x5 stage was PyTorch after all
    assert summarize(run).fastest.key == "apex-fusedadam+layernorm+fp32"  # measured here: not counted
    [imported] = parse_json(to_json(run).encode())
    assert summarize(imported).stages[3].verdict == "imported: fallback on NVIDIA H200"
    assert not summarize(imported).stages[3].ranked
    assert summarize(imported).fastest.key == "apex-fusedadam+layernorm+fp32"


@pytest.mark.parametrize("field,value", [("times_ms", "NaN"), ("peak_allocated_mib", "Infinity")])
def test_a_non_finite_json_number_is_refused_naming_its_stage_and_field(field, value):
    text = to_json(sample_run())
    start = text.index(f'"{field}": ') + len(f'"{field}": ')
    if field == "times_ms":  # the first element of the list
        start = text.index("10.0", start)
        text = text[:start] + value + text[start + len("10.0"):]
    else:
        text = text[:start] + value + text[start + len("100.0"):]
    with pytest.raises(ImportRejected) as info:
        parse_json(text.encode())
    assert "is not a finite number" in str(info.value)
    assert f"stage 0, field {field}" in str(info.value), str(info.value)


def test_one_busy_figure_in_every_view():
    """The Bottleneck cell, the CSV, the JSON and the report show one figure: the kernel share (10 ms of kernels
    in the 20 ms step: 0.5), never the profiled trace's busy share (0.35); a launch-bound stage shows how long the
    GPU idled, not a share that reads as busy."""
    from bench_core.results.columns import DISPLAY_COLUMNS
    from bench_core.results.report import render_html

    run = gpu_run()
    summary = summarize(run)
    base, bf16 = summary.stages[0], summary.stages[3]
    cell = next(c for c in DISPLAY_COLUMNS if c.key == "bottleneck").cell
    assert cell(bf16) == "launch-bound (GPU idle 50% of the step)"
    assert cell(base) == "gpu-bound (kernels 99% of the step)"          # 99 ms of kernels in a 100 ms step
    csv_bf16 = csv_rows(to_csv(run))[3]
    json_bf16 = json.loads(to_json(run))["summary"][3]
    assert float(csv_bf16["kernel_share"]) == json_bf16["kernel_share"] == 0.5
    assert "gpu_busy" not in csv_bf16 and "gpu_busy" not in json_bf16
    report = render_html(run)
    assert "launch-bound (GPU idle 50% of the step)" in report and "busy)" not in report


def test_the_noisy_column_loads_as_booleans_with_an_unavailable_row():
    """A stage that was not measured (unavailable, out of memory) is not flagged noisy: False, never a blank that
    turns the column into text for pandas."""
    import pandas as pd

    run = sample_run()
    assert {s.status for s in run.stages} >= {Status.UNAVAILABLE, Status.OOM}
    frame = pd.read_csv(io.StringIO(to_csv(run)))
    assert frame["noisy"].dtype == bool
    assert json.loads(to_json(run))["summary"][2]["noisy"] is False
    [back] = parse_csv(to_csv(run).encode())
    assert [s.status for s in back.stages] == [s.status for s in run.stages]
