"""Mutations of real ``.tflite`` files: raw bytes and structured edits through the schema API.

Every mutator takes a seeded ``random.Random``, the model's bytes and a donor model's bytes (for
splices) and returns the mutant with a one-line description of what it did. Structured mutators
unpack the model with the generated object API (``ModelT``), break one invariant the way a
hostile or buggy producer would, and pack it again, so the damage is reachable past the
flatbuffer layer: huge dimensions, negative or dangling indices, cycles, missing buffers,
opcodes out of range, subgraphs that call themselves.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from typing import Any

import flatbuffers
from ai_edge_litert import schema_py_generated as fb

Mutant = tuple[bytes, str]
Mutator = Callable[[random.Random, bytes, bytes], Mutant]

_INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF)
_INTERESTING_U32 = (0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE, 0x10000)


class Skip(Exception):
    """The mutator does not apply to this model (e.g. no constant tensor); pick another."""


# --------------------------------------------------------------------------------------------
# raw bytes
# --------------------------------------------------------------------------------------------
def _head_end(data: bytes) -> int:
    """End of the table region: buffers' data usually follows it, so target the head."""
    try:
        model = fb.Model.GetRootAs(data, 0)
        starts = [
            model.Buffers(i)._tab.Vector(4)
            for i in range(model.BuffersLength())
            if not model.Buffers(i).DataIsNone()
        ]
        return max(64, min(starts, default=len(data)))
    except Exception:
        return len(data)


def bit_flips(rng: random.Random, data: bytes, _donor: bytes) -> Mutant:
    out = bytearray(data)
    end = _head_end(data)
    flips = rng.randint(1, 8)
    for _ in range(flips):
        pos = rng.randrange(end)
        out[pos] ^= 1 << rng.randrange(8)
    return bytes(out), f"{flips} bit flip(s) in the first {end} bytes"


def byte_sets(rng: random.Random, data: bytes, _donor: bytes) -> Mutant:
    out = bytearray(data)
    end = _head_end(data)
    count = rng.randint(1, 4)
    for _ in range(count):
        out[rng.randrange(end)] = rng.choice(_INTERESTING_BYTES)
    return bytes(out), f"{count} byte(s) set to boundary values"


def wrong_offset(rng: random.Random, data: bytes, _donor: bytes) -> Mutant:
    out = bytearray(data)
    end = _head_end(data) - 4
    pos = rng.randrange(0, max(4, end), 4)
    (old,) = struct.unpack_from("<I", out, pos)
    new = rng.choice([*_INTERESTING_U32, old + rng.randint(-64, 64) & 0xFFFFFFFF, len(data)])
    struct.pack_into("<I", out, pos, new & 0xFFFFFFFF)
    return bytes(out), f"u32 at byte {pos}: {old} -> {new & 0xFFFFFFFF}"


def truncate(rng: random.Random, data: bytes, _donor: bytes) -> Mutant:
    size = rng.choice([rng.randrange(len(data)), rng.randrange(min(len(data), 4096))])
    return data[:size], f"truncated to {size} of {len(data)} bytes"


def splice(rng: random.Random, data: bytes, donor: bytes) -> Mutant:
    cut = rng.randrange(len(data))
    start = rng.randrange(len(donor))
    return data[:cut] + donor[start:], f"first {cut} bytes + donor bytes from {start}"


def chunk_move(rng: random.Random, data: bytes, _donor: bytes) -> Mutant:
    end = _head_end(data)
    a, b = sorted(rng.randrange(end) for _ in range(2))
    chunk = data[a : min(b, a + 256)]
    at = rng.randrange(end)
    out = data[:at] + chunk + data[at + len(chunk) :]
    return out[: len(data)], f"{len(chunk)} bytes from {a} copied over byte {at}"


RAW: dict[str, Mutator] = {
    "bit_flips": bit_flips,
    "byte_sets": byte_sets,
    "wrong_offset": wrong_offset,
    "truncate": truncate,
    "splice": splice,
    "chunk_move": chunk_move,
}


# --------------------------------------------------------------------------------------------
# structured: through the object API
# --------------------------------------------------------------------------------------------
def unpack_model(data: bytes) -> Any:
    return fb.ModelT.InitFromPackedBuf(data, 0)


def pack_model(model: Any) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _ints(values: Any) -> list[int]:
    """An object-API int vector (numpy array or None) as a list."""
    return [] if values is None else [int(v) for v in values]


def _ops(model: Any) -> list[tuple[int, int, Any]]:
    return [
        (s, k, op)
        for s, sg in enumerate(model.subgraphs)
        for k, op in enumerate(sg.operators or [])
    ]


def _pick_op(rng: random.Random, model: Any) -> tuple[int, int, Any]:
    ops = _ops(model)
    if not ops:
        raise Skip("no ops")
    return rng.choice(ops)


def _structured(edit: Callable[[random.Random, Any], str]) -> Mutator:
    def mutate(rng: random.Random, data: bytes, _donor: bytes) -> Mutant:
        model = unpack_model(data)
        what = edit(rng, model)
        return pack_model(model), what

    mutate.__name__ = edit.__name__
    return mutate


def huge_dimension(rng: random.Random, model: Any) -> str:
    s = rng.randrange(len(model.subgraphs))
    tensors = model.subgraphs[s].tensors or []
    if not tensors:
        raise Skip("no tensors")
    t = rng.randrange(len(tensors))
    tensor = tensors[t]
    dims = _ints(tensor.shape)
    # Absurd sizes only (beyond the 4 GiB the fuzz children may allocate): a merely large
    # tensor is a slow model, not a reliability problem.
    value = rng.choice([2**31 - 1, 2**30, 2**28, -2, -(2**31)])
    if dims:
        dims[rng.randrange(len(dims))] = value
    else:
        dims = [value]
    tensor.shape = dims
    if rng.random() < 0.5 and tensor.shapeSignature is not None:
        tensor.shapeSignature = list(dims)
    return f"subgraph {s} tensor {t} shape -> {dims}"


def bad_tensor_index(rng: random.Random, model: Any) -> str:
    s, k, op = _pick_op(rng, model)
    count = len(model.subgraphs[s].tensors or [])
    field = rng.choice(["inputs", "outputs"])
    values = _ints(getattr(op, field)) or [0]
    slot = rng.randrange(len(values))
    values[slot] = rng.choice([-1, -2, -(2**31), count, count + 7, 2**31 - 1])
    setattr(op, field, values)
    return f"subgraph {s} op {k} {field}[{slot}] -> {values[slot]}"


def graph_io_index(rng: random.Random, model: Any) -> str:
    s = rng.randrange(len(model.subgraphs))
    sg = model.subgraphs[s]
    field = rng.choice(["inputs", "outputs"])
    values = _ints(getattr(sg, field)) or [0]
    slot = rng.randrange(len(values))
    values[slot] = rng.choice([-1, -5, len(sg.tensors or []) + 1])
    setattr(sg, field, values)
    return f"subgraph {s} {field}[{slot}] -> {values[slot]}"


def op_cycle(rng: random.Random, model: Any) -> str:
    s, k, op = _pick_op(rng, model)
    later = [o for kk, o in enumerate(model.subgraphs[s].operators) if kk >= k]
    source = rng.choice(later)
    inputs = _ints(op.inputs)
    if not _ints(source.outputs) or not inputs:
        raise Skip("op without inputs/outputs")
    slot = rng.randrange(len(inputs))
    inputs[slot] = int(source.outputs[0])
    op.inputs = inputs
    return f"subgraph {s} op {k} input {slot} -> output of a later or the same op (cycle)"


def double_producer(rng: random.Random, model: Any) -> str:
    ops = model.subgraphs[0].operators or []
    if len(ops) < 2:
        raise Skip("fewer than 2 ops")
    a, b = rng.sample(range(len(ops)), 2)
    if not _ints(ops[a].outputs):
        raise Skip("no outputs")
    ops[b].outputs = _ints(ops[a].outputs)
    return f"op {b} outputs -> op {a}'s outputs (two producers)"


def missing_buffer(rng: random.Random, model: Any) -> str:
    constants = [
        (s, t, tensor)
        for s, sg in enumerate(model.subgraphs)
        for t, tensor in enumerate(sg.tensors or [])
        if tensor.buffer and model.buffers[tensor.buffer].data is not None
    ]
    if not constants:
        raise Skip("no constant tensor")
    s, t, tensor = rng.choice(constants)
    how = rng.choice(["dangling", "emptied", "shrunk"])
    if how == "dangling":
        tensor.buffer = len(model.buffers) + rng.randint(0, 100)
    elif how == "emptied":
        model.buffers[tensor.buffer].data = None
    else:
        data = model.buffers[tensor.buffer].data
        model.buffers[tensor.buffer].data = data[: max(0, len(data) // 2 - 1)]
    return f"subgraph {s} tensor {t}: constant buffer {how}"


def opcode_out_of_range(rng: random.Random, model: Any) -> str:
    if rng.random() < 0.5:
        s, k, op = _pick_op(rng, model)
        op.opcodeIndex = len(model.operatorCodes) + rng.choice([0, 1, 1000])
        return f"subgraph {s} op {k} opcodeIndex -> {op.opcodeIndex}"
    code = rng.choice(model.operatorCodes)
    code.builtinCode = rng.choice([9999, 2**31 - 1, -1, 32])
    code.deprecatedBuiltinCode = min(max(code.builtinCode, -128), 127)
    return f"operator code builtinCode -> {code.builtinCode}"


def wrong_op_type(rng: random.Random, model: Any) -> str:
    code = rng.choice(model.operatorCodes)
    new = rng.choice([0, 3, 9, 17, 22, 25, 40, 49, 83, 88, 100, 126])
    code.builtinCode = new
    code.deprecatedBuiltinCode = min(new, 127)
    return f"an operator code becomes builtin {new} (inputs/options no longer fit)"


def wrong_tensor_type(rng: random.Random, model: Any) -> str:
    s = rng.randrange(len(model.subgraphs))
    tensors = model.subgraphs[s].tensors or []
    if not tensors:
        raise Skip("no tensors")
    t = rng.randrange(len(tensors))
    tensors[t].type = rng.choice([0, 1, 2, 3, 4, 5, 6, 9, 13, 17, 19, 50, -3])
    return f"subgraph {s} tensor {t} type -> {tensors[t].type}"


def subgraph_self_call(rng: random.Random, model: Any) -> str:
    for s, sg in enumerate(model.subgraphs):
        for k, op in enumerate(sg.operators or []):
            options = op.builtinOptions
            for attr in (
                "thenSubgraphIndex",
                "elseSubgraphIndex",
                "condSubgraphIndex",
                "bodySubgraphIndex",
                "initSubgraphIndex",
            ):
                if hasattr(options, attr):
                    value = rng.choice([s, len(model.subgraphs) + 2, -1])
                    setattr(options, attr, value)
                    return f"subgraph {s} op {k} {attr} -> {value}"
    raise Skip("no control flow")


def signature_index(rng: random.Random, model: Any) -> str:
    if not model.signatureDefs:
        raise Skip("no signature")
    sig = model.signatureDefs[0]
    if rng.random() < 0.5 and sig.outputs:
        sig.outputs[0].tensorIndex = rng.choice([2**31, 99999])
        return "signature output tensor index out of range"
    sig.subgraphIndex = len(model.subgraphs) + rng.randint(0, 3)
    return f"signature subgraph index -> {sig.subgraphIndex}"


def rank_change(rng: random.Random, model: Any) -> str:
    s = rng.randrange(len(model.subgraphs))
    tensors = [t for t in model.subgraphs[s].tensors or [] if _ints(t.shape)]
    if not tensors:
        raise Skip("no shaped tensor")
    tensor = rng.choice(tensors)
    dims = _ints(tensor.shape)
    dims = dims[:-1] if rng.random() < 0.5 else [*dims, rng.choice([0, 1, 3])]
    tensor.shape = dims
    tensor.shapeSignature = None
    return f"a tensor of subgraph {s} gets rank {len(dims)}: {dims}"


STRUCTURED: dict[str, Mutator] = {
    f.__name__: _structured(f)
    for f in (
        huge_dimension,
        bad_tensor_index,
        graph_io_index,
        op_cycle,
        double_producer,
        missing_buffer,
        opcode_out_of_range,
        wrong_op_type,
        wrong_tensor_type,
        subgraph_self_call,
        signature_index,
        rank_change,
    )
}

ALL: dict[str, Mutator] = {**RAW, **STRUCTURED}


def mutate(
    rng: random.Random, data: bytes, donor: bytes, only: str | None = None
) -> tuple[bytes, str, str]:
    """One mutant: (bytes, mutator name, description); retries mutators that do not apply.

    ``only`` names the mutator to use (raises :class:`Skip` if it does not apply).
    """
    if only is not None:
        mutant, what = ALL[only](rng, data, donor)
        return mutant, only, what
    names = sorted(ALL)
    for _ in range(20):
        name = rng.choice(names)
        try:
            mutant, what = ALL[name](rng, data, donor)
        except Skip:
            continue
        return mutant, name, what
    raise RuntimeError("no mutator applies to this model")
