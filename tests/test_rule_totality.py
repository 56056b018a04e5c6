"""Every rule's ``pattern``/``check`` and every constraint predicate is total.

They run over every op of every subgraph of every corpus model (generated and, when the corpus
helper provides them, the world models) and over
generated edge cases: every builtin op type with no inputs, with omitted (None) inputs, with
scalar, int8-quantized, int64, bool, rank-6 and dynamic tensors, with and without options. Any
exception is a failure. A second part rewrites every corpus model and checks that the pass
manager converges: no rule fires on an op it produced itself, and the step count stays far below
the limit.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tflkit import ir
from tflkit.compat.signature import OpSignature
from tflkit.compat.static import check_signature
from tflkit.compat.targets import TARGETS
from tflkit.rewriter.passes import DEFAULT_MAX_STEPS
from tflkit.rewriter.rule import ModelPass, OpRewrite
from tflkit.rewriter.run import catalog, rewrite_model

fb = ir.schema.fb
RULES = list(catalog())


def _predicates() -> list[tuple[str, object]]:
    found: dict[int, tuple[str, object]] = {}
    for target in TARGETS.values():
        for table in (target.rules, target.custom_rules):
            for op_type, rule in table.items():
                for check in rule.checks:
                    name = getattr(check, "__qualname__", repr(check))
                    found.setdefault(id(check), (f"{target.name}:{op_type}:{name}", check))
    return list(found.values())


PREDICATES = _predicates()


#: Op types the edge cases run every predicate of every table on (predicates look at tensors,
#: rarely at the op type; these cover the ones that do). Their own tables run on every op.
PREDICATE_SAMPLE = frozenset({"ADD", "EQUAL", "CAST", "CONV_2D", "STRIDED_SLICE", "PACK", "MEAN"})


def _exercise(op: ir.Op, predicates: bool = True) -> list[str]:
    """Run everything that must be total on ``op``; returns the failures as text."""
    failures = []
    for rule in RULES:
        try:
            if isinstance(rule, OpRewrite) and rule.pattern(op):
                if op.type not in rule.fixes and not rule.any_op_type:  # the index holds
                    failures.append(f"rule {rule.name} takes {op!r}, not of its fixes")
                rule.match(op)
            elif isinstance(rule, ModelPass) and op.subgraph is not None and op.subgraph.model:
                rule.match_model(op.subgraph.model)
        except Exception as exc:  # the property under test: nothing raises
            failures.append(f"rule {rule.name} on {op!r}: {type(exc).__name__}: {exc}")
    try:
        sig = OpSignature.from_op(op)
    except Exception as exc:
        return [*failures, f"OpSignature of {op!r}: {type(exc).__name__}: {exc}"]
    for target in TARGETS:
        try:
            check_signature(sig, target)
        except Exception as exc:
            failures.append(f"{target} verdict on {op!r}: {type(exc).__name__}: {exc}")
    for name, check in PREDICATES if predicates else ():
        try:
            check(sig)  # type: ignore[operator]
        except Exception as exc:
            failures.append(f"predicate {name} on {op!r}: {type(exc).__name__}: {exc}")
    return failures


# --- generated edge cases -----------------------------------------------------------------------

_INT8_Q = dict(scale=[0.05], zeroPoint=[-3])


def _quant() -> object:
    q = fb.QuantizationParametersT()
    q.scale, q.zeroPoint = list(_INT8_Q["scale"]), list(_INT8_Q["zeroPoint"])
    return q


def _tensor(graph: ir.Subgraph, kind: str, i: int) -> ir.Tensor | None:
    """One input of an edge-case op, by kind."""
    name = f"{kind}{i}"
    if kind == "none":
        return None
    if kind == "scalar_f32":
        return graph.add_constant(np.array(1.5, np.float32), name)
    if kind == "int8_q":
        return graph.new_tensor(name, (1, 4, 4, 3), np.int8, quantization=_quant())
    if kind == "int8_q_const":
        values = np.arange(12, dtype=np.int8).reshape(3, 4)
        return graph.add_constant(values, name, quantization=_quant())
    if kind == "int64_const":
        return graph.add_constant(np.array([0, 1, -1], np.int64), name)
    if kind == "int32_const":
        return graph.add_constant(np.array([1, 2, 3, 4], np.int32), name)
    if kind == "empty_int32":
        return graph.new_tensor(name, (0,), np.int32)
    if kind == "bool":
        return graph.new_tensor(name, (2, 3), np.bool_)
    if kind == "rank6":
        return graph.new_tensor(name, (1, 2, 1, 3, 1, 2), np.float32)
    if kind == "dynamic":
        t = graph.new_tensor(name, (1, 1, 8), np.float32)
        t.shape_signature = (-1, -1, 8)
        return t
    if kind == "f16_const":
        return graph.add_constant(np.ones((2, 2), np.float16), name)
    if kind == "variable":
        t = graph.new_tensor(name, (1, 4), np.float32)
        t.is_variable = True
        return t
    return graph.new_tensor(name, (1, 8, 8, 4), np.float32)


#: Input layouts every op type is tried with (None marks an omitted optional input).
LAYOUTS: tuple[tuple[str, ...], ...] = (
    (),
    ("none",),
    ("none", "none", "none"),
    ("f32", "none", "int32_const"),
    ("scalar_f32",),
    ("scalar_f32", "scalar_f32"),
    ("int8_q", "int8_q_const", "none"),
    ("int8_q", "int8_q"),
    ("int64_const", "int64_const", "int64_const", "int64_const"),
    ("empty_int32", "empty_int32"),
    ("bool", "bool", "bool"),
    ("rank6", "int32_const"),
    ("rank6", "rank6"),
    ("dynamic", "empty_int32"),
    ("f16_const", "f32"),
    ("variable", "f32", "none", "f32", "f32"),
    ("f32", "f32", "f32", "f32", "f32", "f32"),
)
#: Outputs: none, a scalar, int8 quantized, a 6-D float.
OUTPUTS: tuple[tuple[tuple[int, ...], object, bool], ...] = (
    ((), np.float32, False),
    ((1, 4, 4, 3), np.int8, True),
    ((1, 2, 1, 3, 1, 2), np.float32, False),
)


def _op_types() -> list[str]:
    names = [n for n in dir(fb.BuiltinOperator) if n.isupper() and not n.startswith("PLACEHOLDER")]
    return sorted(names)


def _edge_models() -> Iterator[ir.Model]:
    """One model per op type: that op in every input layout, with and without outputs."""
    for op_type in _op_types():
        model = ir.Model(description="edge cases")
        graph = model.add_subgraph("main")
        model.add_subgraph("body")  # a second subgraph for control-flow options to point at
        for n, (layout, outputs) in enumerate(
            itertools.product(LAYOUTS, ((), *((o,) for o in OUTPUTS)))
        ):
            inputs = [_tensor(graph, kind, n * 10 + i) for i, kind in enumerate(layout)]
            outs = [
                graph.new_tensor(
                    f"out{n}", shape, dtype, quantization=_quant() if quantized else None
                )
                for shape, dtype, quantized in outputs
            ]
            opcode = ir.OpCode.builtin(op_type, 1 + n % 3)
            graph.add_op(ir.Op(opcode, inputs, outs))
        yield model


@pytest.fixture(scope="module")
def corpus_paths(corpus, world_models: dict[str, Path]) -> list[Path]:
    """Every generated model and every real third-party model of the corpus."""
    return [corpus.path(name) for name in corpus.names()] + list(world_models.values())


def test_edge_cases_are_total() -> None:
    failures: list[str] = []
    ops = 0
    for model in _edge_models():
        for op in model.iter_ops():
            ops += 1
            failures.extend(_exercise(op, predicates=op.type in PREDICATE_SAMPLE))
    assert ops == len(_op_types()) * len(LAYOUTS) * (len(OUTPUTS) + 1)
    assert failures == [], "\n".join(failures[:30]) + f"\n... {len(failures)} failures"


def test_corpus_ops_are_total(corpus_paths: list[Path]) -> None:
    failures: list[str] = []
    ops = 0
    for path in corpus_paths:
        model = ir.load(path)
        for op in model.iter_ops():
            ops += 1
            failures.extend(f"{path.name}: {f}" for f in _exercise(op))
    assert ops > 1000
    assert failures == [], "\n".join(failures[:30]) + f"\n... {len(failures)} failures"


def test_rewrite_converges_on_every_corpus_model(corpus_paths: list[Path]) -> None:
    """No rule fires on what it produced; steps stay far below the limit; nothing raises."""
    problems = []
    for path in corpus_paths:
        outcome = rewrite_model(path.read_bytes(), check=False, label=str(path))
        passes = outcome.passes
        again = [f for f in passes.fired if f.on_own_output]
        if again:
            problems.append(f"{path.name}: {again[0].rule} fired on its own output")
        if passes.steps > DEFAULT_MAX_STEPS // 10:
            problems.append(f"{path.name}: {passes.steps} steps")
        assert ir.verify_model(outcome.model) == [], path.name
    assert problems == []
