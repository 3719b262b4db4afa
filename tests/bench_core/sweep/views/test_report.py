"""The HTML report (sweep.views.report): the map and every point, written to a file."""


from helpers import tiny_sweep


def test_the_html_report_holds_the_map_and_each_point(tmp_path):
    from bench_core.sweep.views.report import write_html
    path = tmp_path / "s.html"
    write_html(tiny_sweep(), str(path))
    text = path.read_text()
    assert "fig-sweep" in text and "fig-memory" in text and "crossover: pays above width" in text
    assert text.count("<tr>") == 5
    # the peak-memory change as the page shows it, a percentage (it read -0.300)
    assert "<td>-30.0%</td>" in text and "<td>-0.300</td>" not in text
    # a speedup as the map writes it (the table read 0.6828 beside the map's ×0.68), a step time in ms
    assert "<td>×1.00</td>" in text and "<td>20.00</td>" in text
    # a point without a peak figure says why (two of these CPU points only have their prediction)
    assert "<p>Peak memory: 2 of 4 points have no peak-memory figure: they were predicted only, and on a CPU" in text
    # the title may break after each "+" on a phone, not inside a lever's name
    assert "<h1>B adam-fused+<wbr>layernorm+<wbr>fp32 vs A adam+<wbr>layernorm+<wbr>fp32 on CPU</h1>" in text
