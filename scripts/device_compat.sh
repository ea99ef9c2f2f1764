#!/bin/bash
# On the device machine: the reference's example suite on this project (and, with REF=1, on
# the reference 0.1.15 from .ref/tlsite.tar.xz), with shared/compat's scripts carried in
# .ref/compat. Results in $OUT: peer_<label>.jsonl, regr_<label>.jsonl and logs.
#   SECTIONS="peer regr" REF=0 bash scripts/device_compat.sh [regression substrings ...]
set -u
OUT=${OUT:-/tmp/device_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TILELANG_CACHE_DIR=/tmp/tlcache
EX=$PWD/.refsrc/examples
[ -d /tmp/tlsite ] || tar xJf .ref/tlsite.tar.xz -C /tmp
run_side() {  # label pythonpath [regression substrings ...]
  local label=$1 pp=$2
  shift 2
  case " ${SECTIONS:-peer regr} " in *" peer "*)
    PYTHONPATH=$pp EXAMPLES=$EX LABEL=$label OUT=$OUT JOBS=${JOBS:-4} PER_DIR_S=${PER_DIR_S:-240} \
      timeout ${PEER_S:-420} bash .ref/compat/peer_examples.sh > $OUT/peer_${label}.txt 2>&1
    echo "== peer $label: $(wc -l < $OUT/peer_$label.jsonl) files";;
  esac
  case " ${SECTIONS:-peer regr} " in *" regr "*)
    PYTHONPATH=$pp PER_FILE_S=${PER_FILE_S:-150} timeout ${REGR_S:-420} \
      python .ref/compat/regression_perf.py $EX $OUT/regr_$label.jsonl "$@" > $OUT/regr_${label}.txt 2>&1
    echo "== regr $label: $(grep -c '"ok": true' $OUT/regr_$label.jsonl) ok of $(wc -l < $OUT/regr_$label.jsonl)";;
  esac
}
run_side ours $PWD "$@"
[ "${REF:-0}" = 1 ] && run_side ref /tmp/tlsite "$@"
true
