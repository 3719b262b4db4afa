"""The old-beside-new launch-bound table in docs/data is what the engine computes today from the raw runs it names:
a change to the rule or to a raw file that is not carried into the published table fails here."""
import contextlib
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_published_old_and_new_labels_are_recomputed_from_the_raw_runs():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bound_labels
    finally:
        sys.path.pop(0)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert bound_labels.main(["--data", str(ROOT / "docs" / "data")]) == 0
    assert out.getvalue() == (ROOT / "docs" / "data" / "bound_labels_old_new.txt").read_text()
