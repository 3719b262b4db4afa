"""What a sweep shows, handed on as one face for the Sweep page: its figures, tables, words and report."""
from bench_core.sweep.core.errors import error_figures
from bench_core.sweep.core.line_answers import line_answers
from bench_core.sweep.views.compare import APART, apart_count, crossovers_side_by_side, same_map, speedups_side_by_side
from bench_core.sweep.views.figures import has_memory, peak_memory_map, sweep_figure, sweep_line
from bench_core.sweep.views.parts import BREAKDOWN_CAPTION, BREAKDOWN_TITLE, breakdown_rows
from bench_core.sweep.views.report import render_html
from bench_core.sweep.views.rows import PREDICTED_MARK, phone_rows, shown_text_rows, to_csv
from bench_core.sweep.views.words import memory_gaps, same_code_warning

__all__ = [
    "APART", "BREAKDOWN_CAPTION", "BREAKDOWN_TITLE", "PREDICTED_MARK", "apart_count", "breakdown_rows",
    "crossovers_side_by_side", "error_figures", "has_memory", "line_answers", "memory_gaps", "peak_memory_map",
    "phone_rows", "render_html", "same_code_warning", "same_map", "shown_text_rows", "speedups_side_by_side",
    "sweep_figure", "sweep_line", "to_csv",
]
