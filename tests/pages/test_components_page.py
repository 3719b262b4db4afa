"""The Components page as a new user read it: raw column names (median_ms, gb_per_s, copy_fraction), "None" cells,
an unavailable row without its reason in sight, and a caption naming rows the table did not."""
from bench_core.results.store import Store
from helpers import sample_runs


def test_the_components_table_reads_as_words_and_says_why_a_row_did_not_run(app, app_env):
    Store(str(app_env / "runs.sqlite3")).save_components(sample_runs().cpu_components_report().to_dict())
    at = app("pages/components.py")
    table = at.dataframe[0].value
    assert not {"median_ms", "gb_per_s", "copy_fraction", "name", "dtype"} & set(table.columns), list(table.columns)
    assert {"Component", "Runs as", "Median", "Bandwidth", "Notes"} <= set(table.columns)
    assert not table.isna().any().any() and "None" not in table.astype(str).to_numpy()
    adam = table[table["Lever"] == "adam"].iloc[0]
    assert (adam["Component"], adam["Runs as"], adam["Median"]) == ("Adam", "for-loop", "0.959 ms")
    markdown = " ".join(m.value for m in at.markdown)
    assert f"Apex FusedAdam (FP32): unavailable, {sample_runs().APEX_ADAM_REASON}" in markdown
    captions = " ".join(c.value for c in at.caption)
    assert "for-loop, foreach and fused Adam rows" not in captions   # rows the table never named so
    assert "Runs as" in captions


def test_a_noisy_row_is_flagged_in_the_table_and_under_it(app, app_env):
    """The LayerNorm row a user saw (23.96 ms, p10–p90 0.216–28.45 ms) reads noisy, by the Benchmark page's rule."""
    from dataclasses import replace
    report = sample_runs().cpu_components_report()
    rows = tuple(replace(r, median_ms=23.96, p10_ms=0.216, p90_ms=28.45) if r.name == "layernorm" else r
                 for r in report.rows)
    Store(str(app_env / "runs.sqlite3")).save_components(replace(report, rows=rows).to_dict())
    at = app("pages/components.py")
    table = at.dataframe[0].value
    layernorm = table[table["Lever"] == "layernorm"].iloc[0]
    assert layernorm["Noise"] == "noisy" and "noisy: p10–p90 spread 118% of the median" in layernorm["Notes"]
    captions = " ".join(c.value for c in at.caption)
    assert "LayerNorm · BF16 autocast (p10–p90 spread 118% of the median" in captions and "noisy: " in captions
