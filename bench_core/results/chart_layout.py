"""How every chart is laid out, whatever it shows: colours, titles and stage labels wrapped to a phone's width,
legends at the foot, and room for the labels beside bars. The figure builders (results.figures) call these."""
from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from bench_core.measure.breakdown import CATEGORIES, Bound
from bench_core.measure.proof import CELL_STATES
from bench_core.results.summary import RunSummary

FASTER, SLOWER, FAILED, UNAVAILABLE, NEUTRAL = "#2e7d32", "#e65100", "#c62828", "#bdbdbd", "#1565c0"
# Who sets a step's pace, in the kernel-share chart: the colours a verdict has wherever it is drawn.
BOUND_COLORS = {Bound.GPU: FASTER, Bound.LAUNCH: SLOWER, Bound.UNKNOWN: UNAVAILABLE}
# Colours that mean something wherever they appear (faster, slower, a bottleneck, failed, unavailable). A run's
# colour in a comparison is only a name: it keeps MIN_COLOR_DISTANCE from each of these and from the other runs'.
MEANING_COLORS = (FASTER, SLOWER, FAILED, UNAVAILABLE, *BOUND_COLORS.values())
RUN_COLORS = ["#1565c0", "#6a1b9a", "#00838f", "#4e342e", "#ad1457", "#fbc02d", "#ba68c8", "#4fc3f7"]
# CIELAB ΔE (1976): about 13 just-noticeable differences (2.3 each), so two colours are told apart at a glance
# and not only side by side
MIN_COLOR_DISTANCE = 30.0
# A loss curve's line, and its key under the chart drawn alike: equal curves lie on one another, and only a later
# one's gaps show the one beneath (seed's reference curve vanished under its twin's)
DASHES = ("solid", "dash", "dot", "dashdot")
DASH_KEYS = ("━━━", "╍╍╍", "┈┈┈", "━·━")
CATEGORY_COLORS = dict(zip(CATEGORIES, ["#1565c0", "#6a1b9a", "#00838f", "#ef6c00", "#c62828", "#9e9e9e",
                                        "#558b2f"], strict=False))
CELL_COLORS = dict(zip(CELL_STATES, ["#e0e0e0", "#fff8e1", "#ffffff", "#66bb6a", "#ffb74d", "#e53935",
                                     "#90caf9"], strict=False))
CELL_MARKS = {"used": "✓", "fallback": "✗ fallback", "expected, not seen": "?", "unavailable": "n/a",
              "pending": "…", "imported": "✓ (imported)"}
PHONE_PX, CHAR_PX = 390, 6.6     # the narrowest width a chart is drawn at; a 12 px character's mean width
STAGE_CHARS = 24                  # a stage label's line, broken after '+'
MAX_LABEL_SHARE = 0.6             # an outside label never takes more of the plot than this
BUSY_TEXT_INSIDE = 25.0   # % busy from which a bar is wide enough, even on a phone, to hold its share as text
# Plain colours instead of a named template: merging a template cost about a quarter of each figure's build time.
LAYOUT = dict(template=None, margin=dict(l=10, r=30, t=70, b=50), plot_bgcolor="white", paper_bgcolor="white",
              font=dict(color="#2a3f5f", size=12), xaxis=dict(gridcolor="#ebf0f8", zerolinecolor="#ebf0f8"),
              yaxis=dict(gridcolor="#ebf0f8", automargin=True, autorange="reversed"),
              # legends at the figure's foot (the container's, so plotly makes room for them under the axis
              # title): above the plot a legend that wraps on a phone grew into the title
              legend=dict(orientation="h", yref="container", yanchor="bottom", y=0, xanchor="left", x=0,
                          font=dict(size=11)))


# Characters a line holds on a 390 px phone: the 14 px title, the 12 px subtitle lines and the 11 px notes under a
# chart. A subtitle is written as a <sup> part and drawn as a 12 px line (SUB_OPEN): plotly's <sup> was 9.8 px on a
# phone, and the subtitle is what says what a chart's colours mean.
TITLE_CHARS, SUB_CHARS, NOTE_CHARS = 40, 52, 56
TITLE_PX, SUB_PX, NOTE_PX, LEGEND_ROW_PX = 20, 18, 15, 20
SUB_OPEN, SUB_CLOSE = '<span style="font-size:12px">', "</span>"
# Above the title: the room of the chart's toolbar, which a hover shows over the figure's top edge (it covered
# the first line of a title on a phone).
MODEBAR_PX = 40   # the toolbar is 25 px tall; a title box starts 13 px above its pad (plotly)
LABEL_LINE_PX = 14   # a 12 px axis label's line
FRAME_PX, ROW_PX = 130, 34   # a bar chart's height: its frame (axes, margins), and a row a stage (two label lines)


def _lab(color: str) -> tuple[float, float, float]:
    """A '#rrggbb' sRGB colour in CIELAB (D65)."""
    rgb = [int(color[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb)
    xyz = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b,
           (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883)
    fx, fy, fz = (t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in xyz)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def color_distance(a: str, b: str) -> float:
    """CIELAB ΔE (1976) between two '#rrggbb' colours: 0 for the same colour, about 2.3 just noticeable."""
    return sum((p - q) ** 2 for p, q in zip(_lab(a), _lab(b), strict=True)) ** 0.5


def wrap_text(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]


def _title_lines(text: str) -> list[str]:
    """The title's '<br>'-separated parts, each wrapped to a phone's width; a <sup> part is a subtitle, each of its
    lines drawn at 12 px."""
    out = []
    for part in text.split("<br>"):
        sub = part.startswith("<sup>")
        plain = part.removeprefix("<sup>").removesuffix("</sup>")
        out += [f"{SUB_OPEN}{line}{SUB_CLOSE}" if sub else line
                for line in wrap_text(plain, SUB_CHARS if sub else TITLE_CHARS)]
    return out


def _title(text: str) -> dict:
    """Left-aligned and wrapped to a phone's width: long titles must not run off a narrow screen."""
    return dict(text="<br>".join(_title_lines(text)), x=0, xanchor="left", yref="container", y=1, yanchor="top",
                pad=dict(t=MODEBAR_PX), font=dict(size=14))


def legend_entries(fig: go.Figure) -> int:
    shown_by_default = len(fig.data) > 1
    return sum(1 for t in fig.data if t.type != "heatmap" and (t.showlegend if t.showlegend is not None
                                                                 else shown_by_default))


def finish_figure(fig: go.Figure, title: str, height: int, **layout: Any) -> None:
    """Title, height and margins from what the figure holds: the top margin fits the wrapped title, and the
    height grows by the title's extra lines and by the legend at the foot, one row an entry (a phone's worst
    case), so neither squeezes the plot nor runs into it. `height` is for a two-line title and no legend."""
    lines = _title_lines(title)
    top = MODEBAR_PX + sum(SUB_PX if line.startswith(SUB_OPEN) else TITLE_PX for line in lines) + 20
    base = {**LAYOUT, **layout}
    margin = {**base.pop("margin"), "t": top + base.pop("extra_top", 0)}
    legend = legend_entries(fig) * LEGEND_ROW_PX + (10 if legend_entries(fig) else 0)
    margin["b"] = margin["b"] + legend
    labels = _stage_ticks(fig)
    fig.update_layout(title=_title(title), height=height + max(0, top - 70) + legend + label_room(labels, height),
                      margin=margin, **base)


def as_summaries(runs: RunSummary | Sequence[RunSummary]) -> list[RunSummary]:
    return [runs] if isinstance(runs, RunSummary) else list(runs)


def figure_height(rows: int, several: int = 1) -> int:
    return FRAME_PX + max(rows, 1) * ROW_PX * max(1, min(several, 3))   # a row holds a stage label of two lines


def run_name(summary: RunSummary) -> str:
    run = summary.run
    return f"{run.preset} · {run.gpu or run.device} · {run.created_at[:16].replace('T', ' ')} · {run.run_id[:6]}"


def stage_keys(runs: list[RunSummary]) -> list[str]:
    """Stage keys in first-seen order across runs: the shared axis of a comparison."""
    return list(dict.fromkeys(s.key for r in runs for s in r.stages))


def phone_plot_px(fig: go.Figure) -> float:
    """The plot area's width on a 390 px phone: what the margins and the (wrapped) stage labels leave."""
    ticks = fig.layout.yaxis.ticktext or [str(y) for t in fig.data if t.y is not None for y in t.y]
    longest = max((len(line) for tick in ticks for line in str(tick).split("<br>")), default=0)
    return max(100.0, PHONE_PX - 40 - CHAR_PX * longest)


def room_for_labels(fig: go.Figure) -> None:
    """Bar labels sit outside the bars: the x range leaves each its width in pixels on a phone's plot area (the
    narrowest a chart is drawn), so '12,441' or '×5.00' is never cut at the edge; at 1440 px the room is to spare."""
    # markers (a roofline's peaks) stay inside too
    need = max((1.05 * x for t in fig.data if t.type == "scatter" and t.mode == "markers" and t.x is not None
                for x in t.x if x is not None), default=0.0)
    for t in fig.data:
        if t.x is None or t.text is None or isinstance(t.text, str):
            continue
        ends = [x + (e or 0) for x, e in zip(t.x, (t.error_x.array if t.type == "bar" and t.error_x
                                                   and t.error_x.array is not None else [0] * len(t.x)),
                                             strict=False) if x is not None]
        for end, text in zip(ends, t.text, strict=False):
            if end and text and t.textposition != "inside":
                # the label's share of the plot's width; the range must put `end` left of (1 - share)
                share = min(MAX_LABEL_SHARE, (CHAR_PX * len(str(text)) + 6) / phone_plot_px(fig))
                need = max(need, end / (1 - share))
    if need > 0:
        fig.update_xaxes(range=[0, need])


def _stage_ticks(fig: go.Figure) -> list[str]:
    """Stage names as axis labels, broken after '+' into lines that fit beside a phone's plot: a 40-character
    name would leave a phone's chart 100 px. Returns the labels."""
    names = list(dict.fromkeys(y for t in fig.data for y in (t.y if t.y is not None else ()) if isinstance(y, str)))
    labels = [break_stage(n) for n in names]
    if names:
        fig.update_yaxes(tickmode="array", tickvals=names, ticktext=labels)
    return labels


def label_room(labels: list[str], height: int) -> int:
    """The height a chart needs beyond `height` for its labels: a row of `figure_height`'s holds two lines, and a label
    of three ("apex-fusedadam+ / apex-fusedln+ / fp32 · cd08cc", a run's id after its key) ran into its neighbours."""
    if not labels:
        return 0
    row_px = (height - FRAME_PX) / len(labels)
    need = max(label.count("<br>") + 1 for label in labels) * LABEL_LINE_PX + 6
    return round(len(labels) * (need - row_px)) if need > row_px else 0


def break_stage(name: str) -> str:
    lines: list[str] = []
    for part in name.replace("+", "+\n").split("\n"):
        if lines and len(lines[-1]) + len(part) <= STAGE_CHARS:
            lines[-1] += part
        else:
            lines.append(part)
    return "<br>".join(lines)


def empty_figure(fig: go.Figure, text: str) -> go.Figure:
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font=dict(color="#757575"))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig
