"""The one rule catalogue: every rule, in the order the pass manager tries them.

Rules flagged ``opt_in(...)`` here (approximations, interface changes) run only when named
with ``--rule``; the others are the default run (``catalog().defaults()``). One list, like
onnxscript's rule sets: the test harness, ``check``'s fix hints and ``rewrite`` all read it,
through :func:`tflkit.rewriter.rules.catalog` (this module imports every rule module).
Adding a rule is one entry here (and its module), then ``python -m
tflkit.rewriter.rules.index_gen`` (the index ``check`` reads to import only the rules it needs).
"""

from __future__ import annotations

from tflkit.rewriter.rules.activation import L2Normalization, LogSoftmax, Relu0To1, SoftmaxBeta
from tflkit.rewriter.rules.arith import (
    AddNToAdd,
    ArgInt64ToInt32,
    ArgMinToArgMax,
    BatchMatMulConstLhs,
    FullyConnectedConstInput,
    GatherInt64Indices,
)
from tflkit.rewriter.rules.attention import AttentionKeyTranspose
from tflkit.rewriter.rules.batch_matmul import BatchMatMulBroadcast
from tflkit.rewriter.rules.broadcast import BroadcastToTile
from tflkit.rewriter.rules.composite import InlineComposite
from tflkit.rewriter.rules.constant import (
    FoldConstants,
    FoldDensify,
    FoldFill,
    FoldRange,
    FoldShape,
    FoldShapeInputs,
    FoldZerosLike,
)
from tflkit.rewriter.rules.conv import TransposeConvVersion
from tflkit.rewriter.rules.conv_geometry import Int8PointwiseFloatWeights, TransposeConvSameToValid
from tflkit.rewriter.rules.cpu_kernels import DepthwiseScalePerChannel
from tflkit.rewriter.rules.fp16_operands import Fp16ConstantOperands
from tflkit.rewriter.rules.gelu import ErfApprox, ErfGelu
from tflkit.rewriter.rules.lookup import GatherFlatIndices, Int64ToInt32
from tflkit.rewriter.rules.rank5 import Rank5Elementwise, Rank5Reduce, Rank5Transpose, ReshapeChain
from tflkit.rewriter.rules.shape import ExpandDimsToReshape, ReshapeStaticShape, SqueezeToReshape
from tflkit.rewriter.rules.slicing import (
    GatherNdConstIndices,
    OneHotLastAxis,
    PackRepeated,
    PadLowRank,
    StridedSliceCanonical,
    StridedSliceMasks,
    StridedSliceReverse,
)
from tflkit.rewriter.rules.streaming import StreamingState
from tflkit.rewriter.ruleset import RuleSet, opt_in

CATALOG = RuleSet(
    [
        # composites first: the other rules see their decompositions' ops; a wrong attention
        # decomposition repaired before it is inlined
        AttentionKeyTranspose(),
        InlineComposite(),
        # then constants: folding feeds the shape rules static values
        FoldFill(),
        FoldRange(),
        FoldShape(),
        FoldZerosLike(),
        FoldDensify(),
        FoldShapeInputs(),
        FoldConstants(),  # any op of constants, accepted ones too, to the fixed point
        ReshapeStaticShape(),
        ExpandDimsToReshape(),
        SqueezeToReshape(),
        PackRepeated(),
        StridedSliceMasks(),
        StridedSliceReverse(),
        StridedSliceCanonical(),
        GatherNdConstIndices(),
        OneHotLastAxis(),
        GatherInt64Indices(),
        Int64ToInt32(),  # computed int64 ids: after the constant ones, before the lookup
        GatherFlatIndices(),
        PadLowRank(),
        ArgMinToArgMax(),
        ArgInt64ToInt32(),
        AddNToAdd(),
        Relu0To1(),
        SoftmaxBeta(),
        LogSoftmax(),
        L2Normalization(),
        BatchMatMulConstLhs(),
        BatchMatMulBroadcast(),
        Fp16ConstantOperands(),
        Int8PointwiseFloatWeights(),
        DepthwiseScalePerChannel(),
        FullyConnectedConstInput(),
        ReshapeChain(),
        Rank5Elementwise(),
        Rank5Transpose(),
        Rank5Reduce(),
        BroadcastToTile(),
        TransposeConvVersion(),
        TransposeConvSameToValid(),
        # ERF has no builtin: the exact GELU around it first, the opt-in approximation after
        ErfGelu(),
        opt_in(ErfApprox()),
        # a model pass, opt-in: changes the interface (state inputs/outputs the app feeds back)
        opt_in(StreamingState()),
    ]
)
