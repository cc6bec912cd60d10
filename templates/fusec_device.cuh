// ---- fusec device helpers --------------------------------------------------------------------------
// Included textually at the top of every generated kernel. Every helper computes what NumPy 2 computes for
// the same op and dtype (the comment above each names the rule). Storage types: bool, signed char, short,
// int, long long, unsigned char/short/int/long long, __half, float, double. __half is storage only: every
// op widens to float, computes there and rounds back once, as NumPy's float16 loops do. The only header
// needed is CUDA's own <cuda_fp16.h> (fusec/codegen/nvrtc.py says how NVRTC finds it).
#ifndef FUSEC_DEVICE_CUH
#define FUSEC_DEVICE_CUH
#include <cuda_fp16.h>

#define FC_FN __device__ __forceinline__

namespace fc {

// ---- type facts ---------------------------------------------------------------------------------------
template <class A, class B> struct same { static constexpr bool value = false; };
template <class A> struct same<A, A> { static constexpr bool value = true; };

// info<T>: kind of a storage type, and for integers the unsigned type their arithmetic wraps in. That type
// is never narrower than unsigned int: unsigned short * unsigned short would promote to int and overflow.
// __half has no info<>: a template that reaches info<__half> fails to compile instead of computing wrong.
template <class T> struct info;
#define FC_INT_INFO(T, SIGNED, BITS, WIDE)                        \
  template <> struct info<T> {                                     \
    static constexpr bool is_float = false, is_signed = SIGNED;    \
    static constexpr int bits = BITS;                              \
    typedef WIDE wide_unsigned;                                    \
  };
FC_INT_INFO(bool, false, 8, unsigned int)
FC_INT_INFO(signed char, true, 8, unsigned int)
FC_INT_INFO(short, true, 16, unsigned int)
FC_INT_INFO(int, true, 32, unsigned int)
FC_INT_INFO(long long, true, 64, unsigned long long)
FC_INT_INFO(unsigned char, false, 8, unsigned int)
FC_INT_INFO(unsigned short, false, 16, unsigned int)
FC_INT_INFO(unsigned int, false, 32, unsigned int)
FC_INT_INFO(unsigned long long, false, 64, unsigned long long)
#undef FC_INT_INFO
template <> struct info<float> { static constexpr bool is_float = true, is_signed = true; };
template <> struct info<double> { static constexpr bool is_float = true, is_signed = true; };
// narrow_float<T>: a 16-bit float storage type besides __half, computed in float and rounded back once, for
// the templates here (cast, warp shuffles) to treat as such: bfloat16 (fusec_bf16.cuh specializes it, with
// widen() to float and from<From>() rounding any storage type to it once, only in kernels that include it).
template <class T> struct narrow_float { static constexpr bool value = false; };

// ---- float16: widen, compute in float, round back once (NumPy: npy_half_to_float / npy_float_to_half) --
#define FC_HALF_UNARY(name) \
  FC_FN __half name(__half a) { return __float2half_rn(::fc::name(__half2float(a))); }
#define FC_HALF_BINARY(name) \
  FC_FN __half name(__half a, __half b) { return __float2half_rn(::fc::name(__half2float(a), __half2float(b))); }
#define FC_HALF_COMPARE(name) \
  FC_FN bool name(__half a, __half b) { return ::fc::name(__half2float(a), __half2float(b)); }
FC_FN unsigned short bits(__half a) { return __half_as_ushort(a); }
FC_FN __half from_bits(unsigned short b) { return __ushort_as_half(b); }

// ---- correctly rounded float arithmetic -----------------------------------------------------------------
// The _rn intrinsics round like NumPy's C operators and are never contracted into an FMA with a neighbouring
// multiply or add (which would change the last bit against NumPy).
FC_FN float add_rn(float a, float b) { return __fadd_rn(a, b); }
FC_FN double add_rn(double a, double b) { return __dadd_rn(a, b); }
FC_FN float sub_rn(float a, float b) { return __fsub_rn(a, b); }
FC_FN double sub_rn(double a, double b) { return __dsub_rn(a, b); }
FC_FN float mul_rn(float a, float b) { return __fmul_rn(a, b); }
FC_FN double mul_rn(double a, double b) { return __dmul_rn(a, b); }
FC_FN float div_rn(float a, float b) { return __fdiv_rn(a, b); }
FC_FN double div_rn(double a, double b) { return __ddiv_rn(a, b); }

// ---- wrapping integer arithmetic ---------------------------------------------------------------------------
// NumPy: integer overflow wraps (int32 max + 1 == INT_MIN, uint8 0 - 1 == 255). C++ signed overflow is
// undefined, so compute in info<T>::wide_unsigned and convert back (modular).
template <class T> FC_FN T wrap_add(T a, T b) {
  typedef typename info<T>::wide_unsigned U;
  return (T)(U)((U)a + (U)b);
}
template <class T> FC_FN T wrap_sub(T a, T b) {
  typedef typename info<T>::wide_unsigned U;
  return (T)(U)((U)a - (U)b);
}
template <class T> FC_FN T wrap_mul(T a, T b) {
  typedef typename info<T>::wide_unsigned U;
  return (T)(U)((U)a * (U)b);
}

// ---- predicates -------------------------------------------------------------------------------------------
// numpy.isnan / isinf / isfinite: integers and bool are never NaN or inf, always finite.
template <class T> FC_FN bool isnan(T a) { if constexpr (info<T>::is_float) return ::isnan(a); else return false; }
template <class T> FC_FN bool isinf(T a) { if constexpr (info<T>::is_float) return ::isinf(a); else return false; }
template <class T> FC_FN bool isfinite(T a) { if constexpr (info<T>::is_float) return ::isfinite(a); else return true; }
// float16 predicates read the bits (exact, and the sign of a NaN survives).
FC_FN bool isnan(__half a) { return (bits(a) & 0x7fffu) > 0x7c00u; }
FC_FN bool isinf(__half a) { return (bits(a) & 0x7fffu) == 0x7c00u; }
FC_FN bool isfinite(__half a) { return (bits(a) & 0x7c00u) != 0x7c00u; }
// numpy.signbit: the sign bit, also of -0.0 and of a NaN (float loops only).
FC_FN bool signbit(float a) { return ::signbit(a); }
FC_FN bool signbit(double a) { return ::signbit(a); }
FC_FN bool signbit(__half a) { return (bits(a) & 0x8000u) != 0; }

// truthiness, as numpy.logical_* and casts to bool see it: x != 0, so NaN is true.
template <class T> FC_FN bool truth(T a) { return a != T(0); }
FC_FN bool truth(bool a) { return a; }
FC_FN bool truth(__half a) { return (bits(a) & 0x7fffu) != 0; }

// ---- arithmetic -------------------------------------------------------------------------------------------
// numpy.add: bool is logical or; integers wrap; floats round once.
template <class T> FC_FN T add(T a, T b) { if constexpr (info<T>::is_float) return add_rn(a, b); else return wrap_add(a, b); }
FC_FN bool add(bool a, bool b) { return a || b; }
FC_HALF_BINARY(add)

// numpy.subtract: integers wrap; floats round once (no bool loop).
template <class T> FC_FN T sub(T a, T b) { if constexpr (info<T>::is_float) return sub_rn(a, b); else return wrap_sub(a, b); }
FC_HALF_BINARY(sub)

// numpy.multiply: bool is logical and; integers wrap; floats round once.
template <class T> FC_FN T mul(T a, T b) { if constexpr (info<T>::is_float) return mul_rn(a, b); else return wrap_mul(a, b); }
FC_FN bool mul(bool a, bool b) { return a && b; }
FC_HALF_BINARY(mul)

// numpy.true_divide (float loops): IEEE division, 1/0 == inf, 0/0 == nan.
FC_FN float div(float a, float b) { return div_rn(a, b); }
FC_FN double div(double a, double b) { return div_rn(a, b); }
FC_HALF_BINARY(div)

// numpy.true_divide (float32) by a divisor b that stays the same over a loop (a row's sum or norm), in the
// loops of a row held in registers. With r = 1/b rounded to nearest (one per row: the compiler hoists it
// out of the unrolled loop), q0 = a*r, e = a - b*q0 (exact, by fma) and q = q0 + e*r is a/b rounded to
// nearest, as the IEEE division gives it, for every pair with 2^-64 <= |a| <= 2^64 and 2^-32 <= |b| <=
// 2^32: scaling a and b by powers of two scales every step exactly in that range, so the pairs of
// significands in [1, 2) decide it, and scripts/check_invariant_division.py compares all 2^46 of them
// with __fdiv_rn on the GPU (BENCHMARKS.md records the run). 3 instructions instead of IEEE division's
// ~10 (reciprocal, its refinement, a range check and a branch). A pair outside the range (a zero,
// subnormal, inf or NaN, a huge ratio) clears `fast`. Such a loop runs in two passes (`exact_pass` 0 and
// 1, unrolled, so `exact_pass` is a constant in each): the second, only where the first cleared `fast`,
// divides with div().
FC_FN float div_invariant(float a, float b, bool& fast, int exact_pass) {
  if (exact_pass) return div(a, b);
  const float r = __frcp_rn(b);
  const float lowest = (fabsf(b) >= 0x1p-32f && fabsf(b) <= 0x1p32f) ? 0x1p-64f : __int_as_float(0x7f800000);
  fast = fast & (fabsf(a) >= lowest) & (fabsf(a) <= 0x1p64f);  // & not &&: no branches
  const float q0 = __fmul_rn(a, r);
  return __fmaf_rn(__fmaf_rn(-b, q0, a), r, q0);
}
// float16, as div(): the float quotient (every nonzero finite half is in the fast range), rounded once.
FC_FN __half div_invariant(__half a, __half b, bool& fast, int exact_pass) {
  if (exact_pass) return div(a, b);
  return __float2half_rn(div_invariant(__half2float(a), __half2float(b), fast, 0));
}

// numpy.negative: integers wrap (-INT_MIN == INT_MIN, -uint8(1) == 255); float16 flips the sign bit.
template <class T> FC_FN T neg(T a) { if constexpr (info<T>::is_float) return -a; else return wrap_sub(T(0), a); }
FC_FN __half neg(__half a) { return from_bits(bits(a) ^ 0x8000u); }

// numpy.positive: the value itself.
template <class T> FC_FN T pos(T a) { return a; }

// numpy.absolute: abs(INT_MIN) == INT_MIN (wraps); unsigned and bool unchanged; floats clear the sign bit.
template <class T> FC_FN T abs(T a) {
  if constexpr (info<T>::is_float) return ::fabs(a);
  else if constexpr (info<T>::is_signed) return a < T(0) ? neg(a) : a;
  else return a;
}
FC_FN float abs(float a) { return ::fabsf(a); }
FC_FN __half abs(__half a) { return from_bits(bits(a) & 0x7fffu); }

// numpy.sign: -1, 0 or 1 (unsigned: 0 or 1); floats: NaN -> NaN, -0.0 -> +0.0.
template <class T> FC_FN T sign(T a) {
  if constexpr (info<T>::is_float) return a > T(0) ? T(1) : (a < T(0) ? T(-1) : (a == T(0) ? T(0) : a));
  else if constexpr (info<T>::is_signed) return T((a > T(0)) - (a < T(0)));
  else return T(a > T(0));
}
FC_HALF_UNARY(sign)

// numpy.square: x * x (integers wrap).
template <class T> FC_FN T square(T a) { return mul(a, a); }
FC_HALF_UNARY(square)

// numpy.reciprocal: floats 1 / x. Integers compute 1.0 / x and truncate: 1 for 1, -1 for -1, else 0.
// x == 0 is a float-to-int cast of inf in NumPy (undefined; INT_MIN on x86): 0 here.
template <class T> FC_FN T reciprocal(T a) {
  if constexpr (info<T>::is_float) return div_rn(T(1), a);
  else if constexpr (info<T>::is_signed) return (a == T(1) || a == T(-1)) ? a : T(0);
  else return a == T(1) ? T(1) : T(0);
}
FC_HALF_UNARY(reciprocal)

// ---- math functions of float and double (float16 through float) ------------------------------------------
// NumPy's float64 loops call libm's f(x), its float32 loops f##f(x); CUDA's are within a few ULP of glibc's
// (CUDA C Programming Guide, "Mathematical Functions"); sqrt is correctly rounded on both.
#define FC_MATH_UNARY(name, cuda_float, cuda_double)                                \
  FC_FN float name(float a) { return ::cuda_float(a); }                             \
  FC_FN double name(double a) { return ::cuda_double(a); }                          \
  FC_HALF_UNARY(name)
#define FC_MATH_BINARY(name, cuda_float, cuda_double)                               \
  FC_FN float name(float a, float b) { return ::cuda_float(a, b); }                 \
  FC_FN double name(double a, double b) { return ::cuda_double(a, b); }             \
  FC_HALF_BINARY(name)
FC_MATH_UNARY(sqrt, __fsqrt_rn, __dsqrt_rn)
FC_MATH_UNARY(cbrt, cbrtf, cbrt)
FC_MATH_UNARY(exp, expf, exp)
FC_MATH_UNARY(exp2, exp2f, exp2)
FC_MATH_UNARY(expm1, expm1f, expm1)
// numpy.log / log2 / log10 of a negative number is NaN. CUDA 13's double versions return -inf for a
// negative subnormal (seen on an H200), so negative inputs are answered first.
#define FC_LOG(name, cuda_float, cuda_double)                                                               \
  FC_FN float name(float a) { return a < 0.0f ? __int_as_float(0x7fc00000) : ::cuda_float(a); }             \
  FC_FN double name(double a) { return a < 0.0 ? __longlong_as_double(0x7ff8000000000000LL) : ::cuda_double(a); } \
  FC_HALF_UNARY(name)
FC_LOG(log, logf, log)
FC_LOG(log2, log2f, log2)
FC_LOG(log10, log10f, log10)
#undef FC_LOG
FC_MATH_UNARY(log1p, log1pf, log1p)
FC_MATH_UNARY(sin, sinf, sin)
FC_MATH_UNARY(cos, cosf, cos)
FC_MATH_UNARY(tan, tanf, tan)
FC_MATH_UNARY(arcsin, asinf, asin)
FC_MATH_UNARY(arccos, acosf, acos)
FC_MATH_UNARY(arctan, atanf, atan)
FC_MATH_UNARY(sinh, sinhf, sinh)
FC_MATH_UNARY(cosh, coshf, cosh)
FC_MATH_UNARY(tanh, tanhf, tanh)
FC_MATH_UNARY(arcsinh, asinhf, asinh)
FC_MATH_UNARY(arccosh, acoshf, acosh)
FC_MATH_UNARY(arctanh, atanhf, atanh)
// numpy.rint: round half to even (the IEEE default mode), like C's rint.
FC_MATH_UNARY(rint, rintf, rint)
FC_MATH_BINARY(arctan2, atan2f, atan2)
// numpy.hypot: CUDA 13's double hypot (2 ulp) rounds hypot(1, DBL_MAX) up to inf (seen on an H200), where
// libm gives DBL_MAX. When it overflows on finite inputs, hi * sqrt(1 + (lo/hi)^2) decides.
FC_FN float hypot(float a, float b) { return ::hypotf(a, b); }
FC_FN double hypot(double a, double b) {
  double r = ::hypot(a, b);
  if (::isinf(r) && ::isfinite(a) && ::isfinite(b)) {
    double hi = ::fmax(::fabs(a), ::fabs(b)), q = ::fmin(::fabs(a), ::fabs(b)) / hi;
    r = hi * ::sqrt(1.0 + q * q);
  }
  return r;
}
FC_HALF_BINARY(hypot)
FC_MATH_BINARY(fmod, fmodf, fmod)
// numpy.copysign: |a| with b's sign bit; float16 by bits, as npy_half_copysign.
FC_FN float copysign(float a, float b) { return ::copysignf(a, b); }
FC_FN double copysign(double a, double b) { return ::copysign(a, b); }
FC_FN __half copysign(__half a, __half b) { return from_bits((bits(a) & 0x7fffu) | (bits(b) & 0x8000u)); }

// numpy.floor / ceil / trunc: floats round; integers and bool are returned unchanged (NumPy 2 keeps the dtype).
#define FC_ROUNDING(name, cuda_float, cuda_double)                                  \
  template <class T> FC_FN T name(T a) { static_assert(!info<T>::is_float, ""); return a; } \
  FC_MATH_UNARY(name, cuda_float, cuda_double)
FC_ROUNDING(floor, floorf, floor)
FC_ROUNDING(ceil, ceilf, ceil)
FC_ROUNDING(trunc, truncf, trunc)
#undef FC_ROUNDING

// numpy.power. Floats: C's pow (pow(x, 0) == 1 even for NaN x, pow(1, y) == 1).
FC_FN float pow(float a, float b) { return ::powf(a, b); }
FC_FN double pow(double a, double b) { return ::pow(a, b); }
FC_HALF_BINARY(pow)
// x ** 3 with a constant exponent (codegen picks it, see cuda_ops.is_float_cube): two multiplies.
FC_FN float cube(float a) { return a * a * a; }
FC_FN double cube(double a) { return a * a * a; }
FC_FN __half cube(__half a) { const float f = __half2float(a); return __float2half_rn(f * f * f); }
// Integers: exponentiation by squaring with wrapping multiplies (int8 3 ** 5 == -13). NumPy raises
// ValueError for a negative exponent; here it is what 1 / a**|b| truncates to (1 for 1, +-1 for -1, else 0).
template <class T> FC_FN T pow(T a, T b) {
  if constexpr (info<T>::is_signed) {
    if (b < T(0)) return a == T(1) ? T(1) : (a == T(-1) ? ((b & T(1)) ? T(-1) : T(1)) : T(0));
  }
  T out = (b & T(1)) ? a : T(1);
  b = T(b >> 1);
  while (b > T(0)) {
    a = wrap_mul(a, a);
    if (b & T(1)) out = wrap_mul(out, a);
    b = T(b >> 1);
  }
  return out;
}

// ---- floor division and remainder ---------------------------------------------------------------------
// Floats: NumPy's npy_divmod. fmod is exact; the quotient is (a - mod) / b snapped to an integer; the
// remainder takes the sign of the divisor. b == 0: floor_divide gives a / b (+-inf or nan), remainder nan.
template <class T> FC_FN T float_divmod(T a, T b, T& mod) {
  mod = fmod(a, b);
  if (!b) return div_rn(a, b);
  T q = div_rn(sub_rn(a, mod), b);
  if (mod) {
    if ((b < T(0)) != (mod < T(0))) {
      mod = add_rn(mod, b);
      q = sub_rn(q, T(1));
    }
  } else {
    mod = copysign(T(0), b);
  }
  if (!q) return copysign(T(0), div_rn(a, b));
  T fq = floor(q);
  if (sub_rn(q, fq) > T(0.5)) fq = add_rn(fq, T(1));
  return fq;
}

// numpy.floor_divide. Integers: x // 0 == 0 (NumPy warns), MIN // -1 wraps to MIN, otherwise the
// quotient rounded toward -inf (-7 // 2 == -4) where C truncates toward zero.
template <class T> FC_FN T floordiv(T a, T b) {
  if constexpr (info<T>::is_float) {
    T mod;
    return float_divmod(a, b, mod);
  } else {
    if (b == T(0)) return T(0);
    if constexpr (info<T>::is_signed) {
      if (b == T(-1)) return neg(a);
      T q = T(a / b);
      if (((a < T(0)) != (b < T(0))) && T(q * b) != a) q = T(q - 1);
      return q;
    } else {
      return T(a / b);
    }
  }
}
FC_HALF_BINARY(floordiv)

// numpy.remainder. Integers: x % 0 == 0, MIN % -1 == 0, and the result takes the divisor's sign
// (-7 % 2 == 1, 7 % -2 == -1). Floats: npy_divmod's remainder (x % 0.0 == nan, 5 % -0.0 == nan).
template <class T> FC_FN T mod(T a, T b) {
  if constexpr (info<T>::is_float) {
    T r;
    float_divmod(a, b, r);
    return r;
  } else {
    if (b == T(0)) return T(0);
    if constexpr (info<T>::is_signed) {
      if (b == T(-1)) return T(0);
      T r = T(a % b);
      return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? T(r + b) : r;
    } else {
      return T(a % b);
    }
  }
}
FC_HALF_BINARY(mod)

// numpy.fmod: the remainder of truncating division, with the dividend's sign. Floats: C's fmod (exact; float16
// through float, which the exact remainder survives). Integers: x fmod 0 == 0 (NumPy warns), MIN fmod -1 == 0.
template <class T> FC_FN T np_fmod(T a, T b) {
  if constexpr (info<T>::is_float) {
    return fmod(a, b);
  } else {
    if (b == T(0)) return T(0);
    if constexpr (info<T>::is_signed) {
      if (b == T(-1)) return T(0);
    }
    return T(a % b);
  }
}
FC_HALF_BINARY(np_fmod)

// ---- maximum and minimum ------------------------------------------------------------------------------
// numpy.maximum / minimum propagate NaN (CUDA's fmaxf ignores it, so it is not used). On a tie (+0.0 vs
// -0.0) NumPy's float32/float64 loops return the second operand and its float16 loop the first; which zero
// comes out is not part of NumPy's contract (it differs between its scalar and SIMD paths).
template <class T> FC_FN T maximum(T a, T b) {
  if constexpr (info<T>::is_float) return (isnan(a) || a > b) ? a : b;
  else return a > b ? a : b;
}
template <class T> FC_FN T minimum(T a, T b) {
  if constexpr (info<T>::is_float) return (isnan(a) || a < b) ? a : b;
  else return a < b ? a : b;
}
// numpy.fmax / fmin ignore a NaN operand (NaN only when both are NaN).
template <class T> FC_FN T fmax(T a, T b) {
  if constexpr (info<T>::is_float) return (isnan(b) || a > b) ? a : b;
  else return a > b ? a : b;
}
template <class T> FC_FN T fmin(T a, T b) {
  if constexpr (info<T>::is_float) return (isnan(b) || a < b) ? a : b;
  else return a < b ? a : b;
}
// max/min reductions with a float accumulator (float32, and float16's): PTX max.NaN / min.NaN, one
// instruction on sm_80 and later where maximum() takes three. The values are maximum()'s but for which
// NaN comes out (the canonical one, not an operand's payload) and which zero on a +0.0/-0.0 tie: NumPy
// promises neither for a reduction (its result depends on its own reduction order).
FC_FN float reduce_max(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return maximum(a, b);
#endif
}
FC_FN float reduce_min(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return minimum(a, b);
#endif
}
// float16 (npy_half_ge etc.): compare in float, return an operand unchanged; ties keep the first.
FC_FN __half maximum(__half a, __half b) { float x = __half2float(a), y = __half2float(b); return (isnan(a) || x >= y) ? a : b; }
FC_FN __half minimum(__half a, __half b) { float x = __half2float(a), y = __half2float(b); return (isnan(a) || x <= y) ? a : b; }
FC_FN __half fmax(__half a, __half b) { float x = __half2float(a), y = __half2float(b); return (isnan(b) || x >= y) ? a : b; }
FC_FN __half fmin(__half a, __half b) { float x = __half2float(a), y = __half2float(b); return (isnan(b) || x <= y) ? a : b; }

// ---- comparisons (IEEE: every comparison with NaN is false except ne) -------------------------------
template <class T> FC_FN bool eq(T a, T b) { return a == b; }
template <class T> FC_FN bool ne(T a, T b) { return a != b; }
template <class T> FC_FN bool lt(T a, T b) { return a < b; }
template <class T> FC_FN bool le(T a, T b) { return a <= b; }
template <class T> FC_FN bool gt(T a, T b) { return a > b; }
template <class T> FC_FN bool ge(T a, T b) { return a >= b; }
FC_HALF_COMPARE(eq)
FC_HALF_COMPARE(ne)
FC_HALF_COMPARE(lt)
FC_HALF_COMPARE(le)
FC_HALF_COMPARE(gt)
FC_HALF_COMPARE(ge)
// uint64 with int64 (NumPy 2's loops Qq->? and qQ->?): exact, a negative int64 below every uint64. cmp_mixed(a, b)
// is -1, 0 or 1 as a is below, equal to or above b.
FC_FN int cmp_mixed(unsigned long long a, long long b) {
  return b < 0 ? 1 : (a < (unsigned long long)b ? -1 : (a == (unsigned long long)b ? 0 : 1));
}
#define FC_MIXED_COMPARE(name, test) \
  FC_FN bool name(unsigned long long a, long long b) { const int c = cmp_mixed(a, b); return test; } \
  FC_FN bool name(long long a, unsigned long long b) { const int c = -cmp_mixed(b, a); return test; }
FC_MIXED_COMPARE(eq, c == 0)
FC_MIXED_COMPARE(ne, c != 0)
FC_MIXED_COMPARE(lt, c < 0)
FC_MIXED_COMPARE(le, c <= 0)
FC_MIXED_COMPARE(gt, c > 0)
FC_MIXED_COMPARE(ge, c >= 0)
#undef FC_MIXED_COMPARE

// ---- logical ops: any dtype, by truthiness (NaN is true) ---------------------------------------------
template <class T> FC_FN bool logical_and(T a, T b) { return truth(a) && truth(b); }
template <class T> FC_FN bool logical_or(T a, T b) { return truth(a) || truth(b); }
template <class T> FC_FN bool logical_xor(T a, T b) { return truth(a) != truth(b); }
template <class T> FC_FN bool logical_not(T a) { return !truth(a); }

// ---- bits (integers and bool) ---------------------------------------------------------------------------
template <class T> FC_FN T bitwise_and(T a, T b) { return T(a & b); }
template <class T> FC_FN T bitwise_or(T a, T b) { return T(a | b); }
template <class T> FC_FN T bitwise_xor(T a, T b) { return T(a ^ b); }
// numpy.invert: bitwise not; on bool it is logical not.
template <class T> FC_FN T invert(T a) { return T(~a); }
FC_FN bool invert(bool a) { return !a; }

// numpy shifts (npy_lshift / npy_rshift): a shift count that is negative or at least the bit width gives 0,
// or -1 for a right shift of a negative signed value. In range, << wraps and >> is arithmetic for signed.
template <class T> FC_FN bool shift_in_range(T b) {
  if constexpr (info<T>::is_signed) {
    if (b < T(0)) return false;
  }
  return (unsigned long long)b < (unsigned long long)info<T>::bits;
}
template <class T> FC_FN T left_shift(T a, T b) {
  typedef typename info<T>::wide_unsigned U;
  return shift_in_range(b) ? T((U)a << (int)b) : T(0);
}
template <class T> FC_FN T right_shift(T a, T b) {
  if (shift_in_range(b)) return T(a >> (int)b);
  if constexpr (info<T>::is_signed) return a < T(0) ? T(-1) : T(0);
  else return T(0);
}

// ---- where and casts ----------------------------------------------------------------------------------
// numpy.where(cond, a, b).
template <class T> FC_FN T where(bool c, T a, T b) { return c ? a : b; }

// x.astype(To) with NumPy's unsafe casting. To bool: x != 0 (NaN is true). Integers convert modulo 2**bits.
// Float to integer truncates toward zero; NaN, inf and values outside To's range are undefined in NumPy
// (and C): CUDA saturates them, x86 does not. Integer to float rounds to nearest even. float64 to float16
// rounds once, directly (npy_double_to_half); other types reach float16 through float, which is exact
// for every integer a float16 can hold (larger ones overflow to inf either way).
template <class To, class From> FC_FN To cast(From x) {
  if constexpr (same<To, From>::value) return x;
  else if constexpr (same<To, bool>::value) return truth(x);
  else if constexpr (same<From, __half>::value) return cast<To>(__half2float(x));
  else if constexpr (narrow_float<From>::value) return cast<To>(narrow_float<From>::widen(x));
  else if constexpr (narrow_float<To>::value) return narrow_float<To>::template from<From>(x);
  else if constexpr (same<To, __half>::value) {
    if constexpr (same<From, double>::value) return __double2half(x);
    else return __float2half_rn((float)x);
  } else {
    return (To)x;
  }
}

// ---- reductions ---------------------------------------------------------------------------------------
// sum/prod/max/min/nanmax/nanmin/any/all combine two partials with the elementwise helper of the op
// table's `combine` (add, mul, maximum, minimum, fmax, fmin, logical_or, logical_and) on the accumulator
// type: float for float16 (NumPy accumulates float16 in float32), the dtype itself otherwise.

// argmax/argmin partial: a value (in the accumulator type) and its index: the kernel's index type (int
// where every index fits, else long long, NumPy's intp); the kernel widens the result to int64.
template <class T, class I = long long> struct ArgPair {
  T value;
  I index;
};
template <class T, class I> FC_FN ArgPair<T, I> make_arg_pair(T value, I index) {
  ArgPair<T, I> p;
  p.value = value;
  p.index = index;
  return p;
}
// The identity's index, larger than any real one: it loses every tie.
template <class I> FC_FN constexpr I largest_index() {
  return sizeof(I) == 4 ? (I)2147483647 : (I)9223372036854775807LL;
}
// numpy.argmax: the index of the first NaN if there is one, else of the first occurrence of the maximum.
// As a combine of two partials it is the maximum under the order (is NaN, value, -index): associative and
// commutative, so a reduction tree of any shape gives NumPy's answer. The identity is (lowest, largest).
template <class T, class I> FC_FN ArgPair<T, I> argmax_combine(ArgPair<T, I> a, ArgPair<T, I> b) {
  bool a_nan = isnan(a.value), b_nan = isnan(b.value);
  if (a_nan != b_nan) return a_nan ? a : b;
  if (!a_nan) {
    if (a.value > b.value) return a;
    if (b.value > a.value) return b;
  }
  return a.index <= b.index ? a : b;
}
// numpy.argmin: the same with the minimum.
template <class T, class I> FC_FN ArgPair<T, I> argmin_combine(ArgPair<T, I> a, ArgPair<T, I> b) {
  bool a_nan = isnan(a.value), b_nan = isnan(b.value);
  if (a_nan != b_nan) return a_nan ? a : b;
  if (!a_nan) {
    if (a.value < b.value) return a;
    if (b.value < a.value) return b;
  }
  return a.index <= b.index ? a : b;
}
// One element folded into a thread's partial that holds only elements of smaller index (every kernel loop
// visits a thread's elements in increasing index order): argmax_combine(a, (value, index)) without its
// general tie rule, since on a tie the partial's index is the smaller one unless the partial is still the
// identity. Non-short-circuit & and | keep it branch-free; a NaN partial keeps its index.
template <class T, class I> FC_FN void argmax_next(ArgPair<T, I>& a, T value, I index) {
  const bool take = !isnan(a.value) & ((value > a.value) | isnan(value) | ((value == a.value) & (index < a.index)));
  a.value = take ? value : a.value;
  a.index = take ? index : a.index;
}
template <class T, class I> FC_FN void argmin_next(ArgPair<T, I>& a, T value, I index) {
  const bool take = !isnan(a.value) & ((value < a.value) | isnan(value) | ((value == a.value) & (index < a.index)));
  a.value = take ? value : a.value;
  a.index = take ? index : a.index;
}
// The same when the partial already holds one of the thread's elements (never the identity): no tie can
// favour the new element, so it wins on "not <=" (greater, or unordered: a NaN) unless the partial is NaN.
template <class T, class I> FC_FN void argmax_next_held(ArgPair<T, I>& a, T value, I index) {
  const bool take = !isnan(a.value) & !(value <= a.value);
  a.value = take ? value : a.value;
  a.index = take ? index : a.index;
}
template <class T, class I> FC_FN void argmin_next_held(ArgPair<T, I>& a, T value, I index) {
  const bool take = !isnan(a.value) & !(value >= a.value);
  a.value = take ? value : a.value;
  a.index = take ? index : a.index;
}

// Warp shuffles of every storage type and of argmax pairs (CUDA's __shfl_*_sync take 32/64-bit types and
// __half; narrower ones travel as int). All 32 lanes must take part.
template <class T> FC_FN T shfl_xor(T v, int lane_mask) {
  if constexpr (sizeof(T) < 4 && !same<T, __half>::value && !narrow_float<T>::value)
    return (T)__shfl_xor_sync(0xffffffffu, (int)v, lane_mask);
  else return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}
template <class T> FC_FN T shfl_down(T v, unsigned int delta) {
  if constexpr (sizeof(T) < 4 && !same<T, __half>::value && !narrow_float<T>::value)
    return (T)__shfl_down_sync(0xffffffffu, (int)v, delta);
  else return __shfl_down_sync(0xffffffffu, v, delta);
}
template <class T, class I> FC_FN ArgPair<T, I> shfl_xor(ArgPair<T, I> p, int lane_mask) {
  return make_arg_pair(shfl_xor(p.value, lane_mask), shfl_xor(p.index, lane_mask));
}
template <class T, class I> FC_FN ArgPair<T, I> shfl_down(ArgPair<T, I> p, unsigned int delta) {
  return make_arg_pair(shfl_down(p.value, delta), shfl_down(p.index, delta));
}

#undef FC_HALF_UNARY
#undef FC_HALF_BINARY
#undef FC_HALF_COMPARE
#undef FC_MATH_UNARY
#undef FC_MATH_BINARY

// ---- gathers: NumPy's index rule, never an out-of-bounds read ----------------------------------------
// The position an index `idx` selects on an axis of `n` elements (negative indices count from the end, once),
// or -1 where NumPy raises IndexError: then the gather reads nothing (its value is 0) and writes `code` into
// the kernel's error word `err` (when it has one), which the launcher turns into fusec's IndexError.
template <typename I>
FC_FN long long gather_index(I idx, long long n, unsigned long long err, unsigned int code) {
  long long v;
  bool ok;
  if ((I)(-1) > (I)0) {  // unsigned: no wrapping
    ok = (unsigned long long)idx < (unsigned long long)n;
    v = (long long)idx;
  } else {
    v = (long long)idx;
    if (v < 0) v += n;
    ok = v >= 0 && v < n;
  }
  if (ok) return v;
  if (err) *reinterpret_cast<volatile unsigned int*>(err) = code;
  return -1;
}

// p[off + i0 * s0 + i1 * s1 + ...], or T(0) where a position is -1 (an index out of range: nothing is read).
template <typename T, typename O>
FC_FN T gather_read(const T* __restrict__ p, O off) { return p[off]; }

template <typename T, typename O, typename... R>
FC_FN T gather_read(const T* __restrict__ p, O off, long long i, long long s, R... rest) {
  return i < 0 ? T(0) : gather_read<T, O>(p, (O)(off + i * s), rest...);
}

// The same read of an array without memory (an iota), whose element at position q is element(q).
template <typename T, typename O, typename F>
FC_FN T gather_compute(F element, O off) { return element((long long)off); }

template <typename T, typename O, typename F, typename... R>
FC_FN T gather_compute(F element, O off, long long i, long long s, R... rest) {
  return i < 0 ? T(0) : gather_compute<T, O>(element, (O)(off + i * s), rest...);
}


// ---- numpy.ldexp, numpy.frexp, numpy.nextafter ------------------------------------------------------------
// numpy.ldexp(x, n): x * 2**n rounded once, as C's ldexp (musl's scalbn steps: at most two exact scalings by a
// power of two that keep the value normal, then one multiplication that rounds, so a subnormal result is rounded
// once); overflow gives inf, underflow a zero of x's sign. An exponent beyond int's range (NumPy's int64 loops
// clamp it to int's) gives the same 0 or inf. float16: ldexpf of the widened value, rounded to half once
// (npy_float_to_half(ldexpf(...)): the float result is exact wherever the half result is not zero).
FC_FN double pow2_double(int k) { return __longlong_as_double((long long)(0x3ff + k) << 52); }  // -1022 <= k <= 1023
FC_FN float pow2_float(int k) { return __int_as_float((0x7f + k) << 23); }  // -126 <= k <= 127
FC_FN double ldexp(double x, long long n) {
  double y = x;
  if (n > 1023) {
    y = mul_rn(y, pow2_double(1023)); n -= 1023;
    if (n > 1023) { y = mul_rn(y, pow2_double(1023)); n -= 1023; if (n > 1023) n = 1023; }
  } else if (n < -1022) {  // 2**-969 = 2**-1022 * 2**53: the last step's n stays below -53 (no double rounding)
    y = mul_rn(y, pow2_double(-969)); n += 969;
    if (n < -1022) { y = mul_rn(y, pow2_double(-969)); n += 969; if (n < -1022) n = -1022; }
  }
  return mul_rn(y, pow2_double((int)n));
}
FC_FN float ldexp(float x, long long n) {
  float y = x;
  if (n > 127) {
    y = mul_rn(y, pow2_float(127)); n -= 127;
    if (n > 127) { y = mul_rn(y, pow2_float(127)); n -= 127; if (n > 127) n = 127; }
  } else if (n < -126) {  // 2**-102 = 2**-126 * 2**24
    y = mul_rn(y, pow2_float(-102)); n += 102;
    if (n < -126) { y = mul_rn(y, pow2_float(-102)); n += 102; if (n < -126) n = -126; }
  }
  return mul_rn(y, pow2_float((int)n));
}
FC_FN __half ldexp(__half x, long long n) { return __float2half_rn(::fc::ldexp(__half2float(x), n)); }

// numpy.frexp(x): (m, e) with x == m * 2**e, 0.5 <= |m| < 1, by the bits (a subnormal scaled to a normal first); for
// 0, inf and NaN, m is x and e is 0, as C's frexp gives them (CUDA's leaves e unspecified for inf and NaN).
// float16: frexpf of the widened value, the mantissa rounded back (exact), as NumPy's HALF_frexp.
FC_FN int frexp_exponent(double x) {
  long long b = __double_as_longlong(x);
  int e = (int)((b >> 52) & 0x7ff);
  if (e == 0x7ff || (b & 0x7fffffffffffffffLL) == 0) return 0;
  if (e == 0) return (int)((__double_as_longlong(mul_rn(x, pow2_double(54))) >> 52) & 0x7ff) - 54 - 1022;
  return e - 1022;
}
FC_FN double frexp_mantissa(double x) {
  long long b = __double_as_longlong(x);
  int e = (int)((b >> 52) & 0x7ff);
  if (e == 0x7ff || (b & 0x7fffffffffffffffLL) == 0) return x;
  if (e == 0) b = __double_as_longlong(mul_rn(x, pow2_double(54)));
  return __longlong_as_double((b & ~(0x7ffLL << 52)) | (0x3feLL << 52));
}
FC_FN int frexp_exponent(float x) {
  int b = __float_as_int(x);
  int e = (b >> 23) & 0xff;
  if (e == 0xff || (b & 0x7fffffff) == 0) return 0;
  if (e == 0) return ((__float_as_int(mul_rn(x, pow2_float(25))) >> 23) & 0xff) - 25 - 126;
  return e - 126;
}
FC_FN float frexp_mantissa(float x) {
  int b = __float_as_int(x);
  int e = (b >> 23) & 0xff;
  if (e == 0xff || (b & 0x7fffffff) == 0) return x;
  if (e == 0) b = __float_as_int(mul_rn(x, pow2_float(25)));
  return __int_as_float((b & ~(0xff << 23)) | (0x7e << 23));
}
FC_FN int frexp_exponent(__half x) { return frexp_exponent(__half2float(x)); }
FC_FN __half frexp_mantissa(__half x) { return __float2half_rn(frexp_mantissa(__half2float(x))); }

// numpy.nextafter(x, y): C's nextafter for float and double (NaN if either is; y where x == y, so
// nextafter(0.0, -0.0) is -0.0; from a zero the smallest subnormal of y's sign; else one step of the bits towards
// y), by the bits. float16: NumPy's npy_half_nextafter (NaN is 0x7e00, steps compared as its bits), y where x == y
// as C and NumPy 2.5 give it (NumPy 2.4 and before kept x, so nextafter(0.0, -0.0) was 0.0: numpy/numpy#31472).
FC_FN double nextafter(double x, double y) {
  if (::isnan(x) || ::isnan(y)) return add_rn(x, y);
  if (x == y) return y;
  if (x == 0.0) return __longlong_as_double((__double_as_longlong(y) & (1LL << 63)) | 1LL);
  const long long b = __double_as_longlong(x);
  return __longlong_as_double(((x < y) == (x > 0.0)) ? b + 1 : b - 1);
}
FC_FN float nextafter(float x, float y) {
  if (::isnan(x) || ::isnan(y)) return add_rn(x, y);
  if (x == y) return y;
  if (x == 0.0f) return __int_as_float((__float_as_int(y) & (int)0x80000000u) | 1);
  const int b = __float_as_int(x);
  return __int_as_float(((x < y) == (x > 0.0f)) ? b + 1 : b - 1);
}
FC_FN __half nextafter(__half x, __half y) {
  const unsigned short a = bits(x), b = bits(y);
  if (isnan(x) || isnan(y)) return from_bits(0x7e00u);
  if (a == b || ((a | b) & 0x7fffu) == 0) return y;
  if ((a & 0x7fffu) == 0) return from_bits((unsigned short)((b & 0x8000u) + 1u));
  if (!(a & 0x8000u)) return from_bits((unsigned short)((short)a > (short)b ? a - 1u : a + 1u));
  return from_bits((unsigned short)((!(b & 0x8000u) || (a & 0x7fffu) > (b & 0x7fffu)) ? a - 1u : a + 1u));
}

}  // namespace fc

#endif  // FUSEC_DEVICE_CUH
// ---- end of fusec device helpers ----------------------------------------------------------------------
