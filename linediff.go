package main

// A line diff as pi 1.6's edit tool shows one (the jsdiff 8 package's
// diffLines, structuredPatch and formatPatch, and pi's own numbered
// display): the same lines aligned the same way, so an edit's
// details.diff and details.patch are pi's byte for byte. The edit diffs
// only windows of lines around its replacements (editDiff), so the work
// follows the size of the change, not of the file.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// diffContextLines is how many unchanged lines are shown around a change.
const diffContextLines = 4

// diffWindowMargin is how many unchanged lines on each side of a
// replacement are diffed: well above the context shown, so the lines
// align within the window as over the whole file (pi's
// DIFF_WINDOW_MARGIN_LINES).
const diffWindowMargin = 32

// diffWorkBudget bounds the work of an edit's line diffs, all its windows
// together: diagonals tried and lines compared while aligning. Aligning
// two texts costs about the product of their lines and the lines that
// differ, so some 40 KB of arguments (ten thousand short lines in each of
// oldText and newText, every other one shared) cost rpi 15 s and pi
// minutes; past the budget (about a third of a second, some 2,500 lines
// rewritten whole) the diff gives up aligning (blockParts).
const diffWorkBudget = 10_000_000

// linePart is a run of lines that both texts share (kind 0), that the new
// one adds (+1) or the old one loses (-1); each line keeps its LF.
type linePart struct {
	kind  int
	lines []string
}

// splitLinesKeep cuts s after each LF: each line with its LF, the last
// without one when s does not end in one. (jsdiff also ends lines at a
// CRLF, which ends in an LF too, so the lines are the same.)
func splitLinesKeep(s string) []string {
	var lines []string
	for s != "" {
		i := strings.IndexByte(s, '\n') + 1
		if i == 0 {
			i = len(s)
		}
		lines = append(lines, s[:i])
		s = s[i:]
	}
	return lines
}

// diffComponent is a run of steps of one kind along a path through the
// edit graph, linked to the run before it; a run is never changed once
// another path may share it.
type diffComponent struct {
	count          int
	added, removed bool
	prev           *diffComponent
}

// diffPath is the farthest path found on a diagonal. Its last run is held
// here, not linked, so that a step that lengthens it costs nothing: runs
// are linked (allocated) only when a new one starts.
type diffPath struct {
	oldPos int
	last   diffComponent // count 0: no steps yet
	ok     bool
}

// diffLineParts diffs old against new by lines with Myers' algorithm as
// jsdiff runs it: the same diagonals tried in the same order, the same
// choice between an insertion and a deletion, and the edges of the graph
// not searched past once reached. Its work is taken from *budget; past
// it, it gives blockParts instead, where pi's jsdiff, which has no bound,
// goes on. It stops with ctx's error when ctx ends.
func diffLineParts(ctx context.Context, oldText, newText string, budget *int) ([]linePart, error) {
	oldLines, newLines := splitLinesKeep(oldText), splitLinesKeep(newText)
	// Lines as numbers: equal lines, equal numbers.
	ids := map[string]int{}
	number := func(lines []string) []int {
		out := make([]int, len(lines))
		for i, l := range lines {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	a, b := number(oldLines), number(newLines)
	oldLen, newLen := len(a), len(b)
	// linked is p's last run, linked for a run after it.
	linked := func(p *diffPath) *diffComponent {
		if p.last.count == 0 {
			return nil
		}
		c := p.last
		return &c
	}
	work := 0
	defer func() { *budget -= work }()
	common := func(p *diffPath, diagonal int) int {
		oldPos, newPos, n := p.oldPos, p.oldPos-diagonal, 0
		for newPos+1 < newLen && oldPos+1 < oldLen && a[oldPos+1] == b[newPos+1] {
			oldPos, newPos, n = oldPos+1, newPos+1, n+1
		}
		work += n
		if n > 0 {
			p.last = diffComponent{count: n, prev: linked(p)}
		}
		p.oldPos = oldPos
		return newPos
	}
	step := func(p *diffPath, added bool, oldInc int) diffPath {
		if l := p.last; l.count > 0 && l.added == added && l.removed == !added {
			return diffPath{p.oldPos + oldInc, diffComponent{l.count + 1, added, !added, l.prev}, true}
		}
		return diffPath{p.oldPos + oldInc, diffComponent{1, added, !added, linked(p)}, true}
	}
	build := func(p *diffPath) []linePart {
		var comps []*diffComponent
		for c := linked(p); c != nil; c = c.prev {
			comps = append(comps, c)
		}
		parts := make([]linePart, 0, len(comps))
		oldPos, newPos := 0, 0
		for i := len(comps) - 1; i >= 0; i-- {
			c := comps[i]
			switch {
			case c.removed:
				parts = append(parts, linePart{-1, oldLines[oldPos : oldPos+c.count]})
				oldPos += c.count
			case c.added:
				parts = append(parts, linePart{1, newLines[newPos : newPos+c.count]})
				newPos += c.count
			default:
				parts = append(parts, linePart{0, newLines[newPos : newPos+c.count]})
				newPos += c.count
				oldPos += c.count
			}
		}
		return parts
	}

	first := diffPath{oldPos: -1, ok: true}
	if newPos := common(&first, 0); first.oldPos+1 >= oldLen && newPos+1 >= newLen {
		return build(&first), nil
	}
	maxEdit := oldLen + newLen
	offset := maxEdit + 1
	best := make([]diffPath, 2*maxEdit+3) // by diagonal (oldPos - newPos) + offset
	best[offset] = first
	minDiagonal, maxDiagonal := -maxEdit-1, maxEdit+1
	checked := work
	for edit := 1; edit <= maxEdit; edit++ {
		for d := max(minDiagonal, -edit); d <= min(maxDiagonal, edit); d += 2 {
			if work++; work > *budget {
				return blockParts(oldLines, newLines), nil
			}
			if work-checked >= 1<<16 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				checked = work
			}
			removePath, addPath := best[d-1+offset], best[d+1+offset]
			best[d-1+offset] = diffPath{} // no other diagonal uses it
			canAdd := false
			if addPath.ok {
				newPos := addPath.oldPos - d
				canAdd = 0 <= newPos && newPos < newLen
			}
			canRemove := removePath.ok && removePath.oldPos+1 < oldLen
			if !canAdd && !canRemove {
				best[d+offset] = diffPath{}
				continue
			}
			// From the path farther along the old text, not past the graph.
			var p diffPath
			if !canRemove || canAdd && removePath.oldPos < addPath.oldPos {
				p = step(&addPath, true, 0)
			} else {
				p = step(&removePath, false, 1)
			}
			newPos := common(&p, d)
			if p.oldPos+1 >= oldLen && newPos+1 >= newLen {
				return build(&p), nil
			}
			best[d+offset] = p
			if p.oldPos+1 >= oldLen {
				maxDiagonal = min(maxDiagonal, d-1)
			}
			if newPos+1 >= newLen {
				minDiagonal = max(minDiagonal, d+1)
			}
		}
	}
	return nil, fmt.Errorf("line diff did not finish") // not reached: maxEdit edits always do
}

// blockParts is a diff that does not align: the lines old and new start
// and end with kept, every line between removed and then added, as a diff
// of texts with no line in common shows them. Its patch applies as any.
func blockParts(oldLines, newLines []string) []linePart {
	head := 0
	for head < min(len(oldLines), len(newLines)) && oldLines[head] == newLines[head] {
		head++
	}
	tail := 0
	for tail < min(len(oldLines), len(newLines))-head && oldLines[len(oldLines)-1-tail] == newLines[len(newLines)-1-tail] {
		tail++
	}
	var parts []linePart
	for _, p := range []linePart{
		{0, newLines[:head]},
		{-1, oldLines[head : len(oldLines)-tail]},
		{1, newLines[head : len(newLines)-tail]},
		{0, newLines[len(newLines)-tail:]},
	} {
		if len(p.lines) > 0 {
			parts = append(parts, p)
		}
	}
	return parts
}

// partText is a part's lines as pi's display splits them: without their
// LFs.
func partText(p linePart) []string {
	out := make([]string, len(p.lines))
	for i, l := range p.lines {
		out[i] = strings.TrimSuffix(l, "\n")
	}
	return out
}

// displayDiff is pi's numbered display of parts (its formatDisplayDiff):
// "+N line" and "-N line" for each line added and removed (N its number
// in the new or old text, counted from oldLine and newLine, padded to
// width), " N line" for up to context unchanged lines on each side of a
// change, and " ..." (padded) where unchanged lines are left out. first
// is the new text's number of the first changed line, 0 if none.
func displayDiff(parts []linePart, oldLine, newLine, width, context int) (out []string, first int) {
	num := func(n int) string {
		s := strconv.Itoa(n)
		return strings.Repeat(" ", max(width-len(s), 0)) + s
	}
	skip := " " + strings.Repeat(" ", width) + " ..."
	same := func(lines []string) {
		for _, l := range lines {
			out = append(out, " "+num(oldLine)+" "+l)
			oldLine, newLine = oldLine+1, newLine+1
		}
	}
	skipped := func(n int) {
		out = append(out, skip)
		oldLine, newLine = oldLine+n, newLine+n
	}
	lastWasChange := false
	for i, p := range parts {
		raw := partText(p)
		if p.kind != 0 {
			if first == 0 {
				first = newLine
			}
			for _, l := range raw {
				if p.kind > 0 {
					out = append(out, "+"+num(newLine)+" "+l)
					newLine++
				} else {
					out = append(out, "-"+num(oldLine)+" "+l)
					oldLine++
				}
			}
			lastWasChange = true
			continue
		}
		nextIsChange := i+1 < len(parts) && parts[i+1].kind != 0
		switch {
		case lastWasChange && nextIsChange:
			if len(raw) <= 2*context {
				same(raw)
			} else {
				same(raw[:context])
				skipped(len(raw) - 2*context)
				same(raw[len(raw)-context:])
			}
		case lastWasChange:
			shown := raw[:min(context, len(raw))]
			same(shown)
			if n := len(raw) - len(shown); n > 0 {
				skipped(n)
			}
		case nextIsChange:
			n := max(0, len(raw)-context)
			if n > 0 {
				skipped(n)
			}
			same(raw[n:])
		default:
			oldLine, newLine = oldLine+len(raw), newLine+len(raw)
		}
		lastWasChange = false
	}
	return out, first
}

// diffHunk is one hunk of a unified patch; its lines are " ", "-" or "+"
// and the line without its LF, a line without one followed by "\ No
// newline at end of file".
type diffHunk struct {
	oldStart, oldLines, newStart, newLines int
	lines                                  []string
}

// patchHunks makes parts into hunks as jsdiff's structuredPatch does, with
// context unchanged lines around each change and changes closer than
// twice that in one hunk; lines count from 1.
func patchHunks(parts []linePart, context int) []diffHunk {
	var hunks []diffHunk
	var cur []string
	oldStart, newStart, oldLine, newLine := 0, 0, 1, 1
	withPrefix := func(prefix string, lines []string) {
		for _, l := range lines {
			cur = append(cur, prefix+l)
		}
	}
	// One part more, empty, closes the last hunk.
	for i := 0; i <= len(parts); i++ {
		var p linePart
		if i < len(parts) {
			p = parts[i]
		}
		if p.kind != 0 {
			if oldStart == 0 {
				oldStart, newStart = oldLine, newLine
				if i > 0 {
					prev := parts[i-1].lines
					cur = nil
					if context > 0 {
						withPrefix(" ", prev[max(len(prev)-context, 0):])
					}
					oldStart -= len(cur)
					newStart -= len(cur)
				}
			}
			if p.kind > 0 {
				withPrefix("+", p.lines)
				newLine += len(p.lines)
			} else {
				withPrefix("-", p.lines)
				oldLine += len(p.lines)
			}
			continue
		}
		if oldStart != 0 {
			if len(p.lines) <= 2*context && i < len(parts)-1 {
				withPrefix(" ", p.lines)
			} else {
				n := min(len(p.lines), context)
				withPrefix(" ", p.lines[:n])
				hunks = append(hunks, diffHunk{oldStart, oldLine - oldStart + n, newStart, newLine - newStart + n, cur})
				oldStart, newStart, cur = 0, 0, nil
			}
		}
		oldLine += len(p.lines)
		newLine += len(p.lines)
	}
	for h := range hunks {
		var lines []string
		for _, l := range hunks[h].lines {
			if t, ok := strings.CutSuffix(l, "\n"); ok {
				lines = append(lines, t)
			} else {
				lines = append(lines, l, `\ No newline at end of file`)
			}
		}
		hunks[h].lines = lines
	}
	return hunks
}

// formatPatch writes hunks as a unified patch of path, with file headers
// only (jsdiff's formatPatch with FILE_HEADERS_ONLY); an empty side of a
// hunk starts one line lower, as the format has it.
func formatPatch(path string, hunks []diffHunk) string {
	var b strings.Builder
	b.WriteString("--- " + path + "\n+++ " + path + "\n")
	for _, h := range hunks {
		if h.oldLines == 0 {
			h.oldStart--
		}
		if h.newLines == 0 {
			h.newStart--
		}
		fmt.Fprintf(&b, "@@ -%d,%d +%d,%d @@\n", h.oldStart, h.oldLines, h.newStart, h.newLines)
		for _, l := range h.lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// editDetails are an edit's result details as pi 1.6 gives them.
type editDetails struct {
	Diff             string `json:"diff,omitempty"`
	Patch            string `json:"patch,omitempty"`
	FirstChangedLine int    `json:"firstChangedLine"`
}

// maxEditDetailsBytes bounds an edit's diff and patch together: past it
// both are left out (pi keeps them whatever their size). An edit inside
// a long line (a minified file's) shows the whole line removed and added
// in each, and the details stay in memory, in the session file and in
// every client's events.
const maxEditDetailsBytes = 1 << 20

// diffWindow is a run of whole lines around one or more replacements:
// [oldStart, oldEnd) of the old text, starting at its line oldLine (from
// 0), and the same lines in the new text.
type diffWindow struct {
	oldStart, oldEnd, oldLine int
	newStart, newEnd, newLine int
}

// lineStartBefore is where the line holding offset starts.
func lineStartBefore(s string, offset int) int {
	return strings.LastIndexByte(s[:offset], '\n') + 1
}

// diffWindows are whole-line windows with diffWindowMargin lines on each
// side of the splices (in order, disjoint, planned in old), windows that
// meet merged: pi's getDiffWindows.
func diffWindows(old string, splices []splice) []diffWindow {
	var windows []diffWindow
	offsetDelta, lineDelta, cursorOffset, cursorLine := 0, 0, 0, 0
	for _, sp := range splices {
		matchEnd := sp.at + sp.n
		start := lineStartBefore(old, sp.at)
		for i := 0; i < diffWindowMargin && start > 0; i++ {
			start = lineStartBefore(old, start-1)
		}
		end := matchEnd
		for i := 0; i <= diffWindowMargin && end < len(old); i++ {
			from := end
			if i == 0 {
				from = max(matchEnd-1, sp.at)
			}
			if lf := strings.IndexByte(old[from:], '\n'); lf < 0 {
				end = len(old)
			} else {
				end = from + lf + 1
			}
		}
		spOffsetDelta := len(sp.text) - sp.n
		spLineDelta := strings.Count(sp.text, "\n") - strings.Count(old[sp.at:matchEnd], "\n")
		if n := len(windows); n > 0 && start <= windows[n-1].oldEnd {
			w := &windows[n-1]
			w.oldEnd = max(w.oldEnd, end)
			w.newEnd = w.oldEnd + offsetDelta + spOffsetDelta
		} else {
			cursorLine += strings.Count(old[cursorOffset:start], "\n")
			cursorOffset = start
			windows = append(windows, diffWindow{start, end, cursorLine, start + offsetDelta, end + offsetDelta + spOffsetDelta, cursorLine + lineDelta})
		}
		offsetDelta += spOffsetDelta
		lineDelta += spLineDelta
	}
	return windows
}

// editDiff is pi 1.6's diff of an edit (its generateEditDiff): old is the
// file as the edits were matched in it (no BOM, LF line ends), new the
// same with splices made; path names the file in the patch. Only windows
// around the splices are diffed, within one diffWorkBudget.
func editDiff(ctx context.Context, path, old, new string, splices []splice) (editDetails, error) {
	width := len(strconv.Itoa(max(strings.Count(old, "\n"), strings.Count(new, "\n")) + 1))
	skip := " " + strings.Repeat(" ", width) + " ..."
	var d editDetails
	var shown []string
	var hunks []diffHunk
	budget := diffWorkBudget
	for _, w := range diffWindows(old, splices) {
		parts, err := diffLineParts(ctx, old[w.oldStart:w.oldEnd], new[w.newStart:w.newEnd], &budget)
		if err != nil {
			return d, err
		}
		lines, first := displayDiff(parts, w.oldLine+1, w.newLine+1, width, diffContextLines)
		if d.FirstChangedLine == 0 {
			d.FirstChangedLine = first
		}
		// Both windows around unchanged lines mark them left out: show one mark.
		if len(shown) > 0 && len(lines) > 0 && shown[len(shown)-1] == skip && lines[0] == skip {
			lines = lines[1:]
		}
		shown = append(shown, lines...)
		for _, h := range patchHunks(parts, diffContextLines) {
			h.oldStart += w.oldLine
			h.newStart += w.newLine
			hunks = append(hunks, h)
		}
	}
	d.Diff = strings.Join(shown, "\n")
	d.Patch = formatPatch(path, hunks)
	if len(d.Diff)+len(d.Patch) > maxEditDetailsBytes {
		d.Diff, d.Patch = "", ""
	}
	return d, nil
}
