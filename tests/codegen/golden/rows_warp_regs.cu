namespace k0_rows_max_sub_exp_sum_div_argmax_acc {
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
struct alignas(4) Acc2 {
  fc::ArgPair<float, index_t> r0;
};
__device__ __forceinline__ Acc2 Acc2_identity() {
  Acc2 a;
  a.r0 = fc::make_arg_pair(__int_as_float((int)0xff800000U), fc::largest_index<index_t>());
  return a;
}
__device__ __forceinline__ void combine(Acc2& a, const Acc2& b) {
  a.r0 = fc::argmax_combine(a.r0, b.r0);
}
}  // namespace k0_rows_max_sub_exp_sum_div_argmax_acc

// k0_rows_max_sub_exp_sum_div_argmax: rows, 4 threads per row holding 16 elements each in registers, vectors of 4, int indices
// schedule: rows:warp_regs,threads=4,elems=16,vec=4,hold=2,fast_division=1,lengths=exact
// contract: in0 16-byte aligned; others any; int32 indices
extern "C" __global__ void __launch_bounds__(256, 2) k0_rows_max_sub_exp_sum_div_argmax(
    const float* __restrict__ in0,
    float* __restrict__ out0,
    long long* __restrict__ out1,
    const int nk,
    const int nr,
    const int e0,
    const int e1,
    const int ld0_s0,
    const int st0_s0,
    const int st1_s0
) {
  using namespace k0_rows_max_sub_exp_sum_div_argmax_acc;
  typedef int index_t;
  const int lane = threadIdx.x & 3;
  const index_t row_step = (index_t)gridDim.x * 64;

  for (index_t warp_row = (index_t)blockIdx.x * 64 + (threadIdx.x >> 5) * 8; warp_row < nk;
       warp_row += row_step) {
    const index_t my_row = warp_row + (index_t)((threadIdx.x & 31) / 4);
    const bool active = my_row < nk;
    const index_t row = active ? my_row : nk - 1;
    const index_t c0 = row;

    const index_t st0_kb = c0 * st0_s0;
    const index_t st1_kb = c0 * st1_s0;
    const index_t ld0_kb = c0 * ld0_s0;

    // the row, read once
    typedef float ld0_t;
    ld0_t ld0_r[16];
    #pragma unroll
    for (int c = 0; c < 4; ++c) {
      const index_t i0 = ((index_t)c * 4 + lane) * 4;
      const fs::Vec<float, 4> ld0_v = *reinterpret_cast<const fs::Vec<float, 4>*>(in0 + ld0_kb + i0);
    #pragma unroll
      for (int j = 0; j < 4; ++j) ld0_r[c * 4 + j] = ld0_v.v[j];
    }

    float v2_h[16];  // computed once, in the first phase that needs it
    // phase 0
    Acc0 acc0 = Acc0_identity();
    #pragma unroll
    for (int c = 0; c < 4; ++c) {
    #pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float ld0 = ld0_r[c * 4 + j];
        acc0.r0 = fc::reduce_max(acc0.r0, ld0);
      }
    }

    acc0 = fs::subwarp_allreduce<4>(acc0);
    const float v0 = acc0.r0;
    // phase 1
    Acc1 acc1 = Acc1_identity();
    #pragma unroll
    for (int c = 0; c < 4; ++c) {
    #pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float ld0 = ld0_r[c * 4 + j];
        const float v1 = fc::sub(ld0, v0);
        const float v2 = fc::exp(v1);
        v2_h[c * 4 + j] = v2;
        acc1.r0 = fc::add(acc1.r0, v2);
      }
    }

    acc1 = fs::subwarp_allreduce<4>(acc1);
    const float v3 = acc1.r0;
    // phase 2
    Acc2 acc2 = Acc2_identity();
    bool fast2 = true;  // cleared by fc::div_invariant for operands out of its range
    #pragma unroll
    for (int exact_pass = 0; exact_pass < 2; ++exact_pass) {  // pass 1 divides as IEEE division does
      if (exact_pass == 0 || !fast2) {
        if (exact_pass == 1) acc2 = Acc2_identity();
        #pragma unroll
        for (int c = 0; c < 4; ++c) {
        #pragma unroll
          for (int j = 0; j < 4; ++j) {
            const index_t i = ((index_t)c * 4 + lane) * 4 + j;
            const index_t ix0 = i;
            const float v2 = v2_h[c * 4 + j];
            const float v4 = fc::div_invariant(v2, v3, fast2, exact_pass);
            if (c == 0 && j == 0) {  // the thread's first element: its partial is the identity
              acc2.r0 = fc::make_arg_pair(v4, (index_t)(ix0));
            } else {
              fc::argmax_next_held(acc2.r0, v4, (index_t)(ix0));
            }
          }
        }
      }
    }

    acc2 = fs::subwarp_allreduce<4>(acc2);
    const float v5 = (acc2.r0).value;
    const long long v7 = (long long)(acc2.r0).index;
    if (lane == 0 && active) {
      out0[st0_kb] = v5;
      out1[st1_kb] = v7;
    }
  }
}
