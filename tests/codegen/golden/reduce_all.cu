namespace k0_reduceall_sum_cast_div_sub_square_acc {
typedef int index_t;
struct alignas(4) Acc0 {
  float r0;
  fc::Moments<float> r1;
};
__device__ __forceinline__ Acc0 Acc0_identity() {
  Acc0 a;
  a.r0 = 0x0.0p+0f;
  a.r1 = fc::moments_identity<float>();
  return a;
}
__device__ __forceinline__ void combine(Acc0& a, const Acc0& b) {
  a.r0 = fc::add(a.r0, b.r0);
  a.r1 = fc::moments_combine(a.r1, b.r1);
}
}  // namespace k0_reduceall_sum_cast_div_sub_square_acc

// k0_reduceall_sum_cast_div_sub_square: reduce-all, last_block, vectors of 4, int indices
// schedule: reduce-all:last_block,loop=vector,vec=4
// contract: in0 16-byte aligned; others any; int32 indices
extern "C" __global__ void __launch_bounds__(256, 2) k0_reduceall_sum_cast_div_sub_square(
    const float* __restrict__ in0,
    float* __restrict__ out0,
    float* __restrict__ out1,
    unsigned char* __restrict__ ws,
    const int n,
    const double size0
) {
  using namespace k0_reduceall_sum_cast_div_sub_square_acc;
  typedef int index_t;
  __shared__ Acc0 smem0[32];
  unsigned int* const counters = reinterpret_cast<unsigned int*>(ws);
  unsigned long long ws_offset = 128;
  const index_t stride = (index_t)gridDim.x * 256;
  const index_t start = (index_t)blockIdx.x * 256 + threadIdx.x;

  // phase 0
  Acc0 acc0 = Acc0_identity();
  {
    const index_t nvec = n / 4;
    for (index_t iv = start; iv < nvec; iv += stride) {
      const fs::Vec<float, 4> ld0_v = reinterpret_cast<const fs::Vec<float, 4>*>(in0)[iv];
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float ld0 = ld0_v.v[j];
        acc0.r0 = fc::add(acc0.r0, ld0);
        fc::moments_next(acc0.r1, ld0);
      }
    }
    for (index_t i = nvec * 4 + start; i < n; i += stride) {
      const float ld0 = in0[i];
      acc0.r0 = fc::add(acc0.r0, ld0);
      fc::moments_next(acc0.r1, ld0);
    }
  }
  acc0 = fs::block_allreduce(acc0, smem0, Acc0_identity());
  if (gridDim.x > 1) {  // one block: its combination is the result, and ws is null
    Acc0* const part0 = reinterpret_cast<Acc0*>(ws + ws_offset);
    ws_offset += fs::round_up_128((unsigned long long)gridDim.x * sizeof(Acc0));
    if (threadIdx.x == 0) part0[blockIdx.x] = acc0;
    if (!fs::arrive_last(counters)) return;
    acc0 = fs::combine_partials(part0, Acc0_identity(), smem0);
  }
  const float v0 = acc0.r0;
  const float v7 = (acc0.r1).m2;
  const double v1 = fc::cast<double>(v0);
  const double v2 = fc::div(v1, size0);
  const float v3 = fc::cast<float>(v2);
  const double v8 = fc::cast<double>(v7);
  const double v9 = fc::div(v8, size0);
  const float v10 = fc::cast<float>(v9);
  if (threadIdx.x == 0) {
    out0[0] = v3;
    out1[0] = v10;
  }
}
