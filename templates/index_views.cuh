#ifndef FUSEC_INDEX_VIEWS
#define FUSEC_INDEX_VIEWS
// Index arithmetic that stands for arrays: numpy.arange's values (the iota op) and indices clamped into an
// array (the window op: np.pad's edge mode, the parts of a join). Only the kernels that read them include this.
namespace fc {
// The array index clamp(i, lo, hi) of a window's axis.
template <class I> FC_FN I clamp_index(I i, I lo, I hi) { return i < lo ? lo : (i > hi ? hi : i); }

// numpy.arange's element i as NumPy's fill computes it: start (i = 0), next (i = 1), else start + i * delta in
// the dtype's arithmetic, delta = next - start rounded to it; i converted to the float type with
// round-to-nearest, the multiply and the add rounded each (never an FMA).
FC_FN float iota_float(long long i, float start, float next, float delta) {
  return i == 0 ? start : (i == 1 ? next : __fadd_rn(start, __fmul_rn((float)i, delta)));
}
FC_FN double iota_double(long long i, double start, double next, double delta) {
  return i == 0 ? start : (i == 1 ? next : __dadd_rn(start, __dmul_rn((double)i, delta)));
}
// float16: computed in float32, rounded once (NumPy's HALF_fill).
FC_FN __half iota_half(long long i, __half start, __half next, float delta) {
  return i == 0 ? start : (i == 1 ? next
                                  : __float2half_rn(__fadd_rn(__half2float(start), __fmul_rn((float)i, delta))));
}
// Integers: start + i * delta in 64-bit arithmetic that wraps, then truncated to the dtype (C's conversion).
template <class T> FC_FN T iota_int(long long i, unsigned long long start, unsigned long long delta) {
  return (T)(start + (unsigned long long)i * delta);
}
FC_FN bool iota_bool(long long i, bool start, bool next) { return i == 0 ? start : next; }
}  // namespace fc
#endif  // FUSEC_INDEX_VIEWS
