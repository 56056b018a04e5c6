"""The preparation pass every ONNX model goes through before a converter sees it.

Loaded by the ONNX workers from their own folder (standard library, numpy, onnx, onnxsim and
onnxoptimizer, all in the ONNX converter's environment). Each step reports one line:

1. **pins**: ``--input-value NAME=V[,V...]`` turns an input into a constant (a sample rate, a
   mode flag), so what depends on it only can fold; then ONNX Runtime's integer and QDQ ops
   become float ops (``_onnx_dequantize``);
2. **static shapes**: every remaining input gets its static shape (``--input-shape``, else a
   dynamic batch becomes ``--batch``); ``value_info`` and the outputs' symbolic dimensions are
   dropped, to be inferred again at those shapes (a ``-1`` kept in ``value_info`` made onnx2tf
   fail with "Dimension -1 must be >= 0");
3. **simplify**: onnxsim at the static shapes (constant folding of shape arithmetic);
4. **fold If**: an ``If`` whose condition became constant is replaced by its branch
   (onnxoptimizer's ``eliminate_if_with_const_cond``), then simplified again;
5. **names**: node and inner tensor names a converter would reject (empty, or characters
   outside ``[A-Za-z0-9_.-/]``) are renamed; the graph's inputs and outputs keep theirs.

The user's file is only read: the prepared model is written to the work directory.
"""

import re
import time

import numpy as np

from tflkit.proc.result_file import load_sibling

_SHAPES = load_sibling(__file__, "_input_shapes")
_DEQUANTIZE = load_sibling(__file__, "_onnx_dequantize")

_NAME_OK = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$")


def _dims(value_info):
    return [
        d.dim_value if d.HasField("dim_value") else None
        for d in value_info.type.tensor_type.shape.dim
    ]


def pinned_array(value_info, values):
    """The array an input pinned to ``values`` holds: the input's dtype, its static shape (a
    scalar or 1-D of the values' length when the declared shape is dynamic or absent)."""
    from onnx import helper

    dtype = helper.tensor_dtype_to_np_dtype(value_info.type.tensor_type.elem_type)
    array = np.asarray(values, dtype=dtype)
    dims = _dims(value_info)
    if dims and all(d is not None for d in dims) and int(np.prod(dims)) == array.size:
        return array.reshape(dims)
    return array.reshape(()) if array.size == 1 and not dims else array


def _pin(model, pins, say):
    from onnx import numpy_helper

    inputs = {i.name: i for i in model.graph.input}
    unknown = sorted(set(pins) - set(inputs))
    if unknown:
        raise ValueError(
            f"usage: --input-value names {unknown} are not ONNX inputs; inputs: "
            f"{', '.join(inputs) or 'none'}"
        )
    for name, values in pins.items():
        array = pinned_array(inputs[name], values)
        model.graph.input.remove(inputs[name])
        model.graph.initializer.append(numpy_helper.from_array(array, name))
        say(f"pinned {name} = {', '.join(map(str, np.ravel(array).tolist()))} ({array.dtype})")


def static_shapes(model, options):
    """``(shapes, source)``: each runtime input's static shape and the shape the file declares."""
    given, fill = _SHAPES.given_shapes(options)
    init = {i.name for i in model.graph.initializer}
    shapes, source = {}, {}
    for inp in model.graph.input:
        if inp.name in init:
            continue
        dims = _dims(inp)
        source[inp.name] = list(dims)
        if inp.name in given:
            dims = given.pop(inp.name)
        elif dims and dims[0] is None:
            dims[0] = int(options["batch"])
        dims = _SHAPES.filled(dims, fill)
        if any(d is None for d in dims):
            raise ValueError(
                f"usage: input {inp.name} has dynamic dimensions {dims}: pass "
                f"--input-shape {inp.name}=D1,D2,... (ONNX layout)"
            )
        shapes[inp.name] = dims
    if given:
        raise ValueError(f"usage: --input-shape names {sorted(given)} are not ONNX inputs")
    return shapes, source


def _fix_shapes(model, shapes, source, say):
    for inp in model.graph.input:
        for dim, value in zip(
            inp.type.tensor_type.shape.dim, shapes.get(inp.name, ()), strict=False
        ):
            dim.Clear()
            dim.dim_value = int(value)
    for out in model.graph.output:  # symbolic output dims are inferred again from the inputs
        for dim in out.type.tensor_type.shape.dim:
            if not dim.HasField("dim_value"):
                dim.Clear()
    dropped = len(model.graph.value_info)
    del model.graph.value_info[:]
    changed = [n for n in shapes if source[n] != shapes[n]]
    for name in changed:
        was = "x".join("?" if d is None else str(d) for d in source[name])
        say(f"input {name}: {'x'.join(map(str, shapes[name]))} (was {was})")
    if dropped and changed:
        say(f"dropped {dropped} value_info shapes (inferred again at the static shapes)")


def nodes(graph):
    """Every node of ``graph`` and of the graphs its nodes hold (If/Loop/Scan bodies)."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                yield from nodes(sub)


def _node_count(graph):
    return sum(1 for _ in nodes(graph))


def _simplify(model, say, label="simplify"):
    import onnxsim

    before = _node_count(model.graph)
    try:
        simplified, ok = onnxsim.simplify(model)
    except Exception as exc:  # onnxsim raises whatever onnx or ONNX Runtime raised
        line = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        say(f"{label}: onnxsim failed ({line}); converting the model unsimplified")
        return model
    if not ok:
        say(f"{label}: onnxsim's check failed; converting the model unsimplified")
        return model
    after = _node_count(simplified.graph)
    say(
        f"{label}: {before} -> {after} nodes (onnxsim)"
        if after != before
        else f"{label}: {before} nodes, nothing to fold (onnxsim)"
    )
    return simplified


def _if_count(graph):
    return sum(1 for node in graph.node if node.op_type == "If")


def _fold_ifs(model):
    """``(model, folded)``: ``If`` nodes whose condition is constant replaced by their branch
    (onnxsim folds most of them itself; this catches the ones it leaves)."""
    import onnxoptimizer

    before = _if_count(model.graph)
    if not before:
        return model, False
    folded = onnxoptimizer.optimize(model, ["eliminate_if_with_const_cond"])
    return folded, _if_count(folded.graph) < before


#: the most elements an input may hold for the error line to suggest pinning it (a rate, a flag,
#: a mode: not the data the model computes on)
PIN_MAX_ELEMENTS = 16


_NO_INLINE = {"If", "Loop", "Scan"}


def _inline_branch(graph, node, attr_name, prefix, taken):
    """The nodes of ``node``'s branch ``attr_name`` with the names it defines prefixed (outer
    names stay), its initializers, and the names of its outputs; None when it holds control
    flow of its own."""
    from onnx import helper

    branch = next(a.g for a in node.attribute if a.name == attr_name)
    if any(n.op_type in _NO_INLINE for n in branch.node):
        return None
    local = {i.name for i in branch.initializer} | {o for n in branch.node for o in n.output}
    rename = {}
    for name in local:
        new, k = f"{prefix}/{name}", 1
        while new in taken:
            new, k = f"{prefix}/{name}_{k}", k + 1
        taken.add(new)
        rename[name] = new
    nodes = []
    for inner in branch.node:
        copy = helper.make_node(
            inner.op_type,
            [rename.get(n, n) for n in inner.input],
            [rename.get(n, n) for n in inner.output],
            name=f"{prefix}/{inner.name}" if inner.name else "",
            domain=inner.domain,
        )
        copy.attribute.extend(inner.attribute)
        nodes.append(copy)
    inits = []
    for init in branch.initializer:
        copy = type(init)()
        copy.CopyFrom(init)
        copy.name = rename[init.name]
        inits.append(copy)
    return nodes, inits, [rename.get(o.name, o.name) for o in branch.output]


def _ifs_to_where(model, say):
    """Each ``If`` left in the main graph (its condition computed from data) becomes both
    branches inline and a ``Where`` per output that picks the one the condition names: what a
    GPU without control flow can run. Only where both branches give the same static shapes
    (checked by shape inference; otherwise the If stays)."""
    import onnx
    from onnx import helper

    graph = model.graph
    taken = {o for n in graph.node for o in n.output} | {i.name for i in graph.initializer}
    taken |= {i.name for i in graph.input}
    changed = 0
    for k, node in enumerate(list(graph.node)):
        if node.op_type != "If":
            continue
        then = _inline_branch(graph, node, "then_branch", f"if{k}_then", taken)
        other = _inline_branch(graph, node, "else_branch", f"if{k}_else", taken)
        if then is None or other is None:
            continue
        trial = onnx.ModelProto()
        trial.CopyFrom(model)
        position = list(trial.graph.node).index(node)
        del trial.graph.node[position]
        new_nodes = then[0] + other[0]
        for out, a, b in zip(node.output, then[2], other[2], strict=True):
            new_nodes.append(helper.make_node("Where", [node.input[0], a, b], [out]))
        for offset, new in enumerate(new_nodes):
            trial.graph.node.insert(position + offset, new)
        trial.graph.initializer.extend(then[1] + other[1])
        try:
            inferred = onnx.shape_inference.infer_shapes(trial, strict_mode=True)
        except Exception:  # shape inference refuses the inlined graph: keep the If
            continue
        shapes = {v.name: _dims(v) for v in inferred.graph.value_info}
        pairs = [(shapes.get(a), shapes.get(b)) for a, b in zip(then[2], other[2], strict=True)]
        if not all(a is not None and a == b and None not in a for a, b in pairs):
            continue
        model.CopyFrom(trial)
        del model.graph.value_info[:]
        changed += 1
    if changed:
        say(f"replaced {changed} If nodes (condition from data) by both branches and a Where")
    return changed


def branch_inputs(model):
    """The small graph inputs the remaining ``If`` conditions depend on: pinning them folds the
    If (a condition computed from the model's data is not offered)."""
    producer = {o: node for node in model.graph.node for o in node.output}
    inputs = {i.name for i in model.graph.input}
    found, seen = [], set()
    todo = [node.input[0] for node in model.graph.node if node.op_type == "If"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in inputs and name not in found:
            found.append(name)
            continue
        todo.extend(producer[name].input if name in producer else [])
    small = {
        i.name
        for i in model.graph.input
        if all(d is not None for d in _dims(i)) and int(np.prod(_dims(i))) <= PIN_MAX_ELEMENTS
    }
    return [name for name in found if name in small]


def _sanitize(model, say):
    """Rename node and inner tensor names a converter would reject (I/O names stay)."""
    graph = model.graph
    keep = {v.name for v in graph.input} | {v.name for v in graph.output}
    taken = set(keep)
    renames = {}

    def fresh(name, fallback):
        base = re.sub(r"[^A-Za-z0-9_.\-/]", "_", name) or fallback
        if not re.match(r"[A-Za-z0-9_]", base):
            base = f"t{base}"
        out, k = base, 1
        while out in taken:
            out, k = f"{base}_{k}", k + 1
        taken.add(out)
        return out

    tensors = [i.name for i in graph.initializer]
    tensors += [o for node in graph.node for o in node.output if o]
    for name in tensors:
        if name not in keep and name not in renames and not _NAME_OK.match(name):
            renames[name] = fresh(name, "tensor")
    taken.update(n for n in tensors if n not in renames)
    for init in graph.initializer:
        init.name = renames.get(init.name, init.name)
    for info in graph.value_info:
        info.name = renames.get(info.name, info.name)
    nodes = 0
    for k, node in enumerate(graph.node):
        node.input[:] = [renames.get(n, n) for n in node.input]
        node.output[:] = [renames.get(n, n) for n in node.output]
        if node.name and not _NAME_OK.match(node.name):  # empty names: converters make their own
            node.name = fresh(node.name, f"{node.op_type}_{k}")
            nodes += 1
    if renames or nodes:
        say(f"renamed {len(renames)} tensors and {nodes} nodes whose names converters reject")


def _reshape_allowzero(model, say):
    """``Reshape(allowzero=1)`` whose shape is a constant holding no zero computes what
    ``allowzero=0`` does (the attribute only changes how a 0 in the shape is read); onnx2torch
    refuses the attribute ("not implemented"), so it goes. Shapes holding a zero keep it."""
    from onnx import numpy_helper

    consts = {i.name: i for i in model.graph.initializer}
    cleared = 0
    for node in nodes(model.graph):
        flag = next((a for a in node.attribute if a.name == "allowzero"), None)
        if node.op_type != "Reshape" or flag is None or flag.i != 1 or len(node.input) < 2:
            continue
        shape = consts.get(node.input[1])
        if shape is None or 0 in numpy_helper.to_array(shape).tolist():
            continue
        node.attribute.remove(flag)
        cleared += 1
    if cleared:
        say(
            f"Reshape allowzero=1 -> 0 on {cleared} node(s) whose shape holds no zero (same result)"
        )


def prepare(source, target, options, say):
    """Prepare ``source`` into ``target`` (see the module's docstring); ``(shapes, source_shapes,
    branch_inputs)`` of the runtime inputs. ``say`` takes each step's line."""
    import onnx

    start = time.perf_counter()
    model = onnx.load(source)
    pins = {k: list(v) for k, v in (options.get("input_values") or {}).items()}
    if pins:
        _pin(model, pins, say)
    _DEQUANTIZE.dequantize(model, say)
    shapes, declared = static_shapes(model, options)
    _fix_shapes(model, shapes, declared, say)
    ifs = _if_count(model.graph)
    model = _simplify(model, say)
    model, folded = _fold_ifs(model)
    if folded:
        model = _simplify(model, say, label="simplify again")
    if ifs > _if_count(model.graph):
        say(f"folded {ifs - _if_count(model.graph)} of {ifs} If nodes (condition constant)")
    branching = branch_inputs(model)  # small inputs to pin: the error line offers them
    if not branching and _ifs_to_where(model, say):
        model = _simplify(model, say, label="simplify again")
    _reshape_allowzero(model, say)
    _sanitize(model, say)
    model = onnx.shape_inference.infer_shapes(model)
    large = model.ByteSize() > 2_000_000_000
    onnx.save(model, str(target), save_as_external_data=large)
    say(f"prepared in {time.perf_counter() - start:.1f} s")
    return shapes, declared, branching
