# Sourced by scripts/bench.sh and scripts/bench-pi.sh: turns raw benchmark
# lines into the medians of every metric and the targets of
# docs/performance.md, each with its ratio and whether it is met.
#
#   medians RAW          each benchmark's metrics, the median over its runs
#   targets RAW <<EOF    one target a line: label|metric|over|op|limit|unit
#   EOF
#
# A metric is "Name unit" as the benchmark line gives them, without the
# -N CPU suffix (BenchmarkStreamTokens/16k cpu-ms/answer). With "over"
# empty the value is the metric's; otherwise it is metric / over, run by
# run, and the median of those. op is >= or <=; unit is "x" for a ratio.
# Each target prints its value, the target, yes or NO, and the runs.

# benchValues prints "name<TAB>unit<TAB>value", one a line, in run order.
benchValues() {
  awk '$1 ~ /^Benchmark/ { name = $1; sub(/-[0-9]+$/, "", name); for (i = 3; i < NF; i += 2) printf "%s\t%s\t%s\n", name, $(i+1), $i }' "$1"
}

medians() {
  benchValues "$1" | sort -t "$(printf '\t')" -k1,1 -k2,2 -k3,3g -s |
    awk -F '\t' '
      function flush() { if (n) printf "%-55s %s\n", key, v[int((n + 1) / 2)] }
      $1 " " $2 != key { flush(); key = $1 " " $2; n = 0 }
      { v[++n] = $3 }
      END { flush() }'
}

targets() {
  local spec
  spec=$(cat)
  benchValues "$1" | awk -F '\t' -v spec="$spec" '
    { key = $1 " " $2; runs[key, ++count[key]] = $3 }
    function median(a, n,    i, j, t) {
      for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
      return a[int((n + 1) / 2)]
    }
    function show(x, unit, format) { return sprintf(format (unit == "x" ? "x" : " " unit), x) }
    END {
      printf "%-58s %-12s %-10s %-4s %s\n", "target", "value", "target", "met", "runs"
      nl = split(spec, lines, "\n")
      met = 0; measured = 0; nt = 0
      for (l = 1; l <= nl; l++) {
        if (lines[l] == "") continue
        nt++
        split(lines[l], f, "|")   # label, metric, over, op, limit, unit
        n = count[f[2]]
        if (f[3] != "" && count[f[3]] < n) n = count[f[3]]
        list = ""
        delete v
        for (i = 1; i <= n; i++) {
          v[i] = runs[f[2], i]
          if (f[3] != "") v[i] = runs[f[3], i] ? v[i] / runs[f[3], i] : 0
          list = list (i > 1 ? ", " : "") sprintf(f[6] == "x" ? "%.2f" : "%.1f", v[i])
        }
        limit = f[4] " " show(f[5], f[6], "%g")
        if (n == 0) { printf "%-58s %-12s %-10s %-4s %s\n", f[1], "-", limit, "?", "not measured"; continue }
        value = median(v, n)
        ok = f[4] == ">=" ? value >= f[5] : value <= f[5]
        measured++; met += ok
        printf "%-58s %-12s %-10s %-4s %s\n", f[1], show(value, f[6], "%.2f"), limit, ok ? "yes" : "NO", list
      }
      printf "%d of %d targets measured, %d met\n", measured, nt, met
    }'
}
