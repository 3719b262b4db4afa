"""The DDP side of a worker launched by torchrun: process group, wrapping, barriers, per-rank memory.

With WORLD_SIZE unset or 1 every method is a no-op, so the single-process path is unchanged.
"""
from __future__ import annotations

import os


class Distributed:
    def __init__(self, device: str):
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.device = device
        self.enabled = self.world > 1
        if self.enabled:
            import torch
            import torch.distributed as dist
            if device == "cuda":
                torch.cuda.set_device(self.local_rank)
                self.device = f"cuda:{self.local_rank}"
            dist.init_process_group("nccl" if device == "cuda" else "gloo")

    @property
    def leader(self) -> bool:
        return self.rank == 0

    def wrap(self, model):
        """DDP around the model (the worker skips this for optimizers that reduce gradients themselves)."""
        if not self.enabled:
            return model
        from torch.nn.parallel import DistributedDataParallel
        return DistributedDataParallel(model, device_ids=[self.local_rank] if self.device.startswith("cuda") else None)

    def barrier(self) -> None:
        if self.enabled:
            import torch.distributed as dist
            dist.barrier()

    def gather(self, value) -> list:
        if not self.enabled:
            return [value]
        import torch.distributed as dist
        out = [None] * self.world
        dist.all_gather_object(out, value)
        return out

    def all_agree(self, flag: bool) -> bool:
        """True only when every rank's flag is true (e.g. 'my warm-up is long enough')."""
        return all(self.gather(bool(flag)))

    def close(self) -> None:
        if self.enabled:
            import torch.distributed as dist
            dist.destroy_process_group()


def nccl_version() -> str | None:
    try:
        import torch
        return ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None
    except Exception:
        return None
