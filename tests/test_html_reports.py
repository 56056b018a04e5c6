"""The HTML reports as a reader sees them: each command's ``--html`` page opened in headless
Chromium (Playwright, one browser for the module) at 1280 px.

Every page: no horizontal overflow, no clipped text, no request leaving the file, every plot there
with its SVG and its ``data-*`` numbers, the numbers shown equal to the command's ``--json``
report (``data-value`` exactly, the text through the one formatter), the op table whole without
JavaScript and filterable with it. Models: the bundled tiny classifier (7 ops, two on the CPU),
deeplabv3 (70 ops, all on the GPU) and BirdNET's FP16 metadata model (56 ops, 37 on the CPU).

``TFLKIT_REPORT_SCREENSHOTS=DIR`` also saves one screenshot per command there (docs/reports/).
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest

from tests.needs import unavailable
from tflkit.cli.main import main
from tflkit.report.html import num

EXAMPLE = Path(__file__).resolve().parents[1] / "tflkit/examples/tiny_classifier.tflite"
CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = os.environ.get("TFLKIT_REPORT_SCREENSHOTS")

#: Elements holding text whose content box must not be narrower than their text.
_CLIPPED = """() => {
  const bad = [];
  for (const el of document.querySelectorAll(
      'td, th, p, li, h1, h2, h3, figcaption, .card, code')) {
    const style = getComputedStyle(el);
    if (style.display === 'inline' || el.clientWidth === 0) continue;
    if (el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1 &&
        style.overflowY !== 'visible')
      bad.push(el.tagName + ': ' + el.textContent.slice(0, 60));
  }
  return bad;
}"""


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed (pip install -e '.[test]')")
    if not os.path.exists(CHROMIUM):
        unavailable(f"chromium is not installed at {CHROMIUM} (apt-get install chromium)")
    from tflkit.delegates.browser.chromium import COMMON_FLAGS

    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", *COMMON_FLAGS], headless=True
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def models(real_models) -> dict[str, Path]:
    by_name = {p.stem: p for p in real_models}
    return {
        "tiny": EXAMPLE,
        "ready": by_name["deeplabv3"],
        "mixed": by_name["BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16"],
    }


def _run(capsys, args: list[str]) -> tuple[int, dict]:
    code = main(args)
    out = capsys.readouterr().out
    return code, json.loads(out)


class Page:
    """A report opened at 1280 px, checked for what every report must be."""

    def __init__(self, browser, path: Path, *, javascript: bool = True):
        assert path.is_file()
        self.context = browser.new_context(
            viewport={"width": 1280, "height": 900}, java_script_enabled=javascript
        )
        self.page = self.context.new_page()
        self.requests: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.resolve().as_uri())
        self.path = path

    def close(self) -> None:
        self.context.close()

    def check_layout(self) -> None:
        html = self.path.read_text()
        # nothing to fetch: no script or style from elsewhere, no url() but the SVGs' own #ids
        assert "<script src" not in html and "@import" not in html and "<link" not in html
        assert not re.search(r"url\((?!#)", html)
        assert all(u.startswith(("file:", "data:")) for u in self.requests), self.requests
        width = self.page.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert width[0] <= width[1], f"horizontal overflow: {width}"
        assert self.page.evaluate(_CLIPPED) == []
        for figure in self.page.query_selector_all("figure.plot"):
            box = figure.query_selector("svg").bounding_box()
            assert box and box["width"] > 100 and box["height"] > 50, figure.get_attribute(
                "data-plot"
            )
            assert box["x"] + box["width"] <= 1280

    def plots(self, name: str) -> list[dict[str, str]]:
        return self.page.eval_on_selector_all(
            f'figure.plot[data-plot="{name}"]', "els => els.map(e => ({...e.dataset}))"
        )

    def value(self, selector: str) -> tuple[str, str]:
        """(data-value, text) of the element."""
        el = self.page.query_selector(selector)
        assert el is not None, selector
        return el.get_attribute("data-value"), el.inner_text().strip()

    def screenshot(self, name: str) -> None:
        """The top of the page (1280 x 900) as ``docs/reports/NAME.png`` when asked for."""
        if SCREENSHOTS:
            Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
            self.page.evaluate("window.scrollTo(0, 0)")
            self.page.screenshot(path=str(Path(SCREENSHOTS) / f"{name}.png"), type="png")


def _same(shown: tuple[str, str], want, unit: str = "") -> None:
    raw, text = shown
    if isinstance(want, str):  # the JSON report spells non-finite numbers out
        want = float(want)
    if want is None:
        assert raw == "" and text == "-"
        return
    if isinstance(want, float) and not math.isfinite(want):
        assert math.isnan(float(raw)) if math.isnan(want) else float(raw) == want
    else:
        assert float(raw) == pytest.approx(want, rel=1e-12, abs=0)
    assert text == num(want, unit)


@pytest.mark.parametrize("which", ["tiny", "ready", "mixed"])
def test_check_html(browser, models, which, tmp_path, capsys):
    model = models[which]
    out = tmp_path / "check.html"
    assert main(["check", str(model), "--html", str(out)]) == 0
    capsys.readouterr()
    code, report = _run(capsys, ["check", str(model), "--json"])
    assert code == 0
    page = Page(browser, out)
    try:
        page.check_layout()
        if which == "mixed":  # the page as it opens, before the table is filtered and sorted
            page.screenshot("check")
        for key in ("gpu_ops", "total_ops", "cpu_ops", "gpu_partitions"):
            _same(page.value(f'#totals [data-metric="{key}"]'), report[key])
        _same(page.value('#totals [data-metric="internal_transfer_bytes"]'),
              report["internal_transfer_bytes"], "B")  # fmt: skip
        strip = page.plots("residency")
        main_ops = [op for op in report["ops"] if op["subgraph"] == 0]
        assert strip[0]["ops"] == str(len(main_ops))
        assert strip[0]["gpu"] == str(sum(op["on_gpu"] for op in main_ops))
        rows = page.page.query_selector_all("#ops tbody tr")
        assert len(rows) == len(report["ops"])
        on_gpu = [r.get_attribute("data-on-gpu") == "true" for r in rows]
        assert on_gpu == [op["on_gpu"] for op in report["ops"]]
        # filtering by an op type leaves exactly that type's rows
        op_type = report["ops"][-1]["type"]
        page.page.fill('input[data-filter-for="ops"]', op_type)
        visible = page.page.eval_on_selector_all(
            "#ops tbody tr", "rs => rs.filter(r => !r.hidden).length"
        )
        assert visible == sum(op_type in (op["type"] + op["why"]) for op in report["ops"])
        page.page.fill('input[data-filter-for="ops"]', "")
        # sorting by op index, twice: descending
        header = page.page.query_selector_all("#ops th[data-sort]")[1]
        header.click()
        header.click()
        order = page.page.eval_on_selector_all("#ops tbody tr", "rs => rs.map(r => +r.dataset.op)")
        assert order == sorted(order, reverse=True)
        if which == "mixed":
            assert len(report["ops"]) >= 50 and report["cpu_ops"] > 0
            assert int(strip[0]["boundaries"]) > 0 and int(strip[0]["partitions"]) >= 1
    finally:
        page.close()
    # without JavaScript every op is still there and visible
    bare = Page(browser, out, javascript=False)
    try:
        shown = bare.page.eval_on_selector_all(
            "#ops tbody tr", "rs => rs.filter(r => r.offsetParent !== null).length"
        )
        assert shown == len(report["ops"])
    finally:
        bare.close()


@pytest.mark.parametrize("which", ["tiny", "ready", "mixed"])
def test_rewrite_html(browser, models, which, tmp_path, capsys):
    out = tmp_path / f"{which}.html"
    code, report = _run(
        capsys,
        ["rewrite", str(models[which]), "-o", str(tmp_path / f"{which}.tflite"),
         "--html", str(out), "--json"],
    )  # fmt: skip
    assert code == 0
    # deeplabv3 is GPU-ready as it is: no rule fires and nothing is written
    assert bool(report["fired"]) == report["written"] == (which != "ready")
    page = Page(browser, out)
    try:
        page.check_layout()
        for when in ("before", "after"):
            static = report[f"static_{when}"]
            for key in ("gpu_ops", "total_ops", "gpu_partitions"):
                _same(page.value(f'tr[data-when="{when}"] [data-metric="{key}"]'), static[key])
        strips = {s["when"]: s for s in page.plots("residency")}
        for when in ("before", "after"):
            static = report[f"static_{when}"]
            assert strips[when]["gpu"] == str(static["gpu_ops"])
            assert strips[when]["ops"] == str(static["total_ops"])
        fired = {
            r.get_attribute("data-rule")
            for r in page.page.query_selector_all("#fired tr[data-rule]")
        }
        assert fired == {f["rule"] for f in report["fired"]}
        if report["fired"]:
            assert page.plots("rules-fired")[0]["fired"] == str(len(report["fired"]))
            for o in report["verification"]["outputs"]:
                row = f'#verify tr[data-output="{o["name"]}"]'
                _same(page.value(f'{row} [data-metric="max_abs"]'), o["max_abs"])
        if which == "tiny":
            page.screenshot("rewrite")
    finally:
        page.close()


_VALIDATE = {
    "tiny": ["-r", "cpu-fp16", "--localize", "--localize-on", "cpu-fp16"],
    "ready": [],
    "mixed": [],
}


@pytest.mark.parametrize("which", ["tiny", "ready", "mixed"])
def test_validate_html(browser, models, which, tmp_path, capsys):
    _validate_page(browser, models[which], _VALIDATE[which], tmp_path, capsys)


@pytest.mark.gpu
def test_validate_html_on_the_gpu(browser, models, gpu, tmp_path, capsys):
    """GPU fp16 and fp32 (the software GPU in CI) against the CPU, localized: the screenshot."""
    extra = ["-r", "gpu-fp16", "-r", "gpu-fp32", "--localize"]
    _validate_page(browser, models["ready"], extra, tmp_path, capsys, screenshot="validate")


@pytest.mark.parametrize("which", ["tiny", "ready", "mixed"])
def test_device_validate_html(browser, models, which, tmp_path, capsys):
    """``device validate --html`` writes validate's page: this machine as a device."""
    args = ["device", "validate", str(models[which]), "--device", "local", "-b", "cpu"]
    shot = "device-validate" if which == "tiny" else None
    _validate_page(browser, models[which], [], tmp_path, capsys, screenshot=shot, command=args)


def _validate_page(browser, model, extra, tmp_path, capsys, screenshot=None, command=None) -> None:
    """validate MODEL -r cpu -r cpu-ref EXTRA --html (or ``command``): the page against its
    --json."""
    out = tmp_path / "validate.html"
    args = command or ["validate", str(model), "-r", "cpu", "-r", "cpu-ref", *extra]
    code, report = _run(capsys, [*args, "-n", "2", "--html", str(out), "--json"])
    assert code == 0, report["findings"]
    page = Page(browser, out)
    try:
        page.check_layout()
        assert page.value("#verdict span")[1] == report["verdict"]
        for pair in report["comparisons"]:
            for o in pair["outputs"]:
                row = f'tr[data-pair="{pair["pair"]}"][data-output="{o["name"]}"]'
                for key in ("max_abs", "rmse", "cosine", "snr_db"):
                    _same(page.value(f'{row} [data-metric="{key}"]'), o["metrics"][key])
                _same(page.value(f'{row} [data-metric="bound"]'), o["bound"])
                hist = [
                    p for p in page.plots("error-histogram")
                    if p["pair"] == pair["pair"] and p["output"] == o["name"]
                ]  # fmt: skip
                assert len(hist) == 1
                assert int(hist[0]["elements"]) == o["metrics"]["elements"]
        outputs = {o["name"] for pair in report["comparisons"] for o in pair["outputs"]}
        assert {p["output"] for p in page.plots("max-abs")} == outputs
        pairs = " ".join(pair["pair"] for pair in report["comparisons"])
        for scatter in page.plots("error-vs-value"):
            assert scatter["pairs"] == pairs and int(scatter["points"]) > 0
        assert {p["output"] for p in page.plots("error-vs-value")} == outputs
        for row in report["speed"]["rows"]:  # compile / first / steady state, per runner
            cells = f'#speed tr[data-runner="{row["runner"]}"]'
            for key, unit in (("compile_s", "s"), ("first_s", "s"), ("p50_s", "s"), ("runs", "")):
                _same(page.value(f'{cells} [data-metric="{key}"]'), row[key], unit)
        loc = report.get("localization")
        if loc:
            along = page.plots("error-along-graph")[0]
            first = loc["first_divergent"]
            assert along["first"] == ("" if first is None else str(first["op_index"]))
            shown = page.page.get_attribute("#first-divergent", "data-op")
            assert shown == along["first"]
        if screenshot:
            page.screenshot(screenshot)
    finally:
        page.close()


@pytest.mark.parametrize("which", ["tiny", "ready", "mixed"])
def test_regress_check_html(browser, models, which, tmp_path, capsys):
    base = tmp_path / "baseline"
    record = ["regress", "record", str(models[which]), "-o", str(base), "-r", "cpu",
              "-r", "cpu-ref", "--no-probe", "--latency"]  # fmt: skip
    assert main(record) == 0
    capsys.readouterr()
    rewritten = tmp_path / f"{which}_rewritten.tflite"
    assert main(["rewrite", str(models[which]), "-o", str(rewritten), "--json"]) == 0
    capsys.readouterr()
    if not rewritten.exists():  # nothing to rewrite: check the model against itself
        rewritten = models[which]
    out = tmp_path / "regress.html"
    code, report = _run(
        capsys,
        ["regress", "check", str(rewritten), "-b", str(base), "--no-probe",
         "--latency-budget", "5", "--html", str(out), "--json"],
    )  # fmt: skip
    assert code in (0, 1)
    page = Page(browser, out)
    try:
        page.check_layout()
        cases = report["models"][0]["cases"]
        outputs = [c for c in cases if c["kind"] == "output"]
        for c in outputs:
            row = f'tr[data-case="{c["name"]}"]'
            _same(page.value(f'{row} [data-metric="max_abs"]'), c["details"]["metrics"]["max_abs"])
            _same(page.value(f'{row} [data-metric="bound"]'), c["details"]["bound"])
        assert page.plots("outputs-vs-baseline")[0]["cases"] == str(len(outputs))
        latency = [c for c in cases if c["kind"] == "latency" and c["details"]]
        assert latency and page.plots("latency")[0]["runners"] == str(len(latency))
        for c in latency:
            row = f'tr[data-case="{c["name"]}"]'
            _same(page.value(f'{row} [data-metric="median_seconds"]'),
                  c["details"]["median_seconds"], "s")  # fmt: skip
        residency = [c["name"] for c in cases if c["kind"] == "residency"]
        shown = page.page.eval_on_selector_all(
            'table[data-kind="residency"] tr[data-case]', "rs => rs.map(r => r.dataset.case)"
        )
        assert shown == residency
        if which == "tiny":
            page.screenshot("regress")
    finally:
        page.close()


def test_number_formatter():
    assert num(None) == "-"
    assert num(0.000123456) == "0.0001235"
    assert num(1234567) == "1.235e6"
    assert num(388) == "388"
    assert num(2_485_000, "B") == "2.485 MB"
    assert num(0.0163, "s") == "16.3 ms"
    assert num(float("inf"), "dB") == "inf dB"
    assert num(149.29042406449253, "dB") == "149.3 dB"
