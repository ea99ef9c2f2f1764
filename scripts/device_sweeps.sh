#!/bin/bash
# One device-tool call that checks the GPU tests and then runs every tuning sweep in
# benchmarks/sweeps/ alone on the GPU (plus the host-overhead breakdown). Output goes to $OUT.
#   bash scripts/device_sweeps.sh [sweep names...]     (default: all)
set -u
OUT=${OUT:-/tmp/device_out}
mkdir -p "$OUT"
export TILELANG_CACHE_DIR=${TILELANG_CACHE_DIR:-/tmp/tlcache} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s)
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout 240 python -m pytest -q -m gpu tests -p no:cacheprovider -rfE --maxfail=20 \
      --deselect tests/reliability/test_bad_inputs.py::test_gpu_tensor_beyond_int32_elements \
      > "$OUT/gpu_tests.txt" 2>&1
  echo "== gpu tests ($(( $(date +%s) - t0 )) s)"
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/gpu_tests.txt" | tail -25
fi
sweeps=${*:-"flash flash_overlap gemm epilogue conv fp8_gemm gemm_examples mha_bwd"}
for s in $sweeps; do
  timeout 100 python "benchmarks/sweeps/$s.py" > "$OUT/sweep_$s.txt" 2>&1
  echo "== sweep $s ($(( $(date +%s) - t0 )) s)"; cat "$OUT/sweep_$s.txt" | grep -v "^device:"
done
timeout 60 python benchmarks/host_overhead.py > "$OUT/host_overhead.txt" 2>&1
echo "== host overhead"; cat "$OUT/host_overhead.txt"
