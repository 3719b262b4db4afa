"""A recorded run's repeat command, read back by the CLI's own parser, gives the run's config and ladder again:
its source (catalog entry, uploaded config saved under its name, built-in family), every field, its stages."""
import json
import shlex
from dataclasses import replace

import pytest

from bench_core.cli import build_config, chosen_stages, parser
from bench_core.config.bench_config import WORKLOADS, BenchConfig, SourceKind
from bench_core.config.settings import Limits
from bench_core.levers.presets import preset
from bench_core.levers.stage import Stage
from bench_core.models import hf_config
from bench_core.models.families import parts_family
from bench_core.results.repeat import repeat_command
from bench_core.run.runner import new_run
from helpers import PROBE, tiny_catalog_cfg


def replayed(run, tmp_path, monkeypatch):
    command = repeat_command(run)
    if command.config_file:
        (tmp_path / command.config_file).write_text(command.config_json)
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(command.command)
    assert argv[:4] == ["python", "-m", "bench_core", "run"]
    args = parser().parse_args(argv[3:])
    cfg = build_config(args, PROBE)
    return cfg, chosen_stages(args, parts_family(cfg), run.device)


def uploaded(name: str):
    data = json.dumps(hf_config.catalog()["qwen3-0.6b"]).encode()
    source = hf_config.source_from_bytes(data, name, SourceKind.CONFIG, Limits())
    return hf_config.shape_from_source(source, BenchConfig(device="cpu", iters=4, seed=7),
                                       {"depth": 2, "width": 64, "heads": 4, "vocab_size": 256, "seq_len": 32})


@pytest.mark.parametrize("cfg, name, stages", [
    (tiny_catalog_cfg("llama-3.2-1b", iters=3, repeats=2), "native", None),
    (uploaded("my model.json"), "custom", [Stage("adam-fused"), Stage("adam-loop", precision="bf16")]),
    (BenchConfig(**{**WORKLOADS["llama-tiny"], "device": "cpu"}), "seed", None),
])
def test_the_repeat_command_gives_the_recorded_config_and_ladder(cfg, name, stages, tmp_path, monkeypatch):
    ladder = stages or list(preset(name, parts_family(cfg)))
    run = new_run(cfg, ladder, PROBE, "llama-seed" if name == "seed" and cfg.family == "llama" else name)
    again, (again_name, again_stages) = replayed(run, tmp_path, monkeypatch)
    # an uploaded config is read back from the file saved under its name: the same config, now at a path
    assert replace(again, source=None) == replace(cfg, source=None)
    if cfg.source is not None:
        assert (again.source.kind, again.source.config_json, again.source.attention) == \
            (cfg.source.kind, cfg.source.config_json, cfg.source.attention)
    assert [s.key for s in again_stages] == [s.key for s in ladder]
    assert again_name == run.preset
