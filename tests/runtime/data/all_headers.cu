// Uses every wrapper of tl.cuh once, so that a compile (nvcc or NVRTC, sm_80 and sm_90a)
// type-checks every header and ptxas accepts every PTX string. Not meant to be run.
#include "tl.cuh"

extern "C" __global__ void __launch_bounds__(384, 1)
all_headers(float* out_f, half_t* out_h, bfloat16_t* out_b, int* out_i, long long* out_l,
            unsigned* out_u, double* out_d, const float* in_f, int n, float scale,
            const __grid_constant__ tl::TensorMap tmap) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const int tid = threadIdx.x;
  float x = in_f[tid] * scale;
  half_t h = tl::cast<half_t>(x);
  bfloat16_t b = tl::cast<bfloat16_t>(x);
  fp8_e4_t e4 = tl::cast<fp8_e4_t>(h);
  fp8_e5_t e5 = tl::cast<fp8_e5_t>(b);
  // common.cuh
  float acc = tl::cast<float>(e4) + tl::cast<float>(e5) + tl::cast<float>(tl::cast<int>(h));
  acc += tl::cast<float>(tl::cast<bool>(b)) + (float)tl::cast<double>(h);
  acc += tl::cast<float>(tl::cast<unsigned char>(x)) + tl::cast<float>(tl::cast<long long>(b));
  acc += tl::cast<float>(tl::cast<half_t>(tl::cast<bfloat16_t>(h)));
  acc += tl::cast<float>(tl::cast<bfloat16_t>(n)) + tl::cast<float>(tl::cast<half_t>(out_l[0]));
  acc += tl::bit_cast<float>(tl::bit_cast<unsigned>(x));
  uint32_t ph = tl::pack_half2(x, acc), pb = tl::pack_bf162(acc, x);
  float2 f2 = tl::half2_to_float2(tl::float2_to_half2(make_float2(x, acc)));
  f2 = tl::bf162_to_float2(tl::float2_to_bf162(f2));
  f2 = tl::fp8x2_e4m3_to_float2(tl::float2_to_fp8x2_e4m3(f2));
  f2 = tl::fp8x2_e5m2_to_float2(tl::float2_to_fp8x2_e5m2(f2));
  tl::vec<half_t, 8> v8 = tl::broadcast<half_t, 8>(h);
  tl::vec<float, 3> v3;
  v3[0] = f2.x; v3[1] = f2.y; v3[2] = (float)(ph ^ pb);
  *(tl::vec<half_t, 8>*)(out_h + 8 * tid) = v8 * v8 + v8 - v8 / v8;
  v3 = v3 + v3;
  tl::device_assert(n >= 0, "n must be non-negative");
  // math.cuh
  acc += tl::exp(x) + tl::exp2(x) + tl::exp10(x) + tl::log(x) + tl::log2(x) + tl::log10(x);
  acc += tl::log1p(x) + tl::expm1(x) + tl::tanh(x) + tl::sin(x) + tl::cos(x) + tl::tan(x);
  acc += tl::asin(x) + tl::acos(x) + tl::atan(x) + tl::sinh(x) + tl::cosh(x) + tl::erf(x);
  acc += tl::sigmoid(x) + tl::rsqrt(x) + tl::rcp(x) + tl::sqrt(x) + tl::floor(x) + tl::ceil(x);
  acc += tl::round(x) + tl::trunc(x) + tl::nearbyint(x) + tl::abs(x) + tl::pow(x, acc);
  acc += tl::fmod(x, acc) + tl::atan2(x, acc) + (tl::isnan(x) + tl::isinf(x) + tl::isfinite(x));
  acc += tl::fast_exp(x) + tl::fast_exp2(x) + tl::fast_log(x) + tl::fast_log2(x);
  acc += tl::fast_sin(x) + tl::fast_cos(x) + tl::fast_tanh(x) + tl::fast_sigmoid(x);
  acc += tl::fast_rsqrt(x) + tl::fast_rcp(x) + tl::max(x, acc) + tl::min(x, acc);
  acc += (float)tl::exp(tl::cast<double>(x)) + tl::cast<float>(tl::exp(h)) + tl::cast<float>(tl::exp(b));
  acc += tl::cast<float>(tl::max(h, h) + tl::max_nan(h, h)) + tl::cast<float>(tl::min(b, b) + tl::min_nan(b, b));
  acc += tl::max_nan(x, acc) + tl::min_nan(x, acc) + (float)tl::abs(n) + (float)tl::sqrt(n);
  acc += tl::cast<float>(tl::max(e4, e4)) + tl::cast<float>(tl::min(e5, e5));
  acc += (float)tl::floordiv(n, 3) + (float)tl::floormod(n, -3) + (float)tl::max(n, 2);
  acc += (float)tl::floordiv((long long)n, 7) + tl::ceildiv(n, 4) + tl::isnan(h) + tl::isinf(b);
  acc += tl::infinity<float>() + tl::cast<float>(tl::infinity<half_t>());
  acc += tl::cast<float>(tl::max_value<bfloat16_t>()) + tl::cast<float>(tl::min_value<fp8_e4_t>());
  acc += (float)tl::max_value<int>() + (float)tl::min_value<long long>() +
         tl::cast<float>(tl::infinity<fp8_e5_t>()) + (float)tl::infinity<double>();
  // reduce.cuh
  acc = tl::warp_allreduce<tl::SumOp, 31>(acc);
  acc += tl::warp_allreduce_lanes<tl::MaxOp, 4>(x) + tl::warp_allreduce<tl::MinOp, 28>(x);
  acc += tl::warp_allreduce<tl::AbsMaxOp, 3>(x) + tl::warp_allreduce<tl::MaxNanOp, 3>(x);
  acc += tl::warp_allreduce<tl::MinNanOp, 1>(x);
  int bits = tl::warp_allreduce<tl::BitAndOp, 31>(n) + tl::warp_allreduce<tl::BitOrOp, 31>(n) +
             tl::warp_allreduce<tl::BitXorOp, 31>(n);
  h = tl::warp_allreduce<tl::SumOp, 31>(h);
  b = tl::warp_allreduce<tl::MaxOp, 31>(b);
  acc += tl::shfl_xor(x, 1) + tl::shfl_down(x, 2) + tl::shfl_up(x, 4) + tl::shfl_sync(x, 0);
  acc += tl::cast<float>(tl::shfl_xor(e4, 1)) + (float)tl::shfl_xor((signed char)bits, 2);
  acc += (float)tl::shfl_xor((long long)bits, 3) + (float)tl::shfl_xor(true, 1);
  float* ws = reinterpret_cast<float*>(smem);
  acc += tl::block_allreduce<tl::SumOp, 12>(acc, ws);
  // atomic.cuh
  acc += tl::atomic_add(out_f, x) + tl::atomic_add(out_f, x, tl::MemoryOrder::acq_rel);
  acc += tl::atomic_max(out_f + 1, x) + tl::atomic_min(out_f + 2, x, tl::MemoryOrder::release);
  acc += tl::cast<float>(tl::atomic_add(out_h, x) + tl::atomic_add(out_h, h, tl::MemoryOrder::seq_cst));
  acc += tl::cast<float>(tl::atomic_add(out_b, x) + tl::atomic_add(out_b, x, tl::MemoryOrder::acquire));
  acc += tl::cast<float>(tl::atomic_max(out_h + 1, h)) +
         tl::cast<float>(tl::atomic_min(out_b + 1, b, tl::MemoryOrder::acquire));
  acc += (float)(tl::atomic_add(out_i, 1) + tl::atomic_add(out_i, 2, tl::MemoryOrder::release));
  acc += (float)(tl::atomic_max(out_i + 1, n) + tl::atomic_min(out_i + 2, n, tl::MemoryOrder::seq_cst));
  acc += (float)(tl::atomic_add(out_l, 1) + tl::atomic_max(out_l + 1, (long long)n, tl::MemoryOrder::acq_rel));
  acc += (float)(tl::atomic_add(out_u, 1u) + tl::atomic_min(out_u + 1, 3u) + tl::atomic_max(out_u + 2, 4u, tl::MemoryOrder::consume));
  acc += (float)(tl::atomic_add(out_d, 1.0) + tl::atomic_add(out_d, 1.0, tl::MemoryOrder::acq_rel));
  acc += (float)(tl::atomic_max(out_d + 1, 1.0) + tl::atomic_min(out_d + 2, -1.0, tl::MemoryOrder::acquire));
  acc += tl::atomic_load(out_f + 3) + tl::atomic_load(out_f + 3, tl::MemoryOrder::relaxed);
  acc += tl::cast<float>(tl::atomic_load(out_h + 3, tl::MemoryOrder::acquire));
  acc += (float)tl::atomic_load(out_l + 3);
  tl::atomic_store(out_f + 4, acc);
  tl::atomic_store(out_h + 4, acc, tl::MemoryOrder::release);
  tl::atomic_store(out_l + 4, (long long)n, tl::MemoryOrder::relaxed);
  float2 o2 = tl::atomic_addx2(out_f + 8, in_f + 8);
  float4 o4 = tl::atomic_addx4(out_f + 16, in_f + 16);
  __half2 oh = tl::atomic_addx2(out_h + 8, in_f);
  __half2 oh4 = tl::atomic_addx4(out_h + 16, out_h + 32);
  __nv_bfloat162 ob = tl::atomic_addx2(out_b + 8, out_b + 32);
  __nv_bfloat162 ob4 = tl::atomic_addx4(out_b + 16, in_f);
  acc += o2.x + o4.w + __low2float(oh) + __high2float(oh4) + __low2float(ob) + __high2float(ob4);
  // print.cuh
  if (tid == 0 && n == 12345) {
    tl::print_msg("hello");
    tl::print_var("x", x);
    tl::print_var("h", h);
    tl::print_var("b", b);
    tl::print_var("e4", e4);
    tl::print_var("e5", e5);
    tl::print_var("d", (double)x);
    tl::print_var("i", n);
    tl::print_var("u", (unsigned)n);
    tl::print_var("ll", (long long)n);
    tl::print_var("ull", (unsigned long long)n);
    tl::print_var("i64", (int64_t)n);
    tl::print_var("i8", (signed char)n);
    tl::print_var("u8", (unsigned char)n);
    tl::print_var("i16", (short)n);
    tl::print_var("u16", (unsigned short)n);
    tl::print_var("bool", n > 0);
    tl::print_var("ptr", out_f);
    tl::print_buffer_value("buffer<A, float>", "A", 3, x);
    tl::print_buffer_value("buffer<B, half_t>", "B", 4, h);
  }
  // rasterize.cuh
  int2 r = tl::rasterization2d_row<4>();
  int2 c = tl::rasterization2d_col<3>();
  int2 rr = tl::rasterize_row(5, blockIdx.x, blockIdx.y, gridDim.x, gridDim.y);
  bits += r.x + r.y + c.x + c.y + rr.x + tl::rasterize_col(2, 1, 1, 4, 4).y;
  // copy.cuh
  unsigned char* s = smem + 1024;
  tl::cp_async<4>(s + 16 * tid, in_f + tid);
  tl::cp_async<8>(s + 16 * tid, in_f + 2 * tid);
  tl::cp_async<16>(s + 16 * tid, in_f + 4 * tid);
  tl::cp_async_zfill<16>(s + 16 * tid, in_f + 4 * tid, n & 15);
  tl::cp_async_zfill<8>(s + 16 * tid, in_f + 4 * tid, n & 7);
  tl::cp_async_pred<4>(s + 16 * tid, in_f + 4 * tid, n > tid);
  tl::cp_async_commit();
  tl::cp_async_wait<1>();
  tl::cp_async_wait_all();
  __syncthreads();
  uint4 q16 = tl::load_vec<16>(s + 16 * tid);
  uint2 q8 = tl::load_vec<8>(s);
  tl::store_vec<16>(out_f + 4 * tid, q16);
  tl::copy_vec<4>(out_f + tid, s + 4 * tid);
  tl::copy_vec<2>(out_h + tid, s + 2 * tid);
  uint4 g16 = tl::ldg_nc_16(in_f + 4 * tid);
  bits += (int)(q8.x + g16.y);
  // ldmatrix.cuh + mma.cuh
  uint32_t a[4], bb[2], m[4];
  tl::ldmatrix_x4(a, s + 16 * (tid & 31));
  tl::ldmatrix_x2(bb, s + 16 * (tid & 15));
  tl::ldmatrix_x1(m[0], s + 16 * (tid & 7));
  tl::ldmatrix_x4_trans(m, s + 16 * (tid & 31));
  tl::ldmatrix_x2_trans(m[0], m[1], s);
  tl::ldmatrix_x1_trans(m, s);
  float cf[4] = {x, acc, x, acc}, df[4];
  tl::mma_m16n8k16_f32_f16(df, a, bb, cf);
  tl::mma_m16n8k16_f32_bf16(cf, m, bb, df);
  tl::mma_m16n8k8_f32_tf32(df, a, bb, cf);
  uint32_t ch[2] = {ph, pb};
  tl::mma_m16n8k16_f16_f16(ch, a, bb, ch);
  int ci[4] = {n, n, bits, bits};
  tl::mma_m16n8k32_s32_s8(ci, a, bb, ci);
  tl::mma_m16n8k32_s32_u8(ci, m, bb, ci);
  a[0] ^= tl::float_to_tf32(x);
#if __CUDA_ARCH__ >= 890
  tl::mma_m16n8k32_f32_e4m3(cf, a, bb, df);
  tl::mma_m16n8k32_f32_e5m2(df, a, bb, cf);
  tl::mma_m16n8k32_f32_e4m3_e5m2(cf, a, bb, df);
  tl::mma_m16n8k32_f32_e5m2_e4m3(df, a, bb, cf);
#endif
  // barrier.cuh (sm_80 part)
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + 512);
  if (tid == 0) tl::mbarrier_init(bar, 1);
  __syncthreads();
  tl::mbarrier_arrive(bar);
  tl::mbarrier_wait(bar, 0);
  bits += tl::mbarrier_test_wait_parity(bar, 1);
  tl::named_barrier_sync(1, 128);
  tl::named_barrier_arrive(2, 256);
#if __CUDA_ARCH__ >= 900
  tl::mbarrier_arrive_cnt(bar, 1);
  tl::mbarrier_arrive_expect_tx(bar, 256);
  tl::mbarrier_expect_tx(bar, 128);
  bits += tl::mbarrier_try_wait_parity(bar, 1);
  tl::mbarrier_arrive_remote(bar, 0);
  tl::fence_proxy_async();
  tl::fence_view_async_shared();
  tl::fence_mbarrier_init();
  bits += tl::cluster_ctarank() + tl::cluster_size();
  tl::cluster_arrive();
  tl::cluster_wait();
  tl::cluster_sync();
  tl::stmatrix_x1(s, ph);
  tl::stmatrix_x2(s, ph, pb);
  tl::stmatrix_x4(s, a);
  tl::stmatrix_x1_trans(s, ph);
  tl::stmatrix_x2_trans(s, ph, pb);
  tl::stmatrix_x4_trans(s, m);
  // tma.cuh
  const void* desc = &tmap;
  tl::prefetch_tma_descriptor(desc);
  void* dst = smem + 2048;
  tl::tma_load(desc, bar, dst, n);
  tl::tma_load(desc, bar, dst, n, 1);
  tl::tma_load(desc, bar, dst, n, 1, 2);
  tl::tma_load(desc, bar, dst, n, 1, 2, 3);
  tl::tma_load(desc, bar, dst, n, 1, 2, 3, 4);
  tl::tma_load_multicast(desc, bar, dst, 0x3, n);
  tl::tma_load_multicast(desc, bar, dst, 0x3, n, 1);
  tl::tma_load_multicast(desc, bar, dst, 0x3, n, 1, 2);
  tl::tma_load_multicast(desc, bar, dst, 0x3, n, 1, 2, 3);
  tl::tma_load_multicast(desc, bar, dst, 0x3, n, 1, 2, 3, 4);
  tl::tma_store(desc, dst, n);
  tl::tma_store(desc, dst, n, 1);
  tl::tma_store(desc, dst, n, 1, 2);
  tl::tma_store(desc, dst, n, 1, 2, 3);
  tl::tma_store(desc, dst, n, 1, 2, 3, 4);
  tl::tma_store_add(desc, dst, n);
  tl::tma_store_add(desc, dst, n, 1);
  tl::tma_store_add(desc, dst, n, 1, 2);
  tl::tma_store_add(desc, dst, n, 1, 2, 3);
  tl::tma_store_add(desc, dst, n, 1, 2, 3, 4);
  tl::tma_store_arrive();
  tl::tma_store_wait<0>();
  tl::tma_store_wait_complete<1>();
  tl::tma_load_1d(dst, in_f, 256, bar);
  tl::tma_store_1d(out_f, dst, 256);
#endif
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // wgmma.cuh + setmaxnreg.cuh
  if (tid < 128) {
    tl::setmaxnreg_dec<40>();
  } else {
    tl::setmaxnreg_inc<232>();
  }
  float wacc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) wacc[i] = x;
  uint64_t da = tl::make_smem_desc(smem + 4096, tl::WgmmaSwizzle::k128B, 16, 1024);
  uint64_t db = tl::smem_desc_advance(da, 32);
  tl::wgmma_fence_operands(wacc, 128);
  tl::wgmma_fence();
  tl::wgmma_m64n256k16_ss_f32_bf16(wacc, da, db, 1);
  tl::wgmma_m64n8k16_ss_f32_f16<1, -1, 1, 1>(wacc, da, db, n);
  tl::wgmma_ss<128, half_t>(wacc, da, db, 0);
  tl::wgmma_ss<72, bfloat16_t, -1, 1, 0, 1>(wacc, da, db, 1);
  tl::wgmma_rs<256, bfloat16_t>(wacc, a, db, 1);
  tl::wgmma_rs<64, half_t, 1, 1, 1>(wacc, m, db, 1);
  tl::wgmma_m64n120k16_rs_f32_f16(wacc, a, db, 1);
  tl::wgmma_commit();
  tl::wgmma_wait<1>();
  tl::wgmma_wait<0>();
  tl::wgmma_fence_operands(wacc, 128);
  uint32_t wr = 0;
  tl::wgmma_fence_operand(wr);
#pragma unroll
  for (int i = 0; i < 128; ++i) acc += wacc[i];
  bits += wr;
#endif
  out_f[tid] = acc + cf[0] + cf[3] + df[1] + v3[2] + (float)(ci[0] + ci[3] + bits) +
               (float)(ch[0] + ch[1]);
  out_b[tid] = b;
  out_i[tid] = bits;
}
