"""The Sweep page under AppTest: the form starts a sweep through the server's sweep service (fake kernel timings
and runs, so it ends at once), the map and the table show it, History lists it, a viewer cannot start one."""
import json

import pytest

import dashboard.session
from bench_core.results.records import Status
from bench_core.sweep.core.records import PointMeasurement
from bench_core.sweep.core.runner import SweepHooks
from helpers import step_timings


def _timings(speedup):
    return step_timings({"adam+layernorm+fp32": speedup, "adam-fused+layernorm+fp32": 1.0})


@pytest.fixture
def fake_sweeps(monkeypatch):
    """Speedup = width / 96 predicted, and measured 2% above: ×1.00 crossed between widths 64 and 128."""
    def predict_points(points, comparison, device, cancel):
        for p in points:
            yield p.index, _timings(p.config.width / 96), ()

    def measure_point(cfg, comparison, probe, hooks):
        s = cfg.width / 96 * 1.02
        return PointMeasurement(Status.OK, None, s, s * 0.95, s * 1.05, "within one process", 10 * s, 10.0,
                                "unknown", 100.0, 90.0, 1.0)
    monkeypatch.setattr(dashboard.session, "SWEEP_HOOKS_OVERRIDE",
                        SweepHooks(predict_points=predict_points, measure_point=measure_point))


def test_the_form_starts_a_sweep_and_the_page_draws_its_map(app, fake_sweeps):
    at = app("pages/sweep.py")
    assert at.title[0].value.startswith("Sweep")
    at.radio(key="sweep_mode").set_value("two stage keys")   # adam against adam-fused, as the fakes time them
    at.text_input(key="sweep_values1").set_value("64,128")
    [start] = [b for b in at.button if b.label == "Start the sweep"]
    start.click()
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    result = dashboard.session.get_sweeps().wait(timeout=30)
    assert result is not None and result.status == Status.DONE and all(p.measured for p in result.points)
    assert all(p.prediction for p in result.points), [p.prediction_note for p in result.points]
    at.run()
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert any(t.get("name", "") == "crossover, its interval shaded" and
               t["hovertext"][0].startswith("crossover: pays above width") for c in charts for t in c["data"])
    assert any("crossover: **pays above width" in m.value for m in at.markdown)
    # the table's cells as the HTML report writes them: ×1.00 rather than 1.0000, +2.0% rather than 2.04%, and "–"
    # where a point has no figure (it read "None")
    [table] = [d.value for d in at.dataframe if "speedup (B over A)" in d.value.columns]
    assert not table.isna().any().any() and "–" in set(table["why not measured"])
    assert all(t.startswith("×") for t in table["speedup (B over A)"]) and set(table["prediction error"]) == {"+2.0%"}
    history = at.switch_page("pages/history.py").run()
    table = [d.value for d in history.dataframe if "compare" in d.value.columns]
    assert len(table) == 1 and table[0]["measured"].tolist() == [2]
    # the link, the lever and its answer first: what a phone's three columns show
    assert list(table[0].columns)[:3] == ["open", "change", "crossover"] and table[0]["change"][0] == "adam-fused"


def test_the_processes_a_stage_are_set_on_the_page_and_checked_against_the_limit(app, fake_sweeps):
    """A CPU sweep measured one process a stage and its note pointed at the CLI's --repeats, which the page lacked:
    the page sets it, and a count over the server's limit is named before anything starts."""
    at = app("pages/sweep.py")
    at.radio(key="sweep_mode").set_value("two stage keys")
    assert at.number_input(key="sweep_processes").value == 1   # this CPU's default; a GPU's is 3
    at.number_input(key="sweep_processes").set_value(6)
    next(b for b in at.button if b.label == "Start the sweep").click()
    at.run()
    assert [e.value for e in at.error] == ["repeats: exceeds the limit of 5 (got 6)"]
    assert dashboard.session.get_sweeps().current() is None
    at.number_input(key="sweep_processes").set_value(2)
    next(b for b in at.button if b.label == "Start the sweep").click()
    at.run()
    result = dashboard.session.get_sweeps().wait(timeout=30)
    assert result is not None and result.spec.base.repeats == 2


def test_a_bad_axis_is_named_and_nothing_starts(app, fake_sweeps):
    at = app("pages/sweep.py")
    at.text_input(key="sweep_values1").set_value("64,sixty")
    [start] = [b for b in at.button if b.label == "Start the sweep"]
    start.click()
    at.run()
    assert any("axis width" in e.value and "positive integers" in e.value for e in at.error)
    assert dashboard.session.get_sweeps().current() is None


def test_the_comparison_is_shown_before_it_starts_and_bad_input_names_what_the_user_set(app, fake_sweeps):
    """A new user's pass over the page: the lever form and the keys field showed together, a lever this CPU cannot
    run was offered like the rest, one key read as an unknown lever ("choose one of ..., 1, 2, 4, 8"), and width
    100 said "divisible by heads (3)", a field the sweep sets itself."""
    at = app("pages/sweep.py")
    assert [s.label for s in at.selectbox if s.key == "sweep_lever"] and not [t for t in at.text_input
                                                                              if t.key == "sweep_keys"]
    lever = at.selectbox(key="sweep_lever")
    assert "apex-fusedadam (cannot run here)" in lever.options and "adam-fused" in lever.options
    assert not any(o.split(" ")[0] in ("1", "2", "4", "8") for o in lever.options)   # GPU counts are no lever here
    # a lever the family has no use for says so, not "cannot run here" ("the two stages are the same" once picked)
    assert "rmsnorm (not in the gpt family)" in lever.options
    lever.set_value("rmsnorm").run()
    assert any("in the gpt family both stages are" in c.value for c in at.caption), [c.value for c in at.caption]
    lever.set_value("apex-fusedadam").run()
    assert any("apex-fusedadam" in c.value and "cannot run here" in c.value for c in at.caption)
    # Start is off while the comparison cannot run (it answered only after the click)
    assert [b for b in at.button if b.label == "Start the sweep"][0].disabled
    at.radio(key="sweep_mode").set_value("two stage keys").run()
    assert not [s for s in at.selectbox if s.key == "sweep_lever"]
    assert any(c.value == "B `adam-fused+layernorm+fp32` against A `adam+layernorm+fp32`." for c in at.caption)
    assert not [b for b in at.button if b.label == "Start the sweep"][0].disabled
    at.text_input(key="sweep_keys").set_value("adam+layernorm+fp32").run()
    assert any("give two stage keys" in c.value for c in at.caption), [c.value for c in at.caption]
    assert [b for b in at.button if b.label == "Start the sweep"][0].disabled
    at.text_input(key="sweep_keys").set_value("adam+layernorm+fp32,adam-fused+layernorm+fp32").run()
    at.text_input(key="sweep_values1").set_value("64,100")   # in the form: sent with its button
    [b for b in at.button if b.label == "Start the sweep"][0].click().run()
    assert any("must be a multiple of the head size 32" in e.value for e in at.error), [e.value for e in at.error]
    assert dashboard.session.get_sweeps().current() is None


def test_a_viewer_cannot_start_a_sweep(app_env, monkeypatch, root, fake_sweeps):
    from streamlit.testing.v1 import AppTest
    monkeypatch.setenv("BENCH_OPERATOR_TOKEN", "secret")
    at = AppTest.from_file(str(root / "app.py"), default_timeout=90)
    at.run()
    at.switch_page("pages/sweep.py").run()
    [start] = [b for b in at.button if b.label == "Start the sweep"]
    assert start.disabled
    from bench_core.service.jobs import NotAllowed
    with pytest.raises(NotAllowed):
        dashboard.session.get_sweeps().cancel("viewer")


def test_the_breakdown_asked_for_is_kept_with_the_sweep_and_shown_beside_its_map(app, monkeypatch):
    """The checkbox reaches the sweep's spec (so the timing process times each part); parts timed are shown A beside
    B per step: adam's optimizer 2.0 ms against adam-fused's 0.5."""
    from bench_core.sweep.timing.timings import KernelTime, Part, PointTimings

    def predict_points(points, comparison, device, cancel):
        for p in points:
            steps = _timings(1.5)
            parts = (KernelTime(Part.OPTIMIZER, "adam", 2.0, 2.0, 2.0, 9, 1),
                     KernelTime(Part.OPTIMIZER, "adam-fused", 0.5, 0.5, 0.5, 3, 1))
            yield p.index, PointTimings(steps.times + parts, 0.0, 1), ()
    monkeypatch.setattr(dashboard.session, "SWEEP_HOOKS_OVERRIDE", SweepHooks(
        predict_points=predict_points, measure_point=lambda *a: PointMeasurement(Status.CANCELLED, "not measured")))
    at = app("pages/sweep.py")
    at.radio(key="sweep_mode").set_value("two stage keys")   # adam against adam-fused, as the fake timed them
    at.text_input(key="sweep_values1").set_value("64")
    at.text_input(key="sweep_budget").set_value("1s")
    at.checkbox(key="sweep_breakdown").check()
    [start] = [b for b in at.button if b.label == "Start the sweep"]
    start.click()
    at.run()
    result = dashboard.session.get_sweeps().wait(timeout=30)
    assert result is not None and result.spec.breakdown
    at.run()
    from bench_core.sweep.views.parts import BREAKDOWN_TITLE
    [expander] = [e for e in at.expander if e.label == BREAKDOWN_TITLE]
    [table] = [d.value for d in expander.dataframe]
    row = table.set_index("part").loc["optimizer"]
    # no point ran end to end, and a CPU's prediction has no peak: the page says so under where the map would be
    assert any(c.value.startswith("Peak memory: the one point has no peak-memory figure: it was predicted only, "
                                  "and on a CPU") for c in at.caption), [c.value for c in at.caption]
    assert (row["A"], row["A ms/step alone"], row["B"], row["B - A ms/step alone"]) == ("adam", 2.0, "adam-fused", -1.5)


def test_the_sweep_service_imports_a_json_under_its_id_once_and_renames_a_duplicate(app_env):
    """What the Sweep page's import and History's call: an H200 sweep's JSON stored under its own id, a second copy
    under a new one (nothing overwritten), a viewer and a broken file refused with nothing stored."""
    from pathlib import Path

    from bench_core.results.formats import ImportRejected
    from bench_core.service.jobs import NotAllowed
    data = (Path(__file__).parents[2] / "docs/data/h200_2026-12-04_call29_sweep_apex_gpt_1.json").read_bytes()
    sweeps = dashboard.session.get_sweeps()
    original = json.loads(data)["sweep_id"]
    assert sweeps.import_sweep(data, "operator") == (original, f"Imported sweep {original}.")
    new_id, message = sweeps.import_sweep(data, "operator")
    assert new_id != original and message == f"Imported sweep {new_id} (sweep {original} was already here)."
    with pytest.raises(NotAllowed):
        sweeps.import_sweep(data, "viewer")
    with pytest.raises(ImportRejected, match="cannot be read"):
        sweeps.import_sweep(b'{"format": "bench_core.sweep/1"}', "operator")
    # a run's JSON brought to the Sweep page says where it belongs (it read "KeyError: 'spec'")
    run = (Path(__file__).parents[2] / "docs/data/h200_2026-12-03_call2_seed_gpt2-small_run1.json").read_bytes()
    with pytest.raises(ImportRejected, match="not a sweep's JSON .* imported on the History page"):
        sweeps.import_sweep(run, "operator")
    assert len(sweeps.store.list_sweeps()) == 2


def test_two_maps_of_one_comparison_are_set_side_by_side_line_by_line_and_point_by_point(app):
    """The H200's Apex map, calls 32 and 33 (two-axis maps of one comparison): picked together, the page lays out
    each line's crossing in each, then each point's speedup in each (a map's lines have no shared chart)."""
    from pathlib import Path
    data = Path(__file__).parents[2] / "docs/data"
    sweeps = dashboard.session.get_sweeps()
    first, _ = sweeps.import_sweep((data / "h200_2026-12-05_call32_sweep_apex_gpt_1.json").read_bytes(), "operator")
    second, _ = sweeps.import_sweep((data / "h200_2026-12-05_call33_sweep_apex_gpt_2.json").read_bytes(), "operator")
    at = app("pages/sweep.py")
    at.selectbox(key="sweep_pick").set_value(second).run()
    at.multiselect(key="sweep_compare").select(first).run()
    assert not at.exception and not at.error
    said = "\n".join(m.value for m in at.markdown)
    assert "*at width=768*" in said and "*at width=1280*" in said and said.count("NVIDIA H200 12-05") >= 4
    # a table a sweep, each sweep's figures in its own (one table of every sweep's column showed a phone only the
    # first): the same points in the same order, the apart ones first and named above
    tables = [d.value for d in at.dataframe if list(d.value.columns) == ["batch_size, width", "speedup (B over A)"]]
    assert len(tables) == 2
    assert all(len(t) == 12 for t in tables) and tables[0].iloc[:, 0].tolist() == tables[1].iloc[:, 0].tolist()
    assert all(t.iloc[:, 1].map(lambda text: text.startswith("×")).all() for t in tables)   # all measured
    # batch 8 x 768 at least: ×1.005 in call 33 against ×0.79 in call 32
    assert tables[0].iloc[0, 0] == "8, 768" and "(batch_size, width: 8, 768" in said
    assert "Their intervals lie apart at **1 of 12**" in said, said
    from bench_core.sweep.views.compare import sweep_name
    shown, picked = (sweep_name(sweeps.store.load(i)) for i in (second, first))
    heads = [m.value for m in at.markdown]
    assert heads.index(f"**{shown}** (shown above)") < heads.index(f"**{picked}**")


def test_opened_from_history_s_link_the_form_folds_away_above_the_linked_sweep(app):
    from pathlib import Path
    data = Path(__file__).parents[2] / "docs/data/h200_2026-12-05_call33_sweep_apex_gpt_2.json"
    sweep_id, _ = dashboard.session.get_sweeps().import_sweep(data.read_bytes(), "operator")
    at = app("pages/sweep.py")
    assert not [e for e in at.expander if e.label == "Start a new sweep"]   # no link: the form open as the page
    at.query_params["sweep"] = sweep_id
    at.run()
    [form] = [e for e in at.expander if e.label == "Start a new sweep"]
    assert not form.proto.expanded and at.selectbox(key="sweep_pick").value == sweep_id
    assert any(b.label == "Start the sweep" for b in form.button)


def test_on_a_cpu_the_lever_offered_first_differs_here_and_a_same_code_comparison_is_warned_of(app):
    """A new user's pass: on this CPU the page offered adam-loop against adam first, which run the same for-loop
    Adam here (torch's foreach kernels are CUDA's), and said nothing; two such sweeps disagreed (noise)."""
    at = app("pages/sweep.py")
    lever = at.selectbox(key="sweep_lever")
    assert lever.value != "adam-loop" and not at.warning, (lever.value, [w.value for w in at.warning])
    lever.set_value("adam-loop").run()
    [warning] = [w.value for w in at.warning]
    assert warning.startswith("On CPU, `adam` and `adam-loop` run the same Adam (for-loop): the kernels that tell "
                              "them apart (`aten::_foreach_*`) run on CUDA only") and "only noise" in warning
    # two stage keys that differ only there say so too; ones that differ here do not
    at.radio(key="sweep_mode").set_value("two stage keys").run()
    at.text_input(key="sweep_keys").set_value("adam+layernorm+fp32,adam-loop+layernorm+fp32").run()
    assert [w.value for w in at.warning] == [warning]
    at.text_input(key="sweep_keys").set_value("adam+layernorm+fp32,adam-loop+layernorm+bf16").run()
    assert not at.warning


def test_which_levers_run_the_same_here_is_read_from_the_registry():
    """Every pair of registry levers, on each device: only adam and adam-loop on a CPU, where adam's proof (torch's
    foreach kernels) is CUDA's alone; a lever whose proof holds on both devices stays apart."""
    from dataclasses import replace

    from bench_core.levers.registry import LEVERS
    from bench_core.levers.same_code import same_here
    pairs = {device: [(a, b) for a in LEVERS for b in LEVERS if a < b and same_here(LEVERS[a], LEVERS[b], device)]
             for device in ("cpu", "cuda")}
    assert pairs == {"cpu": [("adam", "adam-loop")], "cuda": []}
    # a lever that adds a proof on CPU too is told apart there: the rule reads the proofs, not the names
    adam = LEVERS["adam"]
    both = replace(adam, name="adam-both", expects=(*adam.expects, replace(adam.expects[0], on="cpu")))
    assert not same_here(both, LEVERS["adam-loop"], "cpu")


def _in_order(node):
    """The page's elements in the order they are drawn."""
    children = getattr(node, "children", None)
    if not children:
        return [node]
    return [leaf for key in sorted(children) for leaf in _in_order(children[key])]


def test_the_crossing_sentence_comes_first_and_the_prediction_statistics_below_the_map(app):
    from pathlib import Path

    from bench_core.sweep.core.errors import error_figures
    from bench_core.sweep.core.records import from_json
    data = Path(__file__).parents[2] / "docs/data/h200_2026-12-05_call33_sweep_apex_gpt_2.json"
    sweep_id, _ = dashboard.session.get_sweeps().import_sweep(data.read_bytes(), "operator")
    at = app("pages/sweep.py")
    at.query_params["sweep"] = sweep_id
    at.run()
    labels = [e.label for e in error_figures(from_json(data.read_text()))]
    assert labels
    drawn = _in_order(at.main)
    kinds = [(n.type, getattr(n, "value", "")) for n in drawn]
    crossing = next(i for i, (t, v) in enumerate(kinds) if t == "markdown" and "crossover:" in str(v))
    chart = next(i for i, n in enumerate(drawn) if n.type == "plotly_chart")
    stats = next(i for i, (t, v) in enumerate(kinds) if t == "markdown" and f"{labels[0]}:" in str(v))
    assert crossing < chart < stats


def test_a_hugging_face_architecture_is_a_sweep_base_and_names_its_own_norm(app, fake_sweeps):
    """The Model list holds the catalog's architectures: an HF Llama's lever is read for the norm it has (Apex
    FusedLayerNorm becomes FusedRMSNorm against RMSNorm), and the sweep keeps the architecture as its base."""
    at = app("pages/sweep.py")
    at.selectbox(key="sweep_family").set_value("Hugging Face: llama-3.2-1b").run()
    at.selectbox(key="sweep_lever").set_value("apex-fusedln").run()
    assert any(c.value.startswith("B `adam-fused+apex-fusedrms+bf16` against A `adam-fused+rmsnorm+bf16`")
               for c in at.caption), [c.value for c in at.caption]
    assert at.selectbox(key="sweep_model").disabled
    at.radio(key="sweep_mode").set_value("two stage keys").run()   # as the fakes time them
    at.text_input(key="sweep_keys").set_value("adam+rmsnorm+fp32,adam-fused+rmsnorm+fp32")
    at.selectbox(key="sweep_axis1").set_value("width")
    at.text_input(key="sweep_values1").set_value("256,512")   # head size 64: 4 and 8 heads, whole KV groups
    next(b for b in at.button if b.label == "Start the sweep").click()
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    result = dashboard.session.get_sweeps().wait(timeout=30)
    assert result is not None and result.status == Status.DONE
    assert result.spec.base.source is not None and result.spec.base.source.name == "llama-3.2-1b"
    assert [p.value("width") for p in result.points] == [256, 512] and all(p.measured for p in result.points)
    history = at.switch_page("pages/history.py").run()
    [table] = [d.value for d in history.dataframe if "compare" in d.value.columns]
    assert table["family"].tolist() == ["catalog llama-3.2-1b"]   # headed Model: the architecture it mapped
