"""The HTML report layer: one self-contained page per report (``check``, ``rewrite``,
``validate``, ``regress check``), the same look for all.

Pages are Jinja2 templates (``tflkit/report/templates/``, autoescaped) extending one base
template; plots are matplotlib figures inlined as SVG (:mod:`tflkit.report.plots`); every number
on a page goes through :func:`num` (4 significant digits and its unit) and sits in an element whose
``data-value`` holds the full value, next to ``data-*`` addresses (``data-pair``, ``data-output``,
``data-metric``, ``data-op``, ``data-plot``) that tests and tools read off the page. Nothing is
fetched: no CDN, no web font, a few lines of inline script only to sort and filter tables (the
page shows everything without it). Files are written atomically (:mod:`tflkit.fsio`). Jinja2 and
matplotlib are imported when a page is rendered, never by the CLI's ``--help``.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

from tflkit.fsio import write_atomic
from tflkit.report.numbers import num, raw

__all__ = ["num", "raw", "render", "render_html", "write_html"]


@cache
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("tflkit.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = num
    env.filters["raw"] = raw
    env.filters["basename"] = os.path.basename
    env.filters["ranges"] = _ranges
    return env


def _ranges(indices: list[int]) -> str:
    from tflkit.report.check_report import index_ranges

    return index_ranges(list(indices), limit=12)


def render(template: str, **context: Any) -> str:
    """One page from ``templates/<template>`` (which extends ``base.html.j2``)."""
    return _environment().get_template(template).render(**context)


def render_html(report: Any, **extra: Any) -> str:
    """The page of a report (:class:`ValidateReport`, :class:`CheckReport`,
    :class:`RewriteReport` or :class:`RegressReport`) as a string."""
    from tflkit.report import html_pages

    template, context = html_pages.page(report, **extra)
    return render(template, **context)


def write_html(report: Any, path: str | os.PathLike[str], **extra: Any) -> Path:
    """Write the page of ``report`` to ``path`` atomically; ``extra`` gives a page what the
    report does not hold (``model=`` the loaded IR model for ``check``: copies placed on ops)."""
    return write_atomic(path, [render_html(report, **extra).encode("utf-8")])
