"""The HTML reports' plots stay readable with many runners, and quiet on the terminal.

Labels are measured on the drawn figure (matplotlib's own layout, the one the SVG is written
from): no two tick labels of a nine-runner chart overlap, and each shows its runner in full.
"""

from __future__ import annotations

import warnings

from tflkit.report import plots

#: Nine runners of a fleet run (the case that was squashed): pair keys as validate names them.
NINE = [
    "cpu:reference",
    "cpu-fp16:cpu",
    "gpu-fp16:cpu",
    "gpu-fp32:cpu",
    "webgpu-fp16@browser:cpu",
    "webgpu-fp32@browser:cpu",
    "webgpu-fp16@webdriver:127.0.0.1:9515:cpu",
    "webgpu-fp32@webdriver:127.0.0.1:9516:cpu",
    "gpu-fp16@ssh:board-1:cpu",
]


def _labels(groups: list[str]) -> list[tuple[str, object]]:
    fig, ax = plots.bar_figure(
        groups,
        {"max abs": [10.0 ** -(i % 6) for i in range(len(groups))]},
        lines={"bound": [1e-2] * len(groups)},
        ylabel="max |difference|",
        log=True,
    )
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    ticks = ax.get_yticklabels() if len(groups) > 5 else ax.get_xticklabels()
    return [(t.get_text(), t.get_window_extent(renderer)) for t in ticks]


def test_nine_runners_keep_their_labels_apart() -> None:
    labels = _labels(NINE)
    assert [text for text, _ in labels] == NINE  # in full, none cut
    boxes = [box for _, box in labels]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b), (a, b)


def test_few_groups_stay_upright() -> None:
    labels = _labels(NINE[:3])
    boxes = [box for _, box in labels]
    assert all(not a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_layout_warnings_stay_off_the_terminal() -> None:
    """300 rules crowd a positions plot: matplotlib warns that its layout collapsed."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        plots.positions({f"rule_{i}": [1, 2, 3] for i in range(300)}, 10, xlabel="op")
    assert [str(w.message) for w in seen] == []
