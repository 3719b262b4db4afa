import json
from dataclasses import replace

import pytest

from bench_core.config import BenchConfig
from bench_core.importer import ImportRejected, parse_csv, parse_json
from bench_core.levers import PRESETS
from bench_core.results import CSV_COLUMNS, RunResult, StageResult, summary_rows, to_csv, to_json
from bench_core.runner import initial_stage


def sample_run() -> RunResult:
    cfg = BenchConfig(depth=2, width=64, heads=4, seq_len=32, batch_size=2, vocab_size=256, iters=4, device="cuda")
    stages = [initial_stage(i, s, 4) for i, s in enumerate(PRESETS["seed"])]
    stages[0] = replace(stages[0], status="ok", times_ms=(10.0, 11.0, 10.5, 12.0), losses=(5.5, 5.4, 5.3, 5.2),
                        peak_allocated_mib=100.0, peak_reserved_mib=120.0, verdict="verified",
                        kernels={"aten_foreach": ["aten::_foreach_add_"]})
    stages[1] = replace(stages[1], status="ok", times_ms=(5.0, 5.5, 5.2, 5.1), losses=(5.5, 5.4, 5.3, 5.2),
                        peak_allocated_mib=90.0, verdict="fallback",
                        warnings=("Apex FusedAdam fell back to PyTorch: trace shows aten::_fused_adam_",))
    stages[2] = replace(stages[2], status="unavailable", reason="=HYPERLINK(\"x\") apex amp_C extension not built")
    stages[3] = replace(stages[3], status="oom", reason="OutOfMemoryError: Tried to allocate 20.00 GiB")
    env = {"torch": "2.11.0", "cuda_runtime": "13.0", "driver": "580", "cuda": {"name": "NVIDIA H200"},
           "apex": {"status": "genuine", "distribution": {"version": "0.1"}}}
    return RunResult(config=cfg, env=env, device="cuda", preset="seed", stages=tuple(stages), status="done")


def test_csv_has_the_required_columns_and_rows():
    text = to_csv(sample_run())
    header = text.splitlines()[0].split(",")
    for col in ["stage", "optimizer", "norm", "precision", "compile", "status", "reason", "median_ms", "p10_ms",
                "p90_ms", "tokens_per_s", "speedup", "peak_mem_mib", "tflops", "mfu", "loss_first", "loss_last",
                "kernels_seen", "device", "gpu", "torch", "apex", "depth", "width", "heads", "seq_len",
                "batch_size", "vocab_size", "warmup", "iters"]:
        assert col in header
    assert header == CSV_COLUMNS and len(text.strip().splitlines()) == 5


def test_csv_round_trip():
    run = sample_run()
    [back] = parse_csv(to_csv(run).encode())
    before, after = summary_rows(run), summary_rows(back)
    for a, b in zip(before, after):
        for col in ("stage", "status", "reason", "median_ms", "speedup", "mfu", "peak_mem_mib", "kernels_seen",
                    "gpu", "depth", "iters", "verdict", "warnings"):
            assert a[col] == pytest.approx(b[col]) if isinstance(a[col], float) else a[col] == b[col], col
    assert after[1]["speedup"] == pytest.approx(10.75 / 5.15)


def test_csv_neutralises_formulas():
    text = to_csv(sample_run())
    assert "'=HYPERLINK" in text and ",=HYPERLINK" not in text


def test_json_round_trip():
    run = sample_run()
    [back] = parse_json(to_json(run).encode())
    assert back.stages == run.stages and back.config == run.config and back.run_id == run.run_id
    doc = json.loads(to_json(run))
    assert doc["stages"][0]["times_ms"] == [10.0, 11.0, 10.5, 12.0]


@pytest.mark.parametrize("payload,message", [
    (b"a,b\n1,2\n", "missing columns: stage"),
    (b"\x89PNG\x00\x00binary", "binary"),
    (b"{\"schema\": \"other\"}", "not a bench_core run"),
    (b"{not json", "not valid JSON"),
])
def test_bad_files_are_rejected(payload, message):
    parse = parse_json if payload.startswith(b"{") else parse_csv
    with pytest.raises(ImportRejected, match=message):
        parse(payload)


def test_csv_with_wrong_types_or_formulas_is_rejected():
    text = to_csv(sample_run())
    lines = text.splitlines()
    header = lines[0].split(",")
    i = header.index("depth")
    row = lines[1].split(",")
    row[i] = "deep"
    with pytest.raises(ImportRejected, match="column depth: 'deep' is not an integer"):
        parse_csv("\n".join([lines[0], ",".join(row)]).encode())
    row = lines[1].split(",")
    row[0] = "=cmd|'/c calc'!A1"
    with pytest.raises(ImportRejected, match="formula"):
        parse_csv("\n".join([lines[0], ",".join(row)]).encode())


def test_oversized_file_is_rejected():
    with pytest.raises(ImportRejected, match="above the 1 MiB limit"):
        parse_csv(b"x" * (2 * 2**20), max_bytes=2**20)


def test_stage_result_dict_round_trip():
    stage = sample_run().stages[1]
    assert StageResult.from_dict(json.loads(json.dumps(stage.to_dict()))) == stage
