"""Whether the installed Liger-Kernel and transformers go together. Liger's per-model entry points patch
transformers' classes, so a transformers outside the range Liger is tested with may patch nothing or fail. The range
is Liger's own: the transformers requirement its package metadata declares (its `dev` extra, what its tests run)."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata

TRANSFORMERS_PINNED = "5.17.0"   # requirements.txt


@dataclass(frozen=True)
class VersionCheck:
    ok: bool
    message: str


def _version(name: str, version: Callable[[str], str]) -> str | None:
    try:
        return version(name)
    except metadata.PackageNotFoundError:
        return None


def liger_transformers_check(version: Callable[[str], str] = metadata.version,
                             requires: Callable[[str], list[str] | None] = metadata.requires) -> VersionCheck:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version
    liger, transformers = _version("liger-kernel", version), _version("transformers", version)
    if liger is None:
        return VersionCheck(False, "Liger-Kernel is not installed (pip install -r requirements.txt)")
    if transformers is None:
        return VersionCheck(False, f"Liger-Kernel {liger} patches transformers' models, and transformers is not "
                            f"installed (requirements.txt pins {TRANSFORMERS_PINNED})")
    wanted = [r.split(";")[0] for r in requires("liger-kernel") or [] if re.match(r"transformers\b", r)]
    if not wanted:
        return VersionCheck(True, f"Liger-Kernel {liger} declares no transformers range; transformers {transformers}")
    spec = SpecifierSet(wanted[0][len("transformers"):].strip())
    if Version(transformers) in spec:
        return VersionCheck(True, f"Liger-Kernel {liger} with transformers {transformers}: within its tested "
                            f"range transformers{spec}")
    return VersionCheck(False, f"Liger-Kernel {liger} is tested with transformers{spec}; transformers {transformers} "
                        f"is installed: its per-model entry points may not patch this version's classes (install "
                        f"transformers=={TRANSFORMERS_PINNED}, as requirements.txt pins)")
