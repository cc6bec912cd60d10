/* The host cost of one kernel launch with no Python at all: what any dispatch path, however short, pays on
 * this machine. Loads a cubin, then times back-to-back launches of one of its kernels (host time per call
 * over many calls, synchronized at the end, as benchmarks/run.py times the small-input rows), alone and with
 * a stream-ordered allocation and free of the output per call (as a call that returns a new array does).
 *
 *   cc -O2 -o build/launch_floor benchmarks/launch_floor.c -ldl -I/usr/local/cuda/include
 *   build/launch_floor KERNEL.cubin KERNEL_NAME          (the kernel takes (const float*, float*, int))
 *
 * The figure in BENCHMARKS.md (2026-12-03, H200) launched one block of 256 threads of
 *   extern "C" __global__ void scale(const float* x, float* y, int n) {
 *     for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = 2.0f * x[i];
 *   }
 * on n = 1024 (nvcc -cubin -arch=sm_90 -o build/scale.cubin scale.cu).
 *
 * libcuda is opened with dlopen, so this builds without a GPU or the driver's link stubs.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CALLS 20000
#define WARMUP 2000

static CUresult (*p_cuInit)(unsigned);
static CUresult (*p_cuDeviceGet)(CUdevice*, int);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuModuleLoadData)(CUmodule*, const void*);
static CUresult (*p_cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
static CUresult (*p_cuMemAlloc)(CUdeviceptr*, size_t);
static CUresult (*p_cuMemAllocAsync)(CUdeviceptr*, size_t, CUstream);
static CUresult (*p_cuMemFreeAsync)(CUdeviceptr, CUstream);
static CUresult (*p_cuStreamCreate)(CUstream*, unsigned);
static CUresult (*p_cuStreamSynchronize)(CUstream);
static CUresult (*p_cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, CUstream, void**, void**);

#define CHECK(call)                                                        \
  do {                                                                     \
    CUresult r_ = (call);                                                  \
    if (r_ != CUDA_SUCCESS) {                                              \
      fprintf(stderr, "%s failed: %d (line %d)\n", #call, (int)r_, __LINE__); \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static void* sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "libcuda has no %s\n", name);
    exit(1);
  }
  return p;
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s KERNEL.cubin KERNEL_NAME\n", argv[0]);
    return 2;
  }
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "no libcuda.so.1: %s\n", dlerror());
    return 1;
  }
  p_cuInit = sym(lib, "cuInit");
  p_cuDeviceGet = sym(lib, "cuDeviceGet");
  p_cuDevicePrimaryCtxRetain = sym(lib, "cuDevicePrimaryCtxRetain");
  p_cuCtxSetCurrent = sym(lib, "cuCtxSetCurrent");
  p_cuModuleLoadData = sym(lib, "cuModuleLoadData");
  p_cuModuleGetFunction = sym(lib, "cuModuleGetFunction");
  p_cuMemAlloc = sym(lib, "cuMemAlloc_v2");
  p_cuMemAllocAsync = sym(lib, "cuMemAllocAsync");
  p_cuMemFreeAsync = sym(lib, "cuMemFreeAsync");
  p_cuStreamCreate = sym(lib, "cuStreamCreate");
  p_cuStreamSynchronize = sym(lib, "cuStreamSynchronize");
  p_cuLaunchKernel = sym(lib, "cuLaunchKernel");

  FILE* f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* image = malloc(size);
  if (fread(image, 1, size, f) != (size_t)size) return 1;
  fclose(f);

  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction fn;
  CUstream stream;
  CHECK(p_cuInit(0));
  CHECK(p_cuDeviceGet(&dev, 0));
  CHECK(p_cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(p_cuCtxSetCurrent(ctx));
  CHECK(p_cuModuleLoadData(&mod, image));
  CHECK(p_cuModuleGetFunction(&fn, mod, argv[2]));
  CHECK(p_cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

  const int n = 1024;
  CUdeviceptr x, y;
  CHECK(p_cuMemAlloc(&x, n * sizeof(float)));
  CHECK(p_cuMemAlloc(&y, n * sizeof(float)));
  void* params[3] = {&x, &y, (void*)&n};

  for (int mode = 0; mode < 2; ++mode) {
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      double t0 = 0;
      for (int k = 0; k < WARMUP + CALLS; ++k) {
        if (k == WARMUP) {
          CHECK(p_cuStreamSynchronize(stream));
          t0 = now_us();
        }
        if (mode == 1) {
          CHECK(p_cuMemAllocAsync(&y, n * sizeof(float), stream));
          CHECK(p_cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, stream, params, NULL));
          CHECK(p_cuMemFreeAsync(y, stream));
        } else {
          CHECK(p_cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, stream, params, NULL));
        }
      }
      CHECK(p_cuStreamSynchronize(stream));
      double per = (now_us() - t0) / CALLS;
      if (per < best) best = per;
    }
    printf("launch floor (C, cuLaunchKernel%s): %.2f us per call, best of 5 x %d back-to-back\n",
           mode ? " + cuMemAllocAsync/cuMemFreeAsync" : "", best, CALLS);
  }
  return 0;
}
