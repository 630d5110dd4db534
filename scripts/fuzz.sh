#!/usr/bin/env bash
# Runs each libFuzzer target for SECONDS (default 60) from the sanitizer
# build (scripts/sanitize.sh builds it; this script builds it too when
# missing). Corpora start from fuzz/corpus/<target> plus, for the parser,
# every .mlir of the tests and examples; new inputs stay in
# $SEQC_FUZZ_WORK (default build-sanitize/fuzz-work). A crash stops the run
# with the reproducer's path: minimize it, add it to fuzz/corpus/<target>
# (the test suite replays that directory) and fix the bug.
# $SEQC_FUZZ_SEED fixes libFuzzer's seed: with the corpus of a fresh
# checkout, a run then explores a fixed sequence of inputs (the test
# command uses it, so a slower machine tests a prefix of what was tested
# here).
#   scripts/fuzz.sh [SECONDS] [TARGET...]      TARGET: mlir npy weights call
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
shift || true
TARGETS=${*:-mlir npy weights call}
DIR=${SEQC_SANITIZE_DIR:-build-sanitize}
if [ ! -f "$DIR/build.ninja" ]; then
  ./scripts/setup.sh
  CC=clang-22 CXX=clang++-22 cmake -S . -B "$DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DSEQC_SANITIZE=address,undefined -DSEQC_FUZZ=ON
fi
cmake --build "$DIR" -j "${SEQC_JOBS:-$(nproc)}" --target \
  $(for t in $TARGETS; do echo "seqc-fuzz-$t"; done)
WORK=${SEQC_FUZZ_WORK:-$DIR/fuzz-work}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=0:allow_user_poisoning=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/lsan.supp:print_suppressions=0}
export SEQC_CACHE_DIR=$WORK/cache
for t in $TARGETS; do
  corpus=$WORK/corpus-$t
  mkdir -p "$corpus" "$WORK/crashes-$t"
  cp -n fuzz/corpus/$t/* "$corpus/" 2>/dev/null || true
  if [ "$t" = mlir ]; then
    find test examples -name '*.mlir' -exec cp -n {} "$corpus/" \; 2>/dev/null || true
  fi
  case $t in
    call) maxlen=4096 ;;
    mlir) maxlen=16384 ;;
    *) maxlen=8192 ;;
  esac
  echo "== seqc-fuzz-$t for ${SECONDS_EACH}s"
  status=0
  "$DIR/bin/seqc-fuzz-$t" "$corpus" -max_total_time="$SECONDS_EACH" -max_len=$maxlen \
    -rss_limit_mb=4096 -timeout=30 -print_final_stats=1 ${SEQC_FUZZ_SEED:+-seed=$SEQC_FUZZ_SEED} \
    -artifact_prefix="$WORK/crashes-$t/" > "$WORK/log-$t.txt" 2>&1 || status=$?
  grep -E "^#[0-9]+ +(DONE|pulse)|stat::|ERROR|SUMMARY|Test unit written" "$WORK/log-$t.txt" || true
  # A run that ends in anything but success fails, reported or not (a binary
  # that cannot start, an OOM kill without a libFuzzer banner).
  if [ "$status" -ne 0 ] || grep -qE "ERROR: (AddressSanitizer|libFuzzer|UndefinedBehaviorSanitizer|LeakSanitizer)|runtime error:" \
      "$WORK/log-$t.txt"; then
    echo "seqc-fuzz-$t failed (exit status $status): see $WORK/log-$t.txt and $WORK/crashes-$t/" >&2
    exit 1
  fi
done
