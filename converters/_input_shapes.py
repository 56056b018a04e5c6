"""``--input-shape`` in a converter worker: the names the source framework gives its inputs.

Standard library only (workers in foreign environments load it beside them with
``load_sibling``). ``*=N`` (``tflkit.ir.shapes.WILDCARD``) fixes every dynamic dimension of
every input the other entries do not name to ``N``; the batch, when unknown, takes ``--batch``
first, as without the wildcard.
"""

WILDCARD = "*"


def given_shapes(options):
    """``(named, fill)``: the shapes by input name (a fresh dict the caller may pop), and the
    value of ``*=N`` (None without it)."""
    named = {k: [int(d) for d in v] for k, v in (options.get("input_shapes") or {}).items()}
    star = named.pop(WILDCARD, None)
    return named, (int(star[0]) if star else None)


def filled(dims, fill):
    """``dims`` with each unknown (None) dimension set to ``fill`` (unchanged when None)."""
    if fill is None or dims is None:
        return dims
    return [fill if d is None else d for d in dims]
