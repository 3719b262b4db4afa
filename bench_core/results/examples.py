"""The example GPU runs shipped with the package (bench_core/examples/, provenance in its README): read as any
import is, so a CPU-only user can see a GPU's answer."""
from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

from bench_core.results.formats import ImportRejected, parse_json
from bench_core.results.records import RunResult

FOLDER = Path(__file__).resolve().parent.parent / "examples"


@dataclass(frozen=True)
class Example:
    file: str
    title: str


EXAMPLES: dict[str, Example] = {
    "h100-seed-A": Example("h100_2026-12-07_seed_gpt2-small_A.json.gz", "H100 · seed ladder · gpt2-small · run A"),
    "h100-seed-B": Example("h100_2026-12-07_seed_gpt2-small_B.json.gz",
                           "H100 · seed ladder · gpt2-small · run B (a minute after A)"),
}


def example_json(name: str) -> bytes:
    """The example's JSON as the run wrote it; ImportRejected naming the choices for an unknown name."""
    if name not in EXAMPLES:
        raise ImportRejected(f"example: {name!r} is not one of {', '.join(EXAMPLES)}")
    return gzip.decompress((FOLDER / EXAMPLES[name].file).read_bytes())


def example_run(name: str) -> RunResult:
    [run] = parse_json(example_json(name))
    return run
