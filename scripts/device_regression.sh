#!/bin/bash
# On the device machine: the reference's regression functions (examples/*/regression_*.py,
# unpacked in .refsrc/examples) timed on the reference 0.1.15 (the bundle of
# make_reference_bundle.sh, carried in .ref/) and on this project in one call, one example
# directory at a time (reference, then ours: drift between them stays small), then the ratios.
#   [BUDGET=480] bash scripts/device_regression.sh gemm flash_attention ...
# A directory not started within BUDGET seconds is listed as skipped (a call has 600 s: time
# the rest in the next). Rows in $OUT/profile_{ref,ours}_<dir>.jsonl.
set -u
OUT=${OUT:-/tmp/device_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T0=$(date +%s)
[ -d /tmp/tlsite ] || tar xJf .ref/tlsite.tar.xz -C /tmp
EX=$PWD/.refsrc/examples
profile() {  # label pythonpath dir
  TILELANG_CACHE_DIR=/tmp/tlc_$1 PYTHONPATH=$2 PER_FILE_S=200 timeout 300 python \
    scripts/compat/regression_profile.py .ref/compat/regression_perf.py "$EX" "$OUT" "$1" "$3/" \
    > "$OUT/prof_$1.txt" 2>&1
}
for d in "$@"; do
  if [ $(( $(date +%s) - T0 )) -gt "${BUDGET:-480}" ]; then echo "skipped $d (time)"; continue; fi
  profile "ref_$d" /tmp/tlsite "$d"
  profile "ours_$d" "$PWD" "$d"
  echo "$d: $(( $(date +%s) - T0 )) s, ran: reference $(grep -c '"ok": true' "$OUT/profile_ref_$d.jsonl")," \
       "ours $(grep -c '"ok": true' "$OUT/profile_ours_$d.jsonl")"
done
rm -rf "$OUT"/src_*
python scripts/compat/regression_ratios.py "$OUT"
