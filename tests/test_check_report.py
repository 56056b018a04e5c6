"""``tflkit check``'s terminal report: grouped, short on every model, every row says why.

Also: native runtime log lines stay off the terminal unless ``--verbose``, and every command's
``--json`` names its schema, documented in docs/json.md.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tflkit.cli.main import EXIT_OK, main
from tflkit.jsonable import plain_fields
from tflkit.report.check_report import group_cpu_ops, index_ranges
from tflkit.report.check_terminal import MAX_LINES, render_check
from tflkit.rewriter.advice import check_path

DOCS = Path(__file__).resolve().parents[1] / "docs" / "json.md"
EXAMPLE = Path(__file__).resolve().parents[1] / "tflkit" / "examples" / "tiny_classifier.tflite"
#: Corpus models the runtime refuses to load (a usage error, exit 2), each with why. None today:
#: all 36 real and 37 generated models load; one that starts being refused must be named here.
REFUSED: dict[str, str] = {}
#: The least number of models the 40-line test must really check (75 today).
MIN_CHECKED = 73


def _render(report: Any, *, all_ops: bool = False) -> str:
    buffer = io.StringIO()
    render_check(report, Console(file=buffer, width=120, highlight=False), all_ops=all_ops)
    return buffer.getvalue()


def test_index_ranges() -> None:
    assert index_ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    assert index_ranges([3]) == "3"
    assert index_ranges(list(range(0, 40, 2)), limit=3) == "0, 2, 4, ..."


def test_every_corpus_model_fits_in_40_lines(world_models: dict[str, Path], corpus: Any) -> None:
    """The default report of every real and generated model: at most 40 lines at 120 columns,
    every op off the GPU in exactly one group, no group without a why; --all lists every op."""
    paths = {**world_models, **{f"generated/{n}": corpus.path(n) for n in corpus.names()}}
    too_long: dict[str, int] = {}
    refused: dict[str, str] = {}
    checked = 0
    for name, path in paths.items():
        try:
            report, _ = check_path(path)
        except Exception as exc:  # a model the runtime refuses to load is a usage error
            assert getattr(exc, "exit_code", 3) == 2, f"{name}: {exc!r}"
            refused[name] = str(exc)
            continue
        checked += 1
        text = _render(report)
        if text.count("\n") > MAX_LINES:
            too_long[name] = text.count("\n")
        groups = group_cpu_ops(report)
        grouped = sorted((g.subgraph, i) for g in groups for i in g.indices)
        assert grouped == sorted((o.subgraph, o.index) for o in report.offending_ops), name
        assert all(g.why.strip() for g in groups), name
        assert all(op.why.strip() for op in report.ops), name
        # OpCheck.to_json is written out for speed: the fields, in order, then why
        assert all(op.to_json() == {**plain_fields(op), "why": op.why} for op in report.ops)
        assert all(list(op.to_json()) == [*plain_fields(op), "why"] for op in report.ops)
        if report.total_ops <= 120:  # rendering every op of the big ones takes seconds
            full = _render(report, all_ops=True)
            assert all(f"{op.subgraph}:{op.index} " in full for op in report.ops), name
    assert not too_long, too_long
    assert sorted(refused) == sorted(REFUSED), f"refused, not in REFUSED: {refused}"
    assert checked == len(paths) - len(REFUSED) >= MIN_CHECKED, (checked, len(paths))


def test_a_failing_compile_names_the_fatal_op_and_groups_the_rest(
    world_models: dict[str, Path],
) -> None:
    """basic-pitch's nmp (222 ops): RESHAPEs whose shape is computed from data (a PACK of a
    sliced SHAPE and a constant stacked twice, which compiles) make compilation fail, as the
    accelerator's own compile error says; the report names them with their fixes and does not
    list 222 rows."""
    report, _ = check_path(world_models["basic-pitch/nmp"])
    assert not report.compiles
    text = _render(report)
    assert text.count("\n") <= MAX_LINES
    assert "fatal DYNAMIC_SHAPE (subgraph 0, op 172)" in text
    assert "reshape_static_shape" in text
    (fatal,) = [op for op in report.ops if op.index == 172]
    assert fatal.fix is not None and fatal.fix.rule == "reshape_static_shape", fatal.fix
    assert re.search(r"\d+ more group\(s\), \d+ op\(s\) on the CPU not shown", text)
    blocked = [op for op in report.ops if op.status == "blocked"]
    assert blocked and all("compilation of the model fails" in op.why for op in blocked)


_NATIVE = """
import sys
from ai_edge_litert.interpreter import Interpreter
from tflkit.cli.output import native_log
with native_log(verbose=sys.argv[2] == "verbose"):
    Interpreter(model_path=sys.argv[1]).allocate_tensors()  # XNNPACK says hello on fd 2
    print("tflkit's own line", file=sys.stderr)
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_native_log_lines_only_with_verbose(verbose: bool) -> None:
    """LiteRT's "Created TensorFlow Lite XNNPACK delegate" line (native code writing to fd 2,
    once per process: hence a process per case) reaches stderr only when verbose; tflkit's own
    stderr always does. Every command runs inside ``native_log`` (tflkit.cli.main)."""
    mode = "verbose" if verbose else "quiet"
    done = subprocess.run(
        [sys.executable, "-c", _NATIVE, str(EXAMPLE), mode],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "tflkit's own line" in done.stderr
    assert ("Created TensorFlow Lite XNNPACK delegate" in done.stderr) is verbose, done.stderr


@pytest.mark.gpu
def test_verbose_shows_the_accelerators_own_log(gpu: Any) -> None:
    """The probe's child process logs natively too: with --verbose its log is shown."""
    quiet = _tflkit("check", "--probe", str(EXAMPLE))
    loud = _tflkit("check", "--probe", str(EXAMPLE), "--verbose")
    assert quiet.returncode == loud.returncode == EXIT_OK
    assert "Selected adapter" not in quiet.stderr and "INFO:" not in quiet.stderr
    assert "Selected adapter" in loud.stderr


def _tflkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tflkit", *args], capture_output=True, text=True, timeout=300
    )


def test_verbose_anywhere_and_errors_still_shown(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(EXAMPLE), "--verbose"]) == EXIT_OK
    assert main(["--verbose", "check", "/no/such/model.tflite"]) == 2
    assert capsys.readouterr().err.startswith("tflkit: error:")


def test_every_json_report_names_a_documented_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tflkit.report import convert_report, regress_report, validate_report
    from tflkit.report.check_report import CHECK_SCHEMA
    from tflkit.report.inspect_report import INSPECT_SCHEMA
    from tflkit.report.rewrite_report import REWRITE_SCHEMA

    documented = set(re.findall(r"^## `(tflkit\.[\w-]+/\d+)`", DOCS.read_text(), re.MULTILINE))
    for schema in (
        CHECK_SCHEMA,
        INSPECT_SCHEMA,
        REWRITE_SCHEMA,
        validate_report.SCHEMA,
        convert_report.SCHEMA,
        regress_report.REGRESS_SCHEMA,
    ):
        assert schema in documented, f"{schema} is not documented in docs/json.md"
    out = tmp_path / "out.tflite"
    for args, schema in (
        (["inspect", str(EXAMPLE)], INSPECT_SCHEMA),
        (["check", str(EXAMPLE)], CHECK_SCHEMA),
        (["rewrite", str(EXAMPLE), "-o", str(out)], REWRITE_SCHEMA),
        (
            ["validate", str(EXAMPLE), "--runner", "cpu", "--runner", "cpu-ref", "-n", "1"],
            validate_report.SCHEMA,
        ),
    ):
        assert main([*args, "--json"]) == EXIT_OK, args
        assert json.loads(capsys.readouterr().out)["schema"] == schema
