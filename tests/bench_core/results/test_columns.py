"""The display-column spec's own rules: proof warnings name the stage's own libraries, and the terminal table
breaks long stage names only after a '+', with no invisible characters."""
import io
from dataclasses import replace

import pytest
from rich.console import Console

from bench_core.levers.stage import Stage
from bench_core.results.columns import proof_consequence
from bench_core.results.records import Status
from bench_core.results.summary import summarize
from bench_core.results.table import print_table
from helpers import sample_runs

gpu_run = sample_runs().gpu_run


def _with_stage(stage, verdict, warnings=("a lever's kernel was not seen",)):
    run = gpu_run()
    first = replace(run.stages[1], stage=stage, verdict=verdict, warnings=warnings)
    return summarize(replace(run, stages=(run.stages[0], first))).stages[1]


@pytest.mark.parametrize("stage,verdict,expected", [
    (Stage("apex-fusedadam"), "fallback", "this stage is not counted as Apex"),
    (Stage("adam-fused", "liger-ln", "bf16"), "fallback", "this stage is not counted as Liger-Kernel"),
    (Stage("adam-fused", "layernorm", "fp8-torchao", "compile"), "fallback",
     "this stage is not counted as torchao"),
    (Stage("adam-fused", "layernorm", "bf16"), "unconfirmed", "this stage's kernel proof is unconfirmed"),
    (Stage("apex-fusedadam"), "unconfirmed", "this stage's kernel proof is unconfirmed"),
])
def test_a_proof_warning_names_the_stages_own_library(stage, verdict, expected):
    assert proof_consequence(_with_stage(stage, verdict)) == expected


def test_no_warning_no_consequence_and_an_imported_fallback_still_names_its_library():
    assert proof_consequence(_with_stage(Stage("apex-fusedadam"), "verified", ())) is None
    imported = _with_stage(Stage("adam-fused", "liger-ln", "bf16"), "imported: fallback on NVIDIA H200")
    assert proof_consequence(imported) == "this stage is not counted as Liger-Kernel"


@pytest.mark.parametrize("width", [80, 120, 160, 200])
def test_terminal_table_fits_and_breaks_names_only_after_a_plus(width):
    run = gpu_run()
    long = replace(run.stages[3], index=4, stage=Stage("adam-fused", "liger-ln", "bf16", "compile", head="liger-flce"),
                   status=Status.UNAVAILABLE, times_ms=(), reason="")
    summary = summarize(replace(run, stages=(*run.stages, long)))
    console = Console(width=width, file=io.StringIO())
    print_table(summary, console)
    out = console.file.getvalue()
    assert "\u200b" not in out
    framed = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]
    assert framed and all(len(line) <= width for line in framed)  # every table printed fits, the answer's too
    # the stage table is the last one printed (the answer card's contributions table comes first)
    start = max(i for i, line in enumerate(framed) if line.startswith("┏"))
    table = framed[start:]
    first_cells = [line.split("│")[1].strip() for line in table if line.startswith("│")]
    # the stage column read top to bottom spells every key whole: no lever name is cut
    assert "".join(first_cells) == "".join(s.key for s in summary.stages)
    for cell in first_cells:
        assert not cell or cell.endswith("+") or any(key.endswith(cell) for key in (s.key for s in summary.stages))
    if width >= 200:  # a pipe's width: each name on one line
        assert all(s.key in first_cells for s in summary.stages)


def test_a_twin_is_called_native_only_where_it_is_all_pytorch():
    """The seed's twins after its four steps: torch fused Adam in FP32 and native BF16 are native twins; Apex
    FusedAdam + LayerNorm in BF16 (it isolates FusedLayerNorm) is a twin, and was called native (a new user's pass)."""
    from bench_core.levers.presets import preset
    from bench_core.results.columns import key_cell, key_columns
    from bench_core.results.records import initial_stage
    run = gpu_run()
    run = replace(run, stages=tuple(initial_stage(i, s, 4) for i, s in enumerate(preset("seed"))))
    summary = summarize(run)
    column = next(c for c in key_columns(summary) if c.key == "stage")
    cells = {s.result.stage.key: key_cell(summary, column, s) for s in summary.stages}
    assert cells["adam-fused+layernorm+fp32"].endswith(" (native twin)")
    assert cells["adam-fused+layernorm+bf16"].endswith(" (native twin)")
    assert cells["apex-fusedadam+layernorm+bf16"].endswith(" (twin)")
    assert not any(cells[s.key].endswith("twin)") for s in preset("seed")[:4])
