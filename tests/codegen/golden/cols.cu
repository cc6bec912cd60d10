#ifndef FUSEC_COLS_SPLIT_HELPERS
#define FUSEC_COLS_SPLIT_HELPERS
namespace fs {
// Whether this block is the last of `count` blocks to arrive at `counter` (their writes are then visible);
// the last one resets the counter, so the workspace stays zeroed. For blocks of any shape.
__device__ __forceinline__ bool arrive_last_of(unsigned int* counter, unsigned int count) {
  __shared__ unsigned int last;
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    __threadfence();
    const unsigned int arrived = atomicAdd(counter, 1u);
    last = arrived == count - 1 ? 1u : 0u;
    if (last) atomicExch(counter, 0u);
  }
  __syncthreads();
  __threadfence();
  return last != 0u;
}
// fs::grid_barrier for blocks of any shape.
__device__ __forceinline__ void grid_barrier_xy(unsigned int* counters) {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    volatile unsigned int* generation = counters + 1;
    const unsigned int seen = *generation;
    __threadfence();
    if (atomicAdd(counters, 1u) == gridDim.x - 1) {
      atomicExch(counters, 0u);
      __threadfence();
      atomicAdd(counters + 1, 1u);
    } else {
      while (*generation == seen) __nanosleep(64);
    }
    __threadfence();
  }
  __syncthreads();
}
}  // namespace fs
#endif
#ifndef FUSEC_COLS_HELPERS
#define FUSEC_COLS_HELPERS
namespace fs {
// Rows of the shared array column_allreduce takes: a warp's worth of partials when whole warps hold several
// threadIdx.y of the same columns (TILE < 32, combined by shuffles first), else one per threadIdx.y.
template <int TILE, int SPLIT> __host__ __device__ constexpr int column_rows() {
  return (TILE < 32 && (TILE * SPLIT) % 32 == 0) ? TILE * SPLIT / 32 : SPLIT;
}
// 2-D block (TILE x SPLIT): every thread gets the combination over threadIdx.y of its column's values, in
// a fixed order (fs::column_allreduce of the schedule helpers, with shuffles first when TILE < 32).
template <class T, int TILE, int SPLIT> __device__ __forceinline__ T tile_column_allreduce(T a, T (*smem)[TILE]) {
  constexpr int rows = column_rows<TILE, SPLIT>();
  if constexpr (rows != SPLIT) {  // the lanes of a column in a warp differ in the bits TILE..16
    const int linear = threadIdx.x + threadIdx.y * TILE;
#pragma unroll
    for (int m = TILE; m < 32; m <<= 1) {
      const T b = shfl_xor_words(a, m);
      combine(a, b);
    }
    a = shfl_idx_words(a, (linear & 31) & (TILE - 1));  // the column's first lane's result
    __syncthreads();
    if ((linear & 31) < TILE) smem[linear >> 5][threadIdx.x] = a;
  } else {
    __syncthreads();
    smem[threadIdx.y][threadIdx.x] = a;
  }
  __syncthreads();
  T r = smem[0][threadIdx.x];
#pragma unroll
  for (int y = 1; y < rows; ++y) combine(r, smem[y][threadIdx.x]);
  return r;
}
}  // namespace fs
#endif
#ifndef FUSEC_COLS_PARTIALS
#define FUSEC_COLS_PARTIALS
namespace fs {
// Every thread of column threadIdx.x gets the combination of `count` block partials of its tile,
// part[(first + s) * TILE + threadIdx.x] for s = 0..count-1, in a fixed order.
template <class T, int TILE, int SPLIT>
__device__ __forceinline__ T combine_column_partials(const T* part, unsigned long long first, unsigned int count,
                                                     const T& identity, T (*smem)[TILE]) {
  T a = identity;
  for (unsigned int s = threadIdx.y; s < count; s += SPLIT) {
    const T x = load_cg(part + (first + s) * TILE + threadIdx.x);
    combine(a, x);
  }
  return tile_column_allreduce<T, TILE, SPLIT>(a, smem);
}
}  // namespace fs
#endif
namespace k0_cols_max_sub_exp_sum_div_acc {
typedef int index_t;
struct alignas(4) Acc0 {
  float r0;
  fc::ExpSum<float> r1;
};
__device__ __forceinline__ Acc0 Acc0_identity() {
  Acc0 a;
  a.r0 = __int_as_float((int)0xff800000U);
  a.r1 = fc::exp_sum_identity<float>();
  return a;
}
__device__ __forceinline__ void combine(Acc0& a, const Acc0& b) {
  a.r0 = fc::reduce_max(a.r0, b.r0);
  a.r1 = fc::exp_sum_combine(a.r1, b.r1);
}
}  // namespace k0_cols_max_sub_exp_sum_div_acc

// k0_cols_max_sub_exp_sum_div: cols, grid_barrier, 32 kept indices x 8 threads along the reduced axes per block, int indices
// schedule: cols:grid_barrier,tile=32,split=8,blocks=0
// contract: any alignment (no vector accesses); int32 indices
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
      fc::exp_sum_next(acc0.r1, fc::cast<float>(ld0));
    }
    acc0 = fs::tile_column_allreduce<Acc0, 32, 8>(acc0, smem0);
    if (per_tile > 1) {
      Acc0* const part0 = reinterpret_cast<Acc0*>(ws + ws_offset);
      ws_offset += fs::round_up_128((unsigned long long)gridDim.x * 32 * sizeof(Acc0));
      if (threadIdx.y == 0) part0[(unsigned long long)blockIdx.x * 32 + threadIdx.x] = acc0;
      fs::grid_barrier_xy(counters);
      acc0 = fs::combine_column_partials<Acc0, 32, 8>(
          part0, (unsigned long long)tile * per_tile, per_tile, Acc0_identity(), smem0);
    }
    const __half v0 = fc::cast<__half>(acc0.r0);
    const __half v3 = fc::cast<__half>(fc::exp_sum_value(acc0.r1));
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
