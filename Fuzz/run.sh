#!/usr/bin/env bash
# Runs each fuzz target (or those named) for FUZZ_SECONDS (default 60) from its seed corpus in
# Fuzz/corpus/<target>/, FUZZ_JOBS of them at once (default: one per core; each libFuzzer run uses
# one). What a run learns goes to .build/fuzz/corpus/<target>/ (kept between local runs, never
# committed); an input that breaks something goes to .build/fuzz/findings/ and fails the run.
# Usage: Fuzz/run.sh [target ...]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
seconds=${FUZZ_SECONDS:-60}
out=.build/fuzz
Fuzz/build.sh || exit 1
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for target in Fuzz/Targets/*.swift; do targets+=("$(basename "$target" .swift)"); done
fi
mkdir -p "$out/findings" "$out/logs"

jobs=${FUZZ_JOBS:-$(nproc)}
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: FUZZ_JOBS is a whole number of runs at once, not '$jobs'"; exit 2; }

# fuzz_one NAME: one target's run; what it says goes to $out/logs/NAME.result, its exit status to .status.
fuzz_one() {
  local name=$1 log=$out/logs/$1.log status runs corpus
  mkdir -p "$out/corpus/$name"
  # Swift's runtime keeps metadata caches for the life of the process, which LeakSanitizer would
  # report after every input; leaks are the sanitizer runs' business (Tests/sanitizers/), not this one's.
  # Swift's own backtracer, which runs on a fatal error, reads memory in a way ASan reports as a
  # second error; libFuzzer's report of the first is the one wanted.
  SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 "$out/$name" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
    -dict=Fuzz/ringcast.dict -artifact_prefix="$out/findings/$name-" -print_final_stats=1 \
    "$out/corpus/$name" "Fuzz/corpus/$name" >"$log" 2>&1
  status=$?
  runs=$(grep -oE "stat::number_of_executed_units: [0-9]+" "$log" | grep -oE "[0-9]+$" || echo "?")
  corpus=$(find "$out/corpus/$name" -mindepth 1 -maxdepth 1 | wc -l)
  if [ $status -eq 0 ]; then
    echo "fuzz: $name: $runs inputs in ${seconds} s, nothing found ($corpus inputs learnt)"
  else
    echo "fuzz: $name: FOUND something after $runs inputs (exit $status); log: $log"
    grep -E "invariant broken|Fatal error|ERROR: |SUMMARY: |Test unit written to" "$log" | head -8 | cut -c1-400
  fi >"$out/logs/$name.result"
  echo "$status" >"$out/logs/$name.status"
}

failed=()
running=0
for name in "${targets[@]}"; do
  [ -x "$out/$name" ] || { echo "fuzz: no target $name"; failed+=("$name"); continue; }
  rm -f "$out/logs/$name.status"
  fuzz_one "$name" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait
# In the order named, whenever each finished.
for name in "${targets[@]}"; do
  [ -f "$out/logs/$name.status" ] || continue
  cat "$out/logs/$name.result"
  [ "$(cat "$out/logs/$name.status")" -eq 0 ] || failed+=("$name")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]}: reproduce with $out/<target> <input>, then see docs/FUZZING.md"
  exit 1
fi
