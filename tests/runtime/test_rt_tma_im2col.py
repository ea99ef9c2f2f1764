"""TMA in im2col mode (`tl::tma_load_im2col`, `encode_im2col_nhwc`) on the GPU: every block
loads one 64-pixel x 64-channel tile of the implicit im2col matrix of a convolution over a
random NHWC tensor (row m = output pixel (n, oh, ow) in order, filter tap (kh, kw) from the
block index), dumps the raw shared bytes, and the host compares them with the gather computed
from the definition: strides, paddings, dilations, ragged M, no swizzle and the 128B swizzle.
Marked `gpu` (sm_90)."""

import numpy as np
import pytest
import torch

from rt_helpers import build, ptr, run, sm

pytestmark = pytest.mark.gpu

ROWS, CH = 64, 64

PROBE = r"""
#include "tl.cuh"
extern "C" __global__ void im2col_probe(const __grid_constant__ tl::TensorMap tmap,
                                        half_t* raw, int OH, int OW, int S, int P, int D,
                                        int KW) {
  extern __shared__ unsigned char dyn[];
  half_t* tile = reinterpret_cast<half_t*>(
      (reinterpret_cast<uintptr_t>(dyn) + 1023) & ~uintptr_t(1023));
  __shared__ __align__(8) uint64_t bar;
  const int m0 = blockIdx.x * 64, kh = blockIdx.y / KW, kw = blockIdx.y % KW;
  const int c0 = blockIdx.z * 64;
  const int n = m0 / (OH * OW), oh = m0 / OW % OH, ow = m0 % OW;
  if (threadIdx.x == 0) {
    tl::mbarrier_init(&bar, 1);
    tl::fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tl::mbarrier_arrive_expect_tx(&bar, 64 * 64 * sizeof(half_t));
    tl::tma_load_im2col(&tmap, &bar, tile, c0, ow * S - P, oh * S - P, n,
                        (uint16_t)(kw * D), (uint16_t)(kh * D));
  }
  tl::mbarrier_wait(&bar, 0);
  half_t* out = raw + ((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) * 64 * 64;
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) out[i] = tile[i];
}
"""


def expected_tile(x, m0, kh, kw, c0, OH, OW, S, P, D):
    N, H, W, _ = x.shape
    out = np.zeros((ROWS, CH), np.int16)
    for r in range(ROWS):
        m = m0 + r
        n, oh, ow = m // (OH * OW), m // OW % OH, m % OW
        ih, iw = oh * S - P + kh * D, ow * S - P + kw * D
        if n < N and 0 <= ih < H and 0 <= iw < W:
            out[r] = x[n, ih, iw, c0:c0 + CH]
    return out


@pytest.mark.skipif(sm() < 90, reason="TMA needs sm_90")
@pytest.mark.parametrize("swizzle", [0, 3])
@pytest.mark.parametrize("N,H,W,C,K,S,P,D", [
    (2, 7, 9, 128, 3, 1, 1, 1),     # same padding, ragged M = 126
    (2, 9, 11, 64, 3, 2, 1, 1),     # stride 2
    (1, 9, 10, 64, 3, 1, 2, 2),     # dilation 2
    (3, 5, 6, 64, 1, 1, 0, 1),      # 1x1
    (1, 12, 12, 64, 3, 1, 0, 1),    # no padding: the box is smaller than the image
])
def test_im2col_tile_matches_the_gather(N, H, W, C, K, S, P, D, swizzle):
    from tilelang.runtime import encode_im2col_nhwc

    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    M = N * OH * OW
    x = torch.tensor(np.random.default_rng(N * H + W).integers(-3000, 3000, (N, H, W, C)),
                     dtype=torch.int16).view(torch.float16).cuda()
    lower = (-P, -P)
    upper = ((OH - 1) * S - P - (H - 1), (OW - 1) * S - P - (W - 1))
    tmap = encode_im2col_nhwc("float16", ptr(x), tuple(x.shape), tuple(x.stride()), lower,
                              upper, CH, ROWS, conv_stride=(S, S), swizzle=swizzle)
    fn = build(PROBE, "im2col_probe", ["tensor_map", "ptr"] + ["int32"] * 6)
    gx, gy, gz = -(-M // ROWS), K * K, C // CH
    raw = torch.full((gz, gy, gx, ROWS * CH), 7.0, dtype=torch.float16, device="cuda")
    run(fn, (gx, gy, gz), (128, 1, 1), [tmap, ptr(raw), OH, OW, S, P, D, K],
        smem=ROWS * CH * 2 + 1024)
    xs = x.cpu().view(torch.int16).numpy()
    raw = raw.cpu().view(torch.int16).numpy()
    for bz in range(gz):
        for by in range(gy):
            for bx in range(gx):
                want = expected_tile(xs, bx * ROWS, by // K, by % K, bz * CH, OH, OW, S, P, D)
                got = raw[bz, by, bx]
                valid = min(ROWS, M - bx * ROWS)  # rows past the last pixel: not compared
                for r in range(valid):
                    for c in range(0, CH, 8):
                        byte = r * CH * 2 + c * 2
                        if swizzle == 3:
                            byte ^= (r & 7) << 4
                        np.testing.assert_array_equal(
                            got[byte // 2: byte // 2 + 8], want[r, c:c + 8],
                            err_msg=f"tile ({bx}, tap {by}, c0 {bz * CH}) row {r} chunk {c}")
