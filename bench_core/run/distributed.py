"""The DDP side of a worker launched by torchrun: process group, wrapping, barriers, per-rank memory.

With WORLD_SIZE unset or 1 every method is a no-op, so the single-process path is unchanged.

Under torchrun the end of a rank is the end of the job: as soon as one rank exits non-zero the launcher kills the
others, and a rank that tears its process group down while its peer still works can make the peer's next
collective fail. So the ranks leave together (`close`), and every collective runs under an explicit timeout
(BENCH_DIST_TIMEOUT_S, below the runner's 900 s stage limit) so that a stuck collective ends as that rank's own
error, naming the operation, rather than as an anonymous stage timeout.
"""
from __future__ import annotations

import os
import sys
from datetime import timedelta

DIST_TIMEOUT_S = float(os.environ.get("BENCH_DIST_TIMEOUT_S", "600"))


class Distributed:
    def __init__(self, device: str):
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.device = device
        self.enabled = self.world > 1
        self.timeout = timedelta(seconds=DIST_TIMEOUT_S)
        if self.enabled:
            import torch
            import torch.distributed as dist
            if device == "cuda":
                torch.cuda.set_device(self.local_rank)
                self.device = f"cuda:{self.local_rank}"
            dist.init_process_group("nccl" if device == "cuda" else "gloo", timeout=self.timeout)

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
        """True only when every rank's flag is true (e.g. 'my warm-up is long enough').

        One all-reduce (MIN) of one integer, not an object gather (two collectives and a pickle per warm-up step)."""
        if not self.enabled:
            return bool(flag)
        import torch
        import torch.distributed as dist
        value = torch.tensor([1 if flag else 0], dtype=torch.int32, device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MIN)
        return bool(value.item())

    def close(self) -> None:
        """Leave together, then tear down.

        The barrier keeps a rank that is done (the non-leaders, once their profile-phase steps are taken) from
        destroying its process group and exiting while the leader still profiles, reports or sits in a collective:
        the launcher takes a rank's exit as the job's end, and an early teardown closes the connections the leader
        still uses. A peer that died before the barrier is a real failure and raises. Once every rank has passed
        the barrier all results are out, so an error in the teardown itself is written to stderr for the runner
        and does not fail the stage.
        """
        if not self.enabled:
            return
        import torch.distributed as dist
        if not dist.is_initialized():
            return
        dist.barrier()
        try:
            dist.destroy_process_group()
        except Exception as exc:  # noqa: BLE001 (teardown after every rank is done: report, don't fail)
            print(f"[rank {self.rank}] process group teardown: {type(exc).__name__}: {exc}", file=sys.stderr,
                  flush=True)


def nccl_version() -> str | None:
    try:
        import torch
        return ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None
    except Exception:
        return None
