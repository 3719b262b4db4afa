"""torchrun for a multi-GPU stage, tied to its parent: if the server dies, the launcher and its ranks die too.

`--standalone` binds the rendezvous store on port 0 and the ranks reuse that store (torchrun's shared agent store),
so no port is picked free and bound later by someone else: that sharing is forced on here, whatever the
environment says, since TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 would bring back a `get_free_port()` race between
concurrent stages.
"""
import os
import sys

from bench_core.run.processes import die_with_parent

die_with_parent()
os.environ.pop("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", None)
from torch.distributed.run import main  # noqa: E402

main(sys.argv[1:])
