"""Intrinsics emitters (`mma_macro_generator.TensorCoreIntrinEmitter`)."""

from .mma_macro_generator import (TensorCoreIntrinEmitter,  # noqa: F401
                                  TensorCoreIntrinEmitterWithLadderTransform)
