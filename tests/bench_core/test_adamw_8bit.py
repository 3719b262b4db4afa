"""The torchao 8-bit AdamW lever: unavailable on a CPU with its reason, its state bytes as torchao keeps them, and in
no preset (a user asks for it by name)."""
import pytest
import torch

from bench_core.levers import builders
from bench_core.levers.presets import PRESETS
from bench_core.levers.registry import LEVERS
from bench_core.levers.stage import Stage

torchao_optim = pytest.importorskip("torchao.optim")


def test_unavailable_on_cpu_naming_cuda(cpu_probe):
    reason = Stage("adamw-8bit").unavailable_reason(cpu_probe, "cpu")
    assert reason and "CUDA" in reason and "8-bit AdamW" in reason


@pytest.mark.parametrize("shape", [(64, 64), (256, 48), (100,), (4096 + 256,), (4095,)])
def test_moment_bytes_are_the_bytes_torchao_keeps(shape):
    """Built on the meta device, so no torch.compile runs: the moment torchao allocates for a tensor of this shape,
    its codes and block scales (or an fp32 tensor, where torchao keeps one), against the lever's count."""
    p = torch.nn.Parameter(torch.zeros(shape, device="meta"))
    opt = builders.torchao_adamw_8bit([p])
    buf = opt._new_buffer(p, True)
    held = buf.codes.nbytes + buf.scale.nbytes if hasattr(buf, "codes") else buf.nbytes
    assert LEVERS["adamw-8bit"].moment_bytes(p.numel()) == held   # type: ignore[attr-defined]


def test_in_no_preset():
    assert all(stage.optimizer != "adamw-8bit" for stages in PRESETS.values() for stage in stages)
