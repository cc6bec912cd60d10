#!/usr/bin/env bash
# One GPU session, batched into a single device call: the GPU test suite, the GPU fuzzer over the
# precompiled corpus, the demo, and the benchmarks. Every log lands in $OUT; the last lines printed
# are a short summary. Run from the repository root on a machine with an NVIDIA GPU:
#   OUT=/tmp/out bash scripts/gpu_session.sh [--full-bench]
set -u
OUT=${OUT:-/tmp/fusec-gpu}
mkdir -p "$OUT"
export PYTHONPATH=. PYTHONUNBUFFERED=1 FUSEC_CUBIN_CACHE=${FUSEC_CUBIN_CACHE:-$PWD/.fuzz/cubin}
export FUSEC_FUZZ_CORPUS=${FUSEC_FUZZ_CORPUS:-$PWD/.fuzz/corpus.fir}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
start=$(date +%s)
timeout 210 python -m pytest -m gpu -q -p no:cacheprovider -o addopts="" tests/gpu tests/test_examples.py \
  tests/test_cli.py --deselect tests/gpu/test_fuzz_gpu.py > "$OUT/gpu_tests.log" 2>&1
tests_rc=$?
timeout 90 python -m pytest -m gpu -q -s -p no:cacheprovider -o addopts="" tests/gpu/test_fuzz_gpu.py \
  > "$OUT/fuzz.log" 2>&1
fuzz_rc=$?
timeout 50 python -m fusec demo > "$OUT/demo.log" 2>&1
demo_rc=$?
bench_flag=--quick
[ "${1:-}" = "--full-bench" ] && bench_flag=
timeout 140 python benchmarks/run.py $bench_flag --out "$OUT" > "$OUT/bench.log" 2>&1
bench_rc=$?
echo "== elapsed $(( $(date +%s) - start )) s; tests rc=$tests_rc fuzz rc=$fuzz_rc demo rc=$demo_rc bench rc=$bench_rc"
grep -E "passed|failed|error" "$OUT/gpu_tests.log" | tail -3
grep -E "^fuzz:|passed|failed" "$OUT/fuzz.log" | tail -2
grep -E "FAILED" "$OUT/gpu_tests.log" | head -15
tail -12 "$OUT/demo.log"
tail -14 "$OUT/bench.log"
