#!/bin/bash
# One device-tool session that checks and measures everything GPU-facing in a single call:
# GPU tests and the differential fuzzer side by side, then resource growth, then the core
# benchmarks alone on the GPU. Results go to $OUT (the device tool brings them back).
#   bash scripts/device_session.sh [fuzz_seconds] [first_fuzz_seed]
set -u
OUT=${OUT:-/tmp/device_out}
mkdir -p "$OUT"
FUZZ_SECONDS=${1:-60}
SEED_START=${2:-30000}
export TILELANG_CACHE_DIR=${TILELANG_CACHE_DIR:-/tmp/tlcache} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s)

timeout 260 python -m pytest -q -m "gpu or nvrtc" tests -p no:cacheprovider -rfE \
    --deselect tests/reliability/test_bad_inputs.py::test_gpu_tensor_beyond_int32_elements \
    --deselect tests/reliability/test_resources.py \
    > "$OUT/gpu_tests.txt" 2>&1 &
tests_pid=$!
timeout $((FUZZ_SECONDS + 60)) python scripts/device_reliability.py --sections fuzz \
    --fuzz-seconds "$FUZZ_SECONDS" --workers 6 --seed-start "$SEED_START" --out "$OUT/fuzz" \
    > "$OUT/fuzz.txt" 2>&1
wait $tests_pid
echo "== gpu tests ($(( $(date +%s) - t0 )) s)"; grep -E "passed|failed|error" "$OUT/gpu_tests.txt" | tail -15
echo "== fuzz"; tail -25 "$OUT/fuzz.txt"

# device-wide free memory is only meaningful with the GPU to ourselves: after the fuzzer
timeout 60 python -m pytest -q -m gpu tests/reliability/test_resources.py -p no:cacheprovider \
    -rfE > "$OUT/gpu_resource_tests.txt" 2>&1
echo "== gpu resource tests"; tail -3 "$OUT/gpu_resource_tests.txt"
timeout 150 python scripts/device_reliability.py --sections resources --kernels 500 \
    --calls 1000000 --out "$OUT/resources" > "$OUT/resources.txt" 2>&1
echo "== resources ($(( $(date +%s) - t0 )) s)"; tail -20 "$OUT/resources.txt"

timeout 150 python benchmarks/bench_core.py > "$OUT/bench.txt" 2>&1
echo "== bench ($(( $(date +%s) - t0 )) s)"; cat "$OUT/bench.txt"
