namespace k0_rows_max_sub_exp_sum_div_argmax_acc {
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
struct alignas(4) Acc1 {
  fc::ArgPair<float, index_t> r0;
};
__device__ __forceinline__ Acc1 Acc1_identity() {
  Acc1 a;
  a.r0 = fc::make_arg_pair(__int_as_float((int)0xff800000U), fc::largest_index<index_t>());
  return a;
}
__device__ __forceinline__ void combine(Acc1& a, const Acc1& b) {
  a.r0 = fc::argmax_combine(a.r0, b.r0);
}
}  // namespace k0_rows_max_sub_exp_sum_div_argmax_acc

// k0_rows_max_sub_exp_sum_div_argmax: rows, a warp per row, int indices
// schedule: rows:warp
// contract: any alignment (no vector accesses); int32 indices
extern "C" __global__ void __launch_bounds__(256, 2) k0_rows_max_sub_exp_sum_div_argmax(
    const float* __restrict__ in0,
    float* __restrict__ out0,
    long long* __restrict__ out1,
    const int nk,
    const int nr,
    const int e0,
    const int e1,
    const int ld0_s0,
    const int ld0_s1,
    const int ix0_s1,
    const int st0_s0,
    const int st1_s0
) {
  using namespace k0_rows_max_sub_exp_sum_div_argmax_acc;
  typedef int index_t;
  const int lane = threadIdx.x & 31;
  const index_t first_row = (index_t)blockIdx.x * 8 + (threadIdx.x >> 5);
  const index_t row_step = (index_t)gridDim.x * 8;

  for (index_t row = first_row; row < nk; row += row_step) {
    const index_t c0 = row;

    const index_t st0_kb = c0 * st0_s0;
    const index_t st1_kb = c0 * st1_s0;
    const index_t ld0_kb = c0 * ld0_s0;

    // phase 0
    Acc0 acc0 = Acc0_identity();
    for (index_t i = lane; i < nr; i += 32) {
      const index_t c1 = i;
      const float ld0 = in0[ld0_kb + c1 * ld0_s1];
      acc0.r0 = fc::reduce_max(acc0.r0, ld0);
      fc::exp_sum_next(acc0.r1, ld0);
    }
    acc0 = fs::warp_allreduce(acc0);
    const float v0 = acc0.r0;
    const float v3 = fc::exp_sum_value(acc0.r1);
    // phase 1
    Acc1 acc1 = Acc1_identity();
    for (index_t i = lane; i < nr; i += 32) {
      const index_t c1 = i;
      const index_t ix0 = c1 * ix0_s1;
      const float ld0 = in0[ld0_kb + c1 * ld0_s1];
      const float v1 = fc::sub(ld0, v0);
      const float v2 = fc::exp(v1);
      const float v4 = fc::div(v2, v3);
      fc::argmax_next(acc1.r0, v4, (index_t)(ix0));
    }
    acc1 = fs::warp_allreduce(acc1);
    const float v5 = (acc1.r0).value;
    const long long v7 = (long long)(acc1.r0).index;
    if (lane == 0) {
      out0[st0_kb] = v5;
      out1[st1_kb] = v7;
    }
  }
}
