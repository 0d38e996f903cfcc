#!/usr/bin/env bash
# Checks rpi's edit tool against pi 1.6's own, on the same inputs:
#   1. pi 1.6's edit tool runs every case of testdata/edit/ (node
#      scripts/pi-edit-compare.mjs): its text, the file afterwards and the
#      result's details (diff, patch, firstChangedLine) must be what the
#      case says, which TestEditCases holds rpi to (run here too);
#   2. 5,000 random edit calls (mixed line ends, BOMs, trailing whitespace,
#      curly quotes, dashes, NFKC forms; every shape of the arguments; a
#      third of them long files of repeated lines, edits adding and removing
#      many) run through pi 1.6's edit tool, then through rpi's
#      (TestEditAgainstPi): the same text, the same file afterwards, the
#      same details;
#   3. node's normalize("NFKC") on every code point and on 200,000 random
#      sequences, against rpi's nfkc (TestNFKCAgainstNode).
# Not part of CI: it needs node >= 22.19 and pi 1.6's package. Run from the
# repo root:
#   bash scripts/pi-edit-compare.sh           # compare
#   bash scripts/pi-edit-compare.sh --update  # write pi's results into the cases
# PI_COMPAT_CACHE=DIR is where pi 1.6 is installed (as scripts/pi-compat.sh
# leaves it); without it, pi 1.6 is installed into a mktemp -d folder.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$repo/scripts/pi16.sh"     # sets pkgdir and pi16
. "$repo/scripts/node22.sh"   # sets nodebin
echo "node $("$nodebin/node" --version) (Unicode $("$nodebin/node" -p process.versions.unicode))"

status=0
"$nodebin/node" scripts/pi-edit-compare.mjs "$pi16" \
  "$pkgdir/node_modules/@earendil-works/pi-ai" testdata/edit ${1:+"$1"} || status=1
"$nodebin/node" scripts/pi-edit-compare.mjs "$pi16" \
  "$pkgdir/node_modules/@earendil-works/pi-ai" testdata/edit --random 5000 "$work/edits.jsonl"

"$nodebin/node" -e '
const lines = [];
const put = (s) => lines.push(JSON.stringify([s, s.normalize("NFKC")]));
let chunk = [];
for (let cp = 0; cp < 0x110000; cp++) {
  if (cp >= 0xd800 && cp < 0xe000) continue;
  chunk.push(String.fromCodePoint(cp));
  if (chunk.length === 64) { put(chunk.join("\u0000")); chunk = []; }
}
put(chunk.join("\u0000"));
// Random short sequences from where composition and mark order matter.
const pool = [];
const add = (a, b) => { for (let c = a; c <= b; c++) pool.push(c); };
add(0x41, 0x5a); add(0x61, 0x7a); add(0xc0, 0x17f); add(0x300, 0x36f); add(0x340, 0x345); add(0x591, 0x5c7);
add(0x900, 0x97f); add(0x9be, 0x9d7); add(0xb3e, 0xb57); add(0xcbf, 0xcd6); add(0xd3e, 0xd57); add(0xdca, 0xddf);
add(0xf71, 0xf81); add(0x1100, 0x115f); add(0x1161, 0x1175); add(0x11a8, 0x11c2); add(0x1b00, 0x1b44);
add(0x1e00, 0x1eff); add(0x1f00, 0x1fff); add(0x2000, 0x206f); add(0x20d0, 0x20f0); add(0x2126, 0x212b);
add(0x3099, 0x309c); add(0x304b, 0x30fa); add(0xac00, 0xac40); add(0xfb00, 0xfb4f); add(0xff61, 0xff9f);
add(0x1d15e, 0x1d164);
let seed = 12345;
const rnd = (n) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return (seed >>> 8) % n; };
for (let i = 0; i < 200000; i++) {
  let s = "";
  for (let n = 1 + rnd(8); n > 0; n--) s += String.fromCodePoint(pool[rnd(pool.length)]);
  put(s);
}
process.stdout.write(lines.join("\n") + "\n");' > "$work/nfkc.jsonl"

RPI_NFKC_ORACLE="$work/nfkc.jsonl" RPI_EDIT_ORACLE="$work/edits.jsonl" \
  go test -count=1 -run 'TestNFKCAgainstNode|TestEditCases|TestEditAgainstPi' -v . |
  grep -E '^(--- |ok|FAIL|PASS)|compared with' || status=1
exit $status
