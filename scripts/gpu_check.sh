#!/usr/bin/env bash
# Check the GPU in one call (scripts/gpu_check.py says what it runs): from the repository root on the GPU machine,
#   OUT=/tmp/out bash scripts/gpu_check.sh [gpu_check.py's options, e.g. --no-bench, --files scan,joins]
# Wheels carried in .whl/ (Dask and what it needs; see docs/tests.md, "Checking the GPU in one call") are installed first, into
# /tmp/fusec-site, for the modules the machine's Python lacks; the checkout comes first on PYTHONPATH.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
site=/tmp/fusec-site
if compgen -G ".whl/*.whl" > /dev/null; then
  missing=()
  for whl in .whl/*.whl; do
    name=$(basename "$whl" | cut -d- -f1 | tr '[:upper:]' '[:lower:]')
    module=$(python3 - "$whl" "$name" <<'PY'
import sys, zipfile
whl, name = sys.argv[1], sys.argv[2]
tops = [n for n in zipfile.ZipFile(whl).namelist() if n.endswith("top_level.txt")]
top = zipfile.ZipFile(whl).read(tops[0]).decode().split()[0] if tops else name
print({"pyyaml": "yaml"}.get(name, top))
PY
)
    python3 -c "import $module" 2>/dev/null || missing+=("$whl")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${#missing[@]} carried wheel(s) into $site: ${missing[*]##*/}"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "${missing[@]}" \
      || echo "gpu_check.sh: installing the carried wheels failed" >&2
  fi
fi
# An NVRTC carried as .whl/nvidia_cuda_nvrtc-*-libs.tar.xz (the wheel's files, repacked smaller) is loaded ahead of
# the machine's (LD_PRELOAD: fusec, CuPy and the peers then share it): fusec refuses kernels with 8/16-bit values
# on NVRTC before 13.3 (fusec/codegen/compiler_bugs.py), and a machine whose PyTorch brings NVRTC 13.0 has that.
for tarball in .whl/nvidia_cuda_nvrtc-*-libs.tar.xz; do
  [ -f "$tarball" ] || continue
  mkdir -p "$site" && tar -C "$site" -xJf "$tarball" || { echo "gpu_check.sh: could not unpack $tarball" >&2; break; }
  lib=$(ls "$site"/nvidia/cu*/lib/libnvrtc.so.* 2>/dev/null | grep -v builtins | head -1)
  if [ -n "$lib" ]; then
    export LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" LD_LIBRARY_PATH="$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "NVRTC from $tarball: $lib"
  fi
done
export PYTHONPATH=$PWD:$site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
exec python3 scripts/gpu_check.py "$@"
