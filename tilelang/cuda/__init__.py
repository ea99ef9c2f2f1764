"""The reference's `tilelang.cuda` namespace, for programs that drive tensor cores by hand:
`tilelang.cuda.intrinsics` (the mma.sync intrinsics emitter `TensorCoreIntrinEmitter`, the
register-layout index maps of `layout.mma_layout` / `layout.utils`, shared-memory swizzles,
the 2:4 sparsity metadata of `sparse_layout`). The emitter issues `T.ptx_ldmatrix` and
`T.ptx_mma` (tilelang/language/ptx.py), which run on the GPU and on the CPU interpreter."""
