"""The CLI command that repeats a recorded run: its model source, every shape and run field, its ladder. Read from
the run's own record (the JSON and the history hold the config and its source), so what is repeated is what ran.

An uploaded config.json has no path to name: the command names the file it was uploaded as, and the config itself
travels with the run (RepeatCommand.config_json), to be saved under that name first."""
from __future__ import annotations

import shlex
from dataclasses import dataclass

from bench_core.config.bench_config import INT_FIELDS, SourceKind
from bench_core.levers.presets import PRESETS, preset
from bench_core.models.families import parts_family
from bench_core.results.records import RunResult


@dataclass(frozen=True)
class RepeatCommand:
    command: str
    config_file: str = ""     # the config.json the command reads, when it must be saved from the run first
    config_json: str = ""     # that file's text (canonical JSON, as its sha256 in the CSV names it)


def _ladder_args(run: RunResult) -> list[str]:
    """--preset (and --gpus) when the stages are the preset's at those counts, else --stages with each key."""
    counts = sorted({s.stage.gpus for s in run.stages}, key=int)
    if run.preset in PRESETS:
        keys = [s.stage.replace(gpus="1").key for s in run.stages if s.stage.gpus == counts[0]]
        if keys == [s.key for s in preset(run.preset, parts_family(run.config))]:
            return ["--preset", run.preset] + (["--gpus", ",".join(counts)] if counts != ["1"] else [])
    return ["--stages", ",".join(dict.fromkeys(s.stage.key for s in run.stages))]


def repeat_command(run: RunResult) -> RepeatCommand:
    cfg = run.config
    source = cfg.source
    args = ["python", "-m", "bench_core", "run"]
    saved = RepeatCommand("")
    if source is None:
        args += ["--family", cfg.family]
    elif source.kind is SourceKind.FACTORY:
        args += ["--model-factory", source.name]
    else:
        name = source.name
        if source.kind is SourceKind.CONFIG and not name.startswith("/"):   # an upload: no path on any machine
            name = name if name.endswith(".json") else f"{name}.json"
            saved = RepeatCommand("", name, source.config_json)
        args += ["--hf", name] + (["--attention", source.attention] if source.attention != "sdpa" else [])
    for field_name in INT_FIELDS:   # every field, so no default of another version or device decides
        args += ["--" + field_name.replace("_", "-"), str(getattr(cfg, field_name))]
    args += ["--device", cfg.device, *_ladder_args(run)]
    return RepeatCommand(shlex.join(args), saved.config_file, saved.config_json)
