"""Hugging Face architectures as model sources: the catalog, config.json checked as data, the shape overrides
under the architecture's head rules, the adapter's contract, the shared server's refusals, and each catalog
architecture's native ladder on CPU through the engine's own stage build and timed loop."""
import json
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from bench_core.config.bench_config import BenchConfig, ConfigError, ModelSource, SourceKind
from bench_core.config.settings import Limits
from bench_core.levers.presets import PRESETS
from bench_core.models import hf_config
from bench_core.models.families import ModelParts, architecture, build_model, collect_errors
from bench_core.run.processes import StageJob
from bench_core.service.sources import server_source_errors
from bench_core.sweep.core.spec import point_config
from helpers import PROBE, tiny_catalog_cfg

LIMITS = Limits()


def source_of(config: dict, name: str = "upload.json") -> ModelSource:
    return hf_config.source_from_bytes(json.dumps(config).encode(), name, SourceKind.CONFIG, LIMITS)


def test_catalog_entries_name_their_source_and_only_fields_transformers_knows():
    from transformers import CONFIG_MAPPING
    for name, config in hf_config.catalog().items():
        assert config["_source"] == f"https://huggingface.co/{config['_id']}/blob/main/config.json", name
        cls = CONFIG_MAPPING[config["model_type"]]
        known = set(vars(cls())) | set(cls.attribute_map) | {"rope_theta", "rope_scaling", "architectures"}
        unknown = set(config) - known - {"_source", "_id", "model_type"}
        assert not unknown, f"{name}: {sorted(unknown)}"


def test_built_in_float32_with_sdpa_whatever_the_config_says():
    cfg = tiny_catalog_cfg("llama-3.2-1b")
    config = {**cfg.source.config, "torch_dtype": "bfloat16", "dtype": "bfloat16"}
    cfg = replace(cfg, source=source_of(config))
    model = build_model(cfg, ModelParts())
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert model.hf.config._attn_implementation == "sdpa" and model.model_type == "llama"
    assert model.lm_head is model.hf.lm_head and len(model.blocks) == 2


def test_width_keeps_the_head_size_and_the_kv_ratio():
    source = hf_config.resolve_source("llama-3.1-8b", LIMITS)
    cfg = hf_config.shape_from_source(source, BenchConfig(), {"width": 2048, "depth": 4})
    arch = architecture(cfg)
    assert (cfg.heads, arch.attention.kv_heads, arch.attention.head_dim) == (16, 4, 128)
    assert arch.mlp_width == 14336 // 2 and arch.layers == 4
    heads = hf_config.shape_from_source(source, BenchConfig(), {"heads": 16})
    assert (architecture(heads).attention.head_dim, architecture(heads).attention.kv_heads) == (256, 4)
    with pytest.raises(ConfigError, match="query heads per KV head"):
        raise collect_errors(hf_config.shape_from_source(source, BenchConfig(), {"heads": 2}), LIMITS, False, {})[0]
    with pytest.raises(ConfigError, match="keeps the head size 128"):
        hf_config.shape_from_source(source, BenchConfig(), {"width": 1000})


def test_seq_len_past_the_positions_raises_them():
    cfg = replace(tiny_catalog_cfg("gpt2"), seq_len=2048)
    assert hf_config.resolved_config(cfg).n_positions == 2048
    assert sum(p.numel() for p in build_model(cfg, ModelParts()).parameters()) == architecture(cfg).params


def test_a_sweeps_width_axis_follows_the_head_rules():
    base = tiny_catalog_cfg("qwen3-0.6b")
    point = point_config(base, {"width": 2 * base.width})
    a, b = architecture(base).attention, architecture(point).attention
    assert (b.heads, b.kv_heads, b.head_dim) == (2 * a.heads, 2 * a.kv_heads, a.head_dim)
    assert not collect_errors(point, LIMITS, False, {})


@pytest.mark.parametrize("data, match", [
    (b"{not json", "is not valid JSON"),
    (b"[1, 2]", "must be a JSON object"),
    (json.dumps({"model_type": "no-such-model"}).encode(), "transformers does not know this model_type"),
    (json.dumps({"model_type": "llama", "auto_map": {"AutoModel": "x.Y"}}).encode(), "names remote code"),
    (json.dumps({"model_type": "t5"}).encode(), "is not a causal language model"),
    (json.dumps({"model_type": "llama", "intermediate_size": -3}).encode(), "must be a positive integer"),
])
def test_bad_config_json_is_refused_with_its_reason(data, match):
    with pytest.raises(ConfigError, match=match):
        hf_config.source_from_bytes(data, "upload.json", SourceKind.CONFIG, LIMITS)


def test_an_upload_above_the_size_limit_is_refused():
    with pytest.raises(ConfigError, match="above the limit of 1 MiB"):
        hf_config.source_from_bytes(b" " * (2 * 2**20), "big.json", SourceKind.CONFIG, Limits(max_upload_mib=1))


@pytest.mark.parametrize("override, field", [({"num_hidden_layers": 10_000}, "depth"),
                                             ({"intermediate_size": 10**9}, "width")])
def test_absurd_sizes_break_a_named_limit(override, field):
    config = {**hf_config.catalog()["llama-3.2-1b"], **override}
    cfg = hf_config.shape_from_source(source_of(config), BenchConfig(), {})
    errors = collect_errors(cfg, LIMITS, False, {})
    assert errors and errors[0].field == field and "limit" in errors[0].limit


def test_the_shared_server_refuses_factories_and_paths_outside_its_folders(tmp_path):
    factory = BenchConfig(family="factory", source=ModelSource(SourceKind.FACTORY, "docs.examples.my_model:build"))
    assert "runs no user code" in server_source_errors(factory, ())[0].limit
    path = tmp_path / "config.json"
    path.write_text(json.dumps(hf_config.catalog()["gpt2"]))
    cfg = hf_config.shape_from_source(hf_config.resolve_source(str(path), LIMITS), BenchConfig(), {})
    assert "outside the folders" in server_source_errors(cfg, ())[0].limit
    assert "outside the folders" in server_source_errors(cfg, (str(tmp_path / "other"),))[0].limit
    assert server_source_errors(cfg, (str(tmp_path),)) == []
    assert server_source_errors(tiny_catalog_cfg("gpt2"), ()) == []        # the catalog and uploads need no folder


def test_the_job_manager_queues_nothing_for_a_factory(tmp_path):
    from bench_core.results.store import Store
    from bench_core.service.jobs import JobManager
    manager = JobManager(Store(str(tmp_path / "runs.sqlite3")), LIMITS, probe=PROBE)
    factory = BenchConfig(family="factory", device="cpu",
                          source=ModelSource(SourceKind.FACTORY, "docs.examples.my_model:build"))
    with pytest.raises(ConfigError, match="runs no user code"):
        manager.submit(factory, PRESETS["native"][:1], "native", "s")
    assert manager.queued() == []
    manager.shutdown()


@pytest.mark.parametrize("args, match", [
    (["--hf", "{bad}"], "hf='{bad}': is not a catalog entry"),
    (["--hf", "gpt2", "--model", "tiny"], "give either --model or --hf"),
    (["--hf", "gpt2", "--heads", "5"], "must be divisible by heads"),
    (["--model-factory", "nowhere"], "must be module:function"),
])
@pytest.mark.slow
def test_cli_bad_model_input_exits_2_before_anything_starts(tmp_path, args, match):
    out = subprocess.run([sys.executable, "-m", "bench_core", "run", "--device", "cpu", "--no-db", *args],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and match in out.stderr and "stages ×" not in out.stderr + out.stdout


def test_cli_malformed_config_json_exits_2(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{\"model_type\": ")
    out = subprocess.run([sys.executable, "-m", "bench_core", "run", "--device", "cpu", "--no-db", "--hf", str(bad)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "is not valid JSON" in out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", list(hf_config.catalog()))
def test_each_catalog_architecture_runs_the_native_ladder_on_cpu(name):
    """Every native stage this CPU can run, built and timed by the engine's own step (in this process: fresh
    workers would each import transformers again). Compile is left to one architecture per layout kind (GPT-2's
    Conv1D, Llama's rotary), as it costs a minute a model on this CPU."""
    from bench_core.run.step import build_stage, measure
    cfg = tiny_catalog_cfg(name, iters=2, warmup=1)
    compiles = name in ("gpt2", "llama-3.2-1b")
    for stage in PRESETS["native"]:
        if stage.unavailable_reason(PROBE, "cpu") or (stage.compile != "eager" and not compiles):
            continue
        built = build_stage(StageJob(cfg, stage, "cpu", profile=False), stage, torch)
        timed = measure(built, lambda step: None, torch)
        assert len(timed.steps) == 2 and all(s.loss == s.loss and s.loss > 0 for s in timed.steps), stage.key


def test_liger_and_transformers_versions_are_checked_against_ligers_own_range():
    from bench_core.models.compat import liger_transformers_check
    requires = lambda name: ['torch>=2.1.2', 'transformers>=5.0.0; extra == "dev"']   # noqa: E731
    versions = {"liger-kernel": "0.8.5", "transformers": "4.46.0"}
    old = liger_transformers_check(versions.__getitem__, requires)
    assert not old.ok and "tested with transformers>=5.0.0; transformers 4.46.0 is installed" in old.message
    assert liger_transformers_check({**versions, "transformers": "5.17.0"}.__getitem__, requires).ok
    assert liger_transformers_check().ok            # the pinned pair this repository installs


def test_compiled_hf_llama_hands_sdpa_an_explicit_causal_mask():
    """Why compiled HF Llama's attention took 32.6 ms a step against our llama-1b's 12.9 ms on the H100, with the
    same cuDNN kernels (docs/BENCHMARKS.md, calls 51-52): eager, transformers lets SDPA apply causality itself
    (is_causal, no mask); while dynamo traces, `_ignore_causal_mask_sdpa` declines, and a materialised mask is
    passed instead. Fails if transformers changes that, and the published explanation with it."""
    from helpers import tiny_hf
    model = tiny_hf("llama", depth=1, width=64, vocab=256)
    idx = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    eager: list[tuple[bool, object]] = []

    def spy(*args, **kwargs):
        eager.append((kwargs.get("attn_mask") is not None, kwargs.get("is_causal")))
        return sdpa(*args, **kwargs)

    torch.nn.functional.scaled_dot_product_attention = spy
    try:
        model(idx, idx)
    finally:
        torch.nn.functional.scaled_dot_product_attention = sdpa
    traced: list[tuple[bool, object]] = []

    def backend(gm, _inputs):
        traced.extend((n.kwargs.get("attn_mask") is not None, n.kwargs.get("is_causal")) for n in gm.graph.nodes
                      if "scaled_dot_product_attention" in str(n.target))
        return gm.forward

    torch._dynamo.reset()
    torch.compile(model, backend=backend)(idx, idx)
    assert eager == [(False, True)]
    assert traced == [(True, False)]
