"""What each op is, beyond its kernel: the one table of op properties every module reads.

Dead-code removal, constant folding, the partitioner's ordering of stateful ops and the fp16
emulator each ask one of these questions; they read the answer here instead of keeping a set
of their own.
"""

from __future__ import annotations

#: Ops that run other subgraphs (a branch, a loop body, a call, a one-time initializer); the
#: ops there may have side effects of their own.
CONTROL_FLOW = frozenset({"IF", "WHILE", "CALL", "CALL_ONCE", "STABLEHLO_WHILE", "STABLEHLO_CASE"})
#: Control flow that chooses its subgraph at run time by a condition (a branch, a loop).
CONDITIONAL = frozenset({"IF", "WHILE"})
#: Ops that create, read or write resource variables or hash tables (state kept between runs).
RESOURCE = frozenset(
    {
        "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE",
        "HASHTABLE", "HASHTABLE_FIND", "HASHTABLE_IMPORT", "HASHTABLE_SIZE",
    }
)  # fmt: skip
#: Ops whose state spans the graph: resource variables, their one-time initializer and calls
#: (an op-by-op runner cannot cut them out of it).
STATEFUL = frozenset({"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE", "CALL"})
#: Ops drawing fresh random values on every run.
RANDOM = frozenset({"RANDOM_STANDARD_NORMAL", "RANDOM_UNIFORM", "MULTINOMIAL"})
#: Sequence ops keeping their state in variable tensors between runs.
STATEFUL_SEQUENCE = frozenset(
    {
        "SVDF", "LSTM", "UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM",
        "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN", "RNN",
    }
)  # fmt: skip
#: Ops whose outputs are not a function of their inputs alone (never computed ahead of time).
IMPURE = CONTROL_FLOW | RESOURCE | RANDOM | STATEFUL_SEQUENCE
#: Ops that do something besides computing their outputs: kept when nothing reads them.
SIDE_EFFECTS = CONTROL_FLOW | frozenset({"VAR_HANDLE", "ASSIGN_VARIABLE", "HASHTABLE_IMPORT"})
#: The control flow the TFLite runtime orders like stateful ops (``Subgraph::
#: OpMightHaveSideEffect`` in ``tensorflow/lite/core/subgraph.cc``), besides every op with a
#: RESOURCE tensor (``compat.partition.side_effect_ops``).
RUNTIME_ORDERED = frozenset({"IF", "WHILE", "CALL_ONCE"})
#: Ops that only move their input's values (layout, selection, copies): an output holds
#: values of the input, none computed.
MOVES_DATA = frozenset(
    {
        "RESHAPE", "EXPAND_DIMS", "SQUEEZE", "CONCATENATION", "TRANSPOSE", "STRIDED_SLICE",
        "SLICE", "GATHER", "PACK", "UNPACK", "SPLIT", "SPLIT_V", "PAD", "PADV2", "TILE",
        "BROADCAST_TO", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "IDENTITY",
    }
)  # fmt: skip
