"""The Benchmark form's model sources under AppTest: a catalog architecture's facts before the run, an uploaded
config.json refused with its field and limit (nothing launched), and a tiny catalog run on CPU that History lists
by its source, with the command that repeats it."""
import json

import pytest
from test_pages import block, run_button, texts, walk

from bench_core.config.bench_config import BenchConfig
from bench_core.config.settings import Limits
from bench_core.models import hf_config
from bench_core.models.families import architecture
from helpers import wait

TINY = {"depth": "2", "width": "64", "heads": "4", "seq_len": "32", "batch_size": "2", "vocab_size": "256",
        "warmup": "1", "iters": "2"}


def facts(at) -> list[str]:
    return [n.value for n in walk(block(at, "architecture")) if type(n).__name__ == "Markdown"]


def catalog_form(app, entry: str):
    at = app()
    at.radio(key="model_source").set_value("Hugging Face architecture").run()
    at.selectbox(key="hf_entry").set_value(entry).run()
    assert not at.exception, at.exception
    return at


@pytest.mark.slow
def test_a_catalog_pick_fills_its_shape_and_shows_its_facts(app):
    at = catalog_form(app, "qwen2.5-0.5b")
    conf = hf_config.catalog()["qwen2.5-0.5b"]
    assert at.text_input(key="cfg_depth").value == str(conf["num_hidden_layers"])
    assert at.text_input(key="cfg_vocab_size").value == str(conf["vocab_size"])
    # the facts are the engine's, of the architecture at the form's shape
    cfg = hf_config.shape_from_source(hf_config.resolve_source("qwen2.5-0.5b", Limits()),
                                      BenchConfig(seq_len=int(at.text_input(key="cfg_seq_len").value)), {})
    arch = architecture(cfg)
    source_line, line = facts(at)
    assert source_line.startswith("**qwen2.5-0.5b** (Qwen/Qwen2.5-0.5B), model_type `qwen2`")
    for fact in (f"{arch.params / 1e6:.2f}M parameters", f"{arch.layers} layers", f"hidden {arch.hidden:,}",
                 f"{arch.attention.heads} heads / {arch.attention.kv_heads} KV heads", f"MLP {arch.mlp_width:,} gated",
                 f"vocab {arch.vocab:,}", "RMSNorm", f"activation {arch.activation}", "tied embeddings"):
        assert fact in line, (fact, line)
    assert arch.attention.kv_heads != arch.attention.heads   # grouped-query: both counts are shown, as built
    # a width alone keeps the head size, as --width does: the heads follow it
    at.text_input(key="cfg_width").set_value("448").run()     # half of 896: 7 of its 14 heads, 1 of its 2 KV
    assert f"7 heads / 1 KV heads (head size {arch.attention.head_dim})" in facts(at)[1]


BAD_UPLOADS = [
    (b'{"model_type": "llama", ', "config = bad.json: is not valid JSON"),
    (json.dumps({"model_type": "llama", "auto_map": {"AutoModelForCausalLM": "evil.Model"}}).encode(),
     "auto_map = ['AutoModelForCausalLM']: names remote code; a config runs only transformers' own classes "
     "(trust_remote_code is never set)"),
    (json.dumps({"model_type": "no-such-model"}).encode(),
     "model_type = no-such-model: transformers does not know this model_type"),
    (json.dumps({**hf_config.catalog()["llama-3.2-1b"], "num_hidden_layers": 100_000}).encode(),
     f"Depth (layers) = 100000: exceeds the limit of {Limits().max_depth}"),
    (json.dumps({**hf_config.catalog()["llama-3.2-1b"], "hidden_size": 65536}).encode(),
     f"Width = 65536: exceeds the limit of {Limits().max_width}"),
    (b" " * (Limits().max_upload_mib * 2**20 + 1), f"above the limit of {Limits().max_upload_mib} MiB"),
]


@pytest.mark.parametrize("data, message", BAD_UPLOADS)
def test_a_bad_upload_names_its_field_and_limit_and_launches_nothing(app, manager, data, message):
    at = app()
    at.radio(key="model_source").set_value("Upload config.json").run()
    assert run_button(at).disabled     # nothing uploaded yet: nothing to run
    at.file_uploader(key="hf_upload").set_value(("bad.json", data, "application/json")).run()
    assert not at.exception, at.exception
    assert any(message in e for e in texts(at, "error")), texts(at, "error")
    assert run_button(at).disabled
    captions = " ".join(c.value for c in at.caption)
    assert "Nothing runs until the field marked above is mended" in captions and "can run" not in captions
    assert manager.jobs() == [] and manager.store.list_runs() == []


@pytest.mark.slow
def test_a_tiny_catalog_run_runs_on_cpu_and_history_shows_its_source(app, manager):
    at = catalog_form(app, "llama-3.2-1b")
    for name, value in TINY.items():
        at.text_input(key=f"cfg_{name}").set_value(value)
    at.run()
    at.radio(key="stage_choice").set_value("custom").run()
    next(b for b in at.button if b.label == "Add stage to the ladder").click().run()
    assert at.session_state["custom_ladder"] == ["adam+rmsnorm+fp32"]   # the norm the model has
    assert texts(at, "error") == [] and "2 layers" in facts(at)[1]
    run_button(at).click().run()
    [job] = manager.jobs()
    done = wait(manager, job.job_id, timeout=300)
    assert [s.status.value for s in done.run.stages] == ["ok"], [s.reason for s in done.run.stages]
    source = done.run.config.source
    assert (source.name, source.kind.value, done.run.config.depth, done.run.config.width) == \
        ("llama-3.2-1b", "catalog", 2, 64)
    history = app("pages/history.py")
    row = history.dataframe[0].value.iloc[0]
    assert row["model"] == "catalog llama-3.2-1b · d64×L2"
    history.session_state["runs"] = {"selection": {"rows": [0], "columns": []}}
    history.run()
    assert any(t.startswith("Model: catalog llama-3.2-1b · depth 2 · width 64") for t in texts(history, "text"))
    [command] = [c for c in texts(history, "code") if c.startswith("python -m bench_core run")]
    assert "--hf llama-3.2-1b --depth 2 --width 64 --heads 4 --seq-len 32 --batch-size 2" in command
    assert "--stages adam+rmsnorm+fp32" in command


def test_an_imported_gpu_run_of_a_hf_model_names_it_and_what_each_swap_changed(app, app_env, root):
    """H100 call 50's seed ladder on HF GPT-2, imported: its heading names the architecture, and the All columns
    table says what the Apex norm swap changed in the model (25 LayerNorm modules, each checked on a probe)."""
    from bench_core.results.formats import parse_json
    from bench_core.results.store import Store
    run = parse_json((root / "docs/data/h100_2026-12-07_call50_seed_gpt2_1.json").read_bytes())[0]
    run_id, _ = Store(str(app_env / "runs.sqlite3")).import_run(run)
    history = app()
    history.query_params["run"] = run_id
    history.switch_page("pages/history.py").run()
    assert not history.exception, history.exception
    assert f"seed · catalog gpt2 · d768×L12 · NVIDIA H100 80GB HBM3 · run {run_id}" in texts(history, "subheader")
    changes = [v for df in history.dataframe if "model_changes" in df.value.columns
               for v in df.value["model_changes"]]
    assert changes.count("apex-fusedln: 25 LayerNorm → FusedLayerNorm; probe outputs within 0.00 of the float32 "
                         "bound") == 2, changes


def test_an_architectures_heads_field_follows_its_width_and_stays_a_choice(app):
    """A new user's pass: with qwen3-0.6b's width cut to 128 the Heads field kept showing 16 while the run took 2.
    The field now shows the heads the width gives at the head size (as --width alone does), and a value typed into
    it after that is still the user's override."""
    at = catalog_form(app, "qwen3-0.6b")
    for width, heads in ((256, 4), (512, 8)):
        at.text_input(key="cfg_width").set_value(str(width)).run()
        assert at.text_input(key="cfg_heads").value == str(heads)
        assert f"{heads} heads / {heads // 2} KV heads" in " ".join(facts(at))
    at.text_input(key="cfg_heads").set_value("32").run()   # head size 16: the user's own choice
    assert "32 heads / 16 KV heads (head size 16)" in " ".join(facts(at))
