"""A Hugging Face model's GPU run, imported into History, in a real browser: the heading names the architecture,
and the command repeats it from its source (what each swap changed: tests/pages/test_hf_source.py). The README's
screenshot of an HF run is this page (BENCH_SCREENSHOTS=docs/screenshots)."""
import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from bench_core.results.formats import parse_json
from bench_core.results.store import Store
from live_server import ROOT, wait_idle

pytestmark = pytest.mark.browser

HF_SEED = Path(ROOT) / "docs/data/h100_2026-12-07_call50_seed_gpt2_1.json"
SHOTS = os.environ.get("BENCH_SCREENSHOTS")


@pytest.mark.parametrize("width", [1440, 390])
def test_an_imported_hf_gpt2_run_names_its_architecture_and_how_to_repeat_it(page, server, width):
    run = parse_json(HF_SEED.read_bytes())[0]
    run_id, _ = Store(server["db"]).import_run(run)
    page.set_viewport_size({"width": width, "height": 1800})
    page.goto(f"{server['url']}/history?run={run_id}")
    wait_idle(page)
    page.locator(f".st-key-verdict_{run_id}").wait_for(timeout=60_000)
    assert page.get_by_test_id("stException").count() == 0
    main = page.get_by_test_id("stMain")
    heading = main.locator("h3").filter(has_text=f"run {run_id}").first
    expect(heading).to_contain_text(f"{run.config.source.label} · d768×L12 · NVIDIA H100 80GB HBM3", timeout=60_000)
    expect(main).to_contain_text("python -m bench_core run --hf gpt2 ")
    if SHOTS:   # the page as it opens: the architecture, the answer, what each lever adds
        page.screenshot(path=os.path.join(SHOTS, f"hf_gpt2_h100_seed_{width}.png"))
