#ifndef FUSEC_SCAN_CUH
#define FUSEC_SCAN_CUH
// Scans (fusec/kinds/scan.py): the row's threads' exclusive prefixes of one value each, by warp shuffles
// and, for rows of several warps, one exchange of the warps' totals through shared memory. Generic over the
// accumulator T (any trivially copyable type) and its combine Op (associative: a + b, a * b). Prefixes
// combine in one fixed order, so a kernel gives the same bits run to run.
namespace fs_scan {

// All bits zero, any T: what a thread past the row's end holds (it reaches no stored position).
template <class T> __device__ __forceinline__ T zero() {
  T z;
  memset(&z, 0, sizeof(T));
  return z;
}

// Shuffle up by `delta` lanes, any T (one 32-bit word at a time; narrower types through an int).
template <class T> __device__ __forceinline__ T shfl_up(const T& x, unsigned int delta) {
  if constexpr (sizeof(T) < 4) {
    return (T)__shfl_up_sync(0xffffffffu, (int)x, delta);
  } else {
    static_assert(sizeof(T) % 4 == 0, "scan accumulators are 1, 2 or a multiple of 4 bytes");
    unsigned int w[sizeof(T) / 4];
    memcpy(w, &x, sizeof(T));
#pragma unroll
    for (int k = 0; k < (int)(sizeof(T) / 4); ++k) w[k] = __shfl_up_sync(0xffffffffu, w[k], delta);
    T r;
    memcpy(&r, w, sizeof(T));
    return r;
  }
}
template <class T> __device__ __forceinline__ T shfl_idx(const T& x, int lane) {
  if constexpr (sizeof(T) < 4) {
    return (T)__shfl_sync(0xffffffffu, (int)x, lane);
  } else {
    return fs::shfl_idx_words(x, lane);  // (schedule.cuh, which every kernel includes first)
  }
}

// Inclusive prefix of x over the lanes of a warp (Hillis-Steele: 5 shuffles).
template <class T, class Op> __device__ __forceinline__ T warp_inclusive(T x, Op op) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (unsigned int d = 1; d < 32; d <<= 1) {
    const T y = shfl_up(x, d);
    if (lane >= (int)d) x = op(y, x);
  }
  return x;
}

// The exclusive prefix of x over the G threads of a row (threadIdx.x = 0..G-1, G a multiple of 32; the block
// holds blockDim.y rows), and in `total` the combination of all G values. Every thread of the block calls it
// (it synchronizes the block when G > 32); `totals` is this row's shared array of G / 32 values.
template <int G, class T, class Op>
__device__ __forceinline__ T row_exclusive(T x, T identity, Op op, T* totals, T& total) {
  static_assert(G % 32 == 0 && G <= 1024, "a row takes whole warps");
  const int lane = threadIdx.x & 31;
  const T inclusive = warp_inclusive(x, op);
  T exclusive = shfl_up(inclusive, 1);
  if (lane == 0) exclusive = identity;
  if constexpr (G == 32) {
    total = shfl_idx(inclusive, 31);
    return exclusive;
  } else {
    constexpr int W = G / 32;
    const int warp = threadIdx.x >> 5;
    if (lane == 31) totals[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {  // the first warp scans the warps' totals
      T t = lane < W ? totals[lane] : identity;
      t = warp_inclusive(t, op);
      if (lane < W) totals[lane] = t;
    }
    __syncthreads();
    const T before = warp == 0 ? identity : totals[warp - 1];
    total = totals[W - 1];
    __syncthreads();  // the next call writes totals again
    return op(before, exclusive);
  }
}

// Rows along threadIdx.x (32 per block), S threads along each row (threadIdx.y): the exclusive prefix of x over
// the row's threads before this one, and in `total` all S values combined, in order. Every thread of the block
// calls it; `totals` is shared [S][32].
template <int S, class T, class Op>
__device__ __forceinline__ T column_exclusive(T x, T identity, Op op, T (*totals)[32], T& total) {
  if constexpr (S == 1) {
    total = x;
    return identity;
  } else {
    totals[threadIdx.y][threadIdx.x] = x;
    __syncthreads();
    T before = identity;
    T all = totals[0][threadIdx.x];
    if (threadIdx.y > 0) before = all;
#pragma unroll
    for (int y = 1; y < S; ++y) {
      const T v = totals[y][threadIdx.x];
      if (y < (int)threadIdx.y) before = op(before, v);
      all = op(all, v);
    }
    total = all;
    __syncthreads();  // the next call writes totals again
    return before;
  }
}

}  // namespace fs_scan
#endif
