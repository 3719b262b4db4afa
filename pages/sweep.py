"""Sweep: where a lever starts to pay. One comparison across shapes: each point predicted from its own kernels,
the points in doubt measured end to end; a line with its crossover, or a heatmap."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from bench_core.config.bench_config import WORKLOADS, BenchConfig, ConfigError, defaults_for, workload
from bench_core.models.families import FAMILIES, parts_family
from bench_core.models.hf_config import catalog, resolve_source, shape_from_source
from bench_core.results.formats import ImportRejected
from bench_core.service.jobs import LimitExceeded, NotAllowed
from bench_core.sweep.core.records import SweepResult, crossovers, to_json
from bench_core.sweep.core.spec import (
    AXES,
    Comparison,
    SweepSpec,
    parse_axes,
    parse_budget,
    parse_comparison,
    sweepable_levers,
)
from bench_core.sweep.views import (
    APART,
    BREAKDOWN_CAPTION,
    BREAKDOWN_TITLE,
    PREDICTED_MARK,
    apart_count,
    breakdown_rows,
    crossovers_side_by_side,
    error_figures,
    has_memory,
    line_answers,
    memory_gaps,
    peak_memory_map,
    phone_rows,
    render_html,
    same_code_warning,
    same_map,
    shown_text_rows,
    speedups_side_by_side,
    sweep_figure,
    sweep_line,
    to_csv,
)
from dashboard.page_header import open_page, page_header
from dashboard.session import get_sweeps, is_operator, listed, role

manager = open_page()
sweeps = get_sweeps()
page_header(manager, "Sweep: where does a lever start to pay?",
            "One comparison across model shapes on this machine. Each point is first predicted: each stage's own "
            "training step timed on the point's model cut to one block and to two, every kernel at its real shape, "
            "and extrapolated to the full depth (its GPU time, kernels and peak memory; on a GPU the host's time "
            "to issue a step is taken from the stage's full-depth step at the sweep's smallest point); then the "
            "points nearest ×1.00 run end to end, two stages each in fresh processes, while the budget lasts. "
            "On a line, measured points are filled circles, predicted ones hollow; on a heatmap a measured cell "
            "has a dark dot in its corner, a predicted one a light diamond, its figure reading ≈×… inside a dotted "
            "edge.")
probe = manager.probe(timeout=0)
device = "cuda" if probe is not None and probe.cuda_available else "cpu"


def cannot_run(comparison: Comparison) -> str | None:
    """Why a stage of the comparison cannot run on this machine; None while the machine is still being probed."""
    if probe is None:
        return None
    return next((f"{s.key}: {r}" for s in (comparison.a, comparison.b) if (r := s.unavailable_reason(probe, device))),
                None)


def offered_first(levers: list[str], family: str) -> int:
    """The lever the list opens on: the first that this machine runs and whose two stages differ here (on a CPU
    the list's first, adam-loop, runs adam's very for-loop, and was offered first without a word)."""
    for n, name in enumerate(levers):
        try:
            comparison = parse_comparison(name, family)
        except ConfigError:
            continue
        if cannot_run(comparison) is None and same_code_warning(comparison, device) is None:
            return n
    return 0


def lever_label(name: str, family: str) -> str:
    """A lever as the list offers it: marked where this family has no use for it, or this machine cannot run it."""
    try:
        return f"{name} (cannot run here)" if cannot_run(parse_comparison(name, family)) else name
    except ConfigError:
        return f"{name} (not in the {family} family)"


HF = "Hugging Face: "   # the Model list's prefix of a catalog architecture


# Opened from History's "map" link, the linked sweep is what the reader came for: the form folds away above it
# (it took two phone screens before the map, a new user's pass).
linked = st.query_params.get("sweep") is not None
with st.expander("Start a new sweep", expanded=False) if linked else st.container():
    # The comparison outside the form: which field applies, and what B and A are, show as they are chosen.
    left, right = st.columns(2)
    choice = left.selectbox("Model", [*FAMILIES, *(HF + name for name in catalog())], key="sweep_family",
                            help="a built-in family at a base shape, or a Hugging Face architecture of the catalog "
                                 "at its own shape (random weights, nothing downloaded); the axes override its fields "
                                 "under its head rules")
    hf_entry = choice[len(HF):] if choice.startswith(HF) else None
    hf_base = shape_from_source(resolve_source(hf_entry, manager.limits), defaults_for(device), {}) \
        if hf_entry else None
    family = parts_family(hf_base) if hf_base is not None else choice   # the norm the model has names the stages
    model = right.selectbox("Base shape", list(WORKLOADS), key="sweep_model", disabled=hf_base is not None,
                            index=list(WORKLOADS).index("gpt2-small" if device == "cuda" else "tiny"),
                            help="a built-in family's size; a Hugging Face architecture has its own")
    mode = st.radio("Compare", ["a lever against the lever it replaces", "two stage keys"], horizontal=True,
                    key="sweep_mode")
    pair = not mode.startswith("a lever")
    if pair:
        compare_text = st.text_input("Stage keys A,B (B's speedup over A)", key="sweep_keys",
                                     value="adam+layernorm+fp32,adam-fused+layernorm+fp32")
    else:
        levers = sweepable_levers()
        compare_text = st.selectbox("Lever", levers, key="sweep_lever", index=offered_first(levers, family),
                                    format_func=lambda name: lever_label(name, family))
    comparison: Comparison | None = None
    try:
        comparison = parse_comparison(compare_text, family, pair)
        reason = cannot_run(comparison)
        st.caption(f"B `{comparison.b.key}` against A `{comparison.a.key}`"
                   + (f". It cannot run here: {reason}." if reason else "."))
        same = same_code_warning(comparison, device)
        if same:   # said before the start, which stays on: a noise floor may be what is wanted
            st.warning(same)
    except ConfigError as exc:
        reason = exc.limit
        st.caption(f"{exc.field}: {exc.limit}.")

    # Enter in a field started the sweep (an empty budget measures every point end to end: many minutes); only
    # the button starts one
    with st.form("sweep_form", enter_to_submit=False):
        a1, v1 = st.columns([1, 3])
        axis1 = a1.selectbox("Axis", AXES, key="sweep_axis1")
        values1 = v1.text_input("Values (list, or START:STOP:xFACTOR)", key="sweep_values1", value="64,128")
        a2, v2 = st.columns([1, 3])
        axis2 = a2.selectbox("Second axis (optional)", ("none", *AXES), key="sweep_axis2")
        values2 = v2.text_input("Its values", key="sweep_values2", value="")
        b1, p1 = st.columns([3, 1])
        budget = b1.text_input("Budget (e.g. 10m; empty: every point measured)", key="sweep_budget", value="")
        # one process a stage gives an interval of that process's steps only (the sweep says so); a GPU's default 3
        processes = p1.number_input("Processes a stage", min_value=1, step=1, key="sweep_processes",
                                    value=defaults_for(device).repeats,
                                    help="fresh processes each stage runs in at a measured point: with 2 or more "
                                         "the speedup's interval is across processes, which differ more than steps")
        breakdown = st.checkbox("Also time each part of a block alone (where a step's time goes; not used by the "
                                "prediction; a compiled stage compiles each part too, so its points take longer to "
                                "predict)",
                                key="sweep_breakdown")
        # off where the comparison cannot run (its reason is said above): it had answered only after the click
        start = st.form_submit_button("Start the sweep", type="primary",
                                      disabled=not is_operator() or sweeps.running or reason is not None)

if start:
    try:
        base = hf_base or BenchConfig.from_dict({**workload(model, defaults_for(device)).to_dict(), "family": family})
        base = BenchConfig.from_dict({**base.to_dict(), "device": device, "repeats": int(processes)})
        texts = [f"{axis1}={values1}"] + ([f"{axis2}={values2}"] if axis2 != "none" else [])
        comparison = parse_comparison(compare_text, family, pair)   # its error, named, if any
        spec = SweepSpec(comparison, base, parse_axes(texts), parse_budget(budget), breakdown)
        st.session_state["sweep_shown"] = st.session_state["sweep_watching"] = sweeps.start(spec, role())
        st.rerun()   # the whole page once more: the form drawn with its Start disabled while the sweep runs
    except ConfigError as exc:
        st.error(f"{exc.field}: {exc.limit} (got {exc.value!r})")
    except (LimitExceeded, NotAllowed) as exc:
        st.error(str(exc))
if not is_operator():
    st.caption("Only operators start and cancel sweeps.")


ROW_PX, MAX_ROWS = 35, 24   # Streamlit's table row; beyond MAX_ROWS a table scrolls inside itself
PHONE_PX = 640              # Streamlit stacks columns at this width and below: a phone
# One sweep's points in two tables, the browser showing one: every column on a wide screen, a phone's few (at 390 px
# the wide one scrolled sideways, its source and bound off the screen)
st.html(f"<style>@media (max-width: {PHONE_PX}px) {{ [class*='st-key-sweep_points_wide_'] {{ display: none; }} }}"
        f"@media (min-width: {PHONE_PX + 1}px) {{ [class*='st-key-sweep_points_phone_'] {{ display: none; }} }}"
        "</style>")


def rows_height(rows: int) -> int:
    """A table's height showing all its rows, up to MAX_ROWS: at its own default of 10, a 12-point map's table
    scrolled inside itself with nothing to say so (a new user's pass)."""
    return (min(rows, MAX_ROWS) + 1) * ROW_PX + 3


def show(result: SweepResult, key: str, live: bool = False) -> None:
    """A sweep's figures, map, table and downloads; `live`: one still running, whose missing crossover is not yet
    an answer and whose downloads wait for its end."""
    if live:   # a missing crossing is not yet an answer
        found = [c.text for c in crossovers(result)]
        lines = [f"crossover: **{t}**" for t in found] or \
            [f"no crossover of ×1.00 among the {result.estimated} points done so far"]
    else:
        lines = [f"crossover: **{t}**" for t in line_answers(result)]
    # the answer first, then the map; how far the predictions landed is evidence, read after them
    st.markdown("\n".join(f"- {line}" for line in lines))
    if any(p.estimate for p in result.points):
        st.plotly_chart(sweep_figure(result), width="stretch", key=f"sweep_chart_{key}")
    stats = [f"{e.label}: " + (f"**{e.text}**" if e.found else e.text) for e in error_figures(result)]
    if stats or result.shown_notes:
        st.markdown("\n".join(f"- {line}" for line in [*stats, *result.shown_notes]))
    if has_memory(result):
        st.plotly_chart(peak_memory_map(result), width="stretch", key=f"sweep_memory_{key}")
    gaps = memory_gaps(result)
    if gaps:
        st.caption(f"Peak memory: {gaps}.")
    # every cell as the HTML report writes it: Streamlit's own formats wrote 21.04% beside the map's -17.4%, and a
    # missing number "None" (a new user's pass)
    rows = shown_text_rows(result)
    with st.container(key=f"sweep_points_wide_{key}"):
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", height=rows_height(len(rows)))
    with st.container(key=f"sweep_points_phone_{key}"):
        st.dataframe(pd.DataFrame(phone_rows(result)), hide_index=True, width="stretch", height=rows_height(len(rows)))
        st.caption(f"{PREDICTED_MARK}: predicted, not run end to end. Every figure of each point: on a wider screen, "
                   "or in the CSV below.")
    parts = breakdown_rows(result)
    if parts:
        with st.expander(BREAKDOWN_TITLE):
            st.caption(BREAKDOWN_CAPTION)
            st.dataframe(pd.DataFrame([r.shown() for r in parts]), hide_index=True, width="stretch")
    if live:
        return
    c1, c2, c3 = st.columns(3)
    c1.download_button("Download JSON", to_json(result), f"sweep_{result.sweep_id}.json", "application/json",
                       key=f"sweep_json_{key}")
    c2.download_button("Download CSV", to_csv(result), f"sweep_{result.sweep_id}.csv", "text/csv",
                       key=f"sweep_csv_{key}")
    # made on the click: the report embeds its figures (0.7 MB, 0.14 s for a 12-point map), and the live view
    # redraws every second
    c3.download_button("Download HTML report", lambda: render_html(result), f"sweep_{result.sweep_id}.html",
                       "text/html", key=f"sweep_html_{key}")


APART_NAMED = 6   # apart points named in the sentence over the tables; beyond, "and N more"
TABLES_A_ROW = 2  # the sweeps' tables side by side on a desktop (a phone stacks them)


def show_side_by_side(together: list[SweepResult]) -> None:
    """The chosen sweep beside the picked ones: each line's crossing as a list (long sentences wrap on a phone,
    a table's cells were cut), then each sweep's speedup at each point in a table of its own, in columns that a
    phone stacks: one table of every sweep's column showed a 390 px phone only the first sweep's. The points
    whose intervals lie apart are named above the tables and lead each of them."""
    crossings = crossovers_side_by_side(together)
    st.markdown("**Where each sweep crosses ×1.00** (times in UTC; the first is the one shown above)")
    st.markdown("\n".join(f"- *{line}*\n" + "\n".join(f"    - {name}: {text}" for name, text in
                                                      zip(crossings.columns, texts, strict=True))
                          for line, texts in crossings.rows))
    points = speedups_side_by_side(together)
    apart, shared = apart_count(points)
    apart_at = [label for label, texts in points.rows if texts[0] == APART]
    named = "; ".join(apart_at[:APART_NAMED]) + (f" and {len(apart_at) - APART_NAMED} more"
                                                  if len(apart_at) > APART_NAMED else "")
    st.markdown(f"**Each point's speedup of B over A** (≈: predicted, its interval widened by that sweep's "
                f"measured errors). Their intervals lie apart at **{apart} of {shared}** points with a figure in "
                "more than one sweep"
                + (f" ({points.first}: {named}), listed first in each table: there the sweeps disagree beyond "
                   "their own intervals." if apart else "."))
    # the columns after the overlap column, one a sweep in the order of `together`; two to a row, as a table of
    # two columns needs about 330 px
    names = points.columns[1:]
    columns = [c for row in range(0, len(names), TABLES_A_ROW) for c in st.columns(TABLES_A_ROW)]
    for n, (column, name) in enumerate(zip(columns, names, strict=False)):
        column.markdown(f"**{name}**" + (" (shown above)" if n == 0 else ""))
        records = [{points.first: label, "speedup (B over A)": texts[n + 1]} for label, texts in points.rows]
        column.dataframe(pd.DataFrame(records), hide_index=True, width="stretch", height=rows_height(len(records)),
                         key=f"sweep_compare_points_{n}")


# Polled only while a sweep runs: an idle page sent a request a second for as long as it stayed open.
@st.fragment(run_every=1.0 if sweeps.running else None)
def live() -> None:
    current = sweeps.current()
    if current is None or not sweeps.running:
        watched = st.session_state.pop("sweep_watching", None)
        if watched is not None and current is not None and current.sweep_id == watched:
            # it ended (done, cancelled or failed) while only this fragment redrew: the whole page again, opened
            # on the sweep, so its result shows and the form is free without a reload
            st.session_state["sweep_ended"] = (watched, current.status.value, sweeps.error)
            st.rerun()
        return
    st.session_state["sweep_watching"] = current.sweep_id   # also one another session started
    progress = current.progress
    if progress is not None:
        eta = "" if progress.eta_s is None else f", about {progress.eta_s:.0f} s left"
        st.progress(progress.done / max(progress.total, 1),
                    text=f"{progress.phase.value}: {progress.done} of {progress.total} points{eta}")
    st.button("Cancel (keeps the points that finished)", on_click=lambda: sweeps.cancel(role()),
              disabled=not is_operator(), key="sweep_cancel")
    if current.estimated < 2:
        st.caption("The map and the crossover appear once two points are predicted.")
    else:
        show(current, "live", live=True)


def import_sweep(data: bytes) -> None:
    """An uploaded sweep JSON into the history, then picked: the map opens on it."""
    try:
        new_id, message = sweeps.import_sweep(data, role())
    except (ImportRejected, LimitExceeded, NotAllowed) as exc:
        said = str(exc).replace("the History page", "[the History page](/history)")
        st.session_state["sweep_import"] = ("error", f"Import rejected, nothing was imported: {said}")
        return
    st.session_state["sweep_import"] = ("success", message)
    st.session_state["sweep_pick"] = st.session_state["sweep_shown"] = new_id
    # a fresh uploader: the file left in it invited a second click, and a second copy
    st.session_state["sweep_upload_n"] = st.session_state.get("sweep_upload_n", 0) + 1


live()
ended = st.session_state.pop("sweep_ended", None)
if ended is not None:
    ended_id, status, error = ended
    st.session_state["sweep_pick"] = ended_id   # the picker below opens on it
    if error:
        st.error(f"The sweep failed: {error}. The points that finished are kept below.")
    else:
        st.success(f"The sweep ended ({status}); its result is below." + (" The points that finished are kept."
                                                                          if status == "cancelled" else ""))
st.divider()
st.subheader("Past sweeps")
if is_operator():
    with st.expander("Import a sweep (its JSON, from `python -m bench_core sweep --json` or another dashboard)"):
        uploader = f"sweep_upload_{st.session_state.get('sweep_upload_n', 0)}"
        upload = st.file_uploader("Sweep JSON", type=["json"], key=uploader)
        st.button("Import the sweep", disabled=upload is None, key="sweep_import_button",
                  on_click=lambda: import_sweep(st.session_state[uploader].getvalue()))
imported = st.session_state.pop("sweep_import", None)
if imported:
    (st.success if imported[0] == "success" else st.error)(imported[1])
rows = listed(sweeps.store.list_sweeps, "the history database") if sweeps.store else []
if not rows:
    st.info("No sweep yet: start one with the form above, or import a sweep's JSON (just above).")
else:
    # what tells sweeps apart first: a phone cuts the rest (the comparison's stage keys run long); the id tells a
    # sweep from its imported copy
    labels = {r["sweep_id"]: f"{r['created_at'][:16].replace('T', ' ')} · {r['change'] or r['compare']} · "
              f"{r['gpu'] or r['device']} · "
              f"{r['status']} · {r['axes']} · {r['sweep_id']}{' (imported)' if r['imported'] else ''}"
              + (f" · {r['compare']}" if r["change"] else "") for r in rows}
    link = st.query_params.get("sweep")   # History's "open": honoured once, then the picker is the reader's
    if link in labels and st.session_state.get("sweep_link") != link:
        st.session_state["sweep_pick"] = st.session_state["sweep_link"] = link
    if st.session_state.get("sweep_pick") not in labels:   # none yet, or one from before that is gone
        shown = st.session_state.get("sweep_shown")
        st.session_state["sweep_pick"] = shown if shown in labels else next(iter(labels))
    # its value comes from the session state alone: an index beside it made Streamlit warn of two defaults
    chosen = st.selectbox("Sweep", list(labels), format_func=lambda i: labels[i], key="sweep_pick")
    loaded = sweeps.store.load(chosen) if sweeps.store and chosen else None
    if loaded is not None and not (sweeps.running and loaded.sweep_id == getattr(sweeps.current(), "sweep_id", None)):
        show(loaded, "past")
        # only sweeps of the same comparison are read from the database: the listed rows say which
        others = {r["sweep_id"]: sweeps.store.load(r["sweep_id"]) for r in rows
                  if r["sweep_id"] != chosen and r["compare"] == loaded.title} if sweeps.store else {}
        peers = {i: r for i, r in others.items() if r is not None and same_map(loaded, r)}
        if peers:
            picked = st.multiselect("Compare with sweeps of the same comparison and axes (other GPUs, other days)",
                                    list(peers), format_func=lambda i: labels[i], key="sweep_compare")
            if picked:
                together = [loaded, *(peers[i] for i in picked)]
                if len(loaded.spec.axes) == 1:
                    st.plotly_chart(sweep_line(together), width="stretch", key="sweep_chart_compare")
                show_side_by_side(together)
