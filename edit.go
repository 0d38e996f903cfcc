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
	"sort"
	"strings"
	"unicode/utf8"
)

// maxEditBytes is the largest file edit changes.
const maxEditBytes = 64 << 20

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

var editsInStringSchema = func() (m map[string]any) { json.Unmarshal([]byte(editsInString), &m); return }()

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
		return &editCall{path: a.Path, abs: s.toolPath(a.Path), edits: edits}, nil
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
		if err := checkArgs([]byte(text), editsInStringSchema); err != nil {
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
	c.plan, err = planEdits(c.data, c.edits, c.path)
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
	if err := c.target.write(ctx, "edit", c.data, c.plan.result); err != nil {
		return toolResult{}, err
	}
	change := c.change()
	return toolResult{Content: textBlocks(fmt.Sprintf("Successfully replaced %d block(s) in %s.", len(c.edits), c.path)),
		Details: map[string]int{"firstChangedLine": c.plan.firstChangedLine}, change: &change}, nil
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
	text             string   // the file without its BOM, line ends as LF: what the edits were matched in
	splices          []splice // in text, in order, disjoint
	loose            bool     // matched loosely: the splices are whole lines, rewritten from the loose text
	result           []byte   // the bytes to write
	firstChangedLine int
}

// planEdits matches every edit against the file's content and makes the
// bytes to write: the BOM is kept, and so is every line end outside what
// changes (a line break an edit puts in takes the line end of the line
// where its splice starts).
func planEdits(data []byte, edits []textEdit, path string) (*editPlan, error) {
	raw, bom := string(data), ""
	if rest, ok := strings.CutPrefix(raw, "\ufeff"); ok {
		raw, bom = rest, "\ufeff"
	}
	p := &editPlan{text: toLF(raw)}
	var err error
	if p.splices, p.loose, err = matchEdits(p.text, edits, path); err != nil {
		return nil, err
	}
	after := applySplices(p.text, p.splices, 0)
	p.firstChangedLine = firstChangedLine(p.text, after)
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
// from the loose text (so the rest of the file keeps its bytes).
func matchEdits(text string, edits []textEdit, path string) ([]splice, bool, error) {
	count := len(edits)
	olds, looseOlds := make([]string, count), make([]string, count)
	for i, e := range edits {
		if olds[i] = toLF(e.OldText); olds[i] == "" {
			if count == 1 {
				return nil, false, fmt.Errorf("oldText must not be empty in %s.", path)
			}
			return nil, false, fmt.Errorf("edits[%d].oldText must not be empty in %s.", i, path)
		}
		looseOlds[i] = looseText(olds[i])
	}
	loose := looseText(text)
	base, isLoose := text, false
	for i := range olds {
		if !strings.Contains(text, olds[i]) && strings.Contains(loose, looseOlds[i]) {
			base, isLoose = loose, true
		}
	}
	var found []splice
	for i, old := range olds {
		at, n := strings.Index(base, old), len(old)
		if at < 0 {
			at, n = strings.Index(loose, looseOlds[i]), len(looseOlds[i])
		}
		if at < 0 {
			if count == 1 {
				return nil, false, fmt.Errorf("Could not find the exact text in %s. The old text must match exactly including all whitespace and newlines.", path)
			}
			return nil, false, fmt.Errorf("Could not find edits[%d] in %s. The oldText must match exactly including all whitespace and newlines.", i, path)
		}
		if k := occurrences(loose, looseOlds[i]); k > 1 {
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

// wholeLines turns splices of the loose text into splices of text that
// rewrite the whole lines they touch (from the loose text), one for each
// run of lines that splices share; the other lines keep their bytes.
func wholeLines(text, loose string, found []splice) ([]splice, error) {
	textLines, looseLines := lineSpans(text), lineSpans(loose)
	if len(textLines) != len(looseLines) {
		return nil, errors.New("Cannot preserve unchanged lines because the base content has a different line count.")
	}
	type lineGroup struct {
		first, end int // lines [first, end)
		found      []splice
	}
	var groups []lineGroup
	for _, sp := range found {
		first := sort.Search(len(looseLines), func(i int) bool { return looseLines[i][1] > sp.at })
		end := first
		for end < len(looseLines) && looseLines[end][1] < sp.at+sp.n {
			end++
		}
		if end == len(looseLines) {
			return nil, errors.New("Replacement range is outside the base content.")
		}
		end++
		if n := len(groups); n > 0 && first < groups[n-1].end {
			groups[n-1].end = max(groups[n-1].end, end)
			groups[n-1].found = append(groups[n-1].found, sp)
			continue
		}
		groups = append(groups, lineGroup{first, end, []splice{sp}})
	}
	out := make([]splice, len(groups))
	for i, g := range groups {
		from, to := looseLines[g.first][0], looseLines[g.end-1][1]
		var edits []int
		for _, sp := range g.found {
			edits = append(edits, sp.edits...)
		}
		out[i] = splice{textLines[g.first][0], textLines[g.end-1][1] - textLines[g.first][0], applySplices(loose[from:to], g.found, from), edits}
	}
	return out, nil
}

// lineSpans are the [start, end) of each line of s, its LF included; an
// empty last line (after a final LF) is none.
func lineSpans(s string) [][2]int {
	var spans [][2]int
	for start := 0; start < len(s); {
		end := len(s)
		if i := strings.IndexByte(s[start:], '\n'); i >= 0 {
			end = start + i + 1
		}
		spans = append(spans, [2]int{start, end})
		start = end
	}
	return spans
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
var looseQuotesDashesSpaces = strings.NewReplacer(
	"\u2018", "'", "\u2019", "'", "\u201A", "'", "\u201B", "'",
	"\u201C", `"`, "\u201D", `"`, "\u201E", `"`, "\u201F", `"`,
	"\u2010", "-", "\u2011", "-", "\u2012", "-", "\u2013", "-", "\u2014", "-", "\u2015", "-", "\u2212", "-",
	"\u00A0", " ", "\u2002", " ", "\u2003", " ", "\u2004", " ", "\u2005", " ", "\u2006", " ", "\u2007", " ",
	"\u2008", " ", "\u2009", " ", "\u200A", " ", "\u202F", " ", "\u205F", " ", "\u3000", " ",
)

// looseText is pi 1.6's loose form of a text (its normalizeForFuzzyMatch):
// NFKC, then no whitespace at the end of any line, then curly quotes,
// Unicode dashes and special spaces as their ASCII forms.
func looseText(s string) string {
	s = nfkc(s)
	plain := ascii(s)
	var b strings.Builder
	b.Grow(len(s))
	for {
		line, rest, more := strings.Cut(s, "\n")
		b.WriteString(strings.TrimRightFunc(line, jsSpace))
		if !more {
			break
		}
		b.WriteByte('\n')
		s = rest
	}
	if plain {
		return b.String()
	}
	return looseQuotesDashesSpaces.Replace(b.String())
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
