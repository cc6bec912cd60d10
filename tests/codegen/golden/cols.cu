namespace k0_cols_max_sub_exp_sum_div_acc {
typedef int index_t;
struct alignas(4) Acc0 {
  float r0;
};
__device__ __forceinline__ Acc0 Acc0_identity() {
  Acc0 a;
  a.r0 = __int_as_float((int)0xff800000U);
  return a;
}
__device__ __forceinline__ void combine(Acc0& a, const Acc0& b) {
  a.r0 = fc::reduce_max(a.r0, b.r0);
}
struct alignas(4) Acc1 {
  float r0;
};
__device__ __forceinline__ Acc1 Acc1_identity() {
  Acc1 a;
  a.r0 = 0x0.0p+0f;
  return a;
}
__device__ __forceinline__ void combine(Acc1& a, const Acc1& b) {
  a.r0 = fc::add(a.r0, b.r0);
}
}  // namespace k0_cols_max_sub_exp_sum_div_acc

// k0_cols_max_sub_exp_sum_div: cols, grid_barrier, 32 kept indices x 8 threads along the reduced axes per block, int indices
// schedule: cols:grid_barrier,tile=32,split=8,blocks=0
extern "C" __global__ void __launch_bounds__(256, 4) k0_cols_max_sub_exp_sum_div(
    const __half* __restrict__ in0,
    __half* __restrict__ out0,
    unsigned char* __restrict__ ws,
    const int nk,
    const int nr,
    const int e0,
    const int e1,
    const int ld0_s1,
    const int ld0_s0,
    const int st0_s1,
    const int st0_s0
) {
  using namespace k0_cols_max_sub_exp_sum_div_acc;
  typedef int index_t;
  __shared__ Acc0 smem0[fs::column_rows<32, 8>()][32];
  __shared__ Acc1 smem1[fs::column_rows<32, 8>()][32];

  const index_t tiles = (nk + 31) / 32;
  const unsigned int per_tile = (index_t)gridDim.x > tiles ? (unsigned int)(gridDim.x / tiles) : 1u;
  const index_t chunk = (nr + per_tile - 1) / per_tile;
  const index_t i_begin = (index_t)(blockIdx.x % per_tile) * chunk;
  const index_t i_end = nr - i_begin < chunk ? nr : i_begin + chunk;
  unsigned int* const counters = reinterpret_cast<unsigned int*>(ws);
  for (index_t tile = blockIdx.x / per_tile; tile < tiles; tile += gridDim.x / per_tile) {
    const index_t kept_index = tile * 32 + threadIdx.x;
    const bool active = kept_index < nk;
    const index_t row = active ? kept_index : 0;
    const index_t c1 = row;

    const index_t ld0_kb = c1 * ld0_s1;
    const index_t st0_kb = c1 * st0_s1;

    unsigned long long ws_offset = 128;
    // phase 0
    Acc0 acc0 = Acc0_identity();
#pragma unroll 4
    for (index_t i = i_begin + threadIdx.y; i < i_end; i += 8) {
      const index_t c0 = i;
      const __half ld0 = in0[ld0_kb + c0 * ld0_s0];
      acc0.r0 = fc::reduce_max(acc0.r0, fc::cast<float>(ld0));
    }
    acc0 = fs::column_allreduce<Acc0, 32, 8>(acc0, smem0);
    if (per_tile > 1) {
      Acc0* const part0 = reinterpret_cast<Acc0*>(ws + ws_offset);
      ws_offset += fs::round_up_128((unsigned long long)gridDim.x * 32 * sizeof(Acc0));
      if (threadIdx.y == 0) part0[(unsigned long long)blockIdx.x * 32 + threadIdx.x] = acc0;
      fs::grid_barrier(counters);
      acc0 = fs::combine_column_partials<Acc0, 32, 8>(
          part0, (unsigned long long)tile * per_tile, per_tile, Acc0_identity(), smem0);
    }
    const __half v0 = fc::cast<__half>(acc0.r0);
    // phase 1
    Acc1 acc1 = Acc1_identity();
#pragma unroll 4
    for (index_t i = i_begin + threadIdx.y; i < i_end; i += 8) {
      const index_t c0 = i;
      const __half ld0 = in0[ld0_kb + c0 * ld0_s0];
      const __half v1 = fc::sub(ld0, v0);
      const __half v2 = fc::exp(v1);
      acc1.r0 = fc::add(acc1.r0, fc::cast<float>(v2));
    }
    acc1 = fs::column_allreduce<Acc1, 32, 8>(acc1, smem1);
    if (per_tile > 1) {
      Acc1* const part1 = reinterpret_cast<Acc1*>(ws + ws_offset);
      ws_offset += fs::round_up_128((unsigned long long)gridDim.x * 32 * sizeof(Acc1));
      if (threadIdx.y == 0) part1[(unsigned long long)blockIdx.x * 32 + threadIdx.x] = acc1;
      fs::grid_barrier(counters);
      acc1 = fs::combine_column_partials<Acc1, 32, 8>(
          part1, (unsigned long long)tile * per_tile, per_tile, Acc1_identity(), smem1);
    }
    const __half v3 = fc::cast<__half>(acc1.r0);
    // epilogue
    if (active) {
      for (index_t i = i_begin + threadIdx.y; i < i_end; i += 8) {
        const index_t c0 = i;
        const __half ld0 = in0[ld0_kb + c0 * ld0_s0];
        const __half v1 = fc::sub(ld0, v0);
        const __half v2 = fc::exp(v1);
        const __half v4 = fc::div(v2, v3);
        out0[st0_kb + c0 * st0_s0] = v4;
      }
    }
  }
}
