"""The Recommend page under AppTest: a real tiny recommendation on CPU through the page (the engine's worker
processes, a tiny budget), its answer drawn and kept; bad input refused naming its field, nothing launched; History
lists the recommendation and opens it; its JSON goes back in through `python -m bench_core import`."""
import pytest

import dashboard.session
from bench_core.cli import main
from bench_core.recommend.history import RecommendationStore
from bench_core.results.records import Status

TINY = {"rec_budget": "15s", "rec_tokens": "1000000", "rec_exclude": "compile,fp16,adam-loop,bf16"}


def _ask(at, **fields):
    at.text_input(key="cfg_iters").set_value("6")
    for key, value in {**TINY, **fields}.items():
        at.text_input(key=key).set_value(value)
    next(b for b in at.button if b.label == "Find what to switch on").click()
    at.run()
    return at


@pytest.mark.parametrize("field, value, named", [
    ("rec_budget", "ten minutes", "budget:"),
    ("rec_batch", "8:2", "batch_size:"),
    ("rec_memory", "-3", "memory:"),
    ("rec_from", "warp-drive", "stages:"),
    ("rec_exclude", "warp", "exclude:"),
])
def test_bad_input_is_refused_naming_its_field_and_nothing_launches(app, field, value, named):
    at = _ask(app("pages/recommend.py"), **{field: value})
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("Nothing was launched: " + named), errors
    service = dashboard.session.get_recommendations()
    assert service.current() is None and not service.running


def test_a_bad_model_field_launches_nothing(app):
    at = app("pages/recommend.py")
    at.text_input(key="cfg_width").set_value("wide")
    at.run()
    next(b for b in at.button if b.label == "Find what to switch on").click()
    at.run()
    assert "Nothing was launched: fix the model's fields marked above." in [e.value for e in at.error]
    assert dashboard.session.get_recommendations().current() is None


@pytest.mark.slow
def test_a_real_tiny_recommendation_through_the_page_and_history(app, app_env, tmp_path):
    at = _ask(app("pages/recommend.py"))
    assert not at.exception and not at.error, [e.value for e in at.error]
    service = dashboard.session.get_recommendations()
    job = service.wait(timeout=240)
    assert job is not None and job.status is Status.DONE, job
    rec = job.recommendation
    assert rec is not None and rec.recommended is not None and rec.recommended.label == "measured"
    assert rec.speedup is not None and rec.savings is not None and rec.recipe
    at.run()
    shown = "\n".join(m.value for m in at.markdown)
    assert rec.recommended.stage in shown and f"×{rec.speedup:.2f}" in shown and "GPU-hours" in shown
    assert "tokens per step: held at" in shown
    assert [c.value.strip() for c in at.code] == [rec.recipe.strip()]
    [table] = [d.value for d in at.dataframe if "label" in d.value.columns]
    assert len(table) == len(rec.candidates) and "measured" in set(table["label"])
    # kept: History lists it and opens it on this page
    history = at.switch_page("pages/history.py").run()
    [listing] = [d.value for d in history.dataframe if "recommended" in d.value.columns]
    assert listing["open"].tolist() == [f"/recommend?recommendation={rec.recommendation_id}"]
    assert listing["recommended"].tolist() == [rec.recommended.stage]
    # its JSON back in through the CLI's import, into another history
    path, db = tmp_path / "rec.json", tmp_path / "other.sqlite3"
    path.write_text(rec.to_json())
    assert main(["import", str(path), "--db", str(db)]) == 0
    [row] = RecommendationStore(str(db)).list_recommendations()
    assert row["recommendation_id"] == rec.recommendation_id and row["recommended"] == rec.recommended.stage
