"""TMA in im2col mode for the gather of `T.c2d_im2col` (sm_90a warp-specialised pipelines).

Expects: a gather nest that `T.c2d_im2col` wrote (annotation ("im2col", (image, m0, k0,
kernel, stride, dilation, pad)): tile row i is output pixel m0 + i over N x OH x OW, column j
is reduction index k0 + j over KH x KW x C, channels fastest), its shared tile's layout
(tile IR after layout inference), and the lets its indices need.

Guarantees: `im2col_plan` returns an `Im2colPlan` when one TMA load in im2col mode produces
exactly the tile the gather writes, else None with the reason. The load (`loads`) starts at
the bounding-box pixel of output pixel m0, (w, h) = (ow, oh) * stride - pad, walks
block_M pixels W first with the convolution stride inside the box whose corners are -pad and
(O - 1) * stride - pad - (I - 1) per spatial dimension (one box position per output pixel, next
row and next image after the last), and reads each at (w, h) + (kw, kh) * dilation for the
tap (kh, kw) of k0, channels k0 % C .. + block_K; outside the image it reads 0, as the gather's
padding does (verified against the gather on an H200, tests/runtime/test_rt_tma_im2col.py).
That needs: C a multiple of block_K (one tap per tile), block_K channels of one swizzle atom
(or an unswizzled row-major tile of 16-byte rows), block_M <= 256, the image contiguous with
16-byte pixel strides, a stride of at most 8, corners within a signed byte and taps within an
unsigned byte. Rows past the last output pixel hold whatever the walk reads there; they only
feed accumulator rows that the kernel's guarded stores never write.
"""

from __future__ import annotations

from ...ir import nodes as ir
from ..analysis.gather import gather_parts


class Im2colPlan:
    """The producer's TMA load of one im2col tile (the interface of warp_specialize's plans:
    `stmt` leaves the consumers' loop, `dst` is filled from `src`, `bytes` per stage)."""

    def __init__(self, nest, deps, spec, col, swizzle, corners, out_size):
        self.stmt = nest
        self.deps = deps
        self.image, self.m0, self.k0, self.kernel, self.stride, self.dilation, self.pad = spec
        self.dst, self.src = col, self.image
        self.swizzle = swizzle
        self.corners = corners  # ((lower h, lower w), (upper h, upper w))
        self.OH, self.OW = out_size
        self.block_M, self.block_K = col.shape
        self.bytes = self.block_M * self.block_K * col.dtype.bytes

    def descriptor_args(self):
        """(box, im2col) of the TmaDescriptor the host encodes per call."""
        lower, upper = self.corners
        return (self.block_M, self.block_K), (lower, upper, self.block_K, self.block_M,
                                              (self.stride, self.stride))

    def load(self, desc_param, bar, smem):
        """The producer's call for the iteration its m0/k0 expressions name."""
        C, OH, OW = self.image.shape[3], self.OH, self.OW
        b = ir.binary
        m0, k0 = ir.as_expr(self.m0), ir.as_expr(self.k0)
        n = b("floordiv", m0, OH * OW)
        oh = b("floormod", b("floordiv", m0, OW), OH)
        ow = b("floormod", m0, OW)
        w = b("sub", b("mul", ow, self.stride), self.pad)
        h = b("sub", b("mul", oh, self.stride), self.pad)
        kh = b("floordiv", k0, self.kernel * C)
        kw = b("floormod", b("floordiv", k0, C), self.kernel)
        c = b("floormod", k0, C)
        u16 = ir.DType("uint16")
        off_w = ir.cast_to(b("mul", kw, self.dilation), u16)
        off_h = ir.cast_to(b("mul", kh, self.dilation), u16)
        return ir.extern_stmt("tl::tma_load_im2col", desc_param, bar, smem, c, w, h, n, off_w,
                              off_h)


def _out_size(size, kernel, stride, dilation, pad):
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def im2col_plan(nest, layout, deps):
    """(Im2colPlan, None) or (None, reason)."""
    spec = nest.annotation("im2col") if isinstance(nest, ir.For) else None
    if spec is None:
        return None, None
    parts = gather_parts(nest)
    if parts is None:
        return None, "not a plain gather"
    col = parts[0].buffer
    image, _, _, kernel, stride, dilation, pad = spec
    if not all(isinstance(x, int) for x in image.shape + col.shape) or \
            image.strides is not None:
        return None, "needs static shapes and a contiguous image"
    N, H, W, C = image.shape
    block_M, block_K = col.shape
    esize = col.dtype.bytes
    if image.dtype is not col.dtype or col.dtype.bits < 8:
        return None, "the tile's dtype differs from the image's"
    if C % block_K:
        return None, f"C = {C} is not a multiple of block_K = {block_K}"
    if block_M > 256 or (C * esize) % 16:
        return None, "needs block_M <= 256 and 16-byte pixels"
    swizzle = getattr(layout, "swizzle_bytes", None) or 0
    if swizzle and block_K * esize != swizzle:
        return None, f"{block_K}-channel rows are not one {swizzle}-byte swizzle atom"
    if not swizzle and (not layout.is_row_major() or (block_K * esize) % 16):
        return None, "the tile is neither swizzled nor 16-byte row-major"
    OH = _out_size(H, kernel, stride, dilation, pad)
    OW = _out_size(W, kernel, stride, dilation, pad)
    lower = (-pad, -pad)
    upper = ((OH - 1) * stride - pad - (H - 1), (OW - 1) * stride - pad - (W - 1))
    if not 1 <= stride <= 8 or not all(-128 <= x <= 127 for x in lower + upper) or \
            (kernel - 1) * dilation > 255:
        return None, "stride, padding or filter reach outside TMA im2col's ranges"
    return Im2colPlan(nest, deps, spec, col, swizzle, (lower, upper), (OH, OW)), None
