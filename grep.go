package main

// The model's grep tool, as fast as grep on a big tree: files are
// searched on every core while the tree is walked, a whole buffer at a
// time; a text every match must contain (the pattern's required literal)
// is looked for first, so the regexp only sees the lines that hold it; a
// pattern without one is run as a lazy DFA over the buffer (grep_dfa.go),
// so the regexp only sees the lines that match; binary files are left on
// their first bytes. The result keeps the
// walk's order and stops at the match limit, as a search one file after
// another would.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf8"
)

type grepCall struct {
	pattern, path, abs, glob string
	re, globRe               *regexp.Regexp
	literal                  []byte       // every match holds it (requiredLiteral); nil when none is known
	foldLiteral              bool         // in ASCII letters of either case: literal is in lower case
	prog                     *syntax.Prog // the regexp's program, for a lineDFA when there is no literal
	context, limit           int
	cost                     int // the size of the regexp's program: matching a line costs up to its length times this
}

// maxGrepContext is the most context lines shown around a match (more
// than the output, cut at maxOutputBytes, could show of short lines).
const maxGrepContext = 1000

// checkWork is how much matching (a line's length times the program's
// size, about 10-40 ns each) a search does between two looks at the
// abort; a line that costs more is matched through an abortableLine.
const checkWork = 1 << 24

var grepTool = &tool{
	name:    "grep",
	summary: "Search file contents for patterns (respects .gitignore)",
	description: "Search files for a regular expression (Go syntax), or literal text. Results are path:line: text, " +
		"with context lines as path-line- text. .git and what .gitignore lists are skipped.",
	schema: schema(`{
		"type": "object",
		"properties": {
			"pattern": {"type": "string", "description": "Regular expression, or text with literal"},
			"path": {"type": "string", "description": "Directory or file to search (default: the working directory)"},
			"glob": {
				"type": "string",
				"description": "Only files whose path matches this glob, e.g. *.go or src/**/*.ts"
			},
			"ignoreCase": {"type": "boolean"},
			"literal": {"type": "boolean", "description": "Treat pattern as plain text"},
			"context": {"type": "integer", "minimum": 0, "description": "Lines of context around each match"},
			"limit": {"type": "integer", "minimum": 1, "description": "Most matches (default 100)"}
		},
		"required": ["pattern"]
	}`),
	decode: func(s *session, raw json.RawMessage) (toolCall, error) {
		var a struct {
			Pattern, Path, Glob string
			IgnoreCase, Literal bool
			Context, Limit      int
		}
		if err := decodeChecked(raw, &a); err != nil {
			return nil, err
		}
		pattern := a.Pattern
		if a.Literal {
			pattern = regexp.QuoteMeta(pattern)
		}
		if a.IgnoreCase {
			pattern = "(?i)" + pattern
		}
		abs, pathErr := s.toolPath(a.Path)
		c := &grepCall{pattern: a.Pattern, path: a.Path, abs: abs, glob: a.Glob,
			context: min(a.Context, maxGrepContext), limit: cmpOrInt(a.Limit, 100)}
		var err error
		if c.re, err = regexp.Compile(pattern); err != nil {
			return nil, fmt.Errorf("invalid pattern: %v", err)
		}
		c.cost = 1
		if parsed, err := syntax.Parse(pattern, syntax.Perl); err == nil {
			if lit, fold := requiredLiteral(parsed.Simplify()); lit != "" {
				c.literal, c.foldLiteral = []byte(lit), fold
			}
			if prog, err := syntax.Compile(parsed.Simplify()); err == nil {
				c.cost = max(1, len(prog.Inst))
				if c.literal == nil {
					c.prog = prog
				}
			}
		}
		if a.Glob != "" {
			if c.globRe, err = globRegexp(a.Glob); err != nil {
				return nil, fmt.Errorf("invalid glob: %v", err)
			}
		}
		if pathErr != nil {
			return &pathFailed{"grep", a.Path, pathErr}, nil
		}
		return c, nil
	},
}

func (c *grepCall) describe() (string, string) {
	return "Allow grep in " + escapeControl(c.abs) + "?", "Search " + escapeControl(c.abs) + " for " + strconv.Quote(c.pattern)
}

// requiredLiteral is the longest text that every match of re contains,
// or "". A line without it cannot match, whatever else the pattern says.
// fold: the text's ASCII letters may be of either case in a match (and
// are given in lower case); only ASCII runes whose every case is ASCII
// are taken then, so that an ASCII search finds every match (not k and s,
// which the Kelvin sign and the long s fold to).
func requiredLiteral(re *syntax.Regexp) (literal string, fold bool) {
	switch re.Op {
	case syntax.OpLiteral:
		// U+FFFD also matches a byte that is not UTF-8, which a search for
		// its own three bytes would miss.
		if slices.Contains(re.Rune, utf8.RuneError) {
			return "", false
		}
		if re.Flags&syntax.FoldCase == 0 {
			return string(re.Rune), false
		}
		var run, longest []byte
		for i := 0; i <= len(re.Rune); i++ {
			if i < len(re.Rune) {
				// The rune itself ASCII: İ's lower case is i, yet the
				// ASCII search of a lowered line would not find İ there.
				if r := unicode.ToLower(re.Rune[i]); re.Rune[i] < utf8.RuneSelf && r != 'k' && r != 's' {
					run = append(run, byte(r))
					continue
				}
			}
			if len(run) > len(longest) {
				longest = run
			}
			run = nil
		}
		return string(longest), true
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiteral(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiteral(re.Sub[0])
		}
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if lit, f := requiredLiteral(sub); len(lit) > len(literal) || len(lit) == len(literal) && fold && !f {
				literal, fold = lit, f
			}
		}
		return literal, fold
	}
	return "", false
}

// grepFile is what one file gave: its lines of output, in order, each
// match with the context lines shown before it.
type grepFile struct {
	items []grepItem
}

// grepItem is a match line (with the context lines shown before it) or a
// context line after one.
type grepItem struct {
	before []string
	line   string
	match  bool
	cut    bool // a line of it was cut (grepShown)
}

// size is what the item's lines take in the output, a line break each.
func (item grepItem) size() int {
	n := len(item.line) + 1
	for _, b := range item.before {
		n += len(b) + 1
	}
	return n
}

// grepBatch is files to search, a few at a time (fewer hand-offs
// between goroutines); their results come on result, in order.
type grepBatch struct {
	files  []grepTarget
	result chan []grepFile
}

type grepTarget struct{ rel, path string }

// grepBatchFiles is how many files a batch holds.
const grepBatchFiles = 16

func (c *grepCall) run(ctx context.Context, s *session, _ toolRun) (toolResult, error) {
	search, stop := context.WithCancel(ctx)
	defer stop()
	// The walk hands the files, in batches, to the workers and, in the
	// same order, to this goroutine, which takes their results in that
	// order.
	jobs, inOrder := make(chan *grepBatch, 16), make(chan *grepBatch, 16)
	var walkErr error
	var ignoresCut bool
	var wg sync.WaitGroup
	var panicked helperPanic
	wg.Go(func() {
		defer close(jobs)
		defer close(inOrder)
		defer panicked.catch()
		batch := &grepBatch{result: make(chan []grepFile, 1)}
		// send hands the batch on, and starts the next. It goes to the
		// workers first: a batch this goroutine waits for has always been
		// given to them, and none is given twice.
		send := func() bool {
			full := batch
			batch = &grepBatch{result: make(chan []grepFile, 1)}
			for _, ch := range []chan *grepBatch{jobs, inOrder} {
				select {
				case ch <- full:
				case <-search.Done():
					return false
				}
			}
			return true
		}
		ignoresCut, walkErr = walk(search, c.abs, func(rel, path string, isDir, link bool) bool {
			// A symlink is passed over, as ripgrep does without --follow:
			// it may lead out of the project.
			if isDir || link || c.globRe != nil && !c.globRe.MatchString(rel) && !c.globRe.MatchString(filepath.Base(rel)) {
				return true
			}
			batch.files = append(batch.files, grepTarget{rel, path})
			return len(batch.files) < grepBatchFiles || send()
		})
		if len(batch.files) > 0 {
			send()
		}
	})
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			w := &grepWorker{fsKinds: map[uint64]string{}}
			for batch := range jobs {
				batch.result <- c.searchBatch(search, batch, w, &panicked, stop)
			}
		})
	}
	// Gathered until the limit, or until the output is longer than
	// listResult shows (it cuts at maxOutputBytes and says so).
	var out []string
	matches, cut, size, linesCut := 0, false, 0, false
	full := func() bool { return cut || size > maxOutputBytes+1 }
	for batch := range inOrder {
		for _, file := range <-batch.result {
			for _, item := range file.items {
				if item.match {
					if matches == c.limit {
						cut = true
						break
					}
					matches++
				}
				out = append(out, item.before...)
				out = append(out, item.line)
				linesCut = linesCut || item.cut
				if size += item.size(); full() {
					break
				}
			}
			if full() {
				break
			}
		}
		if full() {
			break
		}
	}
	stop()
	for range inOrder { // let the walk end
	}
	wg.Wait()
	panicked.raise()
	if ctx.Err() != nil {
		return toolResult{}, errors.New("Operation aborted")
	}
	if walkErr != nil && !full() { // stopping the walk is no error
		return toolResult{}, walkErr
	}
	var after []string
	if linesCut {
		after = append(after, fmt.Sprintf("Some lines truncated to %d chars. Use read tool to see full lines", maxGrepShown))
	}
	if ignoresCut {
		after = append(after, ignoresCutNote)
	}
	return listResult(out, "No matches found", cut,
		fmt.Sprintf("%d matches limit reached. Use limit=%d for more, or refine pattern", c.limit, 2*c.limit), after...), nil
}

// searchBatch searches a batch's files. A panic stops the search (stop)
// and is kept (panicked) for run to raise; the batch still gets its
// result, so that nothing waits for it forever.
func (c *grepCall) searchBatch(ctx context.Context, batch *grepBatch, w *grepWorker, panicked *helperPanic, stop func()) []grepFile {
	files := make([]grepFile, len(batch.files))
	defer func() {
		if p := recover(); p != nil {
			panicked.keep(p)
			stop()
		}
	}()
	for i, f := range batch.files {
		files[i] = c.searchFile(ctx, f.rel, f.path, w)
	}
	return files
}

// grepChunk is how much of a file is read at a time, and maxGrepLine
// how much of one line is searched: the rest of a longer one is skipped,
// so that memory stays bounded whatever the file.
const (
	grepChunk   = 256 << 10
	maxGrepLine = 8 << 20
)

// grepWorker is what a goroutine searching files keeps from one file to
// the next: its buffer, and what openScan learnt of file systems.
type grepWorker struct {
	buf     []byte
	lower   []byte // a chunk in lower case, for a literal of either case
	fsKinds map[uint64]string
	dfa     *lineDFA // made at the first chunk it can search
	noDFA   bool     // none would help (newLineDFA), or it passed its budget: lines are matched one by one
}

// searchFile searches one file, reading it into w.buf a chunk of whole
// lines at a time. It stops after limit+1 matches, all a search can use.
// Unreadable, binary (a NUL in its first 8000 bytes) and non-regular
// files give nothing.
func (c *grepCall) searchFile(ctx context.Context, rel, path string, w *grepWorker) grepFile {
	var file grepFile
	f, size, err := openScan(path, w.fsKinds)
	if err != nil {
		return file
	}
	defer f.Close()
	s := grepScan{ctx: ctx, c: c, w: w, rel: rel, file: &file, lineNo: 1}
	b := w.buf[:0]
	defer func() { w.buf = b[:0] }()
	checked, skipping := false, false // skipping: the rest of a line longer than maxGrepLine
	var read int64
	for eof := false; !eof && ctx.Err() == nil && !s.done; {
		b = slices.Grow(b, grepChunk)
		n, err := f.Read(b[len(b):cap(b)])
		b, read = b[:len(b)+n], read+int64(n)
		switch {
		case err == io.EOF || err == nil && read == size:
			eof = true // at its size, the end is taken as read
		case err != nil:
			return file
		case !checked && len(b) < 8000:
			continue // read on until 8000 bytes, or the end, can be checked
		}
		if !checked {
			if bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
				return grepFile{} // binary
			}
			checked = true
		}
		if skipping {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				b = b[:0]
				continue
			}
			b, skipping = b[:copy(b, b[i+1:])], false
			s.lineNo++
		}
		end := len(b)
		if !eof {
			end = bytes.LastIndexByte(b, '\n') + 1 // whole lines; the rest waits for more
			if end == 0 && len(b) >= maxGrepLine {
				s.lines(b[:maxGrepLine]) // searched as far as it is kept
				b, skipping = b[:0], true
				continue
			}
		}
		s.lines(b[:end])
		b = b[:copy(b, b[end:])]
	}
	return file
}

// grepScan searches a file's lines as they are read.
type grepScan struct {
	ctx     context.Context
	c       *grepCall
	w       *grepWorker
	rel     string
	file    *grepFile
	lineNo  int         // the number of the next line
	matches int         // in this file
	before  []shownLine // context lines that may show before the next match
	after   int         // context lines still to show after the last match
	done    bool        // limit+1 matches, more than the output shows, or aborted: nothing more can show
	work    int         // matching done since the abort was last looked at
	size    int         // of the items, as grepItem.size counts
}

// add keeps an item of the file's output; past maxOutputBytes of them,
// the rest of the file cannot show.
func (s *grepScan) add(item grepItem) {
	s.file.items = append(s.file.items, item)
	if s.size += item.size(); s.size > maxOutputBytes+1 {
		s.done = true
	}
}

// lines searches chunk: whole lines, each ended by "\n" but perhaps the
// last (the file's last, or the start of one too long); lineNo moves on
// past those ended by "\n".
func (s *grepScan) lines(chunk []byte) {
	switch c := s.c; {
	case c.context == 0 && c.literal != nil:
		s.linesWithLiteral(chunk)
	case c.context == 0 && c.prog != nil && !s.w.noDFA:
		if s.w.dfa == nil {
			if s.w.dfa = newLineDFA(c.prog); s.w.dfa == nil {
				s.w.noDFA = true
				s.eachLine(chunk)
				return
			}
			s.work += s.w.dfa.work
		}
		s.linesWithDFA(chunk)
	default:
		s.eachLine(chunk)
	}
}

// eachLine is lines that matches every line with the regexp.
func (s *grepScan) eachLine(chunk []byte) {
	for start := 0; start < len(chunk) && !s.done; {
		end := bytes.IndexByte(chunk[start:], '\n')
		if end < 0 {
			s.line(chunk[start:]) // not ended: lineNo stays
			return
		}
		s.line(chunk[start : start+end])
		s.lineNo++
		start += end + 1
	}
}

// linesWithLiteral is lines without context lines: it looks for the
// literal, and matches the regexp only on the lines that hold it.
func (s *grepScan) linesWithLiteral(chunk []byte) {
	haystack := chunk
	if s.c.foldLiteral {
		s.w.lower = asciiLower(s.w.lower[:0], chunk)
		haystack = s.w.lower // the same offsets as chunk
	}
	counted := 0 // lineNo counts the lines before chunk[counted:]
	for at := 0; at < len(chunk) && !s.done; {
		i := bytes.Index(haystack[at:], s.c.literal)
		if i < 0 {
			break
		}
		start := bytes.LastIndexByte(chunk[:at+i], '\n') + 1
		end := bytes.IndexByte(chunk[at+i:], '\n')
		if end < 0 {
			end = len(chunk)
		} else {
			end += at + i
		}
		s.lineNo += bytes.Count(chunk[counted:start], []byte("\n"))
		counted = start
		s.line(chunk[start:end])
		at = end + 1
	}
	s.lineNo += bytes.Count(chunk[counted:], []byte("\n"))
}

// asciiLower appends b with its ASCII letters in lower case.
func asciiLower(dst, b []byte) []byte {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// line handles line number s.lineNo: a match (with the context lines
// before it), a context line after one, or one kept in case a match
// follows.
func (s *grepScan) line(line []byte) {
	c := s.c
	// costly: matching the line costs more than checkWork, its length
	// times the program's size; asked by a division, as the product
	// passes a 32-bit int (8 MiB lines, programs of 256 instructions).
	costly, work := len(line) > checkWork/c.cost, checkWork
	if !costly {
		work = len(line) * c.cost
	}
	if s.work += work; s.work >= checkWork {
		s.work = 0
		if s.ctx.Err() != nil {
			s.done = true
			return
		}
	}
	var matched bool
	if !costly {
		matched = c.re.Match(line)
	} else {
		matched = c.re.MatchReader(&abortableLine{ctx: s.ctx, rest: line})
		if s.ctx.Err() != nil { // the line may have been ended early
			s.done = true
			return
		}
	}
	if matched {
		text, cut := grepShown(line)
		item := grepItem{match: true, line: fmt.Sprintf("%s:%d: %s", s.rel, s.lineNo, text), cut: cut}
		for i, b := range s.before {
			item.before = append(item.before, fmt.Sprintf("%s-%d- %s", s.rel, s.lineNo-len(s.before)+i, b.text))
			item.cut = item.cut || b.cut
		}
		s.add(item)
		s.before, s.after = nil, c.context
		if s.matches++; s.matches > c.limit {
			s.done = true
		}
		return
	}
	if s.after > 0 {
		text, cut := grepShown(line)
		s.add(grepItem{line: fmt.Sprintf("%s-%d- %s", s.rel, s.lineNo, text), cut: cut})
		s.after--
		return
	}
	if c.context > 0 {
		text, cut := grepShown(line)
		s.before = append(s.before, shownLine{text, cut})
		if len(s.before) > c.context {
			s.before = s.before[1:]
		}
	}
}

// maxGrepShown is the most of a line grep shows, in UTF-16 units as pi
// counts a line's characters.
const maxGrepShown = 500

// shownLine is a line as grep shows it, and whether it was cut.
type shownLine struct {
	text string
	cut  bool
}

// grepShown is a line as grep shows it: without the CR of a CRLF line
// end, and cut after maxGrepShown UTF-16 units, at a character's start
// (a byte that is not UTF-8 counts one, as the U+FFFD it is shown as),
// as pi 1.6 cuts it.
func grepShown(line []byte) (text string, cut bool) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) <= maxGrepShown {
		return string(line), false
	}
	units := 0
	for i := 0; i < len(line); {
		r, size := utf8.DecodeRune(line[i:])
		if units += utf16Units(r); units > maxGrepShown {
			return string(line[:i]) + "... [truncated]", true
		}
		i += size
	}
	return string(line), false
}

// abortableLine hands a line to the regexp rune by rune (as it reads a
// []byte: a byte that is not UTF-8 is U+FFFD of width 1), and ends it
// early once ctx ends, so that matching one long line with a costly
// pattern (minutes, for a program of thousands of instructions over a few
// MiB) stops at an abort.
type abortableLine struct {
	ctx  context.Context
	rest []byte
	read int
}

func (l *abortableLine) ReadRune() (rune, int, error) {
	if l.read++; l.read%4096 == 0 && l.ctx.Err() != nil {
		l.rest = nil
	}
	if len(l.rest) == 0 {
		return 0, 0, io.EOF
	}
	if c := l.rest[0]; c < utf8.RuneSelf {
		l.rest = l.rest[1:]
		return rune(c), 1, nil
	}
	r, size := utf8.DecodeRune(l.rest)
	l.rest = l.rest[size:]
	return r, size, nil
}
