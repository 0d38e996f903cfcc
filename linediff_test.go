package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// wholeDiff is pi 1.6's diff and patch of two whole texts (its
// generateDiffString and generateUnifiedPatch, with 4 lines of context).
func wholeDiff(t testing.TB, path, old, new string) (string, string, int) {
	budget := diffWorkBudget
	parts, err := diffLineParts(context.Background(), old, new, &budget)
	if err != nil {
		t.Fatal(err)
	}
	width := len(strconv.Itoa(max(strings.Count(old, "\n"), strings.Count(new, "\n")) + 1))
	shown, first := displayDiff(parts, 1, 1, width, diffContextLines)
	return strings.Join(shown, "\n"), formatPatch(path, patchHunks(parts, diffContextLines)), first
}

// TestLineDiff: the line diff, its numbered display and its patch, on
// whole texts. Every expected string is what pi 1.6 itself gives: its
// generateDiffString and generateUnifiedPatch (dist/core/tools/edit-diff.js,
// over jsdiff 8.0.4) run in node on each pair. Among them: repeated lines
// (which of them jsdiff keeps), lines that move, a last line without a line
// end on either side, an empty old text (its hunk starts at 0), a CRLF
// (part of its line), changes far apart (two hunks, "..." between) and
// near (one hunk).
func TestLineDiff(t *testing.T) {
	cases := []struct {
		old, new, diff, patch string
		first                 int
	}{
		{"a\nb\nc\n", "a\nc\n",
			" 1 a\n-2 b\n 3 c",
			"--- f.txt\n+++ f.txt\n@@ -1,3 +1,2 @@\n a\n-b\n c\n", 2},
		{"x\nx\nx\n", "x\nx\n",
			" 1 x\n 2 x\n-3 x",
			"--- f.txt\n+++ f.txt\n@@ -1,3 +1,2 @@\n x\n x\n-x\n", 3},
		{"a\nb\na\nb\n", "b\na\nb\na\n",
			"-1 a\n 2 b\n 3 a\n 4 b\n+4 a",
			"--- f.txt\n+++ f.txt\n@@ -1,4 +1,4 @@\n-a\n b\n a\n b\n+a\n", 1},
		{"a\nb", "a\nb\n",
			" 1 a\n-2 b\n+2 b",
			"--- f.txt\n+++ f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n", 2},
		{"a\nb\n", "a\nb",
			" 1 a\n-2 b\n+2 b",
			"--- f.txt\n+++ f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n", 2},
		{"", "a\n",
			"+1 a",
			"--- f.txt\n+++ f.txt\n@@ -0,0 +1,1 @@\n+a\n", 1},
		{"1\n2\n3\n4\n5\n", "5\n4\n3\n2\n1\n",
			"-1 1\n-2 2\n-3 3\n-4 4\n 5 5\n+2 4\n+3 3\n+4 2\n+5 1",
			"--- f.txt\n+++ f.txt\n@@ -1,5 +1,5 @@\n-1\n-2\n-3\n-4\n 5\n+4\n+3\n+2\n+1\n", 1},
		{"a\r\nb\n", "a\nb\n",
			"-1 a\r\n+1 a\n 2 b",
			"--- f.txt\n+++ f.txt\n@@ -1,2 +1,2 @@\n-a\r\n+a\n b\n", 1},
		{"l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\nl11\nl12\nl13\nl14\nl15\nl16\nl17\nl18\nl19\nl20\n", "l1\nl2\nL3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\nl11\nl12\nl13\nL14\nl15\nl16\nl17\nl18\nl19\nl20\n",
			"  1 l1\n  2 l2\n- 3 l3\n+ 3 L3\n  4 l4\n  5 l5\n  6 l6\n  7 l7\n    ...\n 10 l10\n 11 l11\n 12 l12\n 13 l13\n-14 l14\n+14 L14\n 15 l15\n 16 l16\n 17 l17\n 18 l18\n    ...",
			"--- f.txt\n+++ f.txt\n@@ -1,7 +1,7 @@\n l1\n l2\n-l3\n+L3\n l4\n l5\n l6\n l7\n@@ -10,9 +10,9 @@\n l10\n l11\n l12\n l13\n-l14\n+L14\n l15\n l16\n l17\n l18\n", 3},
		{"l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\nl11\nl12\nl13\nl14\nl15\nl16\nl17\nl18\nl19\nl20\n", "l1\nl2\nL3\nl4\nl5\nl6\nl7\nl8\nl9\nL10\nl11\nl12\nl13\nl14\nl15\nl16\nl17\nl18\nl19\nl20\n",
			"  1 l1\n  2 l2\n- 3 l3\n+ 3 L3\n  4 l4\n  5 l5\n  6 l6\n  7 l7\n  8 l8\n  9 l9\n-10 l10\n+10 L10\n 11 l11\n 12 l12\n 13 l13\n 14 l14\n    ...",
			"--- f.txt\n+++ f.txt\n@@ -1,14 +1,14 @@\n l1\n l2\n-l3\n+L3\n l4\n l5\n l6\n l7\n l8\n l9\n-l10\n+L10\n l11\n l12\n l13\n l14\n", 3},
		{"}\n\n}\n\n}\n", "}\n\n}\n}\n\n}\n\n",
			" 1 }\n 2 \n 3 }\n+4 }\n 4 \n 5 }\n+7 ",
			"--- f.txt\n+++ f.txt\n@@ -1,5 +1,7 @@\n }\n \n }\n+}\n \n }\n+\n", 4},
	}
	for _, c := range cases {
		diff, patch, first := wholeDiff(t, "f.txt", c.old, c.new)
		if diff != c.diff || patch != c.patch || first != c.first {
			t.Errorf("%q to %q:\ndiff %q\npatch %q\nfirst %d\npi 1.6 gives:\ndiff %q\npatch %q\nfirst %d", c.old, c.new, diff, patch, first, c.diff, c.patch, c.first)
		}
	}
}

// applyPatch applies a unified patch as formatPatch writes it to old: each
// hunk's context and removed lines must be there, at the line it says.
func applyPatch(old, patch string) (string, error) {
	oldLines := splitLinesKeep(old)
	lines := strings.Split(strings.TrimSuffix(patch, "\n"), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "--- ") || !strings.HasPrefix(lines[1], "+++ ") {
		return "", fmt.Errorf("no file headers")
	}
	var out strings.Builder
	at := 0 // lines of old copied or consumed
	for i := 2; i < len(lines); {
		var os, ol, ns, nl int
		if _, err := fmt.Sscanf(lines[i], "@@ -%d,%d +%d,%d @@", &os, &ol, &ns, &nl); err != nil {
			return "", fmt.Errorf("line %d: %q: %v", i, lines[i], err)
		}
		if ol > 0 {
			os--
		}
		if os < at || os > len(oldLines) {
			return "", fmt.Errorf("hunk at %d, old line %d", os, at)
		}
		for ; at < os; at++ {
			out.WriteString(oldLines[at])
		}
		i++
		var lastOut *string // the last line written, its LF taken by "\ No newline"
		var written []string
		for ; i < len(lines) && !strings.HasPrefix(lines[i], "@@"); i++ {
			l := lines[i]
			switch {
			case l == `\ No newline at end of file`:
				if lastOut != nil {
					*lastOut = strings.TrimSuffix(*lastOut, "\n")
				}
				continue
			case l[0] == ' ' || l[0] == '-':
				if at >= len(oldLines) || strings.TrimSuffix(oldLines[at], "\n") != l[1:] {
					return "", fmt.Errorf("line %d: %q is not old line %d", i, l, at+1)
				}
				at++
				lastOut = nil
				if l[0] == ' ' {
					written = append(written, l[1:]+"\n")
					lastOut = &written[len(written)-1]
				}
			case l[0] == '+':
				written = append(written, l[1:]+"\n")
				lastOut = &written[len(written)-1]
			default:
				return "", fmt.Errorf("line %d: %q", i, l)
			}
		}
		for _, w := range written {
			out.WriteString(w)
		}
	}
	for ; at < len(oldLines); at++ {
		out.WriteString(oldLines[at])
	}
	return out.String(), nil
}

// TestEditPatchApplies: for random edits of random files (few distinct
// lines, so many repeated; with and without a final line end; edits near
// the start, the end and each other, adding and removing many lines) the
// edit's patch applied to the file gives the edited file, and the diff's
// lines agree with it; the windows diffed hold no more lines than the
// margins and the replaced lines, whatever the file's length.
func TestEditPatchApplies(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pool := []string{"}", "", "x++", "{", "a", "b"}
	for n := range 2000 {
		var lines []string
		for range 1 + rng.IntN([]int{10, 100, 3000}[rng.IntN(3)]) {
			lines = append(lines, pool[rng.IntN(len(pool))])
		}
		old := strings.Join(lines, "\n")
		if rng.IntN(3) > 0 {
			old += "\n"
		}
		// Disjoint splices, in order.
		var splices []splice
		for at := 0; at < len(old); {
			at += rng.IntN(max(len(old)/2, 1))
			if at >= len(old) {
				break
			}
			size := 1 + rng.IntN([]int{5, 50, 500}[rng.IntN(3)])
			size = min(size, len(old)-at)
			var text []string
			for range rng.IntN([]int{3, 40}[rng.IntN(2)]) {
				text = append(text, pool[rng.IntN(len(pool))])
			}
			splices = append(splices, splice{at: at, n: size, text: strings.Join(text, "\n")})
			at += size
		}
		if len(splices) == 0 {
			continue
		}
		new := applySplices(old, splices, 0)
		if new == old {
			continue
		}
		d, err := editDiff(context.Background(), "f.txt", old, new, splices)
		if err != nil {
			t.Fatal(err)
		}
		got, err := applyPatch(old, d.Patch)
		if err != nil || got != new {
			t.Fatalf("case %d: %q with splices %+v: patch %q applies to %q (%v), want %q", n, old, splices, d.Patch, got, err, new)
		}
		for _, l := range strings.Split(d.Diff, "\n") {
			if l == "" || !strings.ContainsAny(l[:1], " +-") {
				t.Fatalf("case %d: diff line %q", n, l)
			}
		}
		if d.FirstChangedLine < 1 || d.FirstChangedLine > strings.Count(new, "\n")+1 {
			t.Fatalf("case %d: firstChangedLine %d", n, d.FirstChangedLine)
		}
		diffed, replaced := 0, 0
		for _, w := range diffWindows(old, splices) {
			diffed += strings.Count(old[w.oldStart:w.oldEnd], "\n")
		}
		for _, sp := range splices {
			replaced += strings.Count(old[sp.at:sp.at+sp.n], "\n") + 1
		}
		if limit := replaced + len(splices)*(2*diffWindowMargin+1); diffed > limit {
			t.Fatalf("case %d: %d lines diffed for %d replaced in %d splices", n, diffed, replaced, len(splices))
		}
	}
}

// BenchmarkEditDiff: the diff of a one-line edit (editDiff) in the middle
// of files of 1,000 and 1,000,000 lines, beside its floor: finding that
// line in the file (strings.Index), which the edit does anyway. Only the
// lines around the edit are diffed; what grows with the file is counting
// its line ends (for the numbers' width and the window's first line, as
// pi counts them), which stays well under the floor (on one machine: 26 µs
// and 1.7 ms for the diff, 9 µs and 7.6 ms for the floor).
func BenchmarkEditDiff(b *testing.B) {
	for _, n := range []int{1_000, 1_000_000} {
		var f strings.Builder
		for i := range n {
			fmt.Fprintf(&f, "line %d of the file\n", i)
		}
		old := f.String()
		target := fmt.Sprintf("line %d of", n/2)
		at := strings.Index(old, target)
		splices := []splice{{at: at, n: len(target), text: "changed\nline"}}
		new := applySplices(old, splices, 0)
		b.Run(fmt.Sprintf("lines=%d/diff", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := editDiff(context.Background(), "f.txt", old, new, splices); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("lines=%d/floor-find", n), func(b *testing.B) {
			for b.Loop() {
				if strings.Index(old, target) < 0 {
					b.Fatal("not found")
				}
			}
		})
	}
}

// TestLineDiffBudget: a diff whose alignment would cost more than
// diffWorkBudget (a model can ask for one cheaply: ten thousand short
// lines in each of oldText and newText, every other one shared, are
// some 40 KB of arguments and took rpi 15 s and pi minutes, blocking
// pi's whole process) keeps the lines both texts start and end with and
// shows every line between as removed and then added, as a diff does for
// texts with no line in common: its patch still applies. Under the
// budget the lines shared are aligned, as pi aligns them.
func TestLineDiffBudget(t *testing.T) {
	var old, new strings.Builder
	old.WriteString("head\n")
	new.WriteString("head\n")
	for i := range 10_000 {
		fmt.Fprintf(&old, "o%d\n}\n", i)
		fmt.Fprintf(&new, "n%d\n}\n", i)
	}
	old.WriteString("tail")
	new.WriteString("tail")
	o, n := old.String(), new.String()
	budget := diffWorkBudget
	parts, err := diffLineParts(context.Background(), o, n, &budget)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, p := range parts[:min(len(parts), 6)] {
		kinds = append(kinds, fmt.Sprint(p.kind, len(p.lines)))
	}
	if got := strings.Join(kinds, " "); len(parts) != 4 || got != "0 1 -1 19999 1 19999 0 2" {
		t.Errorf("%d parts (kind, lines): %s..., want 0 1 -1 19999 1 19999 0 2", len(parts), got)
	}
	_, patch, first := wholeDiff(t, "f.txt", o, n)
	if got, err := applyPatch(o, patch); err != nil || got != n || first != 2 {
		t.Errorf("patch applies to %.40q (%v), first changed line %d", got, err, first)
	}
	// Under the budget: aligned, the work taken from it; then over what
	// is left.
	small := "a\n}\nb\n}\n"
	budget = 15
	if parts, _ := diffLineParts(context.Background(), small, "c\n}\nd\n}\n", &budget); len(parts) != 6 || budget <= 0 || budget >= 15 {
		t.Errorf("under the budget: %d parts, want 6 (the braces aligned); %d of 15 left", len(parts), budget)
	}
	if parts, _ := diffLineParts(context.Background(), small, "c\n}\nd\n}\n", &budget); len(parts) != 3 {
		t.Errorf("over the budget left: %d parts, want 3 (-3 lines, +3 lines, the last brace)", len(parts))
	}
}

// TestEditDiffBudget: an edit's windows share one diffWorkBudget, so
// that a hundred edits cannot each take a whole one. Two windows that
// each take most of a half of it: the first aligned (its "}" lines kept
// as context), the second past what is left (its "}" lines removed and
// added); the patch applies.
func TestEditDiffBudget(t *testing.T) {
	region := func(prefix string) string {
		var b strings.Builder
		for i := range 1800 {
			fmt.Fprintf(&b, "%s%d\n}\n", prefix, i)
		}
		return b.String()
	}
	filler := strings.Repeat("filler\n", 100)
	oldA, oldB := region("a"), region("b")
	old := "head\n" + oldA + filler + oldB + "tail\n"
	splices := []splice{
		{at: len("head\n"), n: len(oldA), text: region("A")},
		{at: len("head\n" + oldA + filler), n: len(oldB), text: region("B")},
	}
	if w := diffWindows(old, splices); len(w) != 2 {
		t.Fatalf("%d windows, want 2", len(w))
	}
	new := applySplices(old, splices, 0)
	d, err := editDiff(context.Background(), "f.txt", old, new, splices)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := applyPatch(old, d.Patch); err != nil || got != new {
		t.Fatalf("the patch does not apply: %v", err)
	}
	inA, inB := strings.Index(d.Patch, "\n-a0\n"), strings.Index(d.Patch, "\n-b0\n")
	if inA < 0 || inB < inA {
		t.Fatalf("the patch removes no a0 then b0")
	}
	if n := strings.Count(d.Patch[inA:inB], "\n-}\n"); n != 0 {
		t.Errorf("the first window removes %d \"}\" lines, want 0 (aligned)", n)
	}
	if n := strings.Count(d.Patch[inB:], "\n-}\n"); n != 1799 {
		t.Errorf("the second window removes %d \"}\" lines, want 1799 (all but the last, not aligned)", n)
	}
}

// TestEditDetailsBounded: an edit inside a long line (a minified file's)
// shows that whole line removed and added, in the diff and again in the
// patch; past maxEditDetailsBytes together both are left out of the
// details, which keep firstChangedLine (the result's text still says
// what was done). A 2 MiB line gave 8 MiB of details, kept in memory and
// in the session file for every such edit.
func TestEditDetailsBounded(t *testing.T) {
	line := strings.Repeat("x", 2<<20)
	old := "first\n" + line + "\nlast\n"
	at := len("first\n") + len(line)/2
	splices := []splice{{at: at, n: 1, text: "y"}}
	d, err := editDiff(context.Background(), "min.js", old, applySplices(old, splices, 0), splices)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(d); string(got) != `{"firstChangedLine":2}` {
		t.Errorf("details %.200s, want only firstChangedLine", got)
	}
	small := []splice{{at: 0, n: len("first"), text: "FIRST"}}
	short := "first\nsecond\n"
	if d, _ := editDiff(context.Background(), "a.txt", short, applySplices(short, small, 0), small); d.Diff == "" || d.Patch == "" {
		t.Errorf("a small edit's details %+v lack the diff or the patch", d)
	}
}
