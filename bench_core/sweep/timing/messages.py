"""What the timing process (timing.process) says on stderr as it goes, and how the sweep reads it back: a line as each
point begins and as each of its parts finishes, its compile included. A point stopped before its line on stdout (a
budget, a cancel) still says where its time went: without these lines a cold compiled point cut by the budget says
nothing of which part took its time."""
from __future__ import annotations

PART_TIMED = "timed "
POINT_BEGINS = "point "
AHEAD = "compiled ahead "
AHEAD_BEGINS = "compiling ahead "
CUT = "stopped while its parts were timed"


def part_line(part: str, name: str, took_s: float, cache_hits: int = 0, cache_misses: int = 0) -> str:
    cache = (f", {cache_hits} graphs read from the compile cache, {cache_misses} compiled"
             if cache_hits or cache_misses else "")
    return f"{PART_TIMED}{part} {name}: {took_s:.1f} s{cache}"


def ahead_begins_line(steps: int, processes: int) -> str:
    return f"{AHEAD_BEGINS}{steps} steps in {processes} processes"


def ahead_line(steps: int, processes: int, seconds: float, failed: int) -> str:
    return (f"{AHEAD}{steps} steps in {processes} processes, {seconds:.1f} s"
            + (f" ({failed} failed there)" if failed else ""))


def point_line(index: int) -> str:
    return f"{POINT_BEGINS}{index}"


def cut_point(lines: list[str], finished: set[int]) -> tuple[int, str] | None:
    """The point the process was timing when it stopped, and its parts timed so far; None where it stopped between
    points."""
    begun = [(n, line) for n, line in enumerate(lines) if line.startswith(POINT_BEGINS)]
    if not begun:   # before the first point: compiling ahead, if it began, holds the first point's place
        ahead = [line for line in lines if line.startswith(AHEAD_BEGINS)]
        return (0, f"stopped while {ahead[-1]} (sweep.timing.ahead), before any point was timed") if ahead else None
    at, line = begun[-1]
    index = int(line[len(POINT_BEGINS):])
    if index in finished:
        return None
    parts = [line[len(PART_TIMED):] for line in lines[at + 1:] if line.startswith(PART_TIMED)]
    return index, CUT + (f"; timed so far: {', '.join(parts)}" if parts else ", before the first of them finished")
