// ---- fusec schedule helpers ---------------------------------------------------------------------------
// Generic over the accumulator type T of a phase (a struct of every reduction's partial, padded to 4 bytes,
// with an overloaded combine(T&, const T&) next to it): warp and block all-reductions, a column
// all-reduction for 2-D blocks, block partials in a global workspace, a grid barrier, and 16-byte vectors.
// Every reduction here combines in one fixed order, so a kernel gives the same bits run to run.
#ifndef FUSEC_SCHEDULE_CUH
#define FUSEC_SCHEDULE_CUH

namespace fs {

// N elements of T moved as one aligned vector (a 16-byte load or store when N * sizeof(T) == 16).
template <class T, int N> struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// Element j of a vector the kernel loaded (templates read 1-byte elements through this; wider ones as v.v[j]).
// A 1-byte element is taken from its 32-bit word by one bfe that sign- or zero-extends it to 32 bits, which the
// optimizer cannot see through. Read as v.v[j], NVRTC 13.5 (NVVM) miscompiles arithmetic on the first byte of
// each 16-bit half of a 16-byte vector of signed bytes: it widens the 8-bit arithmetic to 16 bits without
// sign-extending that byte, so a min/max or comparison after it reads the next byte as the high bits (the PTX
// has `add.s16 r, half, x; min.s16 ...` with no cvt.s16.s8: x - 1, -x, abs(x), x // 2 of int8 elements; in
// GPU fuzz graph 2775, nanmin(y // 2) of int8 gave 64 for -64).
template <class T, int N> __device__ __forceinline__ T lane(const Vec<T, N>& v, int j) {
  if constexpr (sizeof(T) == 1) {
    unsigned int w = 0u, r;
    memcpy(&w, reinterpret_cast<const unsigned char*>(&v) + 4 * (j >> 2), N < 4 ? N : 4);
    if constexpr ((T)(-1) < (T)0) {
      asm("bfe.s32 %0, %1, %2, 8;" : "=r"(r) : "r"(w), "r"(8 * (j & 3)));
    } else {
      asm("bfe.u32 %0, %1, %2, 8;" : "=r"(r) : "r"(w), "r"(8 * (j & 3)));
    }
    return (T)r;
  } else {
    return v.v[j];
  }
}

// Shuffles of any trivially copyable T, one 32-bit word at a time.
template <class T> __device__ __forceinline__ T shfl_xor_words(const T& x, int lane_mask) {
  static_assert(sizeof(T) % 4 == 0, "accumulators are padded to a multiple of 4 bytes");
  unsigned int w[sizeof(T) / 4];
  memcpy(w, &x, sizeof(T));
#pragma unroll
  for (int k = 0; k < (int)(sizeof(T) / 4); ++k) w[k] = __shfl_xor_sync(0xffffffffu, w[k], lane_mask);
  T r;
  memcpy(&r, w, sizeof(T));
  return r;
}
template <class T> __device__ __forceinline__ T shfl_idx_words(const T& x, int lane) {
  unsigned int w[sizeof(T) / 4];
  memcpy(w, &x, sizeof(T));
#pragma unroll
  for (int k = 0; k < (int)(sizeof(T) / 4); ++k) w[k] = __shfl_sync(0xffffffffu, w[k], lane);
  T r;
  memcpy(&r, w, sizeof(T));
  return r;
}

// A load that bypasses L1 (reads partials other blocks wrote during this launch).
template <class T> __device__ __forceinline__ T load_cg(const T* p) {
  unsigned int w[sizeof(T) / 4];
  const unsigned int* q = reinterpret_cast<const unsigned int*>(p);
#pragma unroll
  for (int k = 0; k < (int)(sizeof(T) / 4); ++k) w[k] = __ldcg(q + k);
  T r;
  memcpy(&r, w, sizeof(T));
  return r;
}

// All 32 lanes get the combination of the 32 lanes' values: a butterfly, then lane 0's result (so that a
// combine that is not bitwise commutative, e.g. maximum(+0.0, -0.0), still leaves one value in the warp).
template <class T> __device__ __forceinline__ T warp_allreduce(T a) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) {
    const T b = shfl_xor_words(a, m);
    combine(a, b);
  }
  return shfl_idx_words(a, 0);
}

// Every lane of an aligned group of G lanes (G = 2, 4, ..., 32) gets the combination of the group's values:
// a butterfly inside the group, then the group's first lane's result. Every lane of the warp must call it.
template <int G, class T> __device__ __forceinline__ T subwarp_allreduce(T a) {
#pragma unroll
  for (int m = G / 2; m > 0; m >>= 1) {
    const T b = shfl_xor_words(a, m);
    combine(a, b);
  }
  return shfl_idx_words(a, (int)(threadIdx.x & 31) & ~(G - 1));
}

// Every thread of a 1-D block gets the combination of all its threads' values. smem: 32 elements.
template <class T> __device__ __forceinline__ T block_allreduce(T a, T* smem, const T& identity) {
  a = warp_allreduce(a);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the previous use of smem is over
  if (lane == 0) smem[warp] = a;
  __syncthreads();
  const T b = lane < (int)(blockDim.x >> 5) ? smem[lane] : identity;
  return warp_allreduce(b);  // every warp combines the same values in the same order
}

// 2-D block (TILE x SPLIT): every thread gets the combination over threadIdx.y of its column's values.
template <class T, int TILE, int SPLIT> __device__ __forceinline__ T column_allreduce(T a, T (*smem)[TILE]) {
  __syncthreads();
  smem[threadIdx.y][threadIdx.x] = a;
  __syncthreads();
  T r = smem[0][threadIdx.x];
#pragma unroll
  for (int y = 1; y < SPLIT; ++y) combine(r, smem[y][threadIdx.x]);
  return r;
}

// The combination of the gridDim.x block partials, in block order (then a fixed tree): every thread of
// every block that calls it gets the same bits.
template <class T> __device__ __forceinline__ T combine_partials(const T* part, const T& identity, T* smem) {
  T a = identity;
  for (unsigned int b = threadIdx.x; b < gridDim.x; b += blockDim.x) {
    const T x = load_cg(part + b);
    combine(a, x);
  }
  return block_allreduce(a, smem, identity);
}

__device__ __forceinline__ unsigned long long round_up_128(unsigned long long n) { return (n + 127ull) & ~127ull; }

// Whether this block is the last of the grid to get here (its partial and all others are then visible).
// counters[0] counts arrivals; the last block resets it, so the workspace is reusable.
__device__ __forceinline__ bool arrive_last(unsigned int* counters) {
  __shared__ unsigned int last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    const unsigned int arrived = atomicAdd(counters, 1u);
    last = arrived == gridDim.x - 1 ? 1u : 0u;
    if (last) atomicExch(counters, 0u);
  }
  __syncthreads();
  __threadfence();
  return last != 0u;
}

// A barrier across the whole grid. Needs every block resident at once: the runtime sizes the grid to at
// most SMs x resident blocks per SM. counters[0] counts arrivals (reset by the last to arrive),
// counters[1] is the generation the waiting blocks watch.
__device__ __forceinline__ void grid_barrier(unsigned int* counters) {
  __syncthreads();
  if (threadIdx.x == 0) {
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

#endif  // FUSEC_SCHEDULE_CUH
// ---- end of fusec schedule helpers --------------------------------------------------------------------
