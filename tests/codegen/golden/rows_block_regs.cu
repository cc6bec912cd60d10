namespace k0_rows_max_sub_exp_sum_div_acc {
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
}  // namespace k0_rows_max_sub_exp_sum_div_acc

// k0_rows_max_sub_exp_sum_div: rows, 256 threads per row holding 32 elements each in registers, vectors of 4, int indices
// schedule: rows:block_regs,threads=256,elems=32,vec=4,hold=2,fast_division=1,lengths=exact
// contract: in0, out0 16-byte aligned; int32 indices
extern "C" __global__ void __launch_bounds__(256, 2) k0_rows_max_sub_exp_sum_div(
    const float* __restrict__ in0,
    float* __restrict__ out0,
    const int nk,
    const int nr,
    const int e0,
    const int e1,
    const int ld0_s0,
    const int st0_s0
) {
  using namespace k0_rows_max_sub_exp_sum_div_acc;
  typedef int index_t;
  __shared__ Acc0 smem0[32];
  __shared__ Acc1 smem1[32];
  const int lane = threadIdx.x;

  for (index_t row = blockIdx.x; row < nk; row += gridDim.x) {
    const index_t c0 = row;

    const index_t st0_kb = c0 * st0_s0;
    const index_t ld0_kb = c0 * ld0_s0;

    // the row, read once
    typedef float ld0_t;
    ld0_t ld0_r[32];
    #pragma unroll
    for (int c = 0; c < 8; ++c) {
      const index_t i0 = ((index_t)c * 256 + lane) * 4;
      const fs::Vec<float, 4> ld0_v = *reinterpret_cast<const fs::Vec<float, 4>*>(in0 + ld0_kb + i0);
    #pragma unroll
      for (int j = 0; j < 4; ++j) ld0_r[c * 4 + j] = ld0_v.v[j];
    }

    float v2_h[32];  // computed once, in the first phase that needs it
    // phase 0
    Acc0 acc0 = Acc0_identity();
    #pragma unroll
    for (int c = 0; c < 8; ++c) {
    #pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float ld0 = ld0_r[c * 4 + j];
        acc0.r0 = fc::reduce_max(acc0.r0, ld0);
      }
    }

    acc0 = fs::block_allreduce(acc0, smem0, Acc0_identity());
    const float v0 = acc0.r0;
    // phase 1
    Acc1 acc1 = Acc1_identity();
    #pragma unroll
    for (int c = 0; c < 8; ++c) {
    #pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float ld0 = ld0_r[c * 4 + j];
        const float v1 = fc::sub(ld0, v0);
        const float v2 = fc::exp(v1);
        v2_h[c * 4 + j] = v2;
        acc1.r0 = fc::add(acc1.r0, v2);
      }
    }

    acc1 = fs::block_allreduce(acc1, smem1, Acc1_identity());
    const float v3 = acc1.r0;
    // epilogue
    bool fast_epilogue = true;  // cleared by fc::div_invariant for operands out of its range
    #pragma unroll
    for (int exact_pass = 0; exact_pass < 2; ++exact_pass) {  // pass 1 divides as IEEE division does
      if (exact_pass == 0 || !fast_epilogue) {
        #pragma unroll
        for (int c = 0; c < 8; ++c) {
          const index_t i0 = ((index_t)c * 256 + lane) * 4;
          fs::Vec<float, 4> st0_v;
        #pragma unroll
          for (int j = 0; j < 4; ++j) {
            const float v2 = v2_h[c * 4 + j];
            const float v4 = fc::div_invariant(v2, v3, fast_epilogue, exact_pass);

            st0_v.v[j] = v4;
          }
          *reinterpret_cast<fs::Vec<float, 4>*>(out0 + st0_kb + i0) = st0_v;
        }
      }
    }
  }
}
