#!/usr/bin/env bash
# One GPU session, batched into device calls. Every log lands in $OUT; the last lines printed are a
# short summary. Run from the repository root on a machine with an NVIDIA GPU:
#   OUT=/tmp/out bash scripts/gpu_session.sh tests   # pytest -m gpu (every GPU test of tests/), the fuzzer, the demo
#                                                    (TESTS_TIMEOUT, FUSEC_FUZZ_TIME_LIMIT: seconds, 280 and 110)
#   OUT=/tmp/out bash scripts/gpu_session.sh bench   # benchmarks/run.py with every peer (add --quick for a short run;
#                                                    set FUSEC_GIT_COMMIT to the commit: the copy's git data may be stale)
#   OUT=/tmp/out bash scripts/gpu_session.sh profile # benchmarks/profile_gpu.py: resources, SASS, ncu, dispatch, grid, compile
# The fuzzer reads .fuzz/corpus.fir and the precompiled .fuzz/cubin.tar.xz (scripts/make_fuzz_corpus.py).
set -u
OUT=${OUT:-/tmp/fusec-gpu}
mkdir -p "$OUT"
# the checkout first, then whatever PYTHONPATH held (carried wheels installed with pip --target)
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 FUSEC_CUBIN_CACHE=${FUSEC_CUBIN_CACHE:-$PWD/.fuzz/cubin}
export FUSEC_FUZZ_CORPUS=${FUSEC_FUZZ_CORPUS:-$PWD/.fuzz/corpus.fir}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
start=$(date +%s)
mode=${1:-tests}
if [ "$mode" = tests ]; then
  timeout ${TESTS_TIMEOUT:-280} python -m pytest -m gpu -q -p no:cacheprovider -o addopts="" tests \
    --deselect tests/gpu/test_fuzz_gpu.py \
    > "$OUT/gpu_tests.log" 2>&1
  tests_rc=$?
  FUSEC_FUZZ_TIME_LIMIT=${FUSEC_FUZZ_TIME_LIMIT:-110} timeout $(( ${FUSEC_FUZZ_TIME_LIMIT:-110} + 40 )) \
    python -m pytest -m gpu -q -s -p no:cacheprovider \
    -o addopts="" tests/gpu/test_fuzz_gpu.py > "$OUT/fuzz.log" 2>&1
  fuzz_rc=$?
  timeout 60 python -m fusec demo > "$OUT/demo.log" 2>&1
  demo_rc=$?
  echo "== elapsed $(( $(date +%s) - start )) s; tests rc=$tests_rc fuzz rc=$fuzz_rc demo rc=$demo_rc"
  grep -E "passed|failed|error" "$OUT/gpu_tests.log" | tail -3
  grep -E "^fuzz:|passed|failed" "$OUT/fuzz.log" | tail -2
  grep -E "FAILED|ERROR" "$OUT/gpu_tests.log" | head -30
  tail -12 "$OUT/demo.log"
elif [ "$mode" = profile ]; then
  shift
  names=${PROFILE_NAMES:-gelu softmax layernorm moe_router}
  timeout 120 python benchmarks/profile_gpu.py kernels --cubins "$OUT/cubins" $names > "$OUT/kernels.log" 2>&1
  for f in "$OUT"/cubins/*.cubin; do cuobjdump --dump-sass "$f" > "${f%.cubin}.sass" 2>&1; done
  tar -C "$OUT" -czf "$OUT/cubins.tgz" cubins && rm -rf "$OUT/cubins"
  timeout 200 ncu --clock-control none -k 'regex:^k[0-9]' --launch-count "${NCU_LAUNCHES:-8}" --section SpeedOfLight --section Occupancy \
    --section LaunchStats --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section InstructionStats \
    python benchmarks/profile_gpu.py kernels $names > "$OUT/ncu.txt" 2>&1
  timeout 90 python benchmarks/profile_gpu.py dispatch > "$OUT/dispatch.log" 2>&1
  [ -n "${PROFILE_GRID-1}" ] && timeout 120 python benchmarks/profile_gpu.py grid $names > "$OUT/grid.log" 2>&1
  [ -n "${PROFILE_COMPILE-1}" ] && timeout 120 python benchmarks/profile_gpu.py compile > "$OUT/compile.log" 2>&1
  echo "== elapsed $(( $(date +%s) - start )) s"
  cat "$OUT/kernels.log" "$OUT"/grid.log "$OUT"/compile.log 2>/dev/null
  grep -E " us$|back-to-back" "$OUT/dispatch.log"
  grep -E "^  k[0-9]|Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|Executed Ipc A" "$OUT/ncu.txt" | head -80
else
  shift
  timeout ${BENCH_TIMEOUT:-420} python benchmarks/run.py "$@" --out "$OUT" > "$OUT/bench.log" 2>&1
  echo "== elapsed $(( $(date +%s) - start )) s; bench rc=$?"
  tail -24 "$OUT/bench.log"
fi
