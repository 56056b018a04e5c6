"""The structural verifier: sound models pass, each kind of damage is named in one line.

Structured damage is made through the schema object API (as a hostile producer would), raw
damage with hypothesis; the CLI turns a rejection into one ``tflkit: error:`` line and exit 2,
and a model that crashes the CPU interpreter is refused before tflkit runs it in its process.
"""

from __future__ import annotations

import re
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ai_edge_litert import schema_py_generated as fb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest_corpus import Corpus
from tests.fuzz.mutators import pack_model, unpack_model
from tflkit import ir
from tflkit.errors import ModelLoadError
from tflkit.ir.structure import StructureError, max_tensor_bytes, verify_bytes
from tflkit.proc.cpu_smoke import NativeCrashError, ensure_cpu_safe

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "tflkit" / "examples" / "tiny_classifier.tflite"


def _message(data: bytes) -> str:
    with pytest.raises(StructureError) as info:
        verify_bytes(data, "m.tflite")
    message = str(info.value)
    assert message.startswith("m.tflite: ") and "\n" not in message, message
    return message


# --------------------------------------------------------------------------------------------
# sound models pass
# --------------------------------------------------------------------------------------------
def test_every_corpus_model_passes(corpus: Corpus, real_models: list[Path]) -> None:
    paths = [corpus.path(n) for n in corpus.names()] + real_models + [EXAMPLE]
    for path in paths:
        verify_bytes(path.read_bytes(), str(path))


# --------------------------------------------------------------------------------------------
# structured damage, one message each
# --------------------------------------------------------------------------------------------
def _op_reads_own_output(m: Any) -> None:
    op = m.subgraphs[0].operators[1]
    op.inputs = [int(op.outputs[0]), *[int(i) for i in op.inputs[1:]]]


def _op_reads_later_output(m: Any) -> None:
    ops = m.subgraphs[0].operators
    ops[0].inputs = [int(ops[2].outputs[0]), *[int(i) for i in ops[0].inputs[1:]]]


def _huge_dimension(m: Any) -> None:
    m.subgraphs[0].tensors[0].shape = [2**31 - 1, 2**31 - 1]


def _negative_dimension(m: Any) -> None:
    m.subgraphs[0].tensors[0].shape = [1, -3]


def _constant_too_short(m: Any) -> None:
    tensor = next(t for t in m.subgraphs[0].tensors if m.buffers[t.buffer].data is not None)
    m.buffers[tensor.buffer].data = m.buffers[tensor.buffer].data[:3]


def _unknown_tensor_type(m: Any) -> None:
    m.subgraphs[0].tensors[0].type = 77


def _unknown_builtin(m: Any) -> None:
    m.operatorCodes[0].builtinCode = 4000


def _nameless_custom_op(m: Any) -> None:
    m.operatorCodes[0].builtinCode = 32
    m.operatorCodes[0].deprecatedBuiltinCode = 32
    m.operatorCodes[0].customCode = None


def _options_type_unknown(m: Any) -> None:
    m.subgraphs[0].operators[0].builtinOptionsType = 250


def _foreign_options(m: Any) -> None:
    op = m.subgraphs[0].operators[0]  # CONV_2D
    op.builtinOptionsType = fb.BuiltinOptions.Pool2DOptions
    op.builtinOptions = fb.Pool2DOptionsT()


def _no_subgraph(m: Any) -> None:
    m.subgraphs = []
    m.signatureDefs = None


DAMAGE: list[tuple[Callable[[Any], None], str]] = [
    (_op_reads_own_output, r"op 1 input 0: reads its own output \(a cycle\)"),
    (_op_reads_later_output, r"op 0 input 0: tensor \d+ is produced later, by op 2"),
    (_huge_dimension, r"tensor 0: shape \[2147483647, 2147483647\] needs .* of memory"),
    (_negative_dimension, r"tensor 0: shape \[1, -3\] has a negative dimension"),
    (_constant_too_short, r"constant data of 3 bytes does not fit its shape"),
    (_unknown_tensor_type, r"tensor 0: unknown tensor type 77"),
    (_unknown_builtin, r"operator_codes\[0\]: unknown builtin operator code 4000"),
    (_nameless_custom_op, r"custom operator without a name"),
    (_options_type_unknown, r"op 0 \(\w+\): unknown BuiltinOptions type 250"),
    (_foreign_options, r"op 0 \(CONV_2D\): builtin options are Pool2DOptions, not the op's"),
    (_no_subgraph, r"the model has no subgraph"),
]


@pytest.mark.parametrize("damage, expected", DAMAGE, ids=[d.__name__[1:] for d, _ in DAMAGE])
def test_damage_is_named(damage: Callable[[Any], None], expected: str) -> None:
    model = unpack_model(EXAMPLE.read_bytes())
    damage(model)
    message = _message(pack_model(model))
    assert re.search(expected, message), message


def test_subgraph_calling_itself(corpus: Corpus) -> None:
    model = unpack_model(corpus.path("if_cond").read_bytes())
    ops = model.subgraphs[0].operators
    op = next(o for o in ops if hasattr(o.builtinOptions, "thenSubgraphIndex"))
    op.builtinOptions.thenSubgraphIndex = 0
    assert "subgraphs call each other in a cycle (0 -> 0)" in _message(pack_model(model))


def test_sparsity_that_does_not_fit_the_shape(corpus: Corpus) -> None:
    model = unpack_model(corpus.path("sparse_weights").read_bytes())
    tensor = next(t for t in model.subgraphs[0].tensors if t.sparsity is not None)
    tensor.shape = [*tensor.shape, 0]  # DENSIFY of this segfaulted LiteRT (fuzz seed 1, #926)
    assert "sparsity describes 2 traversed dims" in _message(pack_model(model))


def test_raw_damage_is_located() -> None:
    data = bytearray(EXAMPLE.read_bytes())
    assert "truncated or corrupt" in _message(bytes(data[:200]))
    data[0:4] = (len(data) + 10).to_bytes(4, "little")
    assert "root table: table at byte" in _message(bytes(data))


def test_limit_follows_the_address_space_limit() -> None:
    script = (
        "import resource\n"
        "hard = resource.getrlimit(resource.RLIMIT_AS)[1]\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 << 30, hard))\n"
        "from tflkit.ir.structure import max_tensor_bytes\n"
        "print(max_tensor_bytes())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert int(done.stdout) == 3 << 30
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    assert max_tensor_bytes() <= (soft if soft > 0 else max_tensor_bytes())


# --------------------------------------------------------------------------------------------
# hypothesis: any byte damage gives a pass or one StructureError, and what passes loads cleanly
# --------------------------------------------------------------------------------------------
SMALL = EXAMPLE.read_bytes()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(
        st.tuples(st.integers(0, len(SMALL) - 1), st.integers(0, 255)), min_size=1, max_size=6
    ),
    cut=st.one_of(st.none(), st.integers(0, len(SMALL))),
)
def test_any_damage_is_rejected_cleanly_or_loads(
    edits: list[tuple[int, int]], cut: int | None
) -> None:
    data = bytearray(SMALL)
    for position, value in edits:
        data[position] = value
    damaged = bytes(data[:cut] if cut is not None else data)
    try:
        verify_bytes(damaged, "m")
    except StructureError as exc:
        assert str(exc).startswith("m: ") and "\n" not in str(exc)
        return
    try:
        ir.load(damaged)
    except ModelLoadError as exc:
        assert "\n" not in str(exc)


# --------------------------------------------------------------------------------------------
# the CLI and the native guard
# --------------------------------------------------------------------------------------------
def test_cli_names_what_and_where(tmp_path: Path) -> None:
    model = unpack_model(EXAMPLE.read_bytes())
    _op_reads_own_output(model)
    bad = tmp_path / "cycle.tflite"
    bad.write_bytes(pack_model(model))
    for command in (["inspect"], ["check"], ["rewrite", "-o", str(tmp_path / "o.tflite")]):
        done = subprocess.run(
            [sys.executable, "-m", "tflkit", command[0], str(bad), *command[1:]],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [
            f"tflkit: error: {bad}: corrupt TFLite model: subgraph 0 op 1 input 0: reads its "
            "own output (a cycle)"
        ]
    assert not (tmp_path / "o.tflite").exists()


def _split_with_float_axis(corpus: Corpus) -> bytes:
    """A sound flatbuffer whose op became SPLIT: LiteRT's SPLIT segfaults preparing it."""
    model = unpack_model(corpus.path("sparse_weights").read_bytes())
    for code in model.operatorCodes:
        code.builtinCode = code.deprecatedBuiltinCode = 49  # SPLIT
    for op in model.subgraphs[0].operators:  # no options: the verifier accepts the flatbuffer
        op.builtinOptionsType, op.builtinOptions = 0, None
    return pack_model(model)


def test_native_crash_is_refused_not_suffered(corpus: Corpus, tmp_path: Path) -> None:
    data = _split_with_float_axis(corpus)
    verify_bytes(data)  # structurally sound: only running it shows the crash
    with pytest.raises(NativeCrashError, match=r"crashes on this model \(killed by signal"):
        ensure_cpu_safe(data, "split.tflite")
    path = tmp_path / "split.tflite"
    path.write_bytes(data)
    done = subprocess.run(
        [sys.executable, "-m", "tflkit", "validate", str(path), "-r", "cpu"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "the LiteRT CPU interpreter crashes on this model" in last, done.stderr


def test_file_larger_than_memory_is_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.tflite"
    with open(big, "wb") as f:  # sparse: no disk used
        f.truncate(6 << 30)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, resource.RLIM_INFINITY))

    done = subprocess.run(
        [sys.executable, "-m", "tflkit", "inspect", str(big)],
        cwd=REPO,
        capture_output=True,
        text=True,
        preexec_fn=limit,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"tflkit: error: {big}: 6.0 GiB, more than the 4.0 GiB of memory this process may use"
    )
