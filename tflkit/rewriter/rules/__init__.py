"""The rule catalog; ``DEFAULT_RULES`` is the explicit, ordered tuple the pass manager uses."""

from __future__ import annotations

from tflkit.rewriter.rule import Rule
from tflkit.rewriter.rules.activation import L2Normalization, LogSoftmax, Relu0To1, SoftmaxBeta
from tflkit.rewriter.rules.arith import (
    AddNToAdd,
    ArgInt64ToInt32,
    ArgMinToArgMax,
    BatchMatMulConstLhs,
    FullyConnectedConstInput,
    GatherInt64Indices,
)
from tflkit.rewriter.rules.broadcast import BroadcastToTile
from tflkit.rewriter.rules.constant import FoldFill, FoldRange, FoldShape, FoldZerosLike
from tflkit.rewriter.rules.conv import TransposeConvVersion
from tflkit.rewriter.rules.rank5 import Rank5Elementwise, Rank5Reduce, Rank5Transpose, ReshapeChain
from tflkit.rewriter.rules.shape import ExpandDimsToReshape, ReshapeStaticShape, SqueezeToReshape
from tflkit.rewriter.rules.slicing import (
    GatherNdConstIndices,
    PackRepeated,
    PadLowRank,
    StridedSliceMasks,
    StridedSliceReverse,
)

DEFAULT_RULES: tuple[Rule, ...] = (
    # constants first: folding feeds the shape rules static values
    FoldFill(),
    FoldRange(),
    FoldShape(),
    FoldZerosLike(),
    ReshapeStaticShape(),
    ExpandDimsToReshape(),
    SqueezeToReshape(),
    PackRepeated(),
    StridedSliceMasks(),
    StridedSliceReverse(),
    GatherNdConstIndices(),
    GatherInt64Indices(),
    PadLowRank(),
    ArgMinToArgMax(),
    ArgInt64ToInt32(),
    AddNToAdd(),
    Relu0To1(),
    SoftmaxBeta(),
    LogSoftmax(),
    L2Normalization(),
    BatchMatMulConstLhs(),
    FullyConnectedConstInput(),
    ReshapeChain(),
    Rank5Elementwise(),
    Rank5Transpose(),
    Rank5Reduce(),
    BroadcastToTile(),
    TransposeConvVersion(),
)

__all__ = ["DEFAULT_RULES"]
