"""The Components table: human headers with units (the run table's where the figure is the same), no "None" cell,
each row that did not run with why, and each Adam row with how its step ran (its name said "adam" where the page
said "for-loop, foreach and fused")."""
import re

from sample_runs import APEX_ADAM_REASON, cpu_components_report

from bench_core.components.rows import (
    ComponentRow,
    OptimizerPath,
    component_cells,
    component_columns,
    format_table,
)
from bench_core.results.columns import DISPLAY_COLUMNS, NA


def test_headers_are_words_with_units_and_shared_with_the_run_table():
    cells = component_cells(cpu_components_report())
    headers = list(cells[0])
    assert headers == ["Component", "Precision", "Status", "Runs as", "Median", "p10–p90", "Noise", "Bandwidth",
                       "Kernel proof", "Notes", "Lever"]   # no GPU figures on a CPU report
    run_headers = {c.key: c.header for c in DISPLAY_COLUMNS}
    assert {run_headers[k] for k in ("status", "median_ms", "spread", "noise", "verdict", "reason")} <= set(headers)
    adam = cells[0]
    assert (adam["Median"], adam["p10–p90"], adam["Bandwidth"]) == ("0.959 ms", "0.900–1.100 ms", "13.7 GB/s")
    gpu = [c.header for c in component_columns("cuda")]
    assert {"Of copy ceiling", "Kernels per call", "Kernel time", "Bottleneck"} <= set(gpu)


def test_no_cell_reads_none_and_a_row_that_did_not_run_says_why():
    report = cpu_components_report()
    cells = component_cells(report)
    assert not [v for row in cells for v in row.values() if v in ("None", "nan", "")]
    apex = cells[3]
    assert apex["Status"] == "unavailable" and apex["Notes"] == APEX_ADAM_REASON and apex["Median"] == NA
    assert report.not_run() == [f"Apex FusedAdam (FP32): unavailable, {APEX_ADAM_REASON}",
                                "Apex FusedLayerNorm (FP32, BF16 autocast): unavailable, falls back on CPU"]


def test_each_adam_row_says_how_its_step_ran():
    rows = cpu_components_report().rows
    assert [r.runs_as for r in rows] == [OptimizerPath.FOR_LOOP, OptimizerPath.FOR_LOOP, OptimizerPath.FUSED,
                                         None, None, None, None]
    assert [c["Runs as"] for c in component_cells(cpu_components_report())][:4] == ["for-loop", "for-loop", "fused", NA]
    assert [r.label for r in rows[:3]] == ["Adam · for-loop · FP32", "Adam (for-loop) · FP32", "Adam fused · FP32"]
    on_gpu = ComponentRow("optimizer", "adam", "fp32", "ok", title="Adam",
                          kernel_names=("aten::_foreach_add_", "void at::native::multi_tensor_apply_kernel"))
    apex = ComponentRow("optimizer", "apex-fusedadam", "fp32", "ok", title="Apex FusedAdam",
                        kernel_names=("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>>",))
    assert (on_gpu.runs_as, apex.runs_as) == (OptimizerPath.FOREACH, OptimizerPath.FUSED)
    assert on_gpu.label == "Adam · foreach · FP32"


def test_the_terminal_table_is_headed_and_filled_from_the_same_registry():
    """`python -m bench_core components` printed its own headers ("median ms", "of copy") beside the page's
    ("Median", "Of copy ceiling"): its columns are the registry's, less the notes it lists under the table."""
    from dataclasses import replace
    report = cpu_components_report()
    lines = format_table(report).splitlines()
    columns = [c for c in component_columns("cpu") if c.key != "notes"]
    header = next(line for line in lines if line.startswith(columns[0].header))
    assert re.split(r" {2,}", header.strip()) == [c.header for c in columns], header
    assert "median ms" not in format_table(report) and "of copy" not in format_table(report)
    cells = component_cells(report)
    first = lines[lines.index(header) + 2]   # under the rule
    assert [cells[0][c.header] in first for c in columns] == [True] * len(columns), first
    on_gpu = format_table(replace(report, device="cuda"))
    assert all(c.header in on_gpu for c in component_columns("cuda") if c.key != "notes")
    assert f"  {report.rows[3].name} [fp32]: {APEX_ADAM_REASON}" in lines   # the notes, listed under the table
