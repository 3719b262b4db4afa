"""The CLI table, the HTML report, the dashboard's table and the CSV show the same figures for the same run: each
renders every column of `columns.DISPLAY_COLUMNS` where it applies, with the same text, and none where it does not."""
import csv
import html
import io
import re
from dataclasses import replace

import pytest
from rich.console import Console
from sample_runs import gpu_ladder_on_cpu, gpu_run

from bench_core.levers.stage import Stage
from bench_core.machine.conditions import ClocksLocked, Conditions
from bench_core.results.columns import DISPLAY_COLUMNS, NA, Layout, key_columns, shown
from bench_core.results.file_columns import CSV_COLUMNS
from bench_core.results.formats import neutralise, to_csv
from bench_core.results.report import HIDDEN, render_html
from bench_core.results.summary import summarize
from bench_core.results.table import print_table


def wide_gpu_run():
    """A CUDA run where the figures shown only sometimes are measured: energy (NVML), an FP16 stage's skipped
    steps, the baseline again on two GPUs (scaling), the GPU and host during the baseline's timed steps, and an FP8
    stage's share of GEMM time and the layers its surgery converted."""
    from bench_core.levers.changes import LeverChange, SurgeryReport
    from bench_core.measure.gemms import GemmShare, OtherGemm
    run = gpu_run()
    base, apex = run.stages[0], run.stages[1]
    fp16 = replace(apex, index=4, stage=Stage("adam-fused", "layernorm", "fp16"), skipped_steps=1, energy_j=8.0,
                   warnings=("TF32 matmul was on, the stage asked for off",), verdict="unconfirmed")
    two = replace(base, index=5, stage=base.stage.replace(gpus="2"), times_ms=(60.0,) * 8)
    conditions = Conditions(sm_clock_mhz=(1980, 1755, 1980), power_w=(600.0, 640.0), temp_c_max=71.0,
                            throttle_reasons=("sw_power_cap",), other_processes=0, clocks_locked=ClocksLocked.NO,
                            load_avg=2.5, host_cores=16, cpu_share=0.99)
    head = OtherGemm("nvjet_sm90_tst_192x192_64x4_2x1_v_bz_coopB_TNN", "aten::mm [64, 64] x [64, 256]", 2.0, "lm_head")
    converted = LeverChange("fp8-torchao", converted=8, candidates=14, not_converted={"dims not divisible by 16": 6},
                            note="LM head kept in high precision")
    fp8 = replace(apex, index=6, stage=Stage("adam-fused", "layernorm", "fp8-torchao"),
                  gemm_share=GemmShare("FP8", 8.0, 10.0, (head,)), surgery=SurgeryReport((converted,)))
    stages = (replace(base, energy_j=64.0, conditions=conditions), *run.stages[1:], fp16, two, fp8)
    return replace(run, stages=stages)


def cli_text(summary):
    console = Console(record=True, width=400, file=io.StringIO())
    print_table(summary, console)
    return console.export_text()


def html_tables(text):
    """The report's tables (the key columns, then the rest behind a toggle): each one's headers and row cells."""
    out = []
    for table in re.findall(r"<table>(.*?)</table>", text):
        rows = re.findall(r"<tr>(.*?)</tr>", table)
        header = [html.unescape(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", rows[0])]
        cells = [[c.replace("<wbr>", "") for c in re.findall(r"<td>(.*?)</td>", row)] for row in rows[1:]]
        out.append((header, [[html.unescape(c) for c in row] for row in cells]))   # <wbr>: a break, no text
    return out


def html_cells(text):
    """The report's columns, the key table's first (the stage once): headers, then each row's cells by header."""
    (key_heads, key_rows), (rest_heads, rest_rows) = html_tables(text)
    assert key_heads[0] == rest_heads[0] == "Stage"
    heads = key_heads + rest_heads[1:]
    return heads, [dict(zip(heads, k + r[1:], strict=True)) for k, r in zip(key_rows, rest_rows, strict=True)]


@pytest.mark.parametrize("make", [gpu_run, gpu_ladder_on_cpu, wide_gpu_run])
def test_every_column_shows_the_same_text_in_every_view_where_it_applies(make):
    from dashboard.job_view import column_config, table_rows
    run = make()
    summary = summarize(run)
    cli = cli_text(summary)
    cli_header = next(line for line in cli.splitlines() if "Stage" in line)
    cli_heads = [h.strip() for h in cli_header.strip("┃ ").split("┃")]
    stages_table = cli[cli.index(cli_header):]   # the contributions' own table comes before it
    cli_rows = [[c.strip() for c in line.strip("│ ").split("│")] for line in stages_table.splitlines()
                if line.startswith("│")]
    report_heads, report_rows = html_cells(render_html(run))
    page, config = table_rows(summary), column_config(summary)
    rows = list(csv.DictReader(io.StringIO(to_csv(run))))
    applying = shown(summary)
    table_cols = [c for c in applying if c.layout != Layout.NOTE]
    assert cli_heads == [c.header for c in table_cols]
    assert report_heads[:len(key_columns(summary))] == [c.header for c in key_columns(summary)]
    assert sorted(report_heads) == sorted(c.header for c in applying if c.key not in HIDDEN)
    assert list(page.columns) == [c.key for c in applying] == list(config)
    for column in DISPLAY_COLUMNS:
        if column not in applying:
            assert column.key not in page.columns and column.header not in report_heads + cli_heads, column.key
            continue
        if column.key in HIDDEN:   # CPU RSS is no memory figure of the shared report
            assert column.header not in report_heads
        assert config[column.key]["label"] == column.header and config[column.key]["help"] == column.help
        for i, stage in enumerate(summary.stages):
            text = column.cell(stage)
            assert page.loc[i, column.key] == neutralise(text), (column.key, i)
            if column.key not in HIDDEN:
                assert report_rows[i][column.header] == text, (column.key, i)
            if column.layout == Layout.NOTE:  # under the terminal's table, one line per stage with a text
                assert (f"  {stage.key}: {text}" in cli) == (text != NA), (column.key, i)
            else:
                assert cli_rows[i][table_cols.index(column)] == text, (column.key, i)
            for field in column.fields:  # the same figure, raw, in the file
                raw = field.get(summary, stage)
                assert rows[i][field.name] == ("" if raw is None else neutralise(str(raw))), (field.name, i)


def test_each_sometimes_shown_column_is_shown_in_some_run_and_hidden_in_another():
    """The parametrised runs reach both sides of every `applies` rule (so none of them is vacuous)."""
    runs = [summarize(make()) for make in (gpu_run, gpu_ladder_on_cpu, wide_gpu_run)]
    for column in DISPLAY_COLUMNS:
        verdicts = {column in shown(summary) for summary in runs}
        always = column.key in ("stage", "status", "median_ms", "spread", "speedup", "interval", "tokens_per_s",
                                "noise", "verdict", "reason", "delta")
        assert verdicts == ({True} if always else {True, False}), column.key


def test_the_drifts_are_gone():
    """Peak memory is GPU memory; a CPU run's RSS is labelled so; energy per token is shown where measured."""
    cuda, cpu, wide = (summarize(make()) for make in (gpu_run, gpu_ladder_on_cpu, wide_gpu_run))
    headers = {name: [c.header for c in shown(s)] for name, s in (("cuda", cuda), ("cpu", cpu), ("wide", wide))}
    assert "Peak memory" in headers["cuda"] and "Peak RSS" not in headers["cuda"]
    assert "Peak RSS" in headers["cpu"] and "Peak memory" not in headers["cpu"]
    assert "Energy/token" in headers["wide"] and "Energy/token" not in headers["cuda"]
    energy = next(c for c in DISPLAY_COLUMNS if c.key == "energy")
    assert energy.cell(wide.stages[0]) == f"{64.0 / (8 * 64):.4f} J"   # 64 J over 8 steps of 64 tokens
    rss = next(c for c in DISPLAY_COLUMNS if c.key == "peak_rss_mib")
    assert rss.cell(cpu.stages[0]) == "300 MiB"


def test_every_raw_field_of_a_shown_column_is_a_file_column():
    names = [f.name for c in DISPLAY_COLUMNS for f in c.fields]
    assert set(names) <= set(CSV_COLUMNS)
    assert len({c.key for c in DISPLAY_COLUMNS}) == len(DISPLAY_COLUMNS)
    assert all(c.help and c.header for c in DISPLAY_COLUMNS)


def test_a_new_shown_figure_reaches_the_file_without_touching_formats():
    """A figure added to the display spec only lands in the CSV columns (at the end: saved files keep their order)."""
    from bench_core.results.columns import DisplayColumn, Field
    from bench_core.results.file_columns import file_columns
    extra = DisplayColumn("host", "Host", lambda s: None, "host time per step",
                          (Field("host_per_token", "float", lambda r, s: None),))
    names = [c.name for c in file_columns((*DISPLAY_COLUMNS, extra))]
    assert names[:-1] == CSV_COLUMNS and names[-1] == "host_per_token"


def test_what_each_lever_changed_in_the_model_reaches_every_view():
    from dashboard.job_view import table_rows
    run = wide_gpu_run()
    summary = summarize(run)
    said = "fp8-torchao: 8 of 14 layers converted (not: 6 dims not divisible by 16); LM head kept in high precision"
    assert f"adam-fused+layernorm+fp8-torchao: {said}" in cli_text(summary)
    assert said in html.unescape(render_html(run))
    assert said in list(table_rows(summary)["model_changes"])
    assert [r["model_changes"] for r in csv.DictReader(io.StringIO(to_csv(run)))][-1] == said
