// ---- fusec bfloat16 helpers -----------------------------------------------------------------------------
// Included after fusec_device.cuh, only by the kernels that hold a bfloat16 value (fusec/codegen/cuda_ops.py:
// value_headers), so every other kernel's source stays as it was. bfloat16 is ml_dtypes.bfloat16 to NumPy:
// __nv_bfloat16 is storage only, as __half is: every op widens to float, computes there and rounds back once
// (round to nearest even; NaN stays NaN; overflow gives inf), as ml_dtypes' loops do. Where ml_dtypes' rule
// differs from NumPy's float16 loops (the zero a maximum/minimum tie returns, the sign of sign(-0.0)), these
// helpers follow ml_dtypes, the reference the kernels are checked against.
#ifndef FUSEC_BF16_CUH
#define FUSEC_BF16_CUH
#include <cuda_bf16.h>

namespace fc {

FC_FN unsigned short bits(__nv_bfloat16 a) { return __bfloat16_as_ushort(a); }
FC_FN __nv_bfloat16 bf16_from_bits(unsigned short b) { return __ushort_as_bfloat16(b); }
FC_FN float widen(__nv_bfloat16 a) { return __bfloat162float(a); }

// Casts to bfloat16 round once from the source's exact value: integers and double directly (ml_dtypes does not
// go through float: int64 2^24 + 2^16 + 1 is 2^24 + 2^17, not 2^24), float16 and float through float.
template <> struct narrow_float<__nv_bfloat16> {
  static constexpr bool value = true;
  static FC_FN float widen(__nv_bfloat16 a) { return __bfloat162float(a); }
  template <class From> static FC_FN __nv_bfloat16 from(From x) {
    if constexpr (same<From, double>::value) return __double2bfloat16(x);
    else if constexpr (same<From, float>::value) return __float2bfloat16_rn(x);
    else if constexpr (same<From, __half>::value) return __float2bfloat16_rn(__half2float(x));
    else if constexpr (same<From, long long>::value) return __ll2bfloat16_rn(x);
    else if constexpr (same<From, unsigned long long>::value) return __ull2bfloat16_rn(x);
    else if constexpr (same<From, unsigned int>::value) return __uint2bfloat16_rn(x);
    else return __int2bfloat16_rn((int)x);  // bool, 8- and 16-bit integers, int: exact in int
  }
};

#define FC_BF16_UNARY(name) \
  FC_FN __nv_bfloat16 name(__nv_bfloat16 a) { return __float2bfloat16_rn(::fc::name(__bfloat162float(a))); }
#define FC_BF16_BINARY(name)                                                         \
  FC_FN __nv_bfloat16 name(__nv_bfloat16 a, __nv_bfloat16 b) {                       \
    return __float2bfloat16_rn(::fc::name(__bfloat162float(a), __bfloat162float(b))); \
  }
#define FC_BF16_COMPARE(name) \
  FC_FN bool name(__nv_bfloat16 a, __nv_bfloat16 b) { return ::fc::name(__bfloat162float(a), __bfloat162float(b)); }

// predicates read the bits (8 exponent bits: 0x7f80), exact, and the sign of a NaN survives.
FC_FN bool isnan(__nv_bfloat16 a) { return (bits(a) & 0x7fffu) > 0x7f80u; }
FC_FN bool isinf(__nv_bfloat16 a) { return (bits(a) & 0x7fffu) == 0x7f80u; }
FC_FN bool isfinite(__nv_bfloat16 a) { return (bits(a) & 0x7f80u) != 0x7f80u; }
FC_FN bool signbit(__nv_bfloat16 a) { return (bits(a) & 0x8000u) != 0; }
FC_FN bool truth(__nv_bfloat16 a) { return (bits(a) & 0x7fffu) != 0; }

FC_BF16_BINARY(add)
FC_BF16_BINARY(sub)
FC_BF16_BINARY(mul)
FC_BF16_BINARY(div)
FC_FN __nv_bfloat16 div_invariant(__nv_bfloat16 a, __nv_bfloat16 b, bool& fast, int exact_pass) {
  if (exact_pass) return div(a, b);
  // every nonzero finite bfloat16 quotient pair below 2^64 is in the fast range; the rest clear `fast`
  return __float2bfloat16_rn(div_invariant(__bfloat162float(a), __bfloat162float(b), fast, 0));
}
FC_FN __nv_bfloat16 neg(__nv_bfloat16 a) { return bf16_from_bits(bits(a) ^ 0x8000u); }
FC_FN __nv_bfloat16 pos(__nv_bfloat16 a) { return a; }
FC_FN __nv_bfloat16 abs(__nv_bfloat16 a) { return bf16_from_bits(bits(a) & 0x7fffu); }
// ml_dtypes' sign: -1, +1, or the value itself (NaN and both zeros, -0.0 staying -0.0).
FC_FN __nv_bfloat16 sign(__nv_bfloat16 a) {
  const float f = __bfloat162float(a);
  return f < 0.0f ? bf16_from_bits(0xbf80u) : (f > 0.0f ? bf16_from_bits(0x3f80u) : a);
}
FC_BF16_UNARY(square)
FC_BF16_UNARY(reciprocal)
FC_BF16_UNARY(sqrt)
FC_BF16_UNARY(cbrt)
FC_BF16_UNARY(exp)
FC_BF16_UNARY(exp2)
FC_BF16_UNARY(expm1)
FC_BF16_UNARY(log)
FC_BF16_UNARY(log2)
FC_BF16_UNARY(log10)
FC_BF16_UNARY(log1p)
FC_BF16_UNARY(sin)
FC_BF16_UNARY(cos)
FC_BF16_UNARY(tan)
FC_BF16_UNARY(arcsin)
FC_BF16_UNARY(arccos)
FC_BF16_UNARY(arctan)
FC_BF16_UNARY(sinh)
FC_BF16_UNARY(cosh)
FC_BF16_UNARY(tanh)
FC_BF16_UNARY(arcsinh)
FC_BF16_UNARY(arccosh)
FC_BF16_UNARY(arctanh)
FC_BF16_UNARY(rint)
FC_BF16_UNARY(floor)
FC_BF16_UNARY(ceil)
FC_BF16_UNARY(trunc)
FC_BF16_BINARY(arctan2)
FC_BF16_BINARY(hypot)
FC_BF16_BINARY(fmod)
FC_BF16_BINARY(pow)
FC_BF16_BINARY(floordiv)
FC_BF16_BINARY(mod)
FC_BF16_BINARY(np_fmod)
FC_FN __nv_bfloat16 copysign(__nv_bfloat16 a, __nv_bfloat16 b) {
  return bf16_from_bits((bits(a) & 0x7fffu) | (bits(b) & 0x8000u));
}
FC_FN __nv_bfloat16 cube(__nv_bfloat16 a) { const float f = __bfloat162float(a); return __float2bfloat16_rn(f * f * f); }

// ml_dtypes' maximum/minimum (NaN in a wins, else the strictly larger/smaller, else b: a tie of +0.0 and -0.0
// gives b) and fmax/fmin (NaN in b loses, else the strictly larger/smaller, else b).
FC_FN __nv_bfloat16 maximum(__nv_bfloat16 a, __nv_bfloat16 b) {
  return (isnan(a) || __bfloat162float(a) > __bfloat162float(b)) ? a : b;
}
FC_FN __nv_bfloat16 minimum(__nv_bfloat16 a, __nv_bfloat16 b) {
  return (isnan(a) || __bfloat162float(a) < __bfloat162float(b)) ? a : b;
}
FC_FN __nv_bfloat16 fmax(__nv_bfloat16 a, __nv_bfloat16 b) {
  return (isnan(b) || __bfloat162float(a) > __bfloat162float(b)) ? a : b;
}
FC_FN __nv_bfloat16 fmin(__nv_bfloat16 a, __nv_bfloat16 b) {
  return (isnan(b) || __bfloat162float(a) < __bfloat162float(b)) ? a : b;
}

FC_BF16_COMPARE(eq)
FC_BF16_COMPARE(ne)
FC_BF16_COMPARE(lt)
FC_BF16_COMPARE(le)
FC_BF16_COMPARE(gt)
FC_BF16_COMPARE(ge)

// numpy.arange of bfloat16 (ml_dtypes' fill): start + i * delta in float32, rounded once.
FC_FN __nv_bfloat16 iota_bfloat(long long i, __nv_bfloat16 start, __nv_bfloat16 next, float delta) {
  return i == 0 ? start : (i == 1 ? next
                                  : __float2bfloat16_rn(__fadd_rn(__bfloat162float(start), __fmul_rn((float)i, delta))));
}

// numpy.ldexp and numpy.frexp of bfloat16, as of float16: the float helpers on the widened value, rounded once (the
// float result is exact wherever the bfloat16 one is not zero: the two share their exponent range). Overloads of
// their own: the float helpers would take a bfloat16 by its implicit conversion and return a float.
FC_FN __nv_bfloat16 ldexp(__nv_bfloat16 x, long long n) { return __float2bfloat16_rn(::fc::ldexp(widen(x), n)); }
FC_FN int frexp_exponent(__nv_bfloat16 x) { return ::fc::frexp_exponent(widen(x)); }
FC_FN __nv_bfloat16 frexp_mantissa(__nv_bfloat16 x) { return __float2bfloat16_rn(::fc::frexp_mantissa(widen(x))); }

// numpy.nextafter of bfloat16 (ml_dtypes' loop), by the bits as C's: NaN (0x7fc0) if either is, y where x == y
// (nextafter(0.0, -0.0) is -0.0), from a zero the smallest subnormal of y's sign, else one step towards y. Not
// through float: the float after x rounds back to x.
FC_FN __nv_bfloat16 nextafter(__nv_bfloat16 x, __nv_bfloat16 y) {
  const float fx = __bfloat162float(x), fy = __bfloat162float(y);
  if (::isnan(fx) || ::isnan(fy)) return bf16_from_bits(0x7fc0u);
  if (fx == fy) return y;
  const unsigned short a = bits(x);
  if ((a & 0x7fffu) == 0) return bf16_from_bits((unsigned short)((bits(y) & 0x8000u) | 1u));
  return bf16_from_bits((unsigned short)(((fx < fy) == !(a & 0x8000u)) ? a + 1u : a - 1u));
}

}  // namespace fc

#undef FC_BF16_UNARY
#undef FC_BF16_BINARY
#undef FC_BF16_COMPARE
#endif  // FUSEC_BF16_CUH
