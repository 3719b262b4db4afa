"""A sweep as rows: one per point, every figure the engine derived for it (sweep.core.records), for the CSV export and,
its answer first, for the table the page and the HTML report show."""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from enum import StrEnum

from bench_core.results.near_one import times
from bench_core.sweep.core.records import PointResult, Source, SweepResult

CSV_FIELDS = ("sweep_id", "compare", "a", "b", "family", "device", "gpu", "axis_1", "value_1", "axis_2", "value_2",
              "source", "speedup", "speedup_low", "speedup_high", "bound", "peak_mem_change", "predicted_speedup",
              "predicted_low", "predicted_high", "predicted_bound", "prediction_error", "measured_speedup",
              "measured_low", "measured_high", "interval_scope", "measured_status", "measured_reason",
              "prediction_note", "predicted_a_ms", "predicted_b_ms", "measured_a_ms", "measured_b_ms",
              "a_step_error", "b_step_error", "predicted_a_gpu_ms", "predicted_b_gpu_ms", "measured_a_kernel_ms",
              "measured_b_kernel_ms", "a_kernel_error", "b_kernel_error", "predicted_a_host_ms", "predicted_b_host_ms",
              "measured_a_host_ms", "measured_b_host_ms", "a_host_error", "b_host_error", "memory_source",
              "predicted_peak_mem_change", "measured_peak_mem_change", "predicted_a_peak_mib", "predicted_b_peak_mib",
              "measured_a_peak_mib", "measured_b_peak_mib", "a_peak_error", "b_peak_error")


class Shown(StrEnum):
    """How a shown number reads, the same on the page and in the report."""
    PERCENT = "percent"   # a fraction: -0.297 is -29.7%
    SPEEDUP = "speedup"   # ×0.68, as the map writes it (the table read 0.6828)
    MS = "ms"
    MIB = "mib"           # MiB, whole: what a card's memory is read in


@dataclass(frozen=True)
class ShownColumn:
    """One column of the table the page and the HTML report show: the CSV field it reads, its header (the field
    names read as code: "speedup_low", "measured_reason"), and how its numbers read."""
    field: str
    label: str
    shown: Shown | None = None


# After the axes' values (`shown_rows`): the answer first, so a phone's first columns hold it.
SHOWN_COLUMNS = (
    ShownColumn("speedup", "speedup (B over A)", Shown.SPEEDUP), ShownColumn("source", "source"),
    ShownColumn("bound", "bound"), ShownColumn("speedup_low", "95% low", Shown.SPEEDUP),
    ShownColumn("speedup_high", "95% high", Shown.SPEEDUP),
    ShownColumn("peak_mem_change", "peak memory B vs A", Shown.PERCENT),
    # the peaks themselves, where measured: "will it fit on my card" (a new user's pass found percentages only)
    ShownColumn("measured_a_peak_mib", "A peak MiB", Shown.MIB),
    ShownColumn("measured_b_peak_mib", "B peak MiB", Shown.MIB),
    ShownColumn("predicted_speedup", "predicted", Shown.SPEEDUP),
    ShownColumn("measured_speedup", "measured", Shown.SPEEDUP),
    ShownColumn("prediction_error", "prediction error", Shown.PERCENT),
    ShownColumn("predicted_a_ms", "A predicted ms", Shown.MS), ShownColumn("measured_a_ms", "A measured ms", Shown.MS),
    ShownColumn("a_step_error", "A step error", Shown.PERCENT),
    ShownColumn("predicted_b_ms", "B predicted ms", Shown.MS), ShownColumn("measured_b_ms", "B measured ms", Shown.MS),
    ShownColumn("b_step_error", "B step error", Shown.PERCENT), ShownColumn("interval_scope", "interval over"),
    ShownColumn("measured_status", "run status"), ShownColumn("measured_reason", "why not measured"),
    ShownColumn("prediction_note", "why not predicted"))
SHOWN_FORMATS: dict[str, Shown] = {c.label: c.shown for c in SHOWN_COLUMNS if c.shown}   # by header
PREDICTED_MARK = "≈"   # a predicted figure, as the heatmap, the side-by-side tables and a phone's table mark it
PHONE_SPEEDUP = "B over A"


MISSING = "–"   # a cell with no figure: "None" on the page read as a value


def shown_text(value: object, shown: Shown | None, decimals: int = 2) -> str:
    """One shown cell as text, as the page and the HTML report both write it; a speedup with the `decimals` its
    row's interval takes (results.near_one)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if not isinstance(value, float):
        return str(value)
    if shown == Shown.PERCENT:
        return f"{value:+.1%}"
    if shown == Shown.SPEEDUP:
        return times(value, decimals)
    if shown == Shown.MIB:
        return f"{value:,.0f}"
    return f"{value:.2f}" if shown == Shown.MS else f"{value:.3f}"


def shown_text_rows(result: SweepResult) -> list[dict[str, str]]:
    """`shown_rows` with every cell as text (`shown_text`): the page's table and the report's read alike (the page's
    own number formats wrote 21.04% where the report wrote +21.0%, and "None" where it had no figure). A row's
    speedups share one count of decimals (SweepResult.decimals): ×1.005 (1.005–1.006) read ×1.00, ×1.00, ×1.01."""
    return [{k: shown_text(v, SHOWN_FORMATS.get(k), result.decimals(p)) for k, v in row.items()}
            for p, row in zip(result.points, shown_rows(result), strict=True)]


def phone_rows(result: SweepResult) -> list[dict[str, str]]:
    """A 390 px phone's table: each point's axis values, its speedup (≈ where predicted) and its bound, as
    `shown_text_rows` writes them. The full table scrolled sideways there, its source and bound off the screen; with
    two axes as long as vocab_size and batch_size a source column of its own does not fit either."""
    names, label = [a.name for a in result.spec.axes], {c.field: c.label for c in SHOWN_COLUMNS}
    return [{**{name: row[name] for name in names},
             PHONE_SPEEDUP: (PREDICTED_MARK if p.source == Source.PREDICTED else "") + row[label["speedup"]],
             label["bound"]: row[label["bound"]]}
            for p, row in zip(result.points, shown_text_rows(result), strict=True)]


def shown_rows(result: SweepResult) -> list[dict]:
    """Each point as the page and the report show it: its axis values under the axes' own names, then SHOWN_COLUMNS
    under their headers."""
    names = [a.name for a in result.spec.axes]
    return [{**{name: row[f"value_{i + 1}"] for i, name in enumerate(names)},
             **{c.label: row[c.field] for c in SHOWN_COLUMNS}, **_failed(p)}
            for p, row in zip(result.points, csv_rows(result), strict=True)]


def _failed(p: PointResult) -> dict[str, str]:
    """A point whose end-to-end run failed says so where its speedup would be, and its reason in whole sentences
    (the CSV keeps the whole reason): said only in the table's last columns, an out-of-memory point read as if it
    had a figure."""
    if not p.failure or p.measurement is None:
        return {}
    label = {c.field: c.label for c in SHOWN_COLUMNS}
    return {label["speedup"]: p.failure, label["measured_reason"]: p.measurement.brief_reason or ""}


def csv_rows(result: SweepResult) -> list[dict]:
    spec = result.spec
    out = []
    for p in result.points:
        names = [k for k, _ in p.values] + [None]
        vals = [v for _, v in p.values] + [None]
        pred, meas, est = p.prediction, p.measurement, result.best_estimate(p)
        # a point the sweep ended before says why, in each column it has no figure for
        why = None if (unrun := result.not_run(p)) is None else unrun.text
        steps, kernels, hosts, memory, peaks = p.step_errors, p.kernel_errors, p.host_errors, p.memory, p.peak_errors
        out.append({"sweep_id": result.sweep_id, "compare": spec.comparison.text, "a": spec.comparison.a.key,
                    "b": spec.comparison.b.key, "family": spec.base.family, "device": result.device,
                    "gpu": result.gpu, "axis_1": names[0], "value_1": vals[0], "axis_2": names[1],
                    "value_2": vals[1], "source": p.source.value if p.source else None,
                    "speedup": est[0] if est else None, "speedup_low": est[1] if est else None,
                    "speedup_high": est[2] if est else None, "bound": p.bound,
                    "peak_mem_change": memory[0] if memory else None,
                    "predicted_speedup": pred.speedup if pred else None, "predicted_low": pred.low if pred else None,
                    "predicted_high": pred.high if pred else None, "predicted_bound": pred.bound if pred else None,
                    "prediction_error": p.prediction_error, "measured_speedup": meas.speedup if meas else None,
                    "measured_low": meas.low if meas else None, "measured_high": meas.high if meas else None,
                    "interval_scope": meas.interval_text if meas else None,
                    "measured_status": meas.status.value if meas else None,
                    "measured_reason": meas.reason if meas else why,
                    "prediction_note": p.prediction_note or (why if pred is None else None),
                    "predicted_a_ms": pred.a_ms if pred else None, "predicted_b_ms": pred.b_ms if pred else None,
                    "measured_a_ms": meas.a_ms if meas else None, "measured_b_ms": meas.b_ms if meas else None,
                    "a_step_error": steps[0] if steps else None, "b_step_error": steps[1] if steps else None,
                    "predicted_a_gpu_ms": pred.a_gpu_ms if pred else None,
                    "predicted_b_gpu_ms": pred.b_gpu_ms if pred else None,
                    "measured_a_kernel_ms": meas.a_kernel_ms if meas else None,
                    "measured_b_kernel_ms": meas.b_kernel_ms if meas else None,
                    "a_kernel_error": kernels[0] if kernels else None,
                    "b_kernel_error": kernels[1] if kernels else None,
                    "predicted_a_host_ms": pred.a_host_ms if pred else None,
                    "predicted_b_host_ms": pred.b_host_ms if pred else None,
                    "measured_a_host_ms": meas.a_host_ms if meas else None,
                    "measured_b_host_ms": meas.b_host_ms if meas else None,
                    "a_host_error": hosts[0] if hosts else None, "b_host_error": hosts[1] if hosts else None,
                    "memory_source": memory[1].value if memory else None,
                    "predicted_peak_mem_change": pred.peak_change if pred else None,
                    "measured_peak_mem_change": meas.peak_change if meas else None,
                    "predicted_a_peak_mib": pred.a_peak_mib if pred else None,
                    "predicted_b_peak_mib": pred.b_peak_mib if pred else None,
                    "measured_a_peak_mib": meas.a_peak_mib if meas else None,
                    "measured_b_peak_mib": meas.b_peak_mib if meas else None,
                    "a_peak_error": peaks[0] if peaks else None, "b_peak_error": peaks[1] if peaks else None})
    return out


def to_csv(result: SweepResult) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
    writer.writeheader()
    writer.writerows(csv_rows(result))
    return buf.getvalue()
