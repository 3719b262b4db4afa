"""docs/CONTRIBUTING.md's recipes, each followed once: in a copy of the engine, the files the recipe names are edited
as it says and nothing else, and the new lever, column, family or sweep axis is seen to flow through the real engine
(the CLI on a tiny CPU model, or the derived lists), with the tests that derive lever lists still passing."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY_RUN = ("run", "--model", "tiny", "--device", "cpu", "--iters", "2", "--repeats", "1", "--warmup", "1",
            "--no-db", "--quiet")


def _copy(tmp_path: Path, with_tests: bool = False) -> Path:
    repo = tmp_path / "repo"
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "bench_core", repo / "bench_core", ignore=skip)
    if with_tests:
        shutil.copytree(ROOT / "tests", repo / "tests", ignore=shutil.ignore_patterns("__pycache__", "e2e", "gpu"))
        shutil.copy(ROOT / "pytest.ini", repo / "pytest.ini")
    return repo


def _insert_after(path: Path, anchor: str, text: str) -> None:
    """The recipe's one edit: `text` put right after the line that holds `anchor` (found exactly once)."""
    source = path.read_text()
    assert source.count(anchor) == 1, f"{path.name}: the recipe's place {anchor!r} is not one line"
    end = source.index("\n", source.index(anchor)) + 1
    path.write_text(source[:end] + text + source[end:])


def _python(repo: Path, *args: str, cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(repo)}
    proc = subprocess.run([sys.executable, *args], cwd=cwd or repo, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def test_a_lever_of_an_existing_kind_is_one_registry_entry_and_its_builder(tmp_path):
    repo = _copy(tmp_path, with_tests=True)
    builders = repo / "bench_core/levers/builders.py"
    builders.write_text(builders.read_text() + '''

def adamw_recipe(params: Any, capturable: bool = False) -> Any:
    import torch
    return torch.optim.AdamW(params, lr=LR, foreach=False)
''')
    _insert_after(repo / "bench_core/levers/registry.py", 'factory=builders.adam(foreach=False), expected_class=',
                  '''    OptimizerLever("adamw-recipe", "AdamW (recipe)",
                   "opt = torch.optim.AdamW(model.parameters(), lr=3e-4, foreach=False)\\n",
                   factory=builders.adamw_recipe, expected_class="torch.optim.adamw.AdamW"),
''')
    out = tmp_path / "run.json"
    _python(repo, "-m", "bench_core", *TINY_RUN, "--stages", "adam-loop+layernorm+fp32,adamw-recipe+layernorm+fp32",
            "--json", str(out))
    stage = next(s for s in json.loads(out.read_text())["stages"] if s["optimizer"] == "adamw-recipe")
    assert stage["status"] == "ok" and stage["optimizer_class"] == "torch.optim.adamw.AdamW"
    # the lists the rest of the code reads are derived from the entry; no preset takes it unasked
    _python(repo, "-c", "from bench_core.levers.registry import names_of;"
            "from bench_core.levers.presets import PRESETS;"
            "assert 'adamw-recipe' in names_of('optimizer');"
            "assert all(s.optimizer != 'adamw-recipe' for ladder in PRESETS.values() for s in ladder)")
    # the tests that list levers derive them: they pass with the new entry, unedited
    _python(repo, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests/bench_core/test_levers.py",
            "tests/bench_core/test_cli.py", "-k", "not cli or every_kinds_levers or round_trips")


def test_a_shown_column_is_one_display_columns_entry(tmp_path):
    repo = _copy(tmp_path)
    _insert_after(repo / "bench_core/results/columns.py", "DISPLAY_COLUMNS: tuple[DisplayColumn, ...] = (", '''\
    DisplayColumn("recipe_loss", "Last loss (recipe)", lambda s: None if s.loss_last is None else f"{s.loss_last:.3f}",
                  "the loss at the last timed step", (_stage("recipe_loss", "float", lambda s: s.loss_last),)),
''')
    out, csv, html = tmp_path / "run.json", tmp_path / "run.csv", tmp_path / "run.html"
    _python(repo, "-m", "bench_core", *TINY_RUN, "--stages", "adam+layernorm+fp32", "--json", str(out),
            "--out", str(csv), "--html", str(html))
    header, row = csv.read_text().splitlines()[:2]
    assert "recipe_loss" in header.split(",")
    value = row.split(",")[header.split(",").index("recipe_loss")]
    assert float(value) > 0
    assert "Last loss (recipe)" in html.read_text()
    # the reader knows the column from the same table: the file imports back
    _python(repo, "-m", "bench_core", "import", str(csv), "--db", str(tmp_path / "h.sqlite3"))


def test_a_model_family_is_one_family_specs_entry(tmp_path):
    repo = _copy(tmp_path)
    _insert_after(repo / "bench_core/models/families.py", "FAMILY_SPECS: dict[str, FamilySpec] = {", '''\
    FamilySpec("gpt-recipe", "GPT's architecture under another name",
               {"norm": NormType.LAYERNORM, "mlp": MlpType.GELU}, _gpt_architecture, build=_build_gpt),
''')
    out = tmp_path / "run.json"
    _python(repo, "-m", "bench_core", *TINY_RUN, "--family", "gpt-recipe", "--stages", "adam+layernorm+fp32",
            "--json", str(out))
    run = json.loads(out.read_text())
    assert run["config"]["family"] == "gpt-recipe" and run["stages"][0]["status"] == "ok"
    # part levers reach it by part_type: a norm of the type it does not take is refused, naming its twin
    _python(repo, "-c", "from bench_core.levers.stage import Stage; from bench_core.models.families import FAMILIES;"
            "assert 'gpt-recipe' in FAMILIES;"
            "assert 'layernorm' in Stage(norm='rmsnorm').family_error('gpt-recipe')")


def test_a_sweep_axis_is_a_bounded_config_field_named_in_axes(tmp_path):
    repo = _copy(tmp_path)
    _insert_after(repo / "bench_core/sweep/core/spec.py",
                  'AXES = ("width", "depth", "batch_size", "seq_len", "vocab_size")',
                  'AXES = (*AXES, "heads")\n')
    proc = _python(repo, "-c", """
from bench_core.config.bench_config import ConfigError
from bench_core.config.settings import load_limits
from bench_core.models.families import collect_errors
from bench_core.sweep.core.spec import grid, parse_axes
from bench_core.config.bench_config import BenchConfig
base = BenchConfig.from_dict({**BenchConfig().to_dict(), "width": 128, "heads": 4, "depth": 2})
points = grid(parse_axes(["heads=2,4,8"]), base)
assert [p.config.heads for p in points] == [2, 4, 8] and all(p.config.width == 128 for p in points)
assert not any(collect_errors(p.config, load_limits(), False, {}) for p in points)
# the validation bounds it: a value the family refuses is named before anything runs
bad = grid(parse_axes(["heads=3"]), base)[0].config
print([e.field for e in collect_errors(bad, load_limits(), False, {})])
""")
    assert "heads" in proc.stdout or "width" in proc.stdout
    help_text = _python(repo, "-m", "bench_core", "sweep", "--help").stdout
    assert "heads" in " ".join(help_text.split())


@pytest.fixture(autouse=True)
def _no_leftover_env(monkeypatch):
    monkeypatch.delenv("BENCH_RAY_ADDRESS", raising=False)
