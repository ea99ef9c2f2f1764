#!/bin/bash
# On the device machine: benchmarks/as_written.py for this project and for the reference 0.1.15
# (the bundle made by make_reference_bundle.sh, carried in .ref/), one GPU, one timer, then the
# side-by-side table. Results in $OUT/as_written.jsonl.
#   bash scripts/device_as_written.sh [--only a,b] [--variants default,no_ws]
set -u
OUT=${OUT:-/tmp/device_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TILELANG_CACHE_DIR=/tmp/tlcache
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
[ -d /tmp/tlsite ] || tar xJf .ref/tlsite.tar.xz -C /tmp
res=$OUT/as_written.jsonl; : > "$res"
PYTHONPATH=$PWD timeout 280 python benchmarks/as_written.py --label ours --out "$res" "$@" > "$OUT/ours.txt" 2>&1
echo "ours: rc=$?"
PYTHONPATH=$PWD timeout 120 python benchmarks/as_written.py --label torch --out "$res" "$@" > "$OUT/torch.txt" 2>&1
PYTHONPATH=/tmp/tlsite timeout 280 python benchmarks/as_written.py --label ref --out "$res" "$@" > "$OUT/ref.txt" 2>&1
echo "ref: rc=$?"
tail -3 "$OUT/ref.txt"
PYTHONPATH=$PWD python benchmarks/as_written.py --table "$res"
