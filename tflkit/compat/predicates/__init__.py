"""Predicates of the GPU constraint tables, one module per family.

A predicate takes an ``OpSignature`` and returns a ``Rejection`` (a ``Reason`` code from
``compat/reasons.py`` and a sentence a user understands) or None when it has nothing against the
op. It must answer for any op, however malformed (``tests/test_rule_totality.py`` runs every
predicate on edge cases). Factories build the parametrised ones (``operands.runtime_inputs(1)``).

Families: ``operands`` (counts, constant or runtime), ``shapes`` (BHWC view, broadcasting, axes),
``dtypes``, ``quantization`` (quantized tensors, fp16 weights), ``elementwise``, ``conv``
(convolution, pooling, resize), ``matmul`` (FULLY_CONNECTED, BATCH_MATMUL), ``reduction``,
``slicing``, ``data_movement`` (gather, pack, concat, pad, select, one-hot), ``activations``,
``composite`` (LSTM kernels, StableHLO composites).

To add a verdict: write the predicate in its family's module, with the measurement behind it in
its docstring (the command or test that shows the runtime's behaviour), then list it in the
``checks`` of the op's row in each target table (``compat/targets/litert_gpu.py``, ...). The
tables are data: a row says what one target requires of one op type.
"""
