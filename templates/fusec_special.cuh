// ---- fusec special-function helpers --------------------------------------------------------------------
// Included after the device helpers only by kernels that call one of these (fusec/codegen/cuda_ops.py names
// this header for their ops), so every other kernel's source stays as it was. Same rules as the device
// helpers: each computes what NumPy / SciPy compute for the op and dtype.
#ifndef FUSEC_SPECIAL_CUH
#define FUSEC_SPECIAL_CUH

namespace fc {

// scipy.special.erf / erfc: loops f->f and d->d only (the tracer casts float16, bool and integers to
// double, as SciPy's loop resolution does). CUDA's erff / erfcf are within 2 / 4 ulp, erf / erfc within
// 2 / 5 ulp (CUDA C Programming Guide, "Mathematical Functions"); SciPy rounds a double result for float32.
FC_FN float erf(float a) { return ::erff(a); }
FC_FN double erf(double a) { return ::erf(a); }
FC_FN float erfc(float a) { return ::erfcf(a); }
FC_FN double erfc(double a) { return ::erfc(a); }

}  // namespace fc

#endif  // FUSEC_SPECIAL_CUH
// ---- end of fusec special-function helpers ------------------------------------------------------------
