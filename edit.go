package main

// The model's edit tool, as pi 1.6 has it: {path, edits: [{oldText,
// newText}]}, every edit matched against the file as it was (not one after
// the other), each unique and none overlapping another; an exact match
// first, else pi's loose match (NFKC, trailing whitespace, quote and dash
// styles, special spaces); a BOM and the line ends kept. It also takes
// what models send instead, as pi does, each shape recognised explicitly
// and turned into the one edits list before anything is shown or run. The file
// is read once, every edit planned against it, the plan shown for approval,
// and the plan written: all of it or, when any edit fails, nothing.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// maxEditBytes is the largest file edit changes, and the longest loose
// form (looseText) of one that edit matches in.
const maxEditBytes = 64 << 20

// maxEdits is the most replacements one edit call makes: each is looked
// for in the whole file, so the work of a call is bounded by this many
// searches of at most maxEditBytes.
const maxEdits = 100

// textEdit is one replacement the model asks for.
type textEdit struct {
	OldText string `json:"oldText"`
	NewText string `json:"newText"`
}

const (
	// editItemFields are an edit's fields, in each shape edit takes.
	editItemFields = `
		"properties": {
			"oldText": {
				"type": "string",
				"description": "Exact text to replace: unique in the file as it is now, and not overlapping any other edit's oldText"
			},
			"newText": {"type": "string", "description": "The text to put in its place"}
		},
		"required": ["oldText", "newText"]`
	// editSchema is what the model is offered (pi 1.6's parameters).
	editSchema = `{
		"type": "object",
		"properties": {
			"path": {"type": "string", "description": "File to edit (relative or absolute)"},
			"edits": {
				"type": "array",
				"description": "One or more replacements, each matched against the file as it is now, not after the others. ` +
		`No edit may overlap or contain another: merge changes to the same or nearby lines into one edit.",
				"items": {"type": "object", ` + editItemFields + `}
			}
		},
		"required": ["path", "edits"]
	}`
	// editAccepts is what edit takes besides: edits as a JSON string (of a
	// list or of one edit), one edit object instead of a list, and the
	// older oldText/newText beside path (added after edits' own).
	editAccepts = `{
		"type": "object",
		"properties": {
			"path": {"type": "string"},
			"edits": {
				"type": ["array", "object", "string"],
				"items": {"type": "object", ` + editItemFields + `},
				` + editItemFields + `
			},
			"oldText": {"type": "string"},
			"newText": {"type": "string"}
		},
		"required": ["path"]
	}`
	// editsInString is what a JSON string in edits must hold.
	editsInString = `{"type": ["array", "object"], "items": {"type": "object", ` + editItemFields + `}, ` + editItemFields + `}`
)

// editsInStringSchema is editsInString decoded, on first use (not at
// startup: encoding/json's reflection costs rpi's start).
var editsInStringSchema = lazy[map[string]any]{build: func() (m map[string]any) { json.Unmarshal([]byte(editsInString), &m); return }}

type editCall struct {
	path, abs string
	edits     []textEdit
	// What prepare found: the file, what it held, and the plan.
	target changeTarget
	where  string // where the path leads, for the dialog
	data   []byte
	plan   *editPlan
}

var editTool = &tool{
	name:    "edit",
	strict:  true,
	summary: "Make precise file edits by exact text replacement, several separate edits in one call if need be",
	description: "Edit one file by exact text replacement. Each edits[].oldText must match one unique region of the file as " +
		"it is now, and no two may overlap: when two changes touch the same or nearby lines, make them one edit. Do not " +
		"include long unchanged stretches just to join changes that are far apart.",
	guidelines: []string{
		"Use edit for targeted changes, and put all the changes to one file in one call.",
		"Each edits[].oldText must match the file exactly and only once. Keep it short and apart from the other edits; " +
			"merge changes that are close together, without taking in long unchanged parts.",
	},
	schema:  schema(editSchema),
	accepts: schema(editAccepts),
	decode: func(s *session, raw json.RawMessage) (toolCall, error) {
		var a struct {
			Path             string
			Edits            json.RawMessage
			OldText, NewText *string
		}
		if err := decodeChecked(raw, &a); err != nil {
			return nil, err
		}
		edits, err := editList(a.Edits)
		if err != nil {
			return nil, err
		}
		switch {
		case (a.OldText == nil) != (a.NewText == nil):
			return nil, errors.New(`oldText and newText go together (or give edits)`)
		case a.OldText != nil:
			edits = append(edits, textEdit{*a.OldText, *a.NewText})
		}
		if len(edits) == 0 {
			return nil, errors.New("edits must contain at least one replacement")
		}
		if len(edits) > maxEdits {
			return nil, fmt.Errorf("%d edits in one call, at most %d: split them over several calls", len(edits), maxEdits)
		}
		abs, err := s.toolPath(a.Path)
		if err != nil {
			return &pathFailed{"edit", a.Path, err}, nil
		}
		return &editCall{path: a.Path, abs: abs, edits: edits}, nil
	},
}

// editList reads edits in any of the shapes edit takes (already checked
// against editAccepts): a list, one edit, or a JSON string holding either.
func editList(raw json.RawMessage) ([]textEdit, error) {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var text string
		json.Unmarshal(raw, &text)
		if !json.Valid([]byte(text)) { // checkArgs would say "expected one JSON object" of a list
			return nil, errors.New("field \"edits\" is a string that does not hold a JSON list of edits: it is not JSON")
		}
		if err := checkArgs([]byte(text), editsInStringSchema.get()); err != nil {
			return nil, fmt.Errorf("field \"edits\" is a string that does not hold a JSON list of edits: %v", err)
		}
		raw = json.RawMessage(strings.TrimSpace(text))
	}
	if raw[0] == '{' {
		var one textEdit
		err := json.Unmarshal(raw, &one)
		return []textEdit{one}, err
	}
	var edits []textEdit
	err := json.Unmarshal(raw, &edits)
	return edits, err
}

// prepare opens the file, reads it and plans every edit against it.
func (c *editCall) prepare(ctx context.Context, s *session) error {
	checkCallout("the session's files")
	target, err := s.files.target(ctx, c.path, c.abs, false)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("File not found: %s", c.path)
	}
	if err != nil {
		return fileError("edit", c.path, err)
	}
	c.target, c.where = target, target.where()
	if c.data, err = target.read(ctx, maxEditBytes); err != nil {
		return fileError("edit", c.path, err)
	}
	c.plan, err = planEdits(ctx, c.data, c.edits, c.path)
	if ctx.Err() != nil {
		return errors.New("Operation aborted")
	}
	return err
}

func (c *editCall) release() {
	if c.target != nil {
		c.target.close()
	}
}

// describe lists every change as it will be made: where, what goes and
// what comes.
func (c *editCall) describe() (string, string) {
	var b strings.Builder
	n := "1 edit"
	if len(c.edits) > 1 {
		n = fmt.Sprintf("%d edits", len(c.edits))
	}
	fmt.Fprintf(&b, "Apply %s to %s%s:", n, escapeControl(c.path), c.where)
	for _, sp := range c.plan.splices {
		names := make([]string, len(sp.edits))
		for i, e := range sp.edits {
			names[i] = fmt.Sprintf("edits[%d]", e)
		}
		line := strings.Count(c.plan.text[:sp.at], "\n") + 1
		removed, inserted := c.plan.text[sp.at:sp.at+sp.n], sp.text
		if !c.plan.loose {
			fmt.Fprintf(&b, "\n%s at line %d:", strings.Join(names, " and "), line)
		} else {
			// Whole lines: their last line break is not a line of its own.
			removed, inserted = strings.TrimSuffix(removed, "\n"), strings.TrimSuffix(inserted, "\n")
			lines := fmt.Sprintf("line %d", line)
			if last := line + strings.Count(removed, "\n"); last > line {
				lines = fmt.Sprintf("lines %d-%d", line, last)
			}
			fmt.Fprintf(&b, "\n%s at %s, matched loosely (ignoring trailing whitespace, quote and dash styles, Unicode forms), "+
				"so these lines are rewritten whole:", strings.Join(names, " and "), lines)
		}
		fmt.Fprintf(&b, "\n%s\n%s", showText("- ", removed), showText("+ ", inserted))
	}
	return "Allow edit of " + escapeControl(c.path) + "?", b.String()
}

func (c *editCall) run(ctx context.Context, s *session, _ toolRun) (toolResult, error) {
	if ctx.Err() != nil {
		return toolResult{}, errors.New("Operation aborted")
	}
	// The diff before the write, as pi makes it: it cannot fail after.
	details, err := editDiff(ctx, c.path, c.plan.text, c.plan.after, c.plan.splices)
	if err != nil {
		return toolResult{}, errors.New("Operation aborted")
	}
	if err := c.target.write(ctx, "edit", c.data, c.plan.result); err != nil {
		return toolResult{}, err
	}
	change := c.change()
	return toolResult{Content: textBlocks(fmt.Sprintf("Successfully replaced %d block(s) in %s.", len(c.edits), c.path)),
		Details: details, change: &change}, nil
}

// change is the file as prepare read it and as the plan makes it.
func (c *editCall) change() fileChange {
	return fileChange{path: c.abs, existed: true, before: c.data, after: c.plan.result, where: c.where}
}

// ---- Planning, by pi 1.6's rules ----

// splice replaces n bytes at `at` of the planned text with text; edits
// are the edits[] it carries out.
type splice struct {
	at, n int
	text  string
	edits []int
}

// editPlan is what an edit call does to a file.
type editPlan struct {
	text    string   // the file without its BOM, line ends as LF: what the edits were matched in
	splices []splice // in text, in order, disjoint
	loose   bool     // matched loosely: the splices are whole lines, rewritten from the loose text
	after   string   // text with the splices made
	result  []byte   // the bytes to write
}

// planEdits matches every edit against the file's content and makes the
// bytes to write: the BOM is kept, and so is every line end outside what
// changes (a line break an edit puts in takes the line end of the line
// where its splice starts). It stops with ctx's error when ctx ends.
func planEdits(ctx context.Context, data []byte, edits []textEdit, path string) (*editPlan, error) {
	raw, bom := string(data), ""
	if rest, ok := strings.CutPrefix(raw, "\ufeff"); ok {
		raw, bom = rest, "\ufeff"
	}
	p := &editPlan{text: toLF(raw)}
	var err error
	if p.splices, p.loose, err = matchEdits(ctx, p.text, edits, path); err != nil {
		return nil, err
	}
	after := applySplices(p.text, p.splices, 0)
	p.after = after
	if after == p.text {
		if len(edits) == 1 {
			return nil, fmt.Errorf("No changes made to %s. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected.", path)
		}
		return nil, fmt.Errorf("No changes made to %s. The replacements produced identical content.", path)
	}
	if raw != p.text {
		after = spliceOriginal(raw, p.splices)
	}
	p.result = []byte(bom + after)
	return p, nil
}

// toLF turns CRLF and lone CR line ends into LF.
func toLF(s string) string {
	if !strings.Contains(s, "\r") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
}

// matchEdits finds every edit in text. An edit's oldText must be found as
// it is, or else in the loose forms of both (looseText); when any edit
// needs that, all are matched in the loose text. Whichever way it was
// found, an edit's loose oldText must occur only once in the loose text.
// The first edit that is not found or not unique fails the call, then any
// two that overlap. Loosely matched splices widen to whole lines, rewritten
// from the loose text (so the rest of the file keeps its bytes). The loose
// text is counted in piece by piece (countLoose) and made whole only when
// an edit is matched loosely, at most maxEditBytes of it; ctx is checked
// while it is made and before each edit is looked for.
func matchEdits(ctx context.Context, text string, edits []textEdit, path string) ([]splice, bool, error) {
	count := len(edits)
	olds, looseOlds := make([]string, count), make([]string, count)
	for i, e := range edits {
		if olds[i] = toLF(e.OldText); olds[i] == "" {
			if count == 1 {
				return nil, false, fmt.Errorf("oldText must not be empty in %s.", path)
			}
			return nil, false, fmt.Errorf("edits[%d].oldText must not be empty in %s.", i, path)
		}
	}
	for i := range olds {
		var err error
		if looseOlds[i], err = looseWithin(ctx, olds[i], path); err != nil {
			return nil, false, err
		}
	}
	counts, err := countLoose(ctx, text, looseOlds, looseChunk)
	if err != nil {
		return nil, false, err
	}
	exact := make([]int, count) // where each oldText is in text as it is, or -1
	isLoose := false
	for i := range olds {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		if exact[i] = strings.Index(text, olds[i]); exact[i] < 0 && (counts[i] > 0 || looseOlds[i] == "") {
			isLoose = true
		}
	}
	loose := ""
	if isLoose {
		if loose, err = looseWithin(ctx, text, path); err != nil {
			return nil, false, err
		}
	}
	var found []splice
	for i, old := range olds {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		at, n := exact[i], len(old)
		if isLoose {
			if at = strings.Index(loose, old); at < 0 {
				at, n = strings.Index(loose, looseOlds[i]), len(looseOlds[i])
			}
		}
		if at < 0 {
			if count == 1 {
				return nil, false, fmt.Errorf("Could not find the exact text in %s. The old text must match exactly including all whitespace and newlines.", path)
			}
			return nil, false, fmt.Errorf("Could not find edits[%d] in %s. The oldText must match exactly including all whitespace and newlines.", i, path)
		}
		if k := counts[i]; k > 1 {
			if count == 1 {
				return nil, false, fmt.Errorf("Found %d occurrences of the text in %s. The text must be unique. Please provide more context to make it unique.", k, path)
			}
			return nil, false, fmt.Errorf("Found %d occurrences of edits[%d] in %s. Each oldText must be unique. Please provide more context to make it unique.", k, i, path)
		}
		found = append(found, splice{at, n, toLF(edits[i].NewText), []int{i}})
	}
	sort.SliceStable(found, func(a, b int) bool { return found[a].at < found[b].at })
	for i := 1; i < len(found); i++ {
		if prev, cur := found[i-1], found[i]; prev.at+prev.n > cur.at {
			return nil, false, fmt.Errorf("edits[%d] and edits[%d] overlap in %s. Merge them into one edit or target disjoint regions.", prev.edits[0], cur.edits[0], path)
		}
	}
	if !isLoose {
		return found, false, nil
	}
	widened, err := wholeLines(text, loose, found)
	return widened, true, err
}

// looseWithin is looseText(s) for edit: s itself when it is in its loose
// form already (no copy), an error naming path when the loose form is over
// maxEditBytes, ctx's error when ctx ends.
func looseWithin(ctx context.Context, s, path string) (string, error) {
	if isLooseText(s) {
		return s, nil
	}
	loose, err := looseForm(ctx, s, maxEditBytes)
	if errors.Is(err, errLooseTooLong) {
		return "", fmt.Errorf("Cannot match the edits in %s loosely: its loose form (NFKC, no trailing whitespace) is more than %s. "+
			"Give each oldText exactly as the file has it.", path, formatSize(maxEditBytes))
	}
	return loose, err
}

// looseChunk is about how much of a text countLoose makes loose at a time.
const looseChunk = 1 << 20

// countLoose counts each of needles in looseText(text) as occurrences
// does: in text itself when it is its own loose form, else in pieces of
// the loose text made from looseChunk bytes of text at a time (never the
// whole: NFKC may make a text 11 times longer), a match that spans two
// pieces found in the end of one kept before the next.
func countLoose(ctx context.Context, text string, needles []string, chunk int) ([]int, error) {
	counts, next := make([]int, len(needles)), make([]int, len(needles))
	if isLooseText(text) {
		for k, needle := range needles {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			counts[k] = occurrences(text, needle)
		}
		return counts, nil
	}
	keep, units := 0, 0
	for _, n := range needles {
		keep = max(keep, len(n)-1)
	}
	tail, tailAt := "", 0 // the end of the loose text so far, and where it starts in it
	err := eachLoose(ctx, text, chunk, func(piece string) error {
		window := tail + piece
		for k, needle := range needles {
			if err := ctx.Err(); err != nil {
				return err
			}
			if needle == "" {
				continue
			}
			// Like strings.Count: from where the last match ended.
			from := max(next[k]-tailAt, 0)
			for {
				i := strings.Index(window[from:], needle)
				if i < 0 {
					break
				}
				counts[k]++
				from += i + len(needle)
				next[k] = tailAt + from
			}
		}
		if slices.Contains(needles, "") {
			units += occurrences(piece, "") + 1
		}
		cut := max(len(window)-keep, 0)
		tail, tailAt = strings.Clone(window[cut:]), tailAt+cut
		return nil
	})
	for k, needle := range needles {
		if needle == "" {
			counts[k] = units - 1 // JavaScript's split("") counts UTF-16 units
		}
	}
	return counts, err
}

// eachLoose hands looseText(s) to emit in pieces, each made from about
// chunk bytes of s: s is cut before a character that nothing before it
// composes or reorders with (nfkcCut), and white space at the end of a
// piece waits for the next to know whether its line ends there. It stops
// with ctx's error when ctx ends.
func eachLoose(ctx context.Context, s string, chunk int, emit func(piece string) error) error {
	var held strings.Builder // white space at the end of the line so far
	var out strings.Builder
	for start := 0; start < len(s); {
		end := nfkcCut(s, start+chunk)
		n, err := nfkcWithin(ctx, s[start:end])
		if err != nil {
			return err
		}
		out.Reset()
		for {
			line, rest, ended := strings.Cut(n, "\n")
			kept := strings.TrimRightFunc(line, jsSpace)
			if kept != "" {
				out.WriteString(held.String())
				held.Reset()
				out.WriteString(kept)
			}
			if !ended {
				held.WriteString(line[len(kept):])
				break
			}
			held.Reset()
			out.WriteByte('\n')
			n = rest
		}
		piece := out.String()
		if !ascii(piece) {
			piece = looseQuotesDashesSpaces.get().Replace(piece)
		}
		if err := emit(piece); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// wholeLines turns splices of the loose text into splices of text that
// rewrite the whole lines they touch (from the loose text), one for each
// run of lines that splices share; the other lines keep their bytes.
// found is in order and disjoint, so both texts are walked forward once.
func wholeLines(text, loose string, found []splice) ([]splice, error) {
	if lineCount(text) != lineCount(loose) {
		return nil, errors.New("Cannot preserve unchanged lines because the base content has a different line count.")
	}
	type lineGroup struct {
		first, end int // lines [first, end)
		found      []splice
	}
	var groups []lineGroup
	at := lineWalker{s: loose}
	for _, sp := range found {
		if sp.at >= len(loose) {
			return nil, errors.New("Replacement range is outside the base content.")
		}
		first := at.lineOf(sp.at)
		end := at.lineOf(max(sp.at+sp.n-1, sp.at)) + 1
		if n := len(groups); n > 0 && first < groups[n-1].end {
			groups[n-1].end = max(groups[n-1].end, end)
			groups[n-1].found = append(groups[n-1].found, sp)
			continue
		}
		groups = append(groups, lineGroup{first, end, []splice{sp}})
	}
	out := make([]splice, len(groups))
	inLoose, inText := lineWalker{s: loose}, lineWalker{s: text}
	for i, g := range groups {
		from, to := inLoose.startOf(g.first), inLoose.startOf(g.end)
		start, stop := inText.startOf(g.first), inText.startOf(g.end)
		var edits []int
		for _, sp := range g.found {
			edits = append(edits, sp.edits...)
		}
		out[i] = splice{start, stop - start, applySplices(loose[from:to], g.found, from), edits}
	}
	return out, nil
}

// lineCount is the number of lines of s, each ended by an LF but perhaps
// the last; an empty last line (after a final LF) is none.
func lineCount(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && s[len(s)-1] != '\n' {
		n++
	}
	return n
}

// lineWalker finds lines in s moving only forward: line is the number of
// the line that starts at start.
type lineWalker struct {
	s           string
	line, start int
}

// lineOf is the number of the line holding offset (not before the
// walker's line).
func (w *lineWalker) lineOf(offset int) int {
	for {
		i := strings.IndexByte(w.s[w.start:offset], '\n')
		if i < 0 {
			return w.line
		}
		w.line, w.start = w.line+1, w.start+i+1
	}
}

// startOf is where line k (not before the walker's line) starts: len(s)
// past the last line.
func (w *lineWalker) startOf(k int) int {
	for w.line < k {
		i := strings.IndexByte(w.s[w.start:], '\n')
		if i < 0 {
			w.line, w.start = k, len(w.s)
			break
		}
		w.line, w.start = w.line+1, w.start+i+1
	}
	return w.start
}

// applySplices makes s (which starts at offset of the text the splices
// were planned in) with the splices made.
func applySplices(s string, splices []splice, offset int) string {
	var b strings.Builder
	pos := 0
	for _, sp := range splices {
		b.WriteString(s[pos : sp.at-offset])
		b.WriteString(sp.text)
		pos = sp.at - offset + sp.n
	}
	b.WriteString(s[pos:])
	return b.String()
}

// spliceOriginal makes the splices, planned in toLF(raw), in raw itself:
// the text between them keeps its bytes, line ends included, and a line
// break a splice puts in takes the line end of the line where it starts.
func spliceOriginal(raw string, splices []splice) string {
	// Only a CRLF is shorter in the LF text: an offset there is an offset
	// in raw plus the CRLFs before it.
	crlfs, next := 0, strings.Index(raw, "\r\n")
	inRaw := func(offset int) int {
		for next >= 0 && next-crlfs < offset {
			crlfs++
			if i := strings.Index(raw[next+2:], "\r\n"); i >= 0 {
				next += 2 + i
			} else {
				next = -1
			}
		}
		return offset + crlfs
	}
	var b strings.Builder
	endsWithCR := false
	add := func(part string) {
		if part == "" {
			return
		}
		// A CR before a seam and an LF after it would read as one CRLF:
		// an LF makes the CR a line end of its own, as the plan shows it.
		if endsWithCR && part[0] == '\n' {
			b.WriteByte('\n')
		}
		b.WriteString(part)
		endsWithCR = part[len(part)-1] == '\r'
	}
	pos := 0
	for _, sp := range splices {
		start := inRaw(sp.at)
		add(raw[pos:start])
		if end := lineEndAt(raw, start); end != "\n" {
			add(strings.ReplaceAll(sp.text, "\n", end))
		} else {
			add(sp.text)
		}
		pos = inRaw(sp.at + sp.n)
	}
	add(raw[pos:])
	return b.String()
}

// lineEndAt is the line end of the line holding offset: its own LF or
// CRLF, or the one before it on an unterminated last line. A lone CR
// counts only in a file without any LF (old Mac line ends).
func lineEndAt(raw string, offset int) string {
	lf := strings.IndexByte(raw[offset:], '\n')
	if lf >= 0 {
		lf += offset
	} else {
		lf = strings.LastIndexByte(raw, '\n')
	}
	switch {
	case lf < 0 && strings.Contains(raw, "\r"):
		return "\r"
	case lf > 0 && raw[lf-1] == '\r':
		return "\r\n"
	}
	return "\n"
}

// firstChangedLine is the first line (from 1) of after that differs from
// before.
func firstChangedLine(before, after string) int {
	line := 1
	for {
		b, a := before, after
		if i := strings.IndexByte(b, '\n'); i >= 0 {
			b = b[:i+1]
		}
		if i := strings.IndexByte(a, '\n'); i >= 0 {
			a = a[:i+1]
		}
		if a != b || a == "" {
			return line
		}
		before, after, line = before[len(b):], after[len(a):], line+1
	}
}

// ---- pi's loose form of a text ----

// looseQuotesDashesSpaces are the characters the loose form makes ASCII.
var looseQuotesDashesSpaces = lazy[*strings.Replacer]{build: func() *strings.Replacer {
	return strings.NewReplacer(
		"\u2018", "'", "\u2019", "'", "\u201A", "'", "\u201B", "'",
		"\u201C", `"`, "\u201D", `"`, "\u201E", `"`, "\u201F", `"`,
		"\u2010", "-", "\u2011", "-", "\u2012", "-", "\u2013", "-", "\u2014", "-", "\u2015", "-", "\u2212", "-",
		"\u00A0", " ", "\u2002", " ", "\u2003", " ", "\u2004", " ", "\u2005", " ", "\u2006", " ", "\u2007", " ",
		"\u2008", " ", "\u2009", " ", "\u200A", " ", "\u202F", " ", "\u205F", " ", "\u3000", " ",
	)
}}

// looseText is pi 1.6's loose form of a text (its normalizeForFuzzyMatch):
// NFKC, then no whitespace at the end of any line, then curly quotes,
// Unicode dashes and special spaces as their ASCII forms.
func looseText(s string) string {
	loose, _ := looseForm(context.Background(), s, -1)
	return loose
}

// errLooseTooLong: a loose form would be longer than its limit.
var errLooseTooLong = errors.New("the loose form is over its limit")

// looseForm is looseText(s), made by eachLoose: it stops with ctx's
// error when ctx ends, and with errLooseTooLong past limit bytes (no limit
// when negative).
func looseForm(ctx context.Context, s string, limit int) (string, error) {
	var b strings.Builder
	err := eachLoose(ctx, s, looseChunk, func(piece string) error {
		if limit >= 0 && b.Len()+len(piece) > limit {
			return errLooseTooLong
		}
		b.WriteString(piece)
		return nil
	})
	return b.String(), err
}

// isLooseText reports whether s is its own loose form, looking at it
// without copying it: no line of it ends in white space, and each rune is
// ASCII, or one NFKC keeps as it is whatever its neighbours (no flags, or
// one that decomposes and composes back, like é: a mark after it would
// have flags), and none the loose form makes ASCII. It may say no to a
// text that is its own loose form; never yes to one that is not.
func isLooseText(s string) bool {
	t := nfkcData.get()
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			if (s[i] == '\n' || i+1 == len(s)) && endsInSpace(s[:i+1]) {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if f := t.flags(r); f != 0 && f != nfkcDecomposes|nfkcStable || looseReplaced(r) || i+size == len(s) && jsSpace(r) {
			return false
		}
		i += size
	}
	return true
}

// endsInSpace: the line that line ends (with its LF, if it has one) ends in
// white space.
func endsInSpace(line string) bool {
	line = strings.TrimSuffix(line, "\n")
	r, _ := utf8.DecodeLastRuneInString(line)
	return line != "" && jsSpace(r)
}

// looseReplaced: the loose form makes r ASCII (looseQuotesDashesSpaces).
func looseReplaced(r rune) bool {
	switch {
	case r >= 0x2018 && r <= 0x201F, r >= 0x2010 && r <= 0x2015, r == 0x2212:
		return true
	}
	return r == 0xA0 || r >= 0x2002 && r <= 0x200A || r == 0x202F || r == 0x205F || r == 0x3000
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// jsSpace reports whether JavaScript's trimEnd removes r: its white space
// and line terminators (not Go's unicode.IsSpace: U+0085 is not one, U+FEFF is).
func jsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// occurrences counts needle in s as JavaScript's s.split(needle).length-1
// does: an empty needle splits s into its UTF-16 code units.
func occurrences(s, needle string) int {
	if needle != "" {
		return strings.Count(s, needle)
	}
	units := 0
	for _, r := range s {
		units += utf16Units(r)
	}
	return units - 1
}

func utf16Units(r rune) int {
	if r >= 0x10000 && r <= utf8.MaxRune {
		return 2
	}
	return 1
}
