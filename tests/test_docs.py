"""Every raw file and figure the docs name exists: a figure without its raw output is not published."""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NAMED = re.compile(r"docs/(?:data|figures|screenshots)/[\w.\-]+\.(?:json|log|txt|png|csv)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)]+)\)")
TEMPLATE = re.compile(r"_run[A-Z]\.")  # a command template's output name (record.sh ..._runN.txt), not a claim


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_named_file_and_image_exists(doc):
    text = doc.read_text()
    named = {ROOT / m for m in NAMED.findall(text) if not TEMPLATE.search(m)} | {
        doc.parent / m for m in IMAGE.findall(text)}
    missing = sorted(str(p.relative_to(ROOT)) for p in named if not p.exists())
    assert not missing, f"{doc.name} names files that are not in the repo: {missing}"


# A figure the docs print next to its raw file carries a marker right after it, invisible when rendered:
#   38.83 ms<!-- fig: file=docs/data/X.json stage=STAGE_KEY metric=median_ms -->
# The figure is the number just before the marker; it is recomputed from the raw file through the engine's own
# loader and summary, and compared at the precision it is printed with.
MARKER = re.compile(r"([\d.,]+)(%?)(?: ms)?<!-- fig: file=(\S+) stage=(\S+) metric=(\w+) -->")
METRICS = {
    "median_ms": lambda s: s.timing.median_ms,
    "kernels": lambda s: s.profile.kernels_per_step if s.profile else None,
    "busy": lambda s: s.bottleneck.busy * 100 if s.bottleneck.busy is not None else None,
    "speedup": lambda s: s.speedup,
}


def _recomputed(path: str, stage: str, metric: str) -> float | None:
    from bench_core.results.records import RunResult
    from bench_core.results.summary import summarize
    run = RunResult.from_dict(json.loads((ROOT / path).read_text()))
    found = [s for s in summarize(run).stages if s.result.key == stage]
    assert len(found) == 1, f"{path} has {len(found)} stages {stage!r}"
    return METRICS[metric](found[0])


MARKED = [(doc, m) for doc in DOCS for m in MARKER.finditer(doc.read_text())]


def _paragraph(text: str, at: int) -> str:
    """The paragraph (or list item) around character `at`, its markers removed: what a reader sees. A table's
    paragraph is the table and the text right above it, which names its files."""
    begin = at
    if text[text.rfind("\n", 0, at) + 1] == "|":
        begin = text.rfind("\n\n", 0, at)  # the blank line above the table: its caption ends there
    start = max(text.rfind("\n\n", 0, begin), text.rfind("\n* ", 0, begin), text.rfind("\n  * ", 0, begin))
    ends = [i for i in (text.find("\n\n", at), text.find("\n* ", at), text.find("\n  * ", at)) if i >= 0]
    return re.sub(r"<!--.*?-->", "", text[start:min(ends, default=len(text))], flags=re.S)


@pytest.mark.parametrize(("doc", "mark"), MARKED, ids=[f"{d.name}:{m.group(4)}:{m.group(5)}" for d, m in MARKED])
def test_each_marked_figure_names_its_raw_file_where_a_reader_sees_it(doc, mark):
    """The marker is for the test; the reader needs the raw file named in the same paragraph, in plain text."""
    path = mark.group(3)
    assert path in _paragraph(doc.read_text(), mark.start()), \
        f"{doc.name}: {mark.group(1)} ({mark.group(5)} of {mark.group(4)}) does not name {path} beside it"


@pytest.mark.parametrize(("doc", "mark"), MARKED, ids=[f"{d.name}:{m.group(4)}:{m.group(5)}" for d, m in MARKED])
def test_each_marked_figure_is_recomputed_from_its_raw_file(doc, mark):
    printed, _, path, stage, metric = mark.groups()
    assert metric in METRICS, f"{doc.name}: unknown metric {metric!r}; one of {sorted(METRICS)}"
    value = _recomputed(path, stage, metric)
    assert value is not None, f"{path}: {stage} has no {metric}"
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    assert f"{value:.{decimals}f}" == printed.replace(",", ""), \
        f"{doc.name} prints {printed} for {metric} of {stage} in {path}"


def test_the_guide_s_sweep_paragraph_says_what_the_sweep_says():
    """Its own words, read from the engine: every crossing of ×1.00, a crossing back included; a cancelled sweep's
    points that never ran; a third decimal near ×1.00; the warning before a comparison that runs the same code."""
    from bench_core.sweep.core.crossover import Change, Direction
    from bench_core.sweep.core.records import NotRun
    text = (ROOT / "docs" / "GUIDE.md").read_text()
    start = text.index("* Where does a lever start to pay?")
    sweep = " ".join(text[start:text.index("\n* ", start + 1)].split())
    assert f'"{Direction.PAYS_ABOVE} A, and {Change.STOPS_PAYING} B"' in sweep
    assert f'"{NotRun.CANCELLED.text}"' in sweep
    assert "third decimal" in sweep and "`bench_core/results/near_one.py`" in sweep
    assert "`bench_core/sweep/views/words.py`" in sweep and "warned of before" in sweep
