"""benchmarks/doc_tables.py: the docs' tables come from the engine's own summary texts, one row per stage."""
import json
from dataclasses import replace

import pytest

from bench_core.results.records import Status
from bench_core.results.summary import summarize
from helpers import load_benchmark, sample_runs

gpu_run = sample_runs().gpu_run

doc_tables = load_benchmark("doc_tables")


@pytest.fixture
def two_runs(tmp_path):
    run = gpu_run()
    gone = replace(run.stages[2], status=Status.UNAVAILABLE, reason="Apex: not installed", times_ms=(),
                 losses=())
    paths = []
    for n, r in enumerate((run, replace(run, stages=(*run.stages[:2], gone, run.stages[3])))):
        paths.append(tmp_path / f"run{n}.json")
        paths[-1].write_text(json.dumps(r.to_dict()))
    return [str(p) for p in paths]


def test_pair_table_has_every_stage_with_both_runs_and_why_one_did_not_run(two_runs, capsys):
    doc_tables.main(["--pair", two_runs[1], two_runs[0]])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| `")]
    summary = summarize(gpu_run())
    assert [r.split("`")[1] for r in rows] == [s.key for s in summary.stages]
    base, apex, _, bf16 = summary.stages
    assert f"{apex.timing.median_ms:.2f} ({apex.spread_text})" in rows[1]
    assert "unavailable: Apex: not installed" in rows[2]
    assert f"{bf16.bottleneck.busy_text} launch-bound" in rows[3] and bf16.mfu_text in rows[3]


def test_single_run_table_shows_memory_and_the_reason_of_a_stage_without_timings(two_runs, capsys):
    doc_tables.main([two_runs[1]])
    out = capsys.readouterr().out
    assert "| peak MiB |" in out and "| `apex-fusedadam+apex-fusedln+fp32` | unavailable: Apex: not installed" in out


def test_no_input_is_a_usage_message_not_a_traceback(capsys):
    with pytest.raises(SystemExit) as exit_:
        doc_tables.main([])
    assert exit_.value.code == 2 and "give RUN.json files" in capsys.readouterr().err


def test_twins_compare_each_vendor_lever_with_its_native_lever_in_the_same_run(tmp_path, capsys):
    from bench_core.levers.stage import Stage
    from bench_core.results.records import initial_stage
    run = gpu_run()
    ok = run.stages[3]  # an ok stage: its status, verdict and rounds
    cases = ((Stage("adam-fused", "layernorm", "bf16"), 10.0, 100.0),
             (Stage("adam-fused", "liger-ln", "bf16"), 9.0, 100.0),
             (Stage("adam-fused", "liger-ln", "bf16", head="liger-flce"), 12.5, 60.0))
    stages = tuple(replace(initial_stage(i, st, 4), status=ok.status, verdict=ok.verdict, rounds=ok.rounds,
                           times_ms=(ms,) * 8, peak_allocated_mib=mib) for i, (st, ms, mib) in enumerate(cases))
    path = tmp_path / "run.json"
    path.write_text(json.dumps(replace(run, stages=stages).to_dict()))
    doc_tables.main(["--twins", str(path)])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| `run.json`")]
    logits = run.config.tokens_per_step * run.config.vocab_size
    # one row per vendor lever whose single-lever native twin ran: Liger LN against LayerNorm, FLCE against the
    # plain head with the same Liger LN (its norm twin, native LN + FLCE, did not run)
    assert len(rows) == 2
    ln, flce = rows
    assert "`adam-fused+liger-ln+bf16` | `adam-fused+layernorm+bf16` | ×1.11" in ln and ln.endswith("| — |")
    # 9 / 12.5 ms; 40 of 100 MiB saved; per logit: the saving over tokens × vocab
    assert "| `adam-fused+liger-ln+bf16` | ×0.72 |" in flce and "100 → 60" in flce and "40 MiB (40.0%)" in flce
    assert f"{40 * 2 ** 20 / logits:.1f} B" in flce


# ---------------------------------------------------------------- the docs' printed tables are today's
ROOT = __import__("pathlib").Path(__file__).parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
MARKED = [(doc, mark) for doc in DOCS for mark in doc_tables.marked_tables(doc.read_text())]
# The header row of every table doc_tables prints, read from its own output: a doc table that starts with one of
# them was printed by it and must sit under its marker.
HEADERS = {next(line for line in doc_tables.printed(mark, ROOT).split("\n") if line.startswith("|"))
           for _, mark in MARKED}


@pytest.mark.parametrize(("doc", "mark"), MARKED, ids=[f"{d.name}:{m.line + 1}" for d, m in MARKED])
def test_each_marked_table_is_what_the_engine_prints_today_from_its_raw_file(doc, mark):
    lines = doc.read_text().split("\n")
    shown = "\n".join(lines[mark.start:mark.end])
    assert shown == doc_tables.printed(mark, ROOT), (
        f"{doc.name} line {mark.line + 1}: the table differs from `{mark.command}`; "
        f"print it again with `python benchmarks/doc_tables.py --rewrite docs/{doc.name}`")


def test_every_table_doc_tables_prints_in_the_docs_sits_under_its_marker():
    assert {"single", "agree", "components", "pair", "twins"} <= {
        "single" if not m.argv[0].startswith("--") else m.argv[0][2:] for _, m in MARKED}
    for doc in DOCS:
        lines = doc.read_text().split("\n")
        under = {n for m in doc_tables.marked_tables("\n".join(lines)) for n in range(m.start, m.end)}
        for n, line in enumerate(lines):
            if line in HEADERS and n not in under:
                pytest.fail(f"{doc.name} line {n + 1}: a doc_tables table with no `<!-- table: ... -->` marker above")


def test_rewrite_prints_a_stale_table_again_in_place_and_leaves_the_rest(two_runs, tmp_path, capsys):
    doc_tables.main([two_runs[0]])
    fresh = capsys.readouterr().out.rstrip("\n")
    stale = fresh.replace("| `adam", "| `old-adam", 1)
    doc = tmp_path / "DOC.md"
    marker = f"<!-- table: python benchmarks/doc_tables.py {two_runs[0]} -->"
    doc.write_text(f"# title\n\nprose before\n\n{marker}\n{stale}\n\nprose after\n")
    doc_tables.main(["--rewrite", str(doc)])
    assert "1 of 1 tables changed" in capsys.readouterr().out
    assert doc.read_text() == f"# title\n\nprose before\n\n{marker}\n{fresh}\n\nprose after\n"


def test_a_marker_that_names_another_script_or_has_no_table_is_refused():
    with pytest.raises(ValueError, match="must name `python benchmarks/doc_tables.py"):
        doc_tables.marked_tables("<!-- table: python other.py x.json -->\n| a |")
    with pytest.raises(ValueError, match="no table within"):
        doc_tables.marked_tables("<!-- table: python benchmarks/doc_tables.py x.json -->\n\ntext\n\n\n| a |")
