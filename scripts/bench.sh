#!/usr/bin/env bash
# Every figure of docs/performance.md, each beside its floor, measured in
# one run on this machine: runs the benchmarks of bench_test.go 3 times
# each and prints the median of every metric. Takes about three minutes.
# Run from the repo root:
#   bash scripts/bench.sh            # the table of medians
#   bash scripts/bench.sh -v         # and the raw benchmark lines
# pi itself is measured by scripts/bench-pi.sh (it downloads pi).
set -euo pipefail
cd "$(dirname "$0")/.."
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
bench() { go test -run '^$' -bench "$1" -benchtime "$2" -count 3 . | grep '^Benchmark' | tee -a "$raw" >&2; }
{
  bench '^BenchmarkGetStatePipelinedRatio$' 9x
  bench '^BenchmarkStartup' 200x
  bench '^BenchmarkMemory$' 1x
  bench '^BenchmarkStreamTokens' 5x
  bench '^BenchmarkProcessFloodRatio$' 5x
  bench '^BenchmarkBashTrue' 200x
  bench '^Benchmark(Abort)?HugeAnswer$' 5x
} 2> >(if [ "${1:-}" = -v ]; then cat >&2; else cat >/dev/null; fi)
# Each line: name, iterations, then value/unit pairs (ns/op first); the
# median of each name's unit over the runs.
awk '{ name = $1; sub(/-[0-9]+$/, "", name); for (i = 5; i < NF; i += 2) printf "%s %s\t%s\n", name, $(i+1), $i }' "$raw" |
  sort -t "$(printf '\t')" -k1,1 -k2,2g |
  awk -F '\t' '
    function flush() { if (n) printf "%-55s %s\n", key, v[int((n + 1) / 2)] }
    $1 != key { flush(); key = $1; n = 0 }
    { v[++n] = $2 }
    END { flush() }'
