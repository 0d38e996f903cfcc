package main

// The file tools: read, write, ls and find, and the walk they share with
// grep (.gitignore and globs). edit is in edit.go, grep in grep.go; the
// file a write or edit changes is opened through filetarget.go.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxImageBytes is the largest image read returns.
const maxImageBytes = 20 << 20

type readCall struct {
	path, abs     string
	offset, limit int // limit -1: none
}

var readTool = &tool{
	name:    "read",
	strict:  true,
	summary: "Read file contents",
	description: "Read a file. Text comes back as lines (at most 2000 lines or 50KB at a time; use offset and limit to page " +
		"through long files). Images (png, jpeg, gif, webp) come back as images.",
	schema: schema(`{
		"type": "object",
		"properties": {
			"path": {"type": "string", "description": "File to read, relative to the working directory or absolute"},
			"offset": {"type": "integer", "description": "First line to read, from 1"},
			"limit": {"type": "integer", "description": "How many lines to read"}
		},
		"required": ["path"]
	}`),
	decode: func(s *session, raw json.RawMessage) (toolCall, error) {
		var a struct {
			Path   string
			Offset int
			Limit  *int
		}
		err := decodeChecked(raw, &a)
		limit := -1 // none given, or a negative one: none
		if a.Limit != nil && *a.Limit >= 0 {
			limit = *a.Limit // 0 too: no line, as pi reads it
		}
		abs, perr := s.toolPath(a.Path)
		if perr != nil && err == nil {
			return &pathFailed{"read", a.Path, perr}, nil
		}
		return &readCall{a.Path, abs, a.Offset, limit}, err
	},
}

func (c *readCall) describe() (string, string) {
	return "Allow read of " + escapeControl(c.path) + "?", "Read " + escapeControl(c.abs)
}

func (c *readCall) run(ctx context.Context, s *session, r toolRun) (toolResult, error) {
	checkCallout("the session's files")
	f, err := s.files.open(ctx, c.abs)
	if err != nil {
		return toolResult{}, fileError("read", c.abs, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(16)
	if mime := imageType(head); mime != "" {
		data, err := io.ReadAll(io.LimitReader(br, maxImageBytes+1))
		if err != nil {
			return toolResult{}, fileError("read", c.abs, err)
		}
		if len(data) > maxImageBytes {
			return toolResult{}, fmt.Errorf("Cannot read %s: the image is larger than %s", c.abs, formatSize(maxImageBytes))
		}
		return imageResult(contentBlock{Type: "image", Data: base64.StdEncoding.EncodeToString(data), MimeType: mime}, !s.set.keepImageSize, r.images), nil
	}
	start := max(c.offset, 1) - 1
	limit := c.limit
	if limit > math.MaxInt-start {
		limit = -1 // past any file's end: no limit (start+limit would wrap)
	}
	lr := &lineReader{ctx: ctx, br: br, keep: maxOutputBytes + 1}
	var shown []string
	total, size, firstLength := 0, 0, 0
	cut, byBytes := false, false
	for {
		line, length, ok, err := lr.next()
		if ctx.Err() != nil {
			return toolResult{}, errors.New("Operation aborted")
		}
		if err != nil {
			return toolResult{}, fileError("read", c.abs, err)
		}
		if !ok {
			break
		}
		if total >= start && (limit < 0 || total < start+limit) && !cut {
			if total == start {
				firstLength = length
			}
			switch {
			case len(shown) == maxOutputLines:
				cut = true
			case size+length > maxOutputBytes:
				cut, byBytes = true, true
			default:
				shown = append(shown, string(line))
				size += length + 1
			}
		}
		total++
		if total%4096 == 0 && ctx.Err() != nil {
			return toolResult{}, errors.New("Operation aborted")
		}
	}
	if start >= total {
		return toolResult{}, fmt.Errorf("Offset %d is beyond end of file (%d lines total)", c.offset, total)
	}
	end := total
	if limit >= 0 {
		end = min(start+limit, total)
	}
	if len(shown) == 0 && end > start { // a first line past the byte limit; limit 0 shows none
		return textResult(fmt.Sprintf("[Line %d is %s, exceeds %s limit. Use bash: sed -n '%dp' %s | head -c %d]",
			start+1, formatSize(firstLength), formatSize(maxOutputBytes), start+1, c.path, maxOutputBytes)), nil
	}
	text := strings.Join(shown, "\n")
	last := start + len(shown)
	switch {
	case len(shown) < end-start:
		limit := ""
		if byBytes {
			limit = fmt.Sprintf(" (%s limit)", formatSize(maxOutputBytes))
		}
		text += fmt.Sprintf("\n\n[Showing lines %d-%d of %d%s. Use offset=%d to continue.]", start+1, last, total, limit, last+1)
	case end < total:
		text += fmt.Sprintf("\n\n[%d more lines in file. Use offset=%d to continue.]", total-end, end+1)
	}
	return textResult(text), nil
}

// imageResult is read's result for an image file, made to fit
// (fitImage, to lim) as pi's read makes it: "Read image file [type]",
// with the hint of an image scaled on the next line; for an image past a
// limit that does not decode, pi's note in its place. Unless fit, it is the
// image as it is (settings.json images.autoResize false).
func imageResult(img contentBlock, fit bool, lim imageLimits) toolResult {
	text := "Read image file [" + img.MimeType + "]"
	if !fit {
		return toolResult{Content: []contentBlock{{Type: "text", Text: text}, img}}
	}
	scaled, hint, how := fitImage(img, lim)
	switch how {
	case imageScaled:
		img, text = scaled, "Read image file ["+scaled.MimeType+"]\n"+hint
	case imageBroken:
		return textResult(text + "\n" + imageOmitted)
	}
	return toolResult{Content: []contentBlock{{Type: "text", Text: text}, img}}
}

// imageDataWanted is what an image's data must be (base64Image), as a
// field error says it.
const imageDataWanted = "base64 data of a PNG, JPEG, GIF or WebP image"

// base64Image is base64 data as an image a model takes: its bytes a
// PNG, JPEG, GIF or WebP, typed as they are (not as anyone says), the
// base64 in one piece. A model's API refuses an image whose bytes are not
// of its stated type, and one kept in the conversation fails every later
// request; ok is false for data that is no such image.
func base64Image(data string) (img contentBlock, ok bool) {
	decoded, err := base64.StdEncoding.DecodeString(data)
	kind := imageType(decoded)
	if err != nil || kind == "" {
		return contentBlock{}, false
	}
	return contentBlock{Type: "image", Data: base64.StdEncoding.EncodeToString(decoded), MimeType: kind}, true
}

// imageType recognises an image by its first bytes.
func imageType(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")):
		return "image/jpeg"
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return "image/gif"
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// ---- write ----

type writeCall struct {
	path, abs, content string
	target             changeTarget // what prepare opened
	where              string       // where the path leads, for the dialog
	existed            bool         // the file existed when prepare opened it
	before             []byte       // what it held, when prepare could read it
}

var writeTool = &tool{
	name:        "write",
	strict:      true,
	summary:     "Create or overwrite files",
	description: "Write a file with the given content, creating it and its parent directories, or replacing it.",
	schema: schema(`{
		"type": "object",
		"properties": {
			"path": {"type": "string", "description": "File to write"},
			"content": {"type": "string", "description": "The whole new content"}
		},
		"required": ["path", "content"]
	}`),
	decode: func(s *session, raw json.RawMessage) (toolCall, error) {
		var a struct{ Path, Content string }
		err := decodeChecked(raw, &a)
		abs, perr := s.toolPath(a.Path)
		if perr != nil && err == nil {
			return &pathFailed{"write", a.Path, perr}, nil
		}
		return &writeCall{path: a.Path, abs: abs, content: a.Content}, err
	},
}

// prepare opens the file, or the folder a new one will be made in, and
// reads what an existing file holds (for change; a file it cannot read,
// or larger than maxEditBytes, is still written).
func (c *writeCall) prepare(ctx context.Context, s *session) error {
	checkCallout("the session's files")
	target, err := s.files.target(ctx, c.path, c.abs, true)
	if err != nil {
		return fileError("write", c.path, err)
	}
	c.target, c.where, c.existed = target, target.where(), target.exists()
	if c.existed && target.size() <= maxEditBytes {
		c.before, _ = target.read(ctx, maxEditBytes)
	}
	return nil
}

// change is the file as prepare found it and as the call writes it.
func (c *writeCall) change() fileChange {
	return fileChange{path: c.abs, existed: c.existed, before: c.before, after: []byte(c.content), where: c.where}
}

func (c *writeCall) release() {
	if c.target != nil {
		c.target.close()
	}
}

func (c *writeCall) describe() (string, string) {
	what := "create it"
	if c.existed {
		what = fmt.Sprintf("replace its %d bytes", c.target.size())
	}
	return "Allow write to " + escapeControl(c.path) + "?",
		fmt.Sprintf("Write %d bytes to %s%s (%s):\n%s", len(c.content), escapeControl(c.path), c.where, what, showText("+ ", c.content))
}

func (c *writeCall) run(ctx context.Context, s *session, _ toolRun) (toolResult, error) {
	if ctx.Err() != nil {
		return toolResult{}, errors.New("Operation aborted")
	}
	if err := c.target.write(ctx, "write", nil, []byte(c.content)); err != nil {
		return toolResult{}, err
	}
	res := textResult(fmt.Sprintf("Successfully wrote %d bytes to %s", len(c.content), c.path))
	change := c.change()
	res.change = &change
	return res, nil
}

// cutMiddle cuts text, longer than shown bytes, to its first and last
// half of shown (at rune starts) and says how many bytes lie between.
func cutMiddle(text string, shown int) (head string, hidden int, tail string) {
	h, t := shown/2, len(text)-shown/2
	for h > 0 && !utf8RuneStart(text[h]) {
		h--
	}
	for t < len(text) && !utf8RuneStart(text[t]) {
		t++
	}
	return text[:h], t - h, text[t:]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// ---- ls ----

type lsCall struct {
	path, abs string
	limit     int
}

var lsTool = &tool{
	name:        "ls",
	summary:     "List directory contents",
	description: "List a directory, sorted by name; directories end with /. Dotfiles are included.",
	schema: schema(`{
		"type": "object",
		"properties": {
			"path": {"type": "string", "description": "Directory (default: the working directory)"},
			"limit": {"type": "integer", "minimum": 1, "description": "Most entries to list (default 500)"}
		}
	}`),
	decode: func(s *session, raw json.RawMessage) (toolCall, error) {
		var a struct {
			Path  string
			Limit int
		}
		err := decodeChecked(raw, &a)
		abs, perr := s.toolPath(a.Path)
		if perr != nil && err == nil {
			return &pathFailed{"ls", a.Path, perr}, nil
		}
		return &lsCall{a.Path, abs, cmpOrInt(a.Limit, 500)}, err
	},
}

func (c *lsCall) describe() (string, string) {
	return "Allow ls of " + escapeControl(c.abs) + "?", "List " + escapeControl(c.abs)
}

func (c *lsCall) run(ctx context.Context, s *session, _ toolRun) (toolResult, error) {
	info, err := os.Stat(c.abs)
	switch {
	case err != nil:
		return toolResult{}, fmt.Errorf("Path not found: %s", c.abs)
	case !info.IsDir():
		return toolResult{}, fmt.Errorf("Not a directory: %s", c.abs)
	}
	entries, err := os.ReadDir(c.abs)
	if err != nil {
		return toolResult{}, fmt.Errorf("Cannot read directory: %v", unwrapPathError(err))
	}
	sortAsPi(entries, fs.DirEntry.Name) // by name alone: dir/ before dir-x/, as in pi
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
		if isDirEntry(c.abs, e) {
			names[i] += "/"
		}
	}
	return listResult(names[:min(c.limit, len(names))], "(empty directory)", len(names) > c.limit,
		fmt.Sprintf("%d entries limit reached. Use limit=%d for more", c.limit, 2*c.limit)), nil
}

// isDirEntry reports whether the entry of dir is a directory, or a
// symlink that leads to one (as the model reaches it through that name).
func isDirEntry(dir string, e fs.DirEntry) bool {
	if e.Type()&fs.ModeSymlink == 0 {
		return e.IsDir()
	}
	info, err := os.Stat(filepath.Join(dir, e.Name()))
	return err == nil && info.IsDir()
}

func cmpOrInt(n, otherwise int) int {
	if n > 0 {
		return n
	}
	return otherwise
}

// ---- walking, globs and .gitignore ----

// globRegexp turns a glob into a regexp: * and ? stay within a path
// segment, ** crosses segments, {a,b} is either, [a-z] and [!a-z] are a
// character of those or not, and a backslash makes the next character
// itself (but on Windows).
func globRegexp(glob string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	depth := 0
	for i := 0; i < len(glob); i++ {
		c := glob[i]
		switch {
		case strings.HasPrefix(glob[i:], "**/"):
			b.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(glob[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '{':
			b.WriteString("(?:")
			depth++
		case c == '}' && depth > 0:
			b.WriteString(")")
			depth--
		case c == ',' && depth > 0:
			b.WriteString("|")
		case c == '\\' && i+1 < len(glob) && globEscapes:
			_, size := utf8.DecodeRuneInString(glob[i+1:])
			b.WriteString(regexp.QuoteMeta(glob[i+1 : i+1+size]))
			i += size
		case c == '[':
			end := globClassEnd(glob, i)
			if end < 0 {
				b.WriteString(`\[`)
				continue
			}
			writeGlobClass(&b, glob[i+1:end])
			i = end
		default: // a character, whole: not its first byte as a character of its own
			_, size := utf8.DecodeRuneInString(glob[i:])
			b.WriteString(regexp.QuoteMeta(glob[i : i+size]))
			i += size - 1
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// globEscapes says a backslash in a glob makes the next character itself:
// not on Windows, where it separates folders.
const globEscapes = filepath.Separator == '/'

// globClassEnd is where the class that opens at glob[open] ends (its ]),
// or -1 when it does not: a ] first in the class, after a ! or ^ that
// negates it, or after a backslash, is one of its characters.
func globClassEnd(glob string, open int) int {
	i := open + 1
	if i < len(glob) && (glob[i] == '!' || glob[i] == '^') {
		i++
	}
	if i < len(glob) && glob[i] == ']' {
		i++
	}
	for ; i < len(glob); i++ {
		switch {
		case glob[i] == '\\' && globEscapes:
			i++ // the next character is itself
		case glob[i] == ']':
			return i
		}
	}
	return -1
}

// writeGlobClass writes a glob's class (what is between its brackets) as
// a regexp's: [!a-z] or [^a-z] is any character but those, every other
// character is itself, but - between two, which makes a range, and a
// backslash, which makes the next character itself (but on Windows). No
// class matches /, as in git: a / in it, or in one of its ranges, is left
// out.
func writeGlobClass(b *strings.Builder, class string) {
	negated := false
	if rest, ok := strings.CutPrefix(class, "!"); ok {
		class, negated = rest, true
	} else if rest, ok := strings.CutPrefix(class, "^"); ok {
		class, negated = rest, true
	}
	type member struct {
		char    rune
		escaped bool // after a backslash: itself, never a range's -
	}
	var members []member
	for i := 0; i < len(class); {
		escaped := class[i] == '\\' && globEscapes && i+1 < len(class)
		if escaped {
			i++
		}
		r, size := utf8.DecodeRuneInString(class[i:])
		members = append(members, member{r, escaped})
		i += size
	}
	var ranges strings.Builder // the class's characters and ranges, / left out
	add := func(lo, hi rune) { fmt.Fprintf(&ranges, `\x{%x}-\x{%x}`, lo, hi) }
	for i := 0; i < len(members); i++ {
		lo, hi := members[i].char, members[i].char
		if i+2 < len(members) && members[i+1].char == '-' && !members[i+1].escaped {
			hi = members[i+2].char
			i += 2
		}
		if lo > '/' || hi < '/' {
			add(lo, hi) // a range backwards stays one: the regexp refuses it
			continue
		}
		if lo < '/' {
			add(lo, '/'-1)
		}
		if hi > '/' {
			add('/'+1, hi)
		}
	}
	switch {
	case negated:
		b.WriteString("[^/" + ranges.String() + "]")
	case ranges.Len() == 0: // [/]: no character
		b.WriteString(`[^\x00-\x{10ffff}]`)
	default:
		b.WriteString("[" + ranges.String() + "]")
	}
}

// ignoreRule is one pattern of a .gitignore: the walk's root's, or one
// of a folder above it in the same git repository.
type ignoreRule struct {
	re       *regexp.Regexp
	anchored bool // contains a slash: matched against the path from the .gitignore's folder
	dirOnly  bool
	prefix   string // the path from the .gitignore's folder to the walk's root, with a final /; "" for the root's own
}

// maxToolIgnoreRules bounds the rules grep and find read from the
// .gitignore files of one walk, as maxIgnoreRuleBytes each rule and
// maxIgnoreBytes the files all told: a project's .gitignore may be any
// file, and each rule is a regexp every entry is tested against (1 MiB
// of short rules was 140,000 of them, 216 MiB, at every call). Past them
// the rest are not followed, and the result says so.
const maxToolIgnoreRules = 4096

// ignoresCutNote ends a grep or find result whose walk left rules unread
// (maxToolIgnoreRules, maxIgnoreRuleBytes, maxIgnoreBytes as formatSize
// writes it).
const ignoresCutNote = "Rules of .gitignore files past the first 4096, longer than 1024 bytes, or past 1.0MB of them were not followed"

// loadIgnores reads the .gitignore of root and, when root is in a git
// repository, those of the folders above it up to the repository's top
// (the folder that holds .git), as git and ripgrep take them: a search
// of a subfolder skips what the project's .gitignore lists. cut says
// rules were left unread (maxToolIgnoreRules and the bounds with it).
func loadIgnores(root string) (rules []ignoreRule, cut bool) {
	var above []string // the folders above root, up to the repository's top
	for dir := root; ; {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			above = nil // not in a git repository: the root's own only
			break
		}
		above, dir = append(above, parent), parent
	}
	read := 0 // the bytes of .gitignore files read (maxIgnoreBytes)
	rules, cut = loadIgnore(root, "", nil, &read)
	for _, dir := range above {
		rel, err := filepath.Rel(dir, root)
		if err == nil {
			var c bool
			rules, c = loadIgnore(dir, filepath.ToSlash(rel)+"/", rules, &read)
			cut = cut || c
		}
	}
	return rules, cut
}

// loadIgnore adds to rules those of the .gitignore in dir (negations are
// not supported), for the walk's root at prefix below it, within the
// bounds; cut says some were left.
func loadIgnore(dir, prefix string, rules []ignoreRule, read *int) ([]ignoreRule, bool) {
	data, err := readIgnoreFile(filepath.Join(dir, ".gitignore"), maxIgnoreBytes-*read)
	if err != nil {
		return rules, err == errIgnoreBytes
	}
	*read += len(data)
	cut := false
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "!") {
			continue
		}
		if len(rules) >= maxToolIgnoreRules || len(line) > maxIgnoreRuleBytes {
			cut = true
			continue
		}
		rule := ignoreRule{dirOnly: strings.HasSuffix(line, "/"), prefix: prefix}
		line = strings.TrimSuffix(line, "/")
		rule.anchored = strings.Contains(line, "/")
		if re, err := globRegexp(strings.TrimPrefix(line, "/")); err == nil {
			rule.re = re
			rules = append(rules, rule)
		}
	}
	return rules, cut
}

func ignoredBy(rules []ignoreRule, rel string, isDir bool) bool {
	for _, r := range rules {
		if r.dirOnly && !isDir {
			continue
		}
		if r.anchored && r.re.MatchString(r.prefix+rel) || !r.anchored && r.re.MatchString(filepath.Base(rel)) {
			return true
		}
	}
	return false
}

// walk visits the regular files and directories under root (or root
// itself when it is a file), skipping .git, what root's .gitignore lists
// (and those above it in its git repository),
// and everything that is neither (FIFOs, sockets, devices), with paths
// relative to root; a symlink in the tree is given as it is (link), not
// followed. fn returns false to stop; an ended ctx stops it too.
// A root that is a file the tools do not open (a FIFO, a device, a file
// of /proc, one that cannot be read) is an error that says why.
// ignoresCut says rules of the .gitignore files were not followed
// (loadIgnores' bounds).
func walk(ctx context.Context, root string, fn func(rel, path string, isDir, link bool) bool) (ignoresCut bool, err error) {
	given := root
	if resolved, err := filepath.EvalSymlinks(root); err == nil {
		root = resolved // a symlink to a directory is walked as that directory
	}
	info, err := os.Stat(root)
	if err != nil {
		return false, fmt.Errorf("Path not found: %s", root)
	}
	if !info.IsDir() {
		f, err := openRegular(root, os.O_RDONLY, 0)
		if err != nil {
			return false, fileError("search", given, err)
		}
		f.Close()
		fn(filepath.Base(given), root, false, false) // named as it was given: not where a symlink leads
		return false, nil
	}
	rules, ignoresCut := loadIgnores(root)
	stop := errors.New("stop")
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == root {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && d.Name() == ".git" || ignoredBy(rules, rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() && !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
			return nil // FIFOs, sockets, devices
		}
		if !fn(rel, path, d.IsDir(), d.Type()&fs.ModeSymlink != 0) {
			return stop
		}
		return nil
	})
	switch {
	case err == stop:
		return ignoresCut, nil
	case ctx.Err() != nil:
		return ignoresCut, errors.New("Operation aborted")
	}
	return ignoresCut, err
}

// headLines keeps whole lines from the start: at most maxLines lines and
// maxBytes bytes. byBytes says the byte limit was what cut.
func headLines(lines []string, maxLines, maxBytes int) (kept []string, byBytes bool) {
	size := 0
	for i, line := range lines {
		if i == maxLines {
			return lines[:i], false
		}
		size += len(line) + 1
		if size-1 > maxBytes {
			return lines[:i], true
		}
	}
	return lines, false
}

// listResult is a tool result of lines: emptyText when there are none.
// After them, in brackets, limitNotice when the list was cut at its
// limit (limitCut), and that the output was cut when it was longer than
// maxOutputBytes, as pi says them: the limit is told of only when it was
// reached, so that the model is not sent to raise a limit the list never
// reached; then the notices after, if any.
func listResult(lines []string, emptyText string, limitCut bool, limitNotice string, after ...string) toolResult {
	if len(lines) == 0 {
		return textResult(emptyText)
	}
	var notices []string
	if limitCut {
		notices = append(notices, limitNotice)
	}
	if kept, byBytes := headLines(lines, len(lines), maxOutputBytes); byBytes {
		lines = kept
		notices = append(notices, formatSize(maxOutputBytes)+" limit reached")
	}
	notices = append(notices, after...)
	text := strings.Join(lines, "\n")
	if len(notices) > 0 {
		text += "\n\n[" + strings.Join(notices, ". ") + "]"
	}
	return textResult(text)
}

// ---- find ----

type findCall struct {
	pattern, abs string
	re           *regexp.Regexp
	byName       bool // the pattern has no /: it matches names
	limit        int
}

var findTool = &tool{
	name:    "find",
	summary: "Find files by glob pattern (respects .gitignore)",
	description: "Find files and directories whose path matches a glob (*, ?, **, {a,b}); a pattern without / matches " +
		"names. Paths are relative; directories end with /. .git and what .gitignore lists are skipped.",
	schema: schema(`{
		"type": "object",
		"properties": {
			"pattern": {"type": "string", "description": "Glob, e.g. *.go or src/**/test_*.py"},
			"path": {"type": "string", "description": "Directory to search (default: the working directory)"},
			"limit": {"type": "integer", "minimum": 1, "description": "Most results (default 1000)"}
		},
		"required": ["pattern"]
	}`),
	decode: func(s *session, raw json.RawMessage) (toolCall, error) {
		var a struct {
			Pattern, Path string
			Limit         int
		}
		if err := decodeChecked(raw, &a); err != nil {
			return nil, err
		}
		// A leading ./ is the searched folder, as pi 1.6 drops it.
		glob := a.Pattern
		for strings.HasPrefix(glob, "./") {
			glob = glob[2:]
		}
		re, err := globRegexp(glob)
		if err == nil && glob == strings.ToLower(glob) { // fd's smart case, as pi 1.6 has it
			re, err = regexp.Compile("(?i)" + re.String())
		}
		if err != nil {
			return nil, fmt.Errorf("invalid pattern: %v", err)
		}
		abs, perr := s.toolPath(a.Path)
		if perr != nil {
			return &pathFailed{"find", a.Path, perr}, nil
		}
		return &findCall{a.Pattern, abs, re, !strings.Contains(glob, "/"), cmpOrInt(a.Limit, 1000)}, nil
	},
}

func (c *findCall) describe() (string, string) {
	return "Allow find in " + escapeControl(c.abs) + "?", "Find " + strconv.Quote(c.pattern) + " in " + escapeControl(c.abs)
}

func (c *findCall) run(ctx context.Context, s *session, _ toolRun) (toolResult, error) {
	var found []string
	cut := false
	ignoresCut, err := walk(ctx, c.abs, func(rel, _ string, isDir, _ bool) bool {
		subject := rel
		if c.byName {
			subject = filepath.Base(rel)
		}
		if !c.re.MatchString(subject) {
			return true
		}
		if len(found) == c.limit {
			cut = true
			return false
		}
		if isDir {
			rel += "/"
		}
		found = append(found, rel)
		return true
	})
	if err != nil {
		return toolResult{}, err
	}
	var after []string
	if ignoresCut {
		after = append(after, ignoresCutNote)
	}
	return listResult(found, "No files found matching pattern", cut,
		fmt.Sprintf("%d results limit reached. Use limit=%d for more, or refine pattern", c.limit, 2*c.limit), after...), nil
}
