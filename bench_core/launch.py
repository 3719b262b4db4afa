"""torchrun for a multi-GPU stage, tied to its parent: if the server dies, the launcher and its ranks die too."""
import sys

from .processes import die_with_parent

die_with_parent()
from torch.distributed.run import main  # noqa: E402

main(sys.argv[1:])
