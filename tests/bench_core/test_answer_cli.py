"""The terminal's side of the answer card: `import --example` brings a shipped GPU run into the history, and a real
tiny CPU run opens with the card and says what to do next."""
import os
import subprocess
import sys
import tempfile

import pytest

from bench_core.results.answer import Worth, answer
from bench_core.results.examples import EXAMPLES, example_run
from bench_core.results.store import Store
from bench_core.results.summary import summarize


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    base = tmp_path_factory.mktemp("answer_cli")
    return {"BENCH_CACHE_DIR": str(base / "cache"), "BENCH_DB": str(base / "default.sqlite3"),
            "XDG_DATA_HOME": str(base / "xdg"), "BENCH_WARMUP_MIN_S": "0"}


def _cli(home, *args):
    return subprocess.run([sys.executable, "-m", "bench_core", *args], cwd=tempfile.gettempdir(),
                          capture_output=True, text=True, timeout=300, env={**os.environ, **home})


def test_import_example_brings_each_shipped_gpu_run_into_the_history(home, tmp_path):
    db = tmp_path / "h.sqlite3"
    for name in EXAMPLES:
        proc = _cli(home, "import", "--example", name, "--db", str(db))
        assert proc.returncode == 0, proc.stderr
        assert f"imported run {example_run(name).run_id} into {db}" in proc.stdout
    saved = [Store(str(db)).load_run(r["run_id"]) for r in Store(str(db)).list_runs()]
    assert sorted(r.run_id for r in saved) == sorted(example_run(n).run_id for n in EXAMPLES)
    words = {line.word for r in saved for line in answer(summarize(r)).lines if line.label == "Apex"}
    assert words == {Worth.NOT_WORTH_IT}


@pytest.mark.parametrize("args,message", [
    (["--example", "h100"], "example: 'h100' is not one of h100-seed-A, h100-seed-B"),
    ([], "import: give a FILE or --example NAME (one of them)"),
    (["some.json", "--example", "h100-seed-A"], "import: give a FILE or --example NAME (one of them)"),
])
def test_import_example_refuses_a_bad_name_or_both_naming_the_field(home, tmp_path, args, message):
    db = tmp_path / "h.sqlite3"
    proc = _cli(home, "import", *args, "--db", str(db))
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert not db.exists() or Store(str(db)).list_runs() == []


@pytest.mark.slow
def test_a_cpu_run_opens_with_the_answer_and_says_what_to_do_next(home):
    proc = _cli(home, "run", "--stages", "adam+layernorm+fp32,adam-fused+layernorm+fp32", "--device", "cpu",
                "--model", "tiny", "--iters", "3", "--warmup", "1", "--no-db", "--quiet")
    assert proc.returncode == 0, proc.stderr
    progress, _, result = proc.stdout.partition("Answer:\n")
    assert all(line.startswith("[") for line in progress.splitlines())   # --quiet's round lines, then the result
    out = "Answer:\n" + result
    assert out.startswith("Answer:\n  Apex: not measured here — needs a CUDA GPU")
    step = out.index("Next step: A CPU result does not carry over to a GPU")
    assert step < out.index("┃ Stage")
    assert all(name in out[step:] for name in EXAMPLES) and "docs/CLUSTER.md" in out[step:]
