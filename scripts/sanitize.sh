#!/usr/bin/env bash
# compute-sanitizer over every example and test kernel, in one call, with a summary.
#
#   bash scripts/sanitize.sh                     # memcheck, racecheck, synccheck
#   TOOLS="memcheck" FUZZ=60 bash scripts/sanitize.sh
#
# For each tool it runs, under compute-sanitizer:
#   1. scripts/sanitize_kernels.py run   - every example (size "small"), the kernel builders of
#      tests/gpu/kernels.py, the first $FUZZ fuzz programs that compile;
#   2. pytest -m gpu -v -s on $PYTEST_TARGETS - the GPU tests (pytest -v names each test
#      before its kernels run, so reports are attributed to tests).
# Logs go to $OUT (default sanitize_out/), one per tool and part; then
# `sanitize_kernels.py summarize` prints the reports grouped by tool, kernel/test and kind,
# and writes $OUT/sanitize_summary.json. Exit status: 0 when no report, 1 otherwise.
#
# Environment: TOOLS, PARTS ("kernels pytest"), FUZZ (default 30), SIZE (example size, default small), PYTEST_TARGETS,
# PART_TIMEOUT (seconds per tool and part, default 90: 3 tools x 2 parts fit in 10 minutes), SANITIZER (path of compute-sanitizer).
# PyTorch's caching allocator is disabled (PYTORCH_NO_CUDA_MEMORY_CACHING=1) so memcheck sees
# each tensor's real bounds, not the slack of a cached block.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-sanitize_out}
TOOLS=${TOOLS:-"memcheck racecheck synccheck"}
FUZZ=${FUZZ:-30}
SIZE=${SIZE:-small}
PART_TIMEOUT=${PART_TIMEOUT:-90}
PYTEST_TARGETS=${PYTEST_TARGETS:-"tests/gpu tests/runtime/test_rt_gpu_launch.py tests/runtime/test_rt_gpu_device.py tests/reliability/test_bad_inputs.py"}
PARTS=${PARTS:-"kernels pytest"}
mkdir -p "$OUT"

find_sanitizer() {
  if [ -n "${SANITIZER:-}" ] && [ -x "$SANITIZER" ]; then echo "$SANITIZER"; return; fi
  if command -v compute-sanitizer >/dev/null 2>&1; then command -v compute-sanitizer; return; fi
  for d in "${CUDA_HOME:-}" /usr/local/cuda /usr/local/cuda-*; do
    if [ -n "$d" ] && [ -x "$d/bin/compute-sanitizer" ]; then echo "$d/bin/compute-sanitizer"; return; fi
    if [ -n "$d" ] && [ -x "$d/compute-sanitizer/compute-sanitizer" ]; then
      echo "$d/compute-sanitizer/compute-sanitizer"; return
    fi
  done
  # pip wheel nvidia-cuda-sanitizer-api-cu12 / -cu13
  python - <<'EOF' 2>/dev/null
import glob, os, site
for base in site.getsitepackages() + [site.getusersitepackages()]:
    for p in glob.glob(os.path.join(base, "nvidia", "*", "compute-sanitizer", "compute-sanitizer")):
        if os.access(p, os.X_OK):
            print(p)
            raise SystemExit
EOF
}

SAN=$(find_sanitizer)
if [ -z "$SAN" ]; then
  echo "compute-sanitizer not found (set SANITIZER=/path/to/compute-sanitizer)" >&2
  exit 2
fi
echo "using $SAN ($("$SAN" --version 2>/dev/null | tail -n 1))"

export PYTORCH_NO_CUDA_MEMORY_CACHING=1
export TILELANG_CACHE_DIR=${TILELANG_CACHE_DIR:-$(mktemp -d)}
logs=()
start=$(date +%s)
for tool in $TOOLS; do
  extra=()
  case "$tool" in
    racecheck) extra=(--racecheck-report hazard) ;;
    memcheck) extra=(--leak-check no) ;;
  esac
  for part in $PARTS; do
    log="$OUT/$tool.$part.log"
    echo "TOOL $tool" > "$log"
    t0=$(date +%s)
    if [ "$part" = kernels ]; then
      timeout "$PART_TIMEOUT" "$SAN" --tool "$tool" "${extra[@]}" --print-limit 200 \
        --error-exitcode 0 python scripts/sanitize_kernels.py run --fuzz "$FUZZ" \
        --size "$SIZE" >> "$log" 2>&1
    else
      # shellcheck disable=SC2086
      timeout "$PART_TIMEOUT" "$SAN" --tool "$tool" "${extra[@]}" --print-limit 200 \
        --error-exitcode 0 python -m pytest -m gpu -v -s -p no:cacheprovider \
        -k "not beyond_int32 and not many_calls and not output_allocation" \
        $PYTEST_TARGETS >> "$log" 2>&1
    fi
    rc=$?
    [ $rc -eq 124 ] && echo "@@ TIMEOUT after ${PART_TIMEOUT}s" >> "$log"
    echo "$tool/$part: exit $rc in $(( $(date +%s) - t0 )) s -> $log"
    logs+=("$log")
  done
done
echo "total $(( $(date +%s) - start )) s"
python scripts/sanitize_kernels.py summarize "${logs[@]}" --json "$OUT/sanitize_summary.json"
