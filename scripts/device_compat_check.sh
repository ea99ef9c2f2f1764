#!/bin/bash
# One device call that checks the compatibility suites and the GPU tests side by side (all
# correctness, so they share the GPU), then times a few as-written cases alone. Needs carry
# [".ref", ".refsrc/examples", ".refsrc/testing"]. Results in $OUT.
#   AW_ONLY=flash_bshd,fp8_2xacc REGR="dequantize gemv" bash scripts/device_compat_check.sh
set -u
OUT=${OUT:-/tmp/device_out}; mkdir -p "$OUT"
export TILELANG_CACHE_DIR=/tmp/tlcache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
[ -d /tmp/tlsite ] || tar xJf .ref/tlsite.tar.xz -C /tmp
t0=$(date +%s)
timeout ${PAR_S:-360} python -m pytest -q -m gpu tests -n 4 -p no:cacheprovider -rfE \
    --deselect tests/reliability/test_resources.py > "$OUT/gpu_tests.txt" 2>&1 &
SECTIONS=peer PEER_S=${PAR_S:-360} JOBS=4 OUT=$OUT bash scripts/device_compat.sh > "$OUT/peer_run.txt" 2>&1 &
LABEL=ours PYTHONPATH=$PWD JOBS=6 PER_FILE_S=200 OUT=$OUT timeout ${PAR_S:-360} \
    bash scripts/device_unit.sh > "$OUT/unit_run.txt" 2>&1 &
wait
echo "== correctness ($(( $(date +%s) - t0 )) s)"
grep -E "passed|failed" "$OUT/gpu_tests.txt" | tail -1; grep -E "^FAILED|^ERROR" "$OUT/gpu_tests.txt" | head -20
cat "$OUT/peer_run.txt"; tail -1 "$OUT/unit_run.txt"
if [ -n "${AW_ONLY:-}" ]; then
  res=$OUT/as_written.jsonl; : > "$res"
  PYTHONPATH=$PWD timeout 120 python benchmarks/as_written.py --label ours --out "$res" --only "$AW_ONLY" --variants default,ws,no_ws > "$OUT/aw_ours.txt" 2>&1
  PYTHONPATH=/tmp/tlsite timeout 120 python benchmarks/as_written.py --label ref --out "$res" --only "$AW_ONLY" > "$OUT/aw_ref.txt" 2>&1
  echo "== as written ($(( $(date +%s) - t0 )) s)"
fi
if [ -n "${REGR:-}" ]; then
  SECTIONS=regr REGR_S=${REGR_S:-120} PER_FILE_S=60 OUT=$OUT bash scripts/device_compat.sh $REGR
fi
echo "== done ($(( $(date +%s) - t0 )) s)"
