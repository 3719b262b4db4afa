"""A Hugging Face architecture picked on the Benchmark page, in a real browser at 1440 and 390 px: its facts show
before any run, read whole inside the screen."""
import pytest
from playwright.sync_api import expect

from bench_core.config.bench_config import BenchConfig
from bench_core.config.settings import Limits
from bench_core.models import hf_config
from bench_core.models.families import architecture
from live_server import wait_idle

pytestmark = pytest.mark.browser

ENTRY = "llama-3.2-1b"


def expected_facts(seq_len: int) -> list[str]:
    cfg = hf_config.shape_from_source(hf_config.resolve_source(ENTRY, Limits()), BenchConfig(seq_len=seq_len), {})
    arch = architecture(cfg)
    return [f"{arch.params / 1e9:.2f}B parameters", f"{arch.layers} layers", f"hidden {arch.hidden:,}",
            f"{arch.attention.heads} heads / {arch.attention.kv_heads} KV heads", f"MLP {arch.mlp_width:,} gated",
            f"vocab {arch.vocab:,}", "RMSNorm", f"activation {arch.activation}", "tied embeddings"]


@pytest.mark.parametrize("width", [1440, 390])
def test_a_catalog_pick_shows_its_facts(page, server, width):
    page.set_viewport_size({"width": width, "height": 2000})
    page.goto(server["url"])
    wait_idle(page)
    page.get_by_text("Machine:").wait_for(timeout=90_000)   # the probe is back
    page.get_by_text("Hugging Face architecture", exact=True).click()
    wait_idle(page)
    page.locator(".st-key-hf_entry").click()
    hub_id = hf_config.catalog()[ENTRY]["_id"]
    page.get_by_role("option", name=f"{ENTRY} ({hub_id})").click()
    wait_idle(page)
    facts = page.locator(".st-key-architecture")
    facts.wait_for(timeout=60_000)
    # the pick's rerun may still be drawing the previous entry's facts on a loaded machine: wait for the new ones
    expect(facts).to_contain_text(f"{ENTRY} ({hub_id})", timeout=60_000)
    text = facts.inner_text()
    assert text.startswith(f"{ENTRY} ({hub_id}), model_type llama"), text
    seq_len = int(page.get_by_label("Sequence length", exact=True).input_value())
    for fact in expected_facts(seq_len):
        assert fact in text, (fact, text)
    assert page.get_by_test_id("stException").count() == 0
    box = facts.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width    # wraps inside the screen, no sideways scroll
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
