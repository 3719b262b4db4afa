"""A Hugging Face architecture's ladders name the norm it has: the seed ladder on a Llama-style config swaps in
Apex FusedRMSNorm (a FusedLayerNorm would find no LayerNorm to replace and prove nothing), on GPT-2 FusedLayerNorm.
Checked for every catalog entry, through the CLI's own choice of stages and the run's repeat command."""
import subprocess
import sys
from types import SimpleNamespace

import pytest

from bench_core.cli import build_config, chosen_stages, parser
from bench_core.levers.presets import PRESETS, family_errors
from bench_core.models import hf_config
from bench_core.models.families import architecture, parts_family


def hf_run(entry: str, preset: str):
    args = parser().parse_args(["run", "--preset", preset, "--hf", entry])
    cfg = build_config(args, SimpleNamespace(cuda_available=True))
    return cfg, chosen_stages(args, parts_family(cfg), "cuda")[1]


@pytest.mark.parametrize("entry", sorted(hf_config.catalog()))
@pytest.mark.parametrize("preset", ["seed", "peers"])
def test_every_norm_lever_of_a_catalog_ladder_is_of_the_norm_the_model_has(entry, preset):
    cfg, stages = hf_run(entry, preset)
    norm = architecture(cfg).norm
    norm_levers = [lever for stage in stages for lever in stage.part_levers if lever.kind == "norm"]
    assert norm_levers and all(lever.part_type == norm for lever in norm_levers), \
        (entry, norm, sorted({lever.name for lever in norm_levers}))
    assert family_errors(stages, parts_family(cfg)) == []


def test_the_seed_ladder_on_a_llama_config_swaps_in_apex_fused_rms_norm():
    _, stages = hf_run("llama-3.2-1b", "seed")
    assert "apex-fusedadam+apex-fusedrms+bf16" in [s.key for s in stages]
    _, gpt2 = hf_run("gpt2", "seed")
    assert [s.key for s in gpt2][:len(PRESETS["seed"])] == [s.key for s in PRESETS["seed"]]


@pytest.mark.parametrize("entry, key, match", [
    ("gpt2", "adam-fused+rmsnorm+fp32", "rmsnorm is an RMS norm, valid only for the llama family"),
    ("llama-3.2-1b", "adam-fused+apex-fusedln+fp32", "apex-fusedln is a LayerNorm, valid only for the gpt family"),
])
def test_cli_refuses_a_norm_the_hugging_face_model_does_not_have(entry, key, match):
    """A norm the model lacks would run as a stage named for it with nothing swapped: refused, nothing launched."""
    out = subprocess.run([sys.executable, "-m", "bench_core", "run", "--device", "cpu", "--no-db", "--hf", entry,
                          "--stages", key, "--depth", "1", "--seq-len", "16", "--batch-size", "1", "--warmup", "1",
                          "--iters", "1", "--repeats", "1"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and match in out.stderr and "stages ×" not in out.stderr + out.stdout
