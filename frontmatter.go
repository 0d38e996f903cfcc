package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Front matter is YAML, as pi 1.6 reads it. rpi reads the part of YAML
// that front matter uses: a block mapping whose values are scalars
// (plain, '…', "…", | and >), with nested blocks and flow collections
// read through and taken as "not text", as pi takes any value that is
// not a string. What this reader does not know for certain (anchors,
// tags, complex keys, tabs in indentation, …) is an error, as YAML's
// errors are in pi: the file is skipped with a warning, never guessed.
// The work is linear in the input: each line is read once, and nesting
// deeper than maxYAMLDepth is an error.

// yamlValue is a front matter field: text, YAML's true, or other.
type yamlValue struct {
	kind byte // 's' text, 't' true, 'o' anything else (a number, null, a list, …)
	text string
}

// frontMatterFields are the top-level fields of front matter.
type frontMatterFields map[string]yamlValue

// text is a field's text, or "" when it is missing or not text (a
// number, true, null, a list), as pi takes any value that is no string.
func (f frontMatterFields) text(key string) string {
	if v := f[key]; v.kind == 's' {
		return v.text
	}
	return ""
}

// isTrue says whether a field is YAML's true (true, True or TRUE, not
// quoted), as pi's `=== true`.
func (f frontMatterFields) isTrue(key string) bool { return f[key].kind == 't' }

// frontMatter splits text into its front matter's fields and its body,
// framed as pi frames it: text starting with "---", the front matter
// from the fifth character to the first "\n---" after it, the body
// after that "\n---" and its next character, trimmed. As pi, "\r\n" and
// "\r" are read as "\n" throughout. err is front matter that is not
// YAML this reader can read.
func frontMatter(text string) (frontMatterFields, string, error) {
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
	if !strings.HasPrefix(text, "---") {
		return frontMatterFields{}, text, nil
	}
	end := strings.Index(text[3:], "\n---")
	if end < 0 {
		return frontMatterFields{}, text, nil
	}
	end += 3
	body := strings.TrimFunc(text[end+4:], jsSpace)
	if end <= 4 {
		return frontMatterFields{}, body, nil // nothing between: no front matter, as pi
	}
	fields, err := readYAMLFields(text[4:end])
	return fields, body, err
}

// maxYAMLDepth is how deeply front matter's collections may nest.
const maxYAMLDepth = 64

// yamlError is front matter this reader cannot read, with its line
// (from 1, the line after the first "---").
type yamlError struct {
	line int
	msg  string
}

func (e *yamlError) Error() string { return fmt.Sprintf("%s (front matter line %d)", e.msg, e.line) }

// yamlReader reads YAML text line by line.
type yamlReader struct {
	lines  []string
	i      int // the line being read
	depth  int
	fields frontMatterFields // the top-level mapping's fields

	// blankEnd says the last line is spaces without a "\n" after them,
	// which YAML reads in a block scalar in its own way.
	blankEnd bool
}

// readYAMLFields reads src, a YAML document: its top-level mapping's
// fields, none when it is another kind of node or empty.
func readYAMLFields(src string) (fields frontMatterFields, err error) {
	r := &yamlReader{lines: strings.Split(src, "\n"), fields: frontMatterFields{}}
	if n := len(r.lines); n > 1 && r.lines[n-1] == "" {
		r.lines = r.lines[:n-1] // the text's last "\n" ends a line; it starts none
	} else if strings.Trim(r.lines[n-1], " \t") == "" {
		r.blankEnd = true
	}
	defer func() {
		if p := recover(); p != nil {
			e, ok := p.(*yamlError)
			if !ok {
				panic(p)
			}
			fields, err = nil, e
		}
	}()
	for k, line := range r.lines {
		if strings.HasPrefix(line, "%") {
			panic(&yamlError{k + 1, "a directive (%) is not read"})
		}
		if line == "..." || strings.HasPrefix(line, "... ") {
			// The document's end: only comments may follow.
			for _, after := range r.lines[k+1:] {
				if s := strings.TrimLeft(after, " \t"); s != "" && s[0] != '#' {
					panic(&yamlError{k + 1, "text after the document's end (...)"})
				}
			}
			r.lines, r.blankEnd = r.lines[:k], false
			break
		}
	}
	if !r.skipBlank() {
		return r.fields, nil
	}
	r.node(r.indent(), -1, true)
	if r.skipBlank() {
		r.fail("a line out of place after the front matter's first node")
	}
	return r.fields, nil
}

func (r *yamlReader) fail(msg string) { panic(&yamlError{r.i + 1, msg}) }

func (r *yamlReader) enter() {
	if r.depth++; r.depth > maxYAMLDepth {
		r.fail("nested too deeply")
	}
}

// skipBlank moves past blank and comment lines; false at the end.
func (r *yamlReader) skipBlank() bool {
	for ; r.i < len(r.lines); r.i++ {
		s := strings.TrimLeft(r.lines[r.i], " \t")
		if s != "" && s[0] != '#' {
			return true
		}
	}
	return false
}

// indent is the current line's indentation; a tab in it is an error.
func (r *yamlReader) indent() int {
	line := r.lines[r.i]
	n := len(line) - len(strings.TrimLeft(line, " "))
	if n < len(line) && line[n] == '\t' {
		r.fail("a tab in indentation")
	}
	return n
}

// node reads the block node starting at column col of the current line,
// in a parent indented parent. top says it is the document itself.
func (r *yamlReader) node(col, parent int, top bool) yamlValue {
	line := r.lines[r.i]
	rest := line[col:]
	if isSeqEntry(rest) {
		r.sequence(col)
		return yamlValue{kind: 'o'}
	}
	if rest[0] == '[' || rest[0] == '{' {
		return r.scalar(col, parent) // a flow collection, which may hold ": "
	}
	if _, _, ok := r.key(line, col); ok {
		r.mapping(col, top)
		return yamlValue{kind: 'o'}
	}
	return r.scalar(col, parent)
}

// isSeqEntry says whether s starts a sequence entry ("-" and a space or
// the end).
func isSeqEntry(s string) bool {
	return s == "-" || strings.HasPrefix(s, "- ") || strings.HasPrefix(s, "-\t")
}

// key reads a mapping key starting at col of line: its text and the
// column after its ':'; ok false when line has no key there.
func (r *yamlReader) key(line string, col int) (key string, after int, ok bool) {
	s := line[col:]
	var end int // where the key ends in s
	switch {
	case s[0] == '"' || s[0] == '\'':
		text, n, closed := quotedOnLine(s)
		if !closed {
			return "", 0, false
		}
		key, end = text, n
		for end < len(s) && s[end] == ' ' {
			end++
		}
		if end == len(s) || s[end] != ':' {
			return "", 0, false
		}
		if end+1 < len(s) && s[end+1] != ' ' && s[end+1] != '\t' {
			r.fail("a ':' after a quoted key without a space")
		}
	default:
		end = plainEnd(s, true)
		if end == len(s) || s[end] != ':' {
			return "", 0, false
		}
		key = strings.TrimRight(s[:end], " \t")
		if key == "" || badPlainStart(key) {
			r.fail("a key YAML does not allow or rpi does not read")
		}
		if v := plainValue(key); v.kind != 's' {
			r.fail("a key that is not text")
		}
	}
	if utf16Len(key) > 1000 {
		r.fail("a key too long")
	}
	return key, col + end + 1, true
}

// plainEnd is where a plain scalar at the start of s ends: before a
// comment, or (key) at a ':' followed by a space or the line's end.
// A ": " inside a value is an error, as in YAML.
func plainEnd(s string, key bool) int {
	for j := 0; j < len(s); j++ {
		switch s[j] {
		case '#':
			if j > 0 && (s[j-1] == ' ' || s[j-1] == '\t') {
				return j
			}
		case ':':
			if j+1 == len(s) || s[j+1] == ' ' || s[j+1] == '\t' {
				if key {
					return j
				}
				panic(&yamlError{0, "a ': ' inside a plain value (a mapping where text is expected)"})
			}
		}
	}
	return len(s)
}

// mapping reads a block mapping whose keys are at column col.
func (r *yamlReader) mapping(col int, top bool) {
	r.enter()
	defer func() { r.depth-- }()
	seen := map[string]bool{}
	for {
		line := r.lines[r.i]
		key, after, ok := r.key(line, col)
		if !ok {
			r.fail("a line that is not a 'key: value'")
		}
		if seen[key] {
			r.fail("a key given twice")
		}
		seen[key] = true
		v := r.value(line, after, col, false)
		if top {
			r.fields[key] = v
		}
		if !r.atColumn(col, "mapping's keys") {
			return
		}
	}
}

// atColumn moves to the next line that is not blank and says whether it
// is at column col, where a mapping's or list's next entry is; one
// indented more is an error.
func (r *yamlReader) atColumn(col int, entries string) bool {
	if !r.skipBlank() {
		return false
	}
	n := r.indent()
	if n > col {
		r.fail("a line indented more than its " + entries)
	}
	return n == col
}

// sequence reads a block sequence whose "-" are at column col.
func (r *yamlReader) sequence(col int) {
	r.enter()
	defer func() { r.depth-- }()
	for {
		line := r.lines[r.i]
		if !isSeqEntry(line[col:]) {
			return // a key at the list's column, when the list is its key's value
		}
		rest := strings.TrimLeft(line[col+1:], " ")
		if rest == "" || rest[0] == '#' {
			r.value(line, col+1, col, true)
		} else if strings.HasPrefix(rest, "\t") {
			r.fail("a tab in indentation")
		} else {
			// The entry's node starts on this line, after "- ": read the
			// line with its "-" as a space, so that a mapping there has its
			// keys at that column.
			r.lines[r.i] = line[:col] + " " + line[col+1:]
			c := len(line) - len(rest)
			if strings.ContainsAny(rest[:1], "|>") {
				r.fail("a block scalar in a list entry is not read")
			}
			r.node(c, col, false)
		}
		if !r.atColumn(col, "list's entries") {
			return
		}
	}
}

// value reads the value after a key's ':' (or a list entry's '-') at
// column at of line, the key being at column col.
func (r *yamlReader) value(line string, at, col int, inSeq bool) yamlValue {
	rest := strings.TrimLeft(line[at:], " \t")
	if rest == "" || rest[0] == '#' {
		// Nothing on the line: the value is on the lines below, or null.
		r.i++
		if !r.skipBlank() {
			return yamlValue{kind: 'o'}
		}
		n := r.indent()
		if n > col {
			return r.node(n, col, false)
		}
		if n == col && !inSeq && isSeqEntry(r.lines[r.i][n:]) {
			r.sequence(n) // a list may be at its key's column
			return yamlValue{kind: 'o'}
		}
		return yamlValue{kind: 'o'}
	}
	c := len(line) - len(rest)
	if rest[0] == '|' || rest[0] == '>' {
		return r.blockScalar(c, col)
	}
	return r.scalar(c, col)
}

// scalar reads a flow node (plain, quoted, [..] or {..}) at column c of
// the current line; its further lines are indented more than parent.
func (r *yamlReader) scalar(c, parent int) yamlValue {
	line := r.lines[r.i]
	s := line[c:]
	switch s[0] {
	case '"', '\'':
		return r.quoted(c, parent)
	case '[', '{':
		r.flow(c, parent)
		return yamlValue{kind: 'o'}
	case '|', '>':
		r.fail("a block scalar that is not a key's value")
	}
	if badPlainStart(s) {
		r.fail("a value starting with a character YAML does not allow or rpi does not read: " + s[:1])
	}
	return r.plain(c, parent)
}

// plain reads a plain scalar: its lines folded, a comment ending it.
func (r *yamlReader) plain(c, parent int) yamlValue {
	var b strings.Builder
	first := true
	empty := 0
	for {
		line := r.lines[r.i]
		s := line[c:]
		end := r.plainEndAt(s)
		text := strings.TrimRight(s[:end], " \t")
		if !first {
			if empty == 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strings.Repeat("\n", empty))
		}
		b.WriteString(text)
		first, empty = false, 0
		r.i++
		if end < len(s) {
			break // a comment ends it
		}
		// Its next line, if indented more than its parent.
		j := r.i
		for ; j < len(r.lines) && strings.Trim(r.lines[j], " \t") == ""; j++ {
			empty++
		}
		if j == len(r.lines) {
			break
		}
		next := r.lines[j]
		n := len(next) - len(strings.TrimLeft(next, " "))
		if n <= parent || strings.TrimLeft(next, " \t")[0] == '#' {
			break
		}
		if next[n] == '\t' {
			r.i = j
			r.fail("a tab in indentation")
		}
		r.i, c = j, n
	}
	return plainValue(b.String())
}

// badPlainStart says whether s starts with a character that cannot
// start a plain scalar in YAML, or that rpi does not read there (an
// anchor, alias, tag).
func badPlainStart(s string) bool {
	if strings.ContainsAny(s[:1], ",[]{}#&*!|>'\"%@`") {
		return true
	}
	return strings.ContainsAny(s[:1], "-?:") && (len(s) == 1 || s[1] == ' ' || s[1] == '\t')
}

// plainEndAt is plainEnd, its error at the current line.
func (r *yamlReader) plainEndAt(s string) (end int) {
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(*yamlError); ok {
				e.line = r.i + 1
			}
			panic(p)
		}
	}()
	return plainEnd(s, false)
}

// yamlNumber is YAML 1.2's core schema's numbers: integers (also 0o and
// 0x), floats, .inf and .nan.
var yamlNumber = lazy[*regexp.Regexp]{build: func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+|` +
		`[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)
}}

// plainValue is a plain scalar's value in YAML 1.2's core schema.
func plainValue(s string) yamlValue {
	switch s {
	case "true", "True", "TRUE":
		return yamlValue{kind: 't'}
	case "", "~", "null", "Null", "NULL", "false", "False", "FALSE":
		return yamlValue{kind: 'o'}
	}
	if yamlNumber.get().MatchString(s) {
		return yamlValue{kind: 'o'}
	}
	return yamlValue{kind: 's', text: s}
}

// quotedOnLine reads a quoted scalar that must close on s's line (a
// key): its text and the length read; closed false when it does not
// close or has an escape this reader does not know.
func quotedOnLine(s string) (text string, n int, closed bool) {
	q := s[0]
	var b strings.Builder
	for j := 1; j < len(s); j++ {
		switch {
		case s[j] == q && q == '\'' && j+1 < len(s) && s[j+1] == '\'':
			b.WriteByte('\'')
			j++
		case s[j] == q:
			return b.String(), j + 1, true
		case s[j] == '\\' && q == '"':
			r, size, ok := yamlEscape(s[j+1:])
			if !ok {
				return "", 0, false
			}
			b.WriteString(r)
			j += size
		default:
			b.WriteByte(s[j])
		}
	}
	return "", 0, false
}

// yamlEscapes are the characters after '\\' in YAML's one-character
// escapes, each standing for yamlEscaped's string at its index.
const yamlEscapes = "0abt\tnvfre \"/\\N_LP"

var yamlEscaped = [...]string{"\x00", "\a", "\b", "\t", "\t", "\n", "\v", "\f", "\r", "\x1b", " ", "\"", "/", "\\",
	"\u0085", "\u00a0", "\u2028", "\u2029"}

// yamlEscape reads the escape after a '\' at the start of s: its text
// and length; ok false for one YAML does not have, or a code point
// that is not a character (a lone surrogate).
func yamlEscape(s string) (string, int, bool) {
	if s == "" {
		return "", 0, false
	}
	if k := strings.IndexByte(yamlEscapes, s[0]); k >= 0 {
		return yamlEscaped[k], 1, true
	}
	digits := 0
	switch s[0] {
	case 'x':
		digits = 2
	case 'u':
		digits = 4
	case 'U':
		digits = 8
	}
	if digits == 0 || len(s) < 1+digits {
		return "", 0, false
	}
	v, err := strconv.ParseUint(s[1:1+digits], 16, 32)
	if err != nil || v > utf8.MaxRune {
		return "", 0, false
	}
	if digits == 4 && v >= 0xD800 && v <= 0xDBFF && len(s) >= 11 && s[5] == '\\' && s[6] == 'u' {
		// A UTF-16 pair, as "\ud83d\ude00", is its one character.
		if low, err := strconv.ParseUint(s[7:11], 16, 32); err == nil && low >= 0xDC00 && low <= 0xDFFF {
			return string(utf16.DecodeRune(rune(v), rune(low))), 11, true
		}
	}
	if v >= 0xD800 && v <= 0xDFFF {
		return "", 0, false // half of a pair alone, which Go's text cannot hold
	}
	return string(rune(v)), 1 + digits, true
}

// quoted reads a quoted scalar at column c of the current line, over
// lines indented more than parent, folded as YAML folds them.
func (r *yamlReader) quoted(c, parent int) yamlValue {
	line := r.lines[r.i]
	q := line[c]
	var b []byte
	j := c + 1
	for {
		keep := len(b) // the text before trailing white space, which a line's end drops
		escapedBreak := false
		for ; j < len(line); j++ {
			ch := line[j]
			switch {
			case ch == q && q == '\'' && j+1 < len(line) && line[j+1] == '\'':
				b = append(b, '\'')
				j++
			case ch == q:
				r.afterValue(line[j+1:])
				r.i++
				return yamlValue{kind: 's', text: string(b)}
			case ch == '\\' && q == '"' && j+1 == len(line):
				escapedBreak = true
			case ch == '\\' && q == '"':
				t, size, ok := yamlEscape(line[j+1:])
				if !ok {
					r.fail("an escape YAML does not have or rpi does not read")
				}
				b = append(b, t...)
				j += size
			default:
				b = append(b, ch)
				if ch == ' ' || ch == '\t' {
					continue
				}
			}
			keep = len(b)
		}
		if !escapedBreak {
			b = b[:keep]
		}
		// An escaped line break goes on with the next line, blank or not;
		// otherwise the break folds: a space, or the blank lines' breaks.
		empty := 0
		for r.i++; !escapedBreak && r.i < len(r.lines) && strings.Trim(r.lines[r.i], " \t") == ""; r.i++ {
			empty++
		}
		if r.i == len(r.lines) {
			r.i--
			r.fail("a quote that does not close")
		}
		line = r.lines[r.i]
		n := len(line) - len(strings.TrimLeft(line, " "))
		if n <= parent && strings.Trim(line, " \t") != "" {
			r.fail("a quoted value's line not indented more than its key")
		}
		j = len(line) - len(strings.TrimLeft(line, " \t"))
		if empty == 0 && !escapedBreak {
			b = append(b, ' ')
		}
		b = append(b, strings.Repeat("\n", empty)...)
	}
}

// afterValue checks what follows a value on its line: nothing, or a
// comment after a space.
func (r *yamlReader) afterValue(s string) {
	t := strings.TrimLeft(s, " \t")
	if t != "" && (t[0] != '#' || len(t) == len(s)) {
		r.fail("text after a value")
	}
}

// blockScalar reads a | or > scalar whose header is at column c of the
// current line, a key's value, the key at column col.
func (r *yamlReader) blockScalar(c, col int) yamlValue {
	line := r.lines[r.i]
	folded := line[c] == '>'
	chomp, explicit := byte(0), 0
	h := c + 1
	for ; h < len(line) && h < c+3; h++ {
		if ch := line[h]; (ch == '-' || ch == '+') && chomp == 0 {
			chomp = ch
		} else if ch >= '1' && ch <= '9' && explicit == 0 {
			explicit = int(ch - '0')
		} else {
			break
		}
	}
	r.afterValue(line[h:])
	if explicit > 0 && col != 0 {
		r.fail("an indentation indicator on a nested block scalar is not read")
	}
	r.i++
	indent := explicit // with the key at column 0
	// Its lines: empty ones, and those indented at least as its first.
	var lines []string
	maxEmpty := 0
	for ; r.i < len(r.lines); r.i++ {
		l := r.lines[r.i]
		n := len(l) - len(strings.TrimLeft(l, " "))
		if r.blankEnd && r.i == len(r.lines)-1 && strings.Trim(l, " \t") == "" {
			// The last line, spaces without a "\n": pi's YAML drops it when
			// it is no longer than the indentation, and takes it as text
			// when it is; what it does otherwise is not known for certain.
			if indent == 0 && chomp == '+' || indent > 0 && n > indent && explicit > 0 || n < len(l) {
				r.fail("a block scalar ending in a line of spaces")
			}
			if indent == 0 || n <= indent {
				continue
			}
		}
		if n == len(l) { // spaces only
			if indent > 0 && n > indent {
				if explicit > 0 {
					r.fail("a line of spaces in a block scalar with an indentation indicator")
				}
				lines = append(lines, l[indent:]) // text of spaces
			} else {
				lines = append(lines, "")
				maxEmpty = max(maxEmpty, n)
			}
			continue
		}
		if indent == 0 {
			if l[n] == '\t' && strings.Trim(l, " \t") == "" {
				r.fail("a tab in a block scalar's blank line")
			}
			if n <= col {
				break
			}
			indent = n
			if maxEmpty > indent {
				r.fail("a block scalar's blank line indented more than its text")
			}
		}
		if n < indent {
			if strings.Trim(l, " \t") == "" {
				r.fail("a tab in a block scalar's blank line")
			}
			break
		}
		lines = append(lines, l[indent:])
	}
	// Lines at the end that are empty are trailing, for chomping.
	last := len(lines)
	for last > 0 && lines[last-1] == "" {
		last--
	}
	content, trailing := lines[:last], len(lines)-last
	var b strings.Builder
	prevNormal, empty := false, 0
	for k, l := range content {
		if l == "" {
			empty++
			continue
		}
		normal := l[0] != ' ' && l[0] != '\t'
		switch {
		case k-empty == 0: // the first text line: each empty line before is a line break
			b.WriteString(strings.Repeat("\n", empty))
		case !folded:
			b.WriteString(strings.Repeat("\n", empty+1))
		case prevNormal && normal && empty == 0:
			b.WriteByte(' ')
		case prevNormal && normal:
			b.WriteString(strings.Repeat("\n", empty))
		default:
			b.WriteString(strings.Repeat("\n", empty+1))
		}
		b.WriteString(l)
		prevNormal, empty = normal, 0
	}
	switch chomp {
	case '-':
	case '+':
		if last > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strings.Repeat("\n", trailing))
	default:
		if last > 0 {
			b.WriteByte('\n')
		}
	}
	return yamlValue{kind: 's', text: b.String()}
}

// flow reads a flow collection ([..] or {..}) at column c of the current
// line, over lines indented more than parent.
func (r *yamlReader) flow(c, parent int) {
	f := &flowReader{r: r, parent: parent, j: c}
	f.node()
	r.afterValue(r.lines[r.i][f.j:])
	r.i++
}

// flowReader reads a flow collection character by character.
type flowReader struct {
	r      *yamlReader
	parent int
	j      int // the column on the current line
}

// space moves past spaces, comments and line ends (to lines indented
// more than the parent); it says whether it moved.
func (f *flowReader) space() {
	r := f.r
	for {
		line := r.lines[r.i]
		start := f.j
		for f.j < len(line) && (line[f.j] == ' ' || line[f.j] == '\t') {
			f.j++
		}
		if f.j < len(line) && line[f.j] == '#' && (f.j > start || f.j == 0) {
			f.j = len(line)
		}
		if f.j < len(line) {
			return
		}
		if r.i++; r.i == len(r.lines) {
			r.i--
			r.fail("a [ or { that does not close")
		}
		next := r.lines[r.i]
		if n := len(next) - len(strings.TrimLeft(next, " ")); n <= f.parent && strings.Trim(next, " \t") != "" {
			r.fail("a flow collection's line not indented more than its key")
		}
		f.j = 0
	}
}

func (f *flowReader) peek() byte { return f.r.lines[f.r.i][f.j] }

// node reads one flow node; key says it is a flow mapping's key,
// whose text it returns.
func (f *flowReader) node() (key string) {
	r := f.r
	line := r.lines[r.i]
	switch ch := line[f.j]; ch {
	case '[', '{':
		r.enter()
		f.collection(ch)
		r.depth--
		return "\x00collection"
	case '"', '\'':
		text, n, closed := quotedOnLine(line[f.j:])
		if !closed {
			r.fail("a quoted value in [ ] or { } that is not on one line")
		}
		f.j += n
		return text
	}
	s := line[f.j:]
	if strings.ContainsAny(s[:1], ",]}#&*!|>%@`") || (strings.ContainsAny(s[:1], "-?:") && (len(s) == 1 || strings.ContainsAny(s[1:2], " \t,[]{}"))) {
		r.fail("a value in [ ] or { } starting with a character YAML does not allow or rpi does not read")
	}
	end := 0
	for ; end < len(s); end++ {
		ch := s[end]
		if strings.IndexByte(",[]{}", ch) >= 0 || (ch == '#' && (s[end-1] == ' ' || s[end-1] == '\t')) {
			break
		}
		if ch == ':' {
			if end+1 < len(s) && !strings.ContainsAny(s[end+1:end+2], " \t,]}") {
				r.fail("a ':' inside a value in [ ] or { } is not read")
			}
			break
		}
	}
	f.j += end
	text := strings.TrimRight(s[:end], " \t")
	if end == len(s) && r.i+1 < len(r.lines) {
		// A plain value going on to the next line is not read.
		next := strings.TrimLeft(r.lines[r.i+1], " \t")
		if next != "" && !strings.ContainsAny(next[:1], ",]}#:") {
			r.fail("a value in [ ] or { } over lines is not read")
		}
	}
	if v := plainValue(text); v.kind != 's' {
		return "\x00" + text
	}
	return text
}

// collection reads [..] or {..} after its opening character.
func (f *flowReader) collection(open byte) {
	r := f.r
	closer := byte(']')
	if open == '{' {
		closer = '}'
	}
	f.j++
	seen := map[string]bool{}
	for {
		f.space()
		if f.peek() == closer {
			f.j++
			return
		}
		k := f.node()
		f.space()
		if f.peek() == ':' {
			if open == '[' {
				r.fail("a key: value in [ ] is not read")
			}
			if strings.HasPrefix(k, "\x00") {
				r.fail("a key in { } that is not text")
			}
			f.j++
			f.space()
			if c := f.peek(); c != ',' && c != '}' {
				f.node()
				f.space()
			}
		} else if open == '{' && strings.HasPrefix(k, "\x00") {
			r.fail("a key in { } that is not text")
		}
		if open == '{' {
			if seen[k] {
				r.fail("a key given twice")
			}
			seen[k] = true
		}
		switch f.peek() {
		case ',':
			f.j++
		case closer:
			f.j++
			return
		default:
			r.fail("a [ ] or { } with text where ',' or its end should be")
		}
	}
}
