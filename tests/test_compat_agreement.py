"""Static verdicts (``litert-gpu``) against the real GPU accelerator, op by op.

Every generated case of ``tests/compat_models.py``, every TensorFlow corpus model and every real
model is compiled on the accelerator (software GPU in CI); the per-op agreement is printed,
recorded in the test report and must be at least 95 %. Every disagreement must be listed in
``ALLOWED`` (the Disagreements table of ``docs/compat-rules.md``), so a new one fails.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from tests.compat_models import CASE_BY_NAME, CASES, CompatCase
from tests.corpus.generate import GENERATORS
from tflkit import ir
from tflkit.compat.agreement import (
    Agreement,
    Disagreement,
    combine,
    compare,
    probe_op_verdicts,
)
from tflkit.compat.static import analyze
from tflkit.gpu.probe import probe, probe_many

TARGET = "litert-gpu"
#: Ops of models the probe cannot speak about (compile errors, crashes): 19 of 1,366 when the
#: corpus was measured (docs/compat-rules.md). Each one is covered by ``compile_mismatch``
#: (the static check predicted the failure); the bound stops a new blind spot from growing
#: silently.
MAX_UNKNOWN_OPS = 25
DOC = Path(__file__).resolve().parents[1] / "docs" / "compat-rules.md"

#: (model, subgraph, op index, op type) -> why; mirrors docs/compat-rules.md "Disagreements".
ALLOWED: dict[tuple[str, int, int, str], str] = {}


def _target_index(case: CompatCase, model: ir.Model) -> int:
    return case.target_op % len(model.main.ops)


def _load(case: CompatCase) -> ir.Model:
    return ir.load(ir.dumps(case.build()))  # what the accelerator reads, round-tripped


def test_generated_cases_hit_their_rule() -> None:
    """Each case's op gets the expected static verdict; both verdicts occur in every family
    that has a neighbour, so a rule that always says yes (or no) fails here."""
    assert len(CASES) >= 60 and len(CASE_BY_NAME) == len(CASES)
    wrong = []
    for case in CASES:
        model = _load(case)
        report = analyze(model, TARGET)
        index = _target_index(case, model)
        verdict = next(v for v in report.verdicts if (v.subgraph_index, v.op_index) == (0, index))
        if verdict.ok != case.expect_ok:
            wrong.append(f"{case.name}: {verdict.op_type} ok={verdict.ok} {verdict.codes}")
    assert not wrong, "\n".join(wrong)
    families: dict[str, set[bool]] = {}
    for case in CASES:
        families.setdefault(case.family, set()).add(case.expect_ok)
    one_sided = {f for f, seen in families.items() if len(seen) < 2}
    assert one_sided <= {"CUSTOM_OP", "FLEX_OP"}, one_sided


#: One row of the Disagreements table: model, subgraph, op, op type, why.
_ROW = re.compile(r"\| `([\w.-]+)` \| (\d+) \| (\d+) \| (\w+) \| (.+?) \|")
_HEADER = ("| Model | Subgraph | Op | Op type | Why |", "|---|---|---|---|---|")


def _documented_disagreements(text: str) -> dict[tuple[str, int, int, str], str]:
    """The rows of the "Disagreements" table of ``docs/compat-rules.md``; raises
    AssertionError when the table is missing or a row does not read as one."""
    assert "## Disagreements" in text
    section = text.split("## Disagreements", 1)[1].split("\n## ", 1)[0]
    lines = [line.strip() for line in section.splitlines()]
    start = lines.index(_HEADER[0])  # ValueError: no table at all
    assert lines[start + 1] == _HEADER[1]
    rows: dict[tuple[str, int, int, str], str] = {}
    for line in itertools.takewhile(lambda x: x.startswith("|"), lines[start + 2 :]):
        found = _ROW.fullmatch(line)
        assert found is not None, f"unreadable row of the Disagreements table: {line}"
        model, subgraph, op, op_type, why = found.groups()
        rows[(model, int(subgraph), int(op), op_type)] = why
    return rows


def test_allow_list_mirrors_the_documented_table() -> None:
    assert _documented_disagreements(DOC.read_text()) == ALLOWED


def test_the_table_reader_reads_rows_and_refuses_broken_ones() -> None:
    """The reader behind the mirror test sees a row, so an empty table is read as empty."""
    row = "| `mtcnn_pnet` | 0 | 7 | PRELU | the accelerator takes it |"
    text = "## Disagreements\n\n" + "\n".join([*_HEADER, row]) + "\n\n## Next\n| x |\n"
    expected = {("mtcnn_pnet", 0, 7, "PRELU"): "the accelerator takes it"}
    assert _documented_disagreements(text) == expected
    with pytest.raises(AssertionError, match="unreadable row"):
        _documented_disagreements(text.replace("| 7 |", "| seven |"))
    with pytest.raises(ValueError):
        _documented_disagreements("## Disagreements\n\nNo table.\n")


@pytest.mark.gpu
def test_static_verdicts_agree_with_the_accelerator(
    gpu: str, corpus, real_models: list[Path], tmp_path_factory, record_property
) -> None:
    cache = tmp_path_factory.mktemp("probe-cache")  # cold on purpose: CI starts cold
    named: list[tuple[str, ir.Model, bytes]] = []
    for case in CASES:
        if not case.crashes:
            model = case.build()
            data = ir.dumps(model)
            named.append((case.name, ir.load(data), data))
    for name in GENERATORS:
        data = corpus.path(name).read_bytes()
        named.append((name, ir.load(data), data))
    for path in real_models:
        data = path.read_bytes()
        named.append((path.stem, ir.load(data), data))

    results = probe_many([data for _, _, data in named], cache_dir=cache)
    per_model: list[Agreement] = []
    found: list[tuple[str, Disagreement]] = []
    compile_mismatch: list[str] = []
    count_mismatch: list[str] = []
    target_wrong: list[str] = []
    for (name, model, _), result in zip(named, results, strict=True):
        report = analyze(model, TARGET)
        probed = probe_op_verdicts(model, result)
        agreement = compare(list(report.verdicts), probed)
        per_model.append(agreement)
        found += [(name, d) for d in agreement.disagreements]
        count_mismatch += [f"{name}: {m}" for m in probed.count_mismatches]
        if not result.crashed and report.compiles != result.compiled:
            compile_mismatch.append(f"{name}: static compiles={report.compiles}, {result.status}")
        if result.crashed and not any(i.code == "CRASH" for i in report.issues):
            compile_mismatch.append(f"{name}: the accelerator crashed, static predicted no crash")
        case = CASE_BY_NAME.get(name)
        if case is not None:
            seen = probed[(0, _target_index(case, model))].on_gpu
            if seen is not None and seen != case.expect_ok:
                target_wrong.append(f"{name}: accelerator on_gpu={seen}")

    total = combine(per_model)
    figure = (
        f"litert-gpu static vs accelerator: {total.agree}/{total.total} ops agree "
        f"({total.rate:.2%}) over {len(named)} models; {total.unknown} ops the probe could not "
        f"speak about (compile errors, crashes)"
    )
    print("\n" + figure)
    for name, d in found:
        print(f"  disagreement {name} sg{d.subgraph} op{d.op_index} {d.op_type}: "
              f"static ok={d.static_ok}, accelerator on_gpu={d.probe_on_gpu}")  # fmt: skip
    record_property("agreement", figure)
    record_property("agreement_rate", f"{total.rate:.4f}")

    assert total.total >= 1000, figure  # 1,366 today, 387 of them in the real models
    assert total.unknown <= MAX_UNKNOWN_OPS, figure
    undocumented = [
        f"{name} sg{d.subgraph} op{d.op_index} {d.op_type}: static={d.static_reasons} "
        f"accelerator={d.probe_reasons}"
        for name, d in found
        if (name, d.subgraph, d.op_index, d.op_type) not in ALLOWED
    ]
    assert not undocumented, "undocumented disagreements:\n" + "\n".join(undocumented)
    assert not compile_mismatch, "\n".join(compile_mismatch)
    assert not count_mismatch, "\n".join(count_mismatch)
    assert not target_wrong, "\n".join(target_wrong)


@pytest.mark.gpu
@pytest.mark.parametrize("name", [c.name for c in CASES if c.crashes])
def test_crashing_forms_are_predicted_and_located(gpu: str, name: str, tmp_path) -> None:
    case = CASE_BY_NAME[name]
    model = _load(case)
    report = analyze(model, TARGET)
    assert not report.compiles and any(i.code == "CRASH" for i in report.issues)
    result = probe(ir.dumps(model), cache_dir=tmp_path, timeout=60)
    assert result.crashed, (result.status, result.error)
    assert result.crash_site is not None, result.crash_note
    assert result.crash_site.op_index == _target_index(case, model)
    assert all(v.on_gpu is None for v in probe_op_verdicts(model, result).values())
