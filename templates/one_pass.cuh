#ifndef FUSEC_ONE_PASS
#define FUSEC_ONE_PASS
// Statistics in one pass (fusec/schedule/one_pass.py): variances and softmax denominators.
//
// Variance. A partial holds the count of the elements folded in, a
// shift (the first of them), their mean less the shift and M2, the sum of their squared deviations from their
// mean. T is float (float16 and float32 data) or double. Shifting by an element keeps badly conditioned data
// (a mean far above the spread: 1e6 + N(0, 1) in float32) accurate: the elements less the shift are exact where
// they lie within a factor of two of it, and the mean Welford's update tracks stays near zero, where its
// rounding is small; partials combine their shifts' difference before the means'.
namespace fc {
template <class T> struct Moments {
  T count;
  T shift;
  T mean;  // less the shift
  T m2;
};
template <class T> FC_FN Moments<T> moments_identity() {
  Moments<T> a;
  a.count = (T)0;
  a.shift = (T)0;
  a.mean = (T)0;
  a.m2 = (T)0;
  return a;
}
// The moments of one element.
template <class T> FC_FN Moments<T> moments_of(T x) {
  Moments<T> a;
  a.count = (T)1;
  a.shift = x;
  a.mean = (T)0;
  a.m2 = (T)0;
  return a;
}
// delta / count for Welford's mean update: a fast quotient in float (2 ulp, for counts far below 2^126), where
// the M2 update's second factor, taken against the updated mean, absorbs its rounding.
FC_FN float moments_step(float delta, float count) { return __fdividef(delta, count); }
FC_FN double moments_step(double delta, double count) { return delta / count; }
// Welford's update: one more element (the first sets the shift). NaN and infinities make M2 NaN, as the
// two-pass form does.
template <class T> FC_FN void moments_next(Moments<T>& a, T x) {
  a.shift = a.count == (T)0 ? x : a.shift;
  a.count += (T)1;
  const T y = x - a.shift;
  const T delta = y - a.mean;
  a.mean += moments_step(delta, a.count);
  a.m2 = fma(delta, y - a.mean, a.m2);
}
// Chan, Golub and LeVeque's combination of two partials, kept at the first one's shift; an empty partial
// (count 0, the identity) leaves the other as it is. The kernels combine partials in a fixed order, so the
// result's bits do not vary from run to run.
template <class T> FC_FN Moments<T> moments_combine(const Moments<T>& a, const Moments<T>& b) {
  if (b.count == (T)0) return a;
  if (a.count == (T)0) return b;
  Moments<T> r;
  r.count = a.count + b.count;
  r.shift = a.shift;
  const T delta = (b.shift - a.shift) + (b.mean - a.mean);
  const T share = b.count / r.count;
  r.mean = fma(delta, share, a.mean);
  r.m2 = a.m2 + b.m2 + delta * delta * a.count * share;
  return r;
}

// Softmax denominator: the running maximum of the elements folded in and the sum of exp(element - maximum),
// rescaled when the maximum grows. Every element costs one exp: exp(smaller - larger) of the element and the
// running maximum. While the maximum is -inf (every element so far -inf) the sum stays 0; the value read at
// the end is NaN then, as NumPy's exp(-inf - -inf) makes it. NaN and +inf propagate as in the two-pass form.
FC_FN float one_pass_infinity(float) { return __int_as_float(0x7f800000); }
FC_FN double one_pass_infinity(double) { return __longlong_as_double(0x7ff0000000000000LL); }
FC_FN float one_pass_nan(float) { return __int_as_float(0x7fc00000); }
FC_FN double one_pass_nan(double) { return __longlong_as_double(0x7ff8000000000000LL); }
template <class T> struct ExpSum {
  T max;
  T sum;
};
template <class T> FC_FN ExpSum<T> exp_sum_identity() {
  ExpSum<T> a;
  a.max = -one_pass_infinity(T());
  a.sum = (T)0;
  return a;
}
// exp(lo - hi) for lo <= hi, 0 where hi is -inf.
template <class T> FC_FN T exp_below(T lo, T hi) { return hi == -one_pass_infinity(T()) ? (T)0 : ::fc::exp(lo - hi); }
template <class T> FC_FN ExpSum<T> exp_sum_of(T x) {
  ExpSum<T> a;
  a.max = x;
  a.sum = exp_below(x, x);
  return a;
}
template <class T> FC_FN void exp_sum_next(ExpSum<T>& a, T x) {
  const T hi = ::fc::maximum(a.max, x), lo = ::fc::minimum(a.max, x);
  const T e = exp_below(lo, hi);
  a.sum = x > a.max ? fma(a.sum, e, (T)1 + (x - x)) : a.sum + e;  // the new maximum's own exp(x - x): NaN at inf
  a.max = hi;
}
template <class T> FC_FN ExpSum<T> exp_sum_combine(const ExpSum<T>& a, const ExpSum<T>& b) {
  const T hi = ::fc::maximum(a.max, b.max), lo = ::fc::minimum(a.max, b.max);
  const T e = exp_below(lo, hi);
  ExpSum<T> r;
  r.sum = b.max > a.max ? fma(a.sum, e, b.sum) : fma(b.sum, e, a.sum);
  r.max = hi;
  return r;
}
// The sum of exp(element - maximum): NaN where every element was -inf.
template <class T> FC_FN T exp_sum_value(const ExpSum<T>& a) {
  return a.max == -one_pass_infinity(T()) ? one_pass_nan(T()) : a.sum;
}
}  // namespace fc
#endif
