#!/bin/bash
# On the device machine: the reference's unit tests (testing/python/<dir>/test_*.py of
# tile-ai/tilelang, carried in .refsrc/testing) against whichever `tilelang` PYTHONPATH selects,
# JOBS files at a time on one GPU, each file bounded by PER_FILE_S seconds. Correctness only.
#   LABEL=ours PYTHONPATH=$PWD DIRS="language issue" bash scripts/device_unit.sh
#   FILES="language/test_a.py cuda/test_b.py" runs those files instead of whole directories
# Writes $OUT/unit_$LABEL.jsonl: one line per file with pytest's summary line.
set -u
label=${LABEL:-ours}; OUT=${OUT:-/tmp/device_out}; mkdir -p "$OUT"
DIRS=${DIRS:-"language issue jit kernel layout autotune profiler cache debug math fastmath cuda tilelibrary"}
base=/tmp/unit_$label; rm -rf $base && mkdir -p $base && cp -r .refsrc/testing/python/. $base/
export out=$OUT/unit_$label.jsonl budget=${PER_FILE_S:-300} base label TILELANG_CACHE_DIR=/tmp/tlc_unit_$label
: > $out
one() {
  d=$(dirname $1); f=$(basename $1)
  log=/tmp/unitlog_${label}_${d}_${f%.py}.txt
  res=$(cd $base/$d && timeout $budget python3 -m pytest -q -p no:cacheprovider --tb=line $f > $log 2>&1; tail -1 $log)
  [ -z "$res" ] && res="timeout or crash"
  python3 -c "import json,sys; print(json.dumps({'file': sys.argv[1] + '/' + sys.argv[2], 'summary': sys.argv[3]}))" "$d" "$f" "$res" >> $out
}
export -f one
if [ -n "${FILES:-}" ]; then printf '%s\n' $FILES; else
  (cd $base && for d in $DIRS; do ls $d/test_*.py 2>/dev/null; done); fi | xargs -P ${JOBS:-8} -I{} bash -c 'one {}'
tar czf $OUT/unit_${label}_logs.tgz /tmp/unitlog_${label}_* 2>/dev/null
echo "== unit $label: $(wc -l < $out) files"
