// tl/rasterize.cuh — block-index rasterisation for T.use_swizzle(panel, order).
//
//   tl::rasterize_row(panel, bx, by, gx, gy) -> int2 {x, y}
//   tl::rasterize_col(panel, bx, by, gx, gy) -> int2 {x, y}
//   tl::rasterization2d_row<kPanel>() / rasterization2d_col<kPanel>()   from blockIdx/gridDim
//
// Both are bijections of the grid [0, gx) x [0, gy) onto itself (every (x, y) occurs exactly
// once), so results of independent blocks do not change. Blocks are taken in launch order
// L = bx + by*gx and dealt out panel by panel:
//   row: a panel is `panel` consecutive rows (y); inside it L walks down the panel's rows
//        first, then across the columns, so blocks running together share a few rows and a
//        few columns of tiles. The last panel holds the remaining gy % panel rows (ragged).
//        Odd panels walk the columns right to left (serpentine), so the turn keeps locality.
//   col: the same with x and y exchanged (panels of `panel` columns).
// Requires gx * gy < 2^32 and panel >= 1.
#pragma once
#include "common.cuh"

namespace tl {

TL_HOST_DEVICE int2 rasterize_row(unsigned panel, unsigned bx, unsigned by, unsigned gx,
                                  unsigned gy) {
  const unsigned L = bx + by * gx;
  const unsigned per_panel = panel * gx;
  const unsigned p = L / per_panel;
  const unsigned off = L - p * per_panel;
  const unsigned rows_left = gy - p * panel;
  const unsigned h = rows_left < panel ? rows_left : panel;  // ragged last panel
  unsigned x = off / h;
  const unsigned y = p * panel + off % h;
  if (p & 1u) x = gx - 1u - x;
  return make_int2((int)x, (int)y);
}

TL_HOST_DEVICE int2 rasterize_col(unsigned panel, unsigned bx, unsigned by, unsigned gx,
                                  unsigned gy) {
  const unsigned L = bx + by * gx;
  const unsigned per_panel = panel * gy;
  const unsigned p = L / per_panel;
  const unsigned off = L - p * per_panel;
  const unsigned cols_left = gx - p * panel;
  const unsigned w = cols_left < panel ? cols_left : panel;
  unsigned y = off / w;
  const unsigned x = p * panel + off % w;
  if (p & 1u) y = gy - 1u - y;
  return make_int2((int)x, (int)y);
}

template <int kPanel>
TL_DEVICE int2 rasterization2d_row() {
  static_assert(kPanel >= 1, "rasterization panel size must be >= 1");
  return rasterize_row(kPanel, blockIdx.x, blockIdx.y, gridDim.x, gridDim.y);
}

template <int kPanel>
TL_DEVICE int2 rasterization2d_col() {
  static_assert(kPanel >= 1, "rasterization panel size must be >= 1");
  return rasterize_col(kPanel, blockIdx.x, blockIdx.y, gridDim.x, gridDim.y);
}

}  // namespace tl
