"""Build-only mode of the GPU tests: ``pytest --gpu-build`` on a machine without a GPU.

Every GPU case runs as written (every case of every file in ``tests/gpu``, and the cases marked ``gpu``, the CuPy
halves, of the files whose tests run on both backends: :data:`tests.backends.FILES`), against a host stand-in for CuPy
(:mod:`tests.gpu_build.standin`): arrays are NumPy views of host allocations at 256-byte aligned addresses, so a
view keeps CuPy's pointer offsets and alignments. Each case is planned, each of its kernels generated and compiled
with NVRTC for sm_90 (into a cubin cache that dedupes identical sources) by fusec's own launcher, each launch
checked against the layouts of its arrays (:mod:`tests.gpu_build.contracts`) and run by the reference interpreter
over the region's declared inputs (:mod:`tests.gpu_build.launcher`), so the tests' own assertions still hold. A
codegen exception, an NVRTC rejection or a failed launch check fails the test as it would fail on a GPU.

What it cannot show: wrong results of a kernel that compiles (the interpreter computes them), timings, races.
What it skips, with the reason (:mod:`tests.gpu_build.gpu_only`): tests that time, the dispatch fast path, worker
processes, launches of hand-written kernels (after their modules compiled), inputs of more than 2**31 elements.

Switched on by ``--gpu-build`` or ``FUSEC_GPU_BUILD=1`` and only where CuPy sees no GPU (on a GPU machine it
refuses to start, so it can never stand in for a GPU run); pytest's header says so in capitals. ``--gpu-build-sample
FRACTION`` (``FUSEC_GPU_BUILD_SAMPLE``) runs a seeded sample (:mod:`tests.gpu_build.sample`; the seed is printed,
``--gpu-build-seed``/``FUSEC_GPU_BUILD_SEED`` repeats it), as CI does (``.ci/run``).

Modules: :mod:`.plugin` (pytest's options and hooks), :mod:`.mode` (switching it on), :mod:`.standin`,
:mod:`.launcher`, :mod:`.contracts`, :mod:`.record` (what a run built), :mod:`.sample`, :mod:`.gpu_only`.
"""
