// k0_pointwise_mul_add_tanh: pointwise, vector, int indices
// schedule: pointwise:vector,vec=4
// contract: in0, out0 16-byte aligned; int32 indices
extern "C" __global__ void __launch_bounds__(256, 2) k0_pointwise_mul_add_tanh(
    const float* __restrict__ in0,
    float* __restrict__ out0,
    const int n
) {
  typedef int index_t;

  const index_t stride = (index_t)gridDim.x * 256;
  const index_t start = (index_t)blockIdx.x * 256 + threadIdx.x;
  const index_t nvec = n / 4;
  for (index_t iv = start; iv < nvec; iv += stride) {
    const fs::Vec<float, 4> ld0_v = reinterpret_cast<const fs::Vec<float, 4>*>(in0)[iv];
    fs::Vec<float, 4> st0_v;
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float ld0 = ld0_v.v[j];
      const float v0 = fc::mul(0x1.0000000000000p-1f, ld0);
      const float v1 = fc::mul(0x1.6e4e260000000p-5f, ld0);
      const float v2 = fc::mul(v1, ld0);
      const float v3 = fc::mul(v2, ld0);
      const float v4 = fc::add(ld0, v3);
      const float v5 = fc::mul(0x1.9884540000000p-1f, v4);
      const float v6 = fc::tanh(v5);
      const float v7 = fc::add(0x1.0000000000000p+0f, v6);
      const float v8 = fc::mul(v0, v7);
      st0_v.v[j] = v8;
    }
    reinterpret_cast<fs::Vec<float, 4>*>(out0)[iv] = st0_v;
  }
  for (index_t i = nvec * 4 + start; i < n; i += stride) {
    const float ld0 = in0[i];
    const float v0 = fc::mul(0x1.0000000000000p-1f, ld0);
    const float v1 = fc::mul(0x1.6e4e260000000p-5f, ld0);
    const float v2 = fc::mul(v1, ld0);
    const float v3 = fc::mul(v2, ld0);
    const float v4 = fc::add(ld0, v3);
    const float v5 = fc::mul(0x1.9884540000000p-1f, v4);
    const float v6 = fc::tanh(v5);
    const float v7 = fc::add(0x1.0000000000000p+0f, v6);
    const float v8 = fc::mul(v0, v7);
    out0[i] = v8;
  }
}
