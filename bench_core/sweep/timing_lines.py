"""What the timing process (sweep.kernels) says on stderr as it goes, and how the sweep reads it back: a line as each
point begins and as each of its parts finishes, its compile included. A point stopped before its line on stdout (a
budget, a cancel) still says where its time went: call 42's cold FP8 point was cut at 110 s with nothing to say
which part took it."""
from __future__ import annotations

PART_TIMED = "timed "
POINT_BEGINS = "point "
CUT = "stopped while its parts were timed"


def part_line(part: str, name: str, took_s: float) -> str:
    return f"{PART_TIMED}{part} {name}: {took_s:.1f} s"


def point_line(index: int) -> str:
    return f"{POINT_BEGINS}{index}"


def cut_point(lines: list[str], finished: set[int]) -> tuple[int, str] | None:
    """The point the process was timing when it stopped, and its parts timed so far; None where it stopped between
    points."""
    begun = [(n, line) for n, line in enumerate(lines) if line.startswith(POINT_BEGINS)]
    if not begun:
        return None
    at, line = begun[-1]
    index = int(line[len(POINT_BEGINS):])
    if index in finished:
        return None
    parts = [line[len(PART_TIMED):] for line in lines[at + 1:] if line.startswith(PART_TIMED)]
    return index, CUT + (f"; timed so far: {', '.join(parts)}" if parts else ", before the first of them finished")
