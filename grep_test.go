package main

// The grep tool against a plain search, one file and one line after
// another, over a tree built to hit its corners: chunk boundaries, long
// lines, CRLF, a last line without "\n", empty and binary files.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// plainGrep is the grep tool's result the slow, obvious way: each file in
// the walk's order read whole, split into lines ("\n" ends a line; none
// follows the last one), every line matched.
func plainGrep(t *testing.T, root string, c *grepCall) string {
	var out []string
	matches, cut, linesCut, size := 0, false, false, 0
	add := func(lines []string, cut bool) {
		if size <= maxOutputBytes+1 {
			linesCut = linesCut || cut
		}
		for _, line := range lines {
			out = append(out, line)
			size += len(line) + 1
		}
	}
	walk(context.Background(), root, func(rel, path string, isDir, link bool) bool {
		if isDir || link || c.globRe != nil && !c.globRe.MatchString(rel) && !c.globRe.MatchString(filepath.Base(rel)) {
			return true
		}
		data, err := os.ReadFile(path)
		if err != nil || bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
			return true
		}
		lines := strings.Split(string(data), "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		// A line without its CR, cut past 500 UTF-16 units; linesCut
		// says one was, in what the tool gathers (until past 50 KB).
		shown := func(line string) (string, bool) {
			line = strings.TrimSuffix(line, "\r")
			units := 0
			for i, r := range line {
				if units += utf16Units(r); units > 500 {
					return line[:i] + "... [truncated]", true
				}
			}
			return line, false
		}
		type kept struct {
			text string
			cut  bool
		}
		var before []kept
		after := 0
		for i, line := range lines {
			n := i + 1
			if c.re.MatchString(line) {
				if matches == c.limit {
					cut = true
					return false
				}
				matches++
				var item []string
				text, cut := shown(line)
				for j, b := range before {
					item = append(item, fmt.Sprintf("%s-%d- %s", rel, n-len(before)+j, b.text))
					cut = cut || b.cut
				}
				before, after = nil, c.context
				add(append(item, fmt.Sprintf("%s:%d: %s", rel, n, text)), cut)
			} else if after > 0 {
				text, cut := shown(line)
				add([]string{fmt.Sprintf("%s-%d- %s", rel, n, text)}, cut)
				after--
			} else if c.context > 0 {
				text, cut := shown(line)
				if before = append(before, kept{text, cut}); len(before) > c.context {
					before = before[1:]
				}
			}
		}
		return true
	})
	var notices []string
	if linesCut {
		notices = append(notices, "Some lines truncated to 500 chars. Use read tool to see full lines")
	}
	return listResult(out, "No matches found", cut,
		fmt.Sprintf("%d matches limit reached. Use limit=%d for more, or refine pattern", c.limit, 2*c.limit), notices...).Content[0].Text
}

// TestGrepMatchesPlainSearch: the grep tool (files on every core, a
// literal looked for before the regexp, chunks of whole lines) gives
// exactly what plainGrep gives, for literals, regexps with and without
// a literal (a DFA, within its budget or past it), either case, context
// lines, limits and globs.
func TestGrepMatchesPlainSearch(t *testing.T) {
	t.Parallel()
	if raceDetector {
		t.Skip("29 searches of several MiB, each checked against a plain one: over 3 minutes of the race run, whose other grep tests run grep's goroutines; the plain run checks it")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"alpha", "Beta", "TODO", "todo", "ToDo", "task", "TASK", "Kelvin", "\u212aelvin", "straße", "é", "x", "", "func Read(", "SetDeadline", "x\u0130y", "xiy"}
	line := func() string {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(words[rng.IntN(len(words))] + " ")
		}
		return b.String()
	}
	files := map[string]string{
		"empty.txt":           "",
		"one.txt":             "TODO without a newline",
		"crlf.txt":            "TODO one\r\ntwo\r\nthree TODO\r\n",
		"blank.txt":           "\n\n\nTODO\n\n",
		"bin.dat":             "TODO\x00TODO\n",
		"late-nul.txt":        strings.Repeat("TODO padding\n", 700) + "\x00",
		"long.txt":            "TODO " + strings.Repeat("y", 3000) + " TODO\nshort TODO\n",
		"sub/deeper/a.go":     "package a\n// TODO: a\nfunc Read() {}\n",
		".gitignore":          "ignored/\n*.log\n",
		"ignored/hidden.txt":  "TODO hidden\n",
		"debug.log":           "TODO in a log\n",
		"sub/notes.md":        "# Notes\n- [ ] task\n- [x] TASK\n",
		"big/boundaries.txt":  "",
		"big/random.txt":      "",
		"big/huge-line.txt":   strings.Repeat("z", grepChunk+100) + "TODO\nafter TODO\n",
		"big/no-newlines.txt": strings.Repeat("TODO ", grepChunk/2),
	}
	var b strings.Builder
	for b.Len() < 3*grepChunk {
		b.WriteString(line() + "\n")
	}
	files["big/random.txt"] = b.String()
	// Lines for a DFA of 2^13 states, past its budget; most end in c.
	b.Reset()
	for b.Len() < 2*grepChunk {
		for range 1 + rng.IntN(100) {
			b.WriteByte("ab"[rng.IntN(2)])
		}
		if rng.IntN(20) > 0 {
			b.WriteString("c")
		}
		b.WriteString("\n")
	}
	files["big/ab.txt"] = b.String()
	// Lines with the literal around each chunk boundary.
	b.Reset()
	for b.Len() < 3*grepChunk+100 {
		if n := b.Len() % grepChunk; n > grepChunk-40 {
			b.WriteString("SetDeadline TODO\n")
		} else {
			b.WriteString("filler " + line() + "\n")
		}
	}
	files["big/boundaries.txt"] = b.String()
	s := toolServer(t, files)
	for _, args := range []string{
		`{"pattern":"TODO"}`,
		`{"pattern":"TODO","limit":100000}`,
		`{"pattern":"SetDeadline","limit":100000}`,
		`{"pattern":"todo","ignoreCase":true,"limit":100000}`,
		`{"pattern":"task","ignoreCase":true,"limit":100000}`,
		`{"pattern":"kelvin","ignoreCase":true,"limit":100000}`,
		`{"pattern":"STRASSE|straße","ignoreCase":true,"limit":100000}`,
		`{"pattern":"x\u0130y","ignoreCase":true,"limit":100000}`,
		`{"pattern":"func Read(","literal":true,"limit":100000}`,
		`{"pattern":"[A-Z][a-z]+ [a-z]+","limit":100000}`,
		`{"pattern":"^$","limit":100000}`,
		`{"pattern":"^TODO","limit":100000}`,
		`{"pattern":"TODO$","limit":100000}`,
		`{"pattern":"e","limit":100000}`,
		`{"pattern":"TODO","context":2,"limit":100000}`,
		`{"pattern":"task","context":1,"limit":5}`,
		`{"pattern":"TODO","limit":3}`,
		`{"pattern":"TODO","glob":"*.txt","limit":100000}`,
		`{"pattern":"TODO","path":"big/boundaries.txt","limit":100000}`,
		`{"pattern":"x+","path":"sub","limit":100000}`,
		`{"pattern":"nothing matches this"}`,
		`{"pattern":"[A-Z][a-z]{3}\\b","limit":100000}`,
		`{"pattern":"(?i)[k-t]{4}","limit":100000}`,
		`{"pattern":"\\bt\\w+|[éß]$","limit":100000}`,
		`{"pattern":"[^\\x00-\\x7f]","limit":100000}`,
		`{"pattern":"^[a-z]+ [A-Z]","limit":100000}`,
		`{"pattern":"(a|b)*[ad](a|b){12}$","limit":100000}`,
		`{"pattern":"(a|b)*[ad](a|b){12}$","limit":100000,"path":"big/ab.txt"}`,
		`{"pattern":"[A-Z]+","limit":10}`,
	} {
		call, err := grepTool.decode(s.session, json.RawMessage(args))
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		c := call.(*grepCall)
		want := plainGrep(t, c.abs, c)
		if got, _ := callTool(t, s, "grep", args); got != want {
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			t.Errorf("%s (literal %q): differs from a plain search at byte %d:\ngot  %.300q\nwant %.300q", args, c.literal, i, got[max(0, i-100):], want[max(0, i-100):])
		}
	}
}

// TestRequiredLiteral: the text a pattern's every match holds, in lower
// case when it may be of either case (never k or s then).
func TestRequiredLiteral(t *testing.T) {
	for pattern, want := range map[string]string{
		"SetDeadline":               "SetDeadline",
		`func \w+Reader\(`:          "Reader(",
		"(a|b)c+d":                  "c",
		"(?:foo)+bar?":              "foo",
		"x{2,}":                     "x",
		"a*":                        "",
		"foo|bar":                   "",
		"(?i)ToDo":                  "todo (either case)",
		"(?i)TaskList":              "ta (either case)",
		"(?i)Straße":                "tra (either case)",
		"(?i)x\u0130yz":             "yz (either case)",
		"\uFFFD":                    "",
		"[A-Z]{6}[0-9]{5}":          "",
		"prefix(?i:CASE)suffixlong": "suffixlong",
	} {
		lit, fold := requiredLiteral(mustParse(t, pattern))
		got := lit
		if fold {
			got += " (either case)"
		}
		if got != want && !(lit == "" && want == "") {
			t.Errorf("requiredLiteral(%q) = %q, want %q", pattern, got, want)
		}
		if _, err := regexp.Compile(pattern); err != nil {
			t.Fatal(err)
		}
	}
}

func mustParse(t *testing.T, pattern string) *syntax.Regexp {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	return re.Simplify()
}

// TestGrepHelperPanic: a panic in one of grep's goroutines (here: no
// regexp to match with) comes back on the goroutine that called the tool,
// where the tool's own recover turns it into an error result; nothing
// waits for the failed goroutine forever, and rpi goes on.
func TestGrepHelperPanic(t *testing.T) {
	s := toolServer(t, map[string]string{"a.txt": "x\n", "b/c.txt": "y\n"})
	c := &grepCall{abs: s.set.cwd, limit: 10}
	raised := make(chan any)
	go func() {
		defer func() { raised <- recover() }()
		c.run(context.Background(), s.session, toolRun{})
	}()
	select {
	case p := <-raised:
		if p == nil {
			t.Error("the panic was lost")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the search hung")
	}
	if got, _ := callTool(t, s, "grep", `{"pattern":"y"}`); got != "b/c.txt:1: y" {
		t.Errorf("grep after the panic: %q", got)
	}
}

// TestGrepAbort: an abort while the tree is searched ends the call with
// "Operation aborted", whenever it comes, and leaves nothing waiting.
func TestGrepAbort(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	for i := range 300 {
		files[fmt.Sprintf("d%d/f%d.txt", i%7, i)] = strings.Repeat("needle and hay\n", 50)
	}
	s := toolServer(t, files)
	for i := range 400 {
		// A literal, and a pattern without one (searched with a DFA).
		call, err := grepTool.decode(s.session, json.RawMessage([]string{`{"pattern":"needle","limit":100000}`, `{"pattern":"[mn][de][ef][de][kl][ef]","limit":100000}`}[i%2]))
		if err != nil || i%2 == 1 && call.(*grepCall).prog == nil {
			t.Fatalf("%v (or no program for a DFA)", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := call.run(ctx, s.session, toolRun{})
			done <- err
		}()
		time.Sleep(time.Duration(i/2%20) * 50 * time.Microsecond)
		cancel()
		select {
		case err := <-done:
			if err != nil && err.Error() != "Operation aborted" {
				t.Fatalf("aborted search: %v", err)
			}
		case <-time.After(10 * time.Second):
			buf := make([]byte, 1<<20)
			t.Fatalf("the search never ended after the abort (try %d)\n%s", i, buf[:runtime.Stack(buf, true)])
		}
	}
}

// lateAbort is a context that ends once its Err has been asked after more
// than n times: an abort that comes at a known point of the work.
type lateAbort struct {
	context.Context
	n int
}

func (c *lateAbort) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// TestGrepAbortInALine: an abort that comes while one long line is matched
// with a costly pattern (a program of 2,000 instructions: minutes for a
// few MiB, and one regexp match cannot be interrupted) stops the match:
// the line is handed to the regexp rune by rune (abortableLine), and the
// match at its end is not found. That way of matching finds what Match
// finds, byte for byte.
func TestGrepAbortInALine(t *testing.T) {
	s := toolServer(t, map[string]string{"f.txt": strings.Repeat("ab", 50_000) + "e\n"})
	call, err := grepTool.decode(s.session, json.RawMessage(`{"pattern":"(?:[a-c][a-d]){1000}[ef]"}`))
	if err != nil {
		t.Fatal(err)
	}
	c := call.(*grepCall)
	// Asked before each of the two reads, then before the line is matched
	// (by the regexp: the worker has no DFA).
	file := c.searchFile(&lateAbort{context.Background(), 3}, "f.txt", filepath.Join(s.set.cwd, "f.txt"), &grepWorker{fsKinds: map[uint64]string{}, noDFA: true})
	if len(file.items) != 0 {
		t.Errorf("the search went on after the abort and found %q", file.items[0].line)
	}

	rng := rand.New(rand.NewPCG(5, 6))
	pieces := []string{"a", "b", "é", "\xff", "\xe2\x82", " ", "_", "ab", "\u212a"}
	for _, pattern := range []string{"^a", "b$", `\bab\b`, "(?i)é+", "\uFFFD", ".", "(?:ab)+", "(?i)k", "^$", `\Ba`} {
		re := regexp.MustCompile(pattern)
		for range 2000 {
			var b strings.Builder
			for range rng.IntN(8) {
				b.WriteString(pieces[rng.IntN(len(pieces))])
			}
			line := []byte(b.String())
			if got, want := re.MatchReader(&abortableLine{ctx: context.Background(), rest: line}), re.Match(line); got != want {
				t.Fatalf("%q on %q: rune by rune %v, as bytes %v", pattern, line, got, want)
			}
		}
	}
}

// TestGrepAbortInALineCostingPastAnInt: a line whose length times the
// program's size passes 2^32 is matched rune by rune too, so an abort
// stops it (on a 32-bit system the product wrapped to a few thousand,
// and one Match of minutes could not be stopped).
func TestGrepAbortInALineCostingPastAnInt(t *testing.T) {
	s := toolServer(t, nil)
	call, err := grepTool.decode(s.session, json.RawMessage(`{"pattern":"(?:[a-c][a-d]){1000}[ef]"}`))
	if err != nil {
		t.Fatal(err)
	}
	c := call.(*grepCall)
	pairs := int((int64(1)<<32)/int64(c.cost)/2 + 1) // "ab" pairs: the line's cost just past 2^32
	path := filepath.Join(s.set.cwd, "f.txt")
	if err := os.WriteFile(path, []byte(strings.Repeat("ab", pairs)+"e\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		c.searchFile(ctx, "f.txt", path, &grepWorker{fsKinds: map[uint64]string{}, noDFA: true})
		close(done)
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Errorf("the search of a line costing %d × %d went on 10 s after the abort", 2*pairs, c.cost)
	}
}

// TestGrepGathersWhatShows: with a limit of 10^9, a file's search keeps
// only the lines the output can show (listResult cuts it at
// maxOutputBytes), not every match (515 MiB for a 53 KB result over Go's
// sources), and context is at most maxGrepContext lines (10^9 lines of
// context kept every line of a file that had no match).
func TestGrepGathersWhatShows(t *testing.T) {
	s := toolServer(t, map[string]string{"f.txt": strings.Repeat("match me\n", 100_000)})
	call, err := grepTool.decode(s.session, json.RawMessage(`{"pattern":"match","limit":1000000000,"context":1000000000}`))
	if err != nil {
		t.Fatal(err)
	}
	c := call.(*grepCall)
	if c.context != maxGrepContext {
		t.Errorf("context %d, want at most %d", c.context, maxGrepContext)
	}
	file := c.searchFile(context.Background(), "f.txt", filepath.Join(s.set.cwd, "f.txt"), &grepWorker{fsKinds: map[uint64]string{}})
	size := 0
	for _, item := range file.items {
		size += item.size()
	}
	if last := file.items[len(file.items)-1].size(); size > maxOutputBytes+1+last {
		t.Errorf("the file's search kept %d lines, %d bytes, for an output cut at %d", len(file.items), size, maxOutputBytes)
	}
	got, _ := callTool(t, s, "grep", `{"pattern":"match","limit":1000000000}`)
	if !strings.HasSuffix(got, "\n\n[50.0KB limit reached]") {
		t.Errorf("the result ends %q", got[max(0, len(got)-200):])
	}
	// Over many files, the walk stopped once the output is full is no error.
	files := map[string]string{}
	for i := range 400 {
		files[fmt.Sprintf("d%d/f%03d.txt", i%5, i)] = strings.Repeat("match me\n", 100)
	}
	tree := toolServer(t, files)
	for range 20 {
		if got, isError := callTool(t, tree, "grep", `{"pattern":"match","limit":1000000000}`); isError || !strings.HasSuffix(got, "\n\n[50.0KB limit reached]") {
			t.Fatalf("grep over 400 files: %.200q (isError %v)", got, isError)
		}
	}
}

// dfaScan runs text through grepScan.lines as searchFile would, in
// chunks of whole lines (cut after the line breaks numbered in cuts),
// with a worker whose DFA for pattern has the given budget. It returns
// the numbers of the lines handed to line, and the worker. With re
// matching every line, those are the lines the DFA found a match in.
func dfaScan(t testing.TB, pattern string, re *regexp.Regexp, text []byte, cuts []int, budget int) ([]int, *grepWorker) {
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		t.Fatal(err)
	}
	c := &grepCall{re: re, limit: 1 << 30, cost: len(prog.Inst)}
	w := &grepWorker{}
	c.prog = prog
	if w.dfa = newLineDFA(prog); w.dfa != nil {
		w.dfa.budget = budget
	}
	var file grepFile
	s := grepScan{ctx: context.Background(), c: c, w: w, rel: "f", file: &file, lineNo: 1}
	start, breaks := 0, 0
	for i, b := range text {
		if b == '\n' {
			breaks++
			if slices.Contains(cuts, breaks) {
				s.lines(text[start : i+1])
				start = i + 1
			}
		}
	}
	s.lines(text[start:])
	if s.done {
		t.Fatalf("%q: more output than a search shows", pattern)
	}
	var lineNos []int
	for _, item := range file.items {
		n, _, _ := strings.Cut(strings.TrimPrefix(item.line, "f:"), ":")
		no, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("item %q", item.line)
		}
		lineNos = append(lineNos, no)
	}
	return lineNos, w
}

// matchingLines is the numbers of text's lines that re matches, each
// line alone ("\n" ends a line; none follows the last one).
func matchingLines(re *regexp.Regexp, text []byte) []int {
	lines := bytes.Split(text, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	var lineNos []int
	for i, line := range lines {
		if re.Match(line) {
			lineNos = append(lineNos, i+1)
		}
	}
	return lineNos
}

// checkDFA: for pattern over text, the lines the DFA finds a match in
// are those re.Match says match, line by line, whole or in chunks; and
// so are the lines the search shows when its DFA's budget is too small
// (it goes on matching each line with the regexp, from where it was).
func checkDFA(t testing.TB, pattern string, text []byte, cuts []int, budget int) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return
	}
	want := matchingLines(re, text)
	if got, _ := dfaScan(t, pattern, regexp.MustCompile(""), text, cuts, maxDFABytes); !slices.Equal(got, want) {
		t.Fatalf("%q on %q (cut after the line breaks %v): the DFA found matches in lines %v, the regexp in %v", pattern, text, cuts, got, want)
	}
	if got, _ := dfaScan(t, pattern, re, text, cuts, budget); !slices.Equal(got, want) {
		t.Fatalf("%q on %q (cut after the line breaks %v), budget %d: the search found lines %v, the regexp %v", pattern, text, cuts, budget, got, want)
	}
}

// grepDFAPatternPieces and grepDFATextPieces are what FuzzGrepDFA builds
// patterns and texts of, a byte a piece: ASCII and not, word characters
// and not, case folding (the Kelvin sign folds to k, ſ to s), bytes that
// are not UTF-8, anchors, classes, repetition and alternation.
var (
	grepDFAPatternPieces = []string{"a", "b", "k", "A", "é", "\u212a", "ß", "_", " ", ".", "[a-c]", "[^a]", `\w`, `\W`, `\d`, `\s`,
		`\pL`, "[[:upper:]]", `\x{FFFD}`, "(?i)", "(?m)", "(?s)", "(?U)", "^", "$", `\A`, `\z`, `\b`, `\B`, "*", "+", "?",
		"{2}", "{0,3}", "*?", "|", "(", ")", "(?:", "x", "0", "[é-ü]", `\n`, "(?i:k)"}
	grepDFATextPieces = []string{"a", "b", "A", "k", "K", "é", "É", "\u212a", "ß", "ſ", "_", " ", "\n", "\r", "\xff", "\xe2\x82",
		"0", "x", "\u0130", "ab", "\n\n", "\t", "ü"}
)

// FuzzGrepDFA: the lines the grep tool's DFA finds a match in are those
// regexp's Match finds one in, line by line, for patterns and texts made
// of the pieces above (each byte picks one), in chunks cut where cut
// says, with a full budget and with one of a few bytes to a few states.
func FuzzGrepDFA(f *testing.F) {
	for _, seed := range []struct{ pattern, text string }{
		{"\x00\x01*", "\x00\x01\x0c\x01\x02"},
		{"\x18\x00\x19", "\x00\x0c\x0c\x01"},
		{"\x1c\x00\x1c\x0d\x1c", "\x00\x0b\x0c\x05\x0c"},
		{"\x13\x02", "\x04\x0c\x03\x0c\x07"},
		{"\x17\x16\x00", "\x10\x0c\x12\x0c"},
	} {
		f.Add([]byte(seed.pattern), []byte(seed.text), uint16(0x0102))
	}
	f.Fuzz(func(t *testing.T, pieces, textPieces []byte, cut uint16) {
		if len(pieces) > 24 || len(textPieces) > 200 {
			return
		}
		var pattern strings.Builder
		for _, b := range pieces {
			pattern.WriteString(grepDFAPatternPieces[int(b)%len(grepDFAPatternPieces)])
		}
		var text []byte
		for _, b := range textPieces {
			text = append(text, grepDFATextPieces[int(b)%len(grepDFATextPieces)]...)
		}
		cuts := []int{int(cut & 0xf), int(cut >> 4 & 0xf)}
		checkDFA(t, pattern.String(), text, cuts, int(cut>>8)*dfaStateBytes/16)
	})
}

// TestGrepDFA: the DFA against the regexp on the cases most likely to
// part them (see checkDFA), each pattern over every text, whole and cut
// in chunks, with a full budget and with room for none to a few states.
func TestGrepDFA(t *testing.T) {
	patterns := []string{
		"^$", "$", "^", "a*", "x?", `\b`, `\B`, `\bab\b`, `\Ba`, `a\b`, `é\b`, `\bé`, `\B\x{FFFD}`, "(?i)k", "(?i)K+$", "(?i)ß",
		"(?i)ſ", `\x{FFFD}`, "[^a]", ".", "^.$", "(?s).", "(?m)^a$", "(?m)^", "(?m)$b", `\Aa`, `a\z`, `^\z`, `\A$`, "^foo",
		"foo$", "^(foo|ab)", "x$|^a", "é+$", "[é-ü]{2}", "[A-Z]{6}[0-9]{5}", "(a|b)*a(a|b){3}", "(?U)a+?b", "a{0}", "(|a)b",
		`^\b`, `\b$`, "$^", `$\b^`, `$\B`, `\b\B`, `(?:^|_)x`, `[\x{80}-\x{10FFFF}]`, `\pL\PL`, "\r$", `(?i)\x{212a}`, `\n|a`, "[^\n]b",
	}
	texts := []string{
		"", "\n", "\n\n", "a", "a\n", "ab\nba\n", "foo\nxfoo\nfoo", "x\r\n\r\nk\r\n", "\u212a\nK\nk\n", "é\néa\naé\n",
		"\xff\n\xe2\x82\na\xffb\n\xef\xbf\xbd\n", "ABCDEF12345\nABCDE12345\nxABCDEFG123456\n", "ſ\nS\nß\nẞ\nSS\n",
		"ab ab\n_ab\nab_\n", "babaa\naaaa\nbbbb\nabbb", "x\n_x\n__x\ny_x", "foo", "\n\na", "ab\n\nb\n",
	}
	for _, pattern := range patterns {
		for _, text := range texts {
			for _, cuts := range [][]int{nil, {1}, {1, 2}, {2, 3}} {
				for _, budget := range []int{maxDFABytes, 0, dfaStateBytes + 20, 3 * dfaStateBytes} {
					checkDFA(t, pattern, []byte(text), cuts, budget)
				}
			}
		}
	}
}

// TestGrepDFABudget: a pattern whose DFA needs more states than its
// budget (2^13 for lines of random a and b) still gives every match:
// past the budget, the worker matches each line with the regexp.
func TestGrepDFABudget(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var text []byte
	for range 1000 {
		for range 13 + rng.IntN(30) {
			text = append(text, "ab"[rng.IntN(2)])
		}
		text = append(text, '\n')
	}
	pattern := "^(a|b)*a(a|b){12}$"
	re := regexp.MustCompile(pattern)
	got, w := dfaScan(t, pattern, re, text, []int{1000, 2000}, maxDFABytes)
	if !w.noDFA {
		t.Errorf("%q: the DFA kept within its budget", pattern)
	}
	if want := matchingLines(re, text); !slices.Equal(got, want) || len(want) == 0 {
		t.Errorf("%q: %d lines found, the regexp matches %d", pattern, len(got), len(want))
	}
}

// TestGrepDFASetupWithinCheckWork: making a DFA's first states looks at
// no abort, so a program too big for that to stay within checkWork (a
// 19 KB pattern of a million instructions) gets no DFA: its lines go to
// the regexp, which stops at an abort.
func TestGrepDFASetupWithinCheckWork(t *testing.T) {
	for _, pattern := range []string{"[A-Z]{6}[0-9]{5}", strings.Repeat("(?:(?:)|(?:)){1000}", 1000) + "[A-Z]"} {
		parsed, err := syntax.Parse(pattern, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		prog, _ := syntax.Compile(parsed.Simplify())
		if d := newLineDFA(prog); d != nil && d.work > checkWork {
			t.Errorf("making the DFA of a %d-instruction program did %d work, %.1f times checkWork, without a look at the abort",
				len(prog.Inst), d.work, float64(d.work)/checkWork)
		} else if d == nil && len(prog.Inst) < 100 {
			t.Errorf("no DFA for %q", pattern)
		}
	}
}
