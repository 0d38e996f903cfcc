package main

// Session files: pi's format (version 3), read back with versions 1 and 2
// migrated; a session's entries as a tree and the conversation they say;
// writing a file whole or a line at a time. The lock by which a session
// holds its file, and a new one its id, are in session_lock.go; the
// conversation store is in conversation.go, the commands in
// session_commands.go.

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// sessionEntry is one entry of a session file. The fields rpi reads are
// decoded (decodeEntry); raw keeps the line as it was, so entries and
// fields rpi does not know survive a rewrite untouched. A message entry
// whose line is exactly what rpi would write for its decoded message
// keeps no raw: the message is held once, and its line is written again
// from it (line). The fields of the other kinds of entry are held apart
// (more), so that a message entry, by far the most common, is small.
type sessionEntry struct {
	Type      string  `json:"type"`
	ID        string  `json:"id"`
	ParentID  *string `json:"parentId"`
	Timestamp string  `json:"timestamp"`

	more    *entryMore // nil when the line had none of its fields
	raw     []byte
	msg     any // a message entry's message, as decodeMessage gives it
	msgSize int // the bytes of its JSON
}

// entryMore are the fields of the entries other than messages.
type entryMore struct {
	Provider         string          `json:"provider"`
	ModelID          string          `json:"modelId"`
	ThinkingLevel    string          `json:"thinkingLevel"`
	Summary          string          `json:"summary"`
	FirstKeptEntryID string          `json:"firstKeptEntryId"`
	TokensBefore     int             `json:"tokensBefore"`
	Name             string          `json:"name"`
	FromID           string          `json:"fromId"`
	CustomType       string          `json:"customType"`
	Content          json.RawMessage `json:"content"`

	// extra: the members of a message entry's line and of its message
	// that rpi does not know, written again beside its own (raw is nil).
	extra lineExtras
}

// extras is the entry's extra, or nil when it has none.
func (e *sessionEntry) extras() *lineExtras {
	if e.more == nil || e.more.extra.entry == nil && e.more.extra.message == nil {
		return nil
	}
	return &e.more.extra
}

// zero reports whether none of m's fields is set.
func (m *entryMore) zero() bool {
	return m.Provider == "" && m.ModelID == "" && m.ThinkingLevel == "" && m.Summary == "" && m.FirstKeptEntryID == "" &&
		m.TokensBefore == 0 && m.Name == "" && m.FromID == "" && m.CustomType == "" && m.Content == nil
}

// noMore is what info gives for an entry without any of entryMore's
// fields; it is never written.
var noMore = &entryMore{}

// info is the entry's fields of entryMore, to read only (setInfo to
// write them). An entry other than a message that keeps its line holds
// them there only (keepLine), and they are read from it each time.
func (e *sessionEntry) info() *entryMore {
	switch {
	case e.more != nil:
		return e.more
	case e.raw != nil && e.Type != "message":
		var d jsonIn
		if line, err := decodeEntry(e.raw, &d); err == nil && line.more != nil {
			return line.more
		}
	}
	return noMore
}

// setInfo is the entry's fields of entryMore, to write, made (from its
// line, when it keeps one) when the entry has none yet.
func (e *sessionEntry) setInfo() *entryMore {
	if e.more == nil {
		more := *e.info()
		e.more = &more
	}
	return e.more
}

// lineExtras are the members of a line and of its message that rpi does
// not know, each with a leading ",", as they were written.
type lineExtras struct{ entry, message []byte }

// line is the entry's line in the file.
func (e *sessionEntry) line() []byte {
	if e.raw != nil {
		return e.raw
	}
	return e.appendLine(nil)
}

// appendLine appends the entry's line to buf.
func (e *sessionEntry) appendLine(buf []byte) []byte {
	if e.raw != nil {
		return append(buf, e.raw...)
	}
	buf, _ = e.appendMessageLine(buf)
	return buf
}

// appendMessageLine appends the line rpi writes for a message entry:
// type, id, parentId, timestamp and the message (appendMessageJSON),
// with the members it had that rpi does not know (extra); ok is false
// when the message cannot be written so.
func (e *sessionEntry) appendMessageLine(buf []byte) (_ []byte, ok bool) {
	buf, ok = appendMessageJSON(e.appendMessageHead(buf), e.msg)
	if x := e.extras(); x != nil && ok {
		end := len(buf) - 1 // the message's "}"
		message := x.message
		if len(message) > 0 && buf[end-1] == '{' { // an empty message: its first member takes no ","
			message = message[1:]
		}
		buf = append(append(append(buf[:end], message...), '}'), x.entry...)
	}
	return append(buf, '}'), ok
}

// appendMessageHead appends what comes before the message in its line.
func (e *sessionEntry) appendMessageHead(buf []byte) []byte {
	buf = append(buf, `{"type":"message","id":`...)
	buf = appendJSONString(buf, e.ID)
	buf = append(buf, `,"parentId":`...)
	if e.ParentID == nil {
		buf = append(buf, "null"...)
	} else {
		buf = appendJSONString(buf, *e.ParentID)
	}
	buf = append(buf, `,"timestamp":`...)
	buf = appendJSONString(buf, e.Timestamp)
	return append(buf, `,"message":`...)
}

// keepLine sets the entry's raw to a copy of line, just decoded by d,
// unless it is a message entry whose line holds the same JSON value as
// the line appendMessageLine writes for it (however it was written:
// spaces, keys in any order, escapes, numbers as 1.0), which is then
// written instead. d tells it as it decodes (lossy: something read
// would be written otherwise, or not at all); the members rpi does not
// know are kept on their own (extra), not with the whole line. An entry
// of another type holds its line alone: its fields decoded (entryMore,
// 224 bytes) made a session of small session_info entries hold 4.5
// times its size; info reads them from the line.
func (e *sessionEntry) keepLine(line []byte, d *jsonIn) {
	e.raw = nil
	if e.more != nil {
		e.more.extra = lineExtras{}
	}
	if e.Type == "message" && e.msg != nil && !d.lossy {
		if len(d.extra) > 0 || len(d.msgExtra) > 0 {
			// Both non-nil, so that extras tells there are some.
			e.setInfo().extra = lineExtras{entry: append([]byte{}, d.extra...), message: append([]byte{}, d.msgExtra...)}
		}
		return
	}
	if e.Type != "message" {
		e.more = nil
	}
	e.raw = bytes.Clone(line)
}

// startsConversation reports whether e makes a session one that has a
// file: a message entry of a user or an assistant, as pi 1.6's
// _hasConversation counts (a bash result, a custom message, a model or
// thinking level change alone leave no file).
func (e *sessionEntry) startsConversation() bool {
	if e.Type != "message" {
		return false
	}
	r := e.role()
	return r == "user" || r == "assistant"
}

// role is the role of a message entry's message ("" without one), as
// messageRole of its JSON gives it.
func (e *sessionEntry) role() string {
	switch m := e.msg.(type) {
	case *userMessage:
		return m.Role
	case *assistantMessage:
		return m.Role
	case *toolResultMessage:
		return m.Role
	case bashExecutionMessage:
		return m.Role
	case *summaryMessage:
		return m.Role
	case rawMessage:
		return messageRole(json.RawMessage(m))
	}
	return ""
}

// sessionHeader is the data of session_started and the first line of a
// session file (minus its "type").
type sessionHeader struct {
	Version       int    `json:"version"`
	ID            string `json:"id"`
	Timestamp     string `json:"timestamp"`
	Cwd           string `json:"cwd"`
	ParentSession string `json:"parentSession,omitempty"`
}

// sessionFile is the conversation's record: its header, its entries as a
// tree, and the file they are written to (or none, in memory only).
type sessionFile struct {
	header sessionHeader
	path   string // "" for an in-memory session (--no-session)
	// link: path was a symbolic link when the session was opened, and is
	// written where it led then (linkTarget, "" when it led nowhere); one
	// put there since, or made to lead elsewhere, is not (linkedSince).
	link       bool
	linkTarget string
	written    bool // the file exists and holds every entry so far
	entries    []*sessionEntry
	byID       map[string]*sessionEntry
	leaf       string      // the current entry; "" before the first
	skipped    lineNumbers // lines that were not entries, besides a torn last one
	size       int64       // the file's size when it was read (0: not read)
	// lock is the session's hold on its file (see lockSessionFile), nil
	// until it has one; guarded by the conversation's lockMu.
	lock *os.File
	// claim is a new session's hold on the id the user gave it
	// (claimSessionID) until its file exists and is held; guarded by
	// lockMu as lock is.
	claim *sessionClaim
	// sameFileAs is the current session whose file this one was loaded
	// from (switch_session to it): it takes that one's hold over.
	sameFileAs *sessionFile
	// handedTo is that session once this one handed it its hold: a write
	// of this one still under way goes on under it (guarded by lockMu).
	handedTo *sessionFile
}

// maxSessionLineBytes is the longest session line rpi reads: far more
// than any entry rpi or pi writes (a 64 MiB image prompt). What a line
// decodes to is bounded by its size in turn (bytesPerBlock; details are
// held as JSON), so this bounds what a hostile file can make rpi hold.
const maxSessionLineBytes = 256 << 20

// skippedNotice tells the client about lines a load had to skip, or "".
func (ss *sessionFile) skippedNotice() string {
	if ss.skipped.n == 0 {
		return ""
	}
	lines := fmt.Sprint(ss.skipped.first)
	if more := ss.skipped.n - len(ss.skipped.first); more > 0 {
		lines += fmt.Sprintf(" and %d more", more)
	}
	return fmt.Sprintf("Skipped %d line(s) of %s that are not session entries (line %s): what they held is not in the conversation", ss.skipped.n, ss.path, lines)
}

// newSessionFile starts an empty session whose id is id (a fresh UUID when
// "", the only one made) and whose file (unless in memory) will be path,
// or a fresh name in dir.
func newSessionFile(now time.Time, id, cwd, dir, path, parent string, inMemory bool) *sessionFile {
	if id == "" {
		id = newUUIDv7(now)
	}
	s := &sessionFile{header: sessionHeader{Version: 3, ID: id, Timestamp: timestamp(now), Cwd: cwd, ParentSession: parent},
		byID: map[string]*sessionEntry{}}
	switch {
	case inMemory:
	case path != "":
		s.path = path
		s.link, s.linkTarget = linkOf(path)
	default:
		name := strings.NewReplacer(":", "-", ".", "-").Replace(s.header.Timestamp)
		s.path = filepath.Join(dir, name+"_"+s.header.ID+".jsonl")
	}
	return s
}

// defaultSessionDir is pi's session folder for a cwd: the path without
// its first character when that is / or \ (one only: a Windows UNC path's
// second backslash is a -, as in pi 1.6), with /, \ and : turned into -.
func defaultSessionDir(agentDir, cwd string) string {
	if cwd != "" {
		cwd = filepath.Clean(cwd) // as pi's resolvePath has it (//x is /x on Unix)
	}
	if cwd != "" && (cwd[0] == '/' || cwd[0] == '\\') {
		cwd = cwd[1:]
	}
	safe := strings.NewReplacer("/", "-", "\\", "-", ":", "-").Replace(cwd)
	return filepath.Join(agentDir, "sessions", "--"+safe+"--")
}

// newEntryID is 8 hex characters not yet used in the session.
func (ss *sessionFile) newEntryID() string {
	for {
		var b [4]byte
		randomID(b[:])
		if id := hex.EncodeToString(b[:]); ss.byID[id] == nil {
			return id
		}
	}
}

// entryField is one of an entry's own fields, in order after type, id,
// parentId and timestamp.
type entryField struct {
	name  string
	value any
}

// add appends an entry under the current leaf, in memory, and returns it
// with its line. A message of rpi's own (ownMessage) is held by the entry
// as it is, shared with the conversation, and its line written from it
// once, without reflection: a message that holds a 49 MiB image is not
// encoded twice and decoded again into a second copy.
func (ss *sessionFile) add(now time.Time, typ string, fields []entryField) (_ *sessionEntry, line []byte, _ error) {
	id := ss.newEntryID()
	if typ == "message" && len(fields) == 1 && fields[0].name == "message" && ownMessage(fields[0].value) {
		e := &sessionEntry{Type: typ, ID: id, Timestamp: timestamp(now), msg: fields[0].value}
		if ss.leaf != "" {
			parent := ss.leaf
			e.ParentID = &parent
		}
		line = e.appendMessageHead(nil)
		head := len(line)
		line, _ = appendMessageJSON(line, e.msg)
		e.msgSize = len(line) - head
		line = append(line, '}')
		ss.entries = append(ss.entries, e)
		ss.byID[id] = e
		ss.leaf = id
		return e, line, nil
	}
	line = []byte(`{"type":`)
	line = appendJSONString(line, typ)
	line = append(line, `,"id":`...)
	line = appendJSONString(line, id)
	line = append(line, `,"parentId":`...)
	if ss.leaf != "" {
		line = appendJSONString(line, ss.leaf)
	} else {
		line = append(line, "null"...)
	}
	stamp := timestamp(now)
	line = append(line, `,"timestamp":`...)
	line = appendJSONString(line, stamp)
	// An entry whose fields are all text (a model, thinking level or name
	// change) is set directly: what json.Unmarshal of its line would give,
	// without encoding/json's reflection, whose first use costs startup.
	e, direct := &sessionEntry{}, true
	for _, f := range fields {
		line = append(line, ',')
		line = appendJSONString(line, f.name)
		line = append(line, ':')
		if text, ok := f.value.(string); ok && utf8.ValidString(text) && e.setText(f.name, text) {
			line = appendJSONString(line, text)
			continue
		}
		direct = false
		var err error
		if line, err = appendMarshal(line, f.value); err != nil {
			return nil, nil, err
		}
	}
	line = append(line, '}')
	if direct {
		e.Type, e.ID, e.Timestamp = typ, id, stamp
		if ss.leaf != "" {
			parent := ss.leaf
			e.ParentID = &parent
		}
		e.raw = line
	} else {
		var err error
		var d jsonIn
		if e, err = decodeEntry(line, &d); err != nil {
			return nil, nil, err
		}
		e.keepLine(line, &d)
	}
	ss.entries = append(ss.entries, e)
	ss.byID[id] = e
	ss.leaf = id
	return e, line, nil
}

// ownMessage reports whether m is a message of one of rpi's own types,
// with a role that reads back as that type, that appendMessageJSON
// writes: decoding its line gives m again, as JSON has it (a tool
// result's details as a map, invalid UTF-8 as U+FFFD).
func ownMessage(m any) bool {
	var ok bool
	switch m := m.(type) {
	case *userMessage:
		ok = m.Role == "user"
	case *assistantMessage:
		ok = m.Role == "assistant"
	case *toolResultMessage:
		ok = m.Role == "toolResult"
	case bashExecutionMessage:
		ok = m.Role == "bashExecution"
	case *summaryMessage:
		ok = m.Role == "compactionSummary" || m.Role == "branchSummary"
	}
	return ok && messageAppendable(m)
}

// setText sets the text field whose JSON name is name, as json.Unmarshal
// of the entry's line would; false for a name that is not one.
func (e *sessionEntry) setText(name, text string) bool {
	switch name {
	case "provider":
		e.setInfo().Provider = text
	case "modelId":
		e.setInfo().ModelID = text
	case "thinkingLevel":
		e.setInfo().ThinkingLevel = text
	case "summary":
		e.setInfo().Summary = text
	case "firstKeptEntryId":
		e.setInfo().FirstKeptEntryID = text
	case "name":
		e.setInfo().Name = text
	case "fromId":
		e.setInfo().FromID = text
	case "customType":
		e.setInfo().CustomType = text
	default:
		return false
	}
	return true
}

// headerLine is the file's first line: the header with "type":"session"
// first.
func (ss *sessionFile) headerLine() []byte {
	line := ss.header.appendMembers([]byte(`{"type":"session"`))
	return append(line, '}')
}

// wholeFile is the file as it should be: the header, then every entry.
func (ss *sessionFile) wholeFile() []byte {
	buf := append(ss.headerLine(), '\n')
	for _, e := range ss.entries {
		buf = append(e.appendLine(buf), '\n')
	}
	return buf
}

// appendLine appends one line to an existing file with a single write.
// When the file does not end with "\n" (a crash tore its last line, rpi's
// before it read the file or another process's since), the torn bytes
// are dropped first, or, when they are a whole entry, ended: the line
// is never glued to them, which would lose it and cut its branch there.
// Only header, the header line itself, goes into an empty file: an entry
// appended to a file another program emptied (or cut inside its header)
// would be the first line of a file that no longer opens
// (errHeaderGone; the caller writes the file whole instead).
// With follow false, a symlink at path is not opened (noFollow).
func appendLine(path string, line []byte, header, follow bool) error {
	flag := os.O_RDWR | os.O_APPEND
	if !follow {
		flag |= noFollow
	}
	f, err := openRegular(path, flag, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if size, err := mendEnd(f); err != nil {
		return err
	} else if size == 0 && !header {
		return errHeaderGone
	}
	if _, err := f.Write(append(slices.Clip(line), '\n')); err != nil {
		return err
	}
	return f.Sync()
}

// isSymlink reports whether path is a symbolic link.
func isSymlink(path string) bool {
	info, err := os.Lstat(path)
	return err == nil && info.Mode()&os.ModeSymlink != 0
}

// linkOf reports whether path is a symbolic link, and where it leads
// (symlinks resolved; "" when it leads nowhere).
func linkOf(path string) (link bool, target string) {
	if !isSymlink(path) {
		return false, ""
	}
	target, _ = filepath.EvalSymlinks(path)
	return true, target
}

// linkedSince refuses a write to ss's file when its path is a symbolic
// link that was none when the session was opened: someone else who may
// write in the folder (a shared --session-dir) swapped the file for a
// link to a file of theirs choosing (~/.bashrc), which rpi must neither
// append to nor replace. A file given as a link is written where it
// led then, as pi writes it; once the link is made to lead elsewhere (by
// the same someone), not at all.
func (ss *sessionFile) linkedSince() error {
	if !ss.link {
		if isSymlink(ss.path) {
			return errLinkedSince
		}
		return nil
	}
	if now, err := filepath.EvalSymlinks(ss.path); err == nil && ss.linkTarget != "" && now != ss.linkTarget {
		return errLinkRetargeted
	}
	return nil
}

// writtenPath is where ss's file is written (an entry appended, or the
// file replaced whole), and whether a link there is followed: a file
// given as a link that led somewhere, where it led then (linkTarget,
// itself not followed, so that a link made to lead elsewhere between
// linkedSince's check and the write is not followed either); one that
// led nowhere, through its link; any other file at its path, not
// followed.
func (ss *sessionFile) writtenPath() (path string, follow bool) {
	switch {
	case ss.link && ss.linkTarget != "":
		return ss.linkTarget, false
	case ss.link:
		return ss.path, true
	}
	return ss.path, false
}

// errLinkedSince and errLinkRetargeted are linkedSince's refusals.
var (
	errLinkedSince    = errors.New("it was swapped for a symbolic link while the session was open, and rpi writes nothing where such a link leads")
	errLinkRetargeted = errors.New("its symbolic link was made to lead elsewhere while the session was open, and rpi writes nothing where it leads now")
)

// errHeaderGone refuses an append to a session file that holds nothing
// any more.
var errHeaderGone = errors.New("it is empty now, its header gone: another program emptied it")

// mendEnd makes the file end with "\n" before an append: a last line
// without one is kept (and ended) when it is a whole JSON object, and cut
// off when it is torn (or, unread, longer than maxSessionLineBytes). A
// byte order mark that starts the file is no part of its first line, as
// the loader has it (readHeaderLine). size is the file's size after.
func mendEnd(f *os.File) (size int64, err error) {
	info, err := f.Stat()
	if err != nil || info.Size() == 0 {
		return 0, err
	}
	size = info.Size()
	var last [1]byte
	if _, err := f.ReadAt(last[:], size-1); err != nil && err != io.EOF {
		return size, err
	} else if err == nil && last[0] == '\n' {
		return size, nil // the common case: one byte read
	}
	const window = 64 << 10
	buf := make([]byte, window) // one for the whole look back: the line may be of any length
	for end := size; end > 0; {
		start := max(end-window, 0)
		buf := buf[:end-start]
		if _, err := f.ReadAt(buf, start); err != nil && err != io.EOF {
			return size, err
		}
		if end == size && buf[len(buf)-1] == '\n' {
			return size, nil
		}
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 || start == 0 {
			lineStart := start + int64(i) + 1
			if size-lineStart > maxSessionLineBytes {
				// Longer than a line the loader reads: no entry, and
				// not read into memory (another process may have made
				// it of any length since rpi read the file).
				return lineStart, f.Truncate(lineStart)
			}
			tail := make([]byte, size-lineStart)
			f.ReadAt(tail, lineStart)
			if lineStart == 0 {
				tail = bytes.TrimPrefix(tail, byteOrderMark)
			}
			var obj map[string]json.RawMessage
			if json.Unmarshal(tail, &obj) == nil && obj != nil {
				_, err := f.Write([]byte("\n"))
				return size + 1, err
			}
			return lineStart, f.Truncate(lineStart)
		}
		end = start
	}
	return size, nil
}

// messageRole is a message's role, read by its exact name as pi reads it
// ("" when it has none that is a string).
func messageRole(raw json.RawMessage) string {
	var role string
	if v, ok := exactMember(raw, "role"); ok && json.Unmarshal(v, &role) == nil {
		return role
	}
	return ""
}

// errInvalidSessionFile says why a session file cannot be opened: it
// names the file and what is wrong with it. rpc's switch_session answers
// it as it is, and so do ACP's session/load and session/resume.
type errInvalidSessionFile struct{ path, why string }

// errSessionNotFound is a session file that is not there.
func errSessionNotFound(path string) error { return fmt.Errorf("Session file not found: %s", path) }

// errEmptySessionFile is the file at path holding no byte at all. Where
// rpi opens a file given with --session it starts a new session in it
// instead, as pi does (a file made by mktemp, say); switch_session refuses
// it, as it refuses a missing file where pi would start one.
func errEmptySessionFile(path string) error { return &errInvalidSessionFile{path, emptyFile} }

// emptyFile is why an empty session file is not a session.
const emptyFile = "it is empty"

// isEmptySessionFile reports whether err is errEmptySessionFile's.
func isEmptySessionFile(err error) bool {
	var invalid *errInvalidSessionFile
	return errors.As(err, &invalid) && invalid.why == emptyFile
}

func (e *errInvalidSessionFile) Error() string {
	return fmt.Sprintf("Not a valid session file: %s (%s)", e.path, e.why)
}

// loadSessionFile reads a session file: a header line, then entries. Lines
// that are not JSON (a torn last line, say) are skipped; lines of any
// length are read as they stream by. Version 1 and 2 files are migrated
// in memory (and rewritten on the next append). A file where two entries
// have one id, or whose parentId links loop, is refused. Reading stops
// when ctx ends (the session, or rpi, closing).
func loadSessionFile(ctx context.Context, path string) (*sessionFile, error) {
	link, linkTarget := linkOf(path) // before the open: a link put there after is not followed by a write
	f, err := openRegular(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errSessionNotFound(path)
	}
	var nr *errNotRegular
	if errors.As(err, &nr) {
		return nil, &errInvalidSessionFile{path, nr.kind}
	}
	if err != nil {
		return nil, fmt.Errorf("Cannot read session file %s: %v", path, unwrapPathError(err))
	}
	defer f.Close()
	ss := &sessionFile{path: path, written: true, link: link, linkTarget: linkTarget}
	tooLong := func(line int) error {
		return &errInvalidSessionFile{path, fmt.Sprintf("line %d is longer than %d bytes", line, maxSessionLineBytes)}
	}
	line, lineNo, next, passedOver, err := readHeaderLine(ctx, f)
	switch {
	case err == errLineTooLong:
		return nil, tooLong(lineNo)
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("Stopped reading session file %s: the session is closing", path)
	case err != nil:
		return nil, fmt.Errorf("Cannot read session file %s: %v", path, err)
	case line == nil && next == 0:
		return nil, errEmptySessionFile(path)
	case line == nil && passedOver.n > 0:
		return nil, &errInvalidSessionFile{path, "no line of it is a session header"}
	case line == nil:
		return nil, &errInvalidSessionFile{path, "it holds only blank lines"}
	}
	var header struct {
		Type    string `json:"type"`
		Version *int   `json:"version"` // absent in version 1
		sessionHeader
	}
	if unmarshalExact(plainWholeNumbers(line, headerInts, false), &header) != nil || header.Type != "session" || header.ID == "" {
		return nil, &errInvalidSessionFile{path, "the first line is not a session header"}
	}
	// Version 3 lines are written again as they are (keepLine); older
	// ones are kept for the migrations below.
	var parts int
	if info, err := f.Stat(); err == nil {
		parts, ss.size = sessionParts(info.Size()-next), info.Size()
	}
	read, err := readEntries(ctx, f, next, lineNo, header.Version != nil && *header.Version >= 3, parts)
	switch {
	case err == errLineTooLong:
		return nil, tooLong(read.tooLong)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("Stopped reading session file %s: the session is closing", path)
	case err != nil:
		return nil, fmt.Errorf("Cannot read session file %s: %v", path, err)
	}
	ss.entries, ss.skipped = read.entries, passedOver
	ss.skipped.join(read.skipped, 0)
	ss.header = header.sessionHeader
	version := 1
	if header.Version != nil {
		version = *header.Version
	}
	if version < 2 {
		ss.migrateV1()
	}
	if version < 3 {
		ss.migrateV2()
	}
	ss.header.Version = 3
	if version >= 2 { // migrateV1 made version 1's ids unique, and chained them one after another
		ss.byID = make(map[string]*sessionEntry, len(ss.entries)) // its size at once: no garbage of its growth
		for _, e := range ss.entries {
			// A file where two entries have one id is refused rather
			// than repaired: which of the two a parentId means cannot
			// be known, and the tree built from either guess may loop.
			if ss.byID[e.ID] != nil {
				return nil, &errInvalidSessionFile{path, fmt.Sprintf("two entries have the id %q, so a parentId naming it "+
					"could mean either: each entry's id must be unique in its file", e.ID)}
			}
			ss.byID[e.ID] = e
		}
		if id, loops := ss.parentLoop(); loops {
			return nil, &errInvalidSessionFile{path, "the parentId links from entry " + displayID(id) + " loop"}
		}
	}
	if len(ss.entries) > 0 {
		ss.leaf = ss.entries[len(ss.entries)-1].ID
	}
	if version < 3 {
		ss.written = false // the next append rewrites the file as version 3
	}
	return ss, nil
}

// parentLoop returns an entry whose chain of parents loops, and whether
// there is one: the entry may have the id "" (a hostile file's), which
// is then no answer of "none".
func (ss *sessionFile) parentLoop() (id string, loops bool) {
	const (
		visiting = 1
		done     = 2
	)
	state := make(map[string]int8, len(ss.entries)) // its size at once, as byID
	var path []string
	for _, start := range ss.entries {
		path = path[:0]
		for e := start; e != nil && state[e.ID] != done; {
			if state[e.ID] == visiting {
				return e.ID, true
			}
			state[e.ID] = visiting
			path = append(path, e.ID)
			if e.ParentID == nil {
				break
			}
			e = ss.byID[*e.ParentID]
		}
		for _, id := range path {
			state[id] = done
		}
	}
	return "", false
}

// displayID is an entry's id as an error names it: `""` for an empty one.
func displayID(id string) string {
	if id == "" {
		return `""`
	}
	return id
}

// parent is the entry e's parentId names; nil for the root (or a parent
// not in the file).
func (ss *sessionFile) parent(e *sessionEntry) *sessionEntry {
	if e.ParentID == nil {
		return nil
	}
	return ss.byID[*e.ParentID]
}

// branch is the path of entries from the root to leaf, made in one
// allocation: the chain is walked twice, to count it and to fill it from
// its end. Loaded files never loop (see parentLoop), nor do the entries
// rpi adds; a path is still never longer than the entries, rather than
// checked entry by entry in a map as long as it (for a chain of a
// million entries, about 50 MB made and thrown away on each walk).
func (ss *sessionFile) branch(leaf string) []*sessionEntry {
	n := 0
	for e := ss.byID[leaf]; e != nil && n < len(ss.entries); e = ss.parent(e) {
		n++
	}
	path := make([]*sessionEntry, n)
	e := ss.byID[leaf]
	for i := n - 1; i >= 0; i-- {
		path[i], e = e, ss.parent(e)
	}
	return path
}

// migrateV1 gives version 1's linear entries ids and parents (each id
// unique: byID is made here), and turns a compaction's
// firstKeptEntryIndex into firstKeptEntryId. A line gets its
// id and parentId after its own members, as pi's migration adds them (the
// last of a name is the one JSON.parse and encoding/json read): no
// decode and encode of every line, which for a file of tiny entries
// ({"type":"a"}, 13 bytes) allocated about 100 times the file's size.
func (ss *sessionFile) migrateV1() {
	ss.byID = make(map[string]*sessionEntry, len(ss.entries))
	var prev *sessionEntry
	for _, e := range ss.entries {
		for e.ID == "" || ss.byID[e.ID] != nil {
			var b [4]byte
			randomID(b[:])
			e.ID = hex.EncodeToString(b[:])
		}
		ss.byID[e.ID] = e
		e.ParentID = nil
		if prev != nil {
			e.ParentID = &prev.ID // one string for both, as a version 3 file's are read
		}
		prev = e
	}
	for _, e := range ss.entries {
		if e.Type == "compaction" && ss.migrateCompactionV1(e) {
			continue
		}
		// The line is an object with a type (readEntryPart keeps no
		// other), so a member comes before the id.
		end := bytes.LastIndexByte(e.raw, '}')
		line := make([]byte, 0, len(e.raw)+len(`,"id":"","parentId":""`)+2*len(e.ID))
		line = appendJSONString(append(append(line, e.raw[:end]...), `,"id":`...), e.ID)
		if line = append(line, `,"parentId":`...); e.ParentID == nil {
			line = append(line, "null"...)
		} else {
			line = appendJSONString(line, *e.ParentID)
		}
		e.raw = append(line, e.raw[end:]...)
	}
}

// migrateCompactionV1 writes a version 1 compaction's line again with its
// id and parentId, and its firstKeptEntryIndex as firstKeptEntryId; false
// when it has no firstKeptEntryIndex (its line is migrated as any other).
func (ss *sessionFile) migrateCompactionV1(e *sessionEntry) bool {
	var fields map[string]json.RawMessage
	if _, _, indexed := memberValue(e.raw, "firstKeptEntryIndex"); !indexed || json.Unmarshal(e.raw, &fields) != nil {
		return false
	}
	fields["id"], _ = json.Marshal(e.ID)
	fields["parentId"], _ = json.Marshal(e.ParentID)
	var i float64
	// The index counts the file's lines, the header being 0: any
	// whole number, as pi reads it (2.0 too).
	if json.Unmarshal(fields["firstKeptEntryIndex"], &i) == nil && i == math.Trunc(i) && i >= 1 && i <= float64(len(ss.entries)) {
		fields["firstKeptEntryId"], _ = json.Marshal(ss.entries[int(i)-1].ID)
	}
	delete(fields, "firstKeptEntryIndex")
	e.raw, e.more = orderedEntry(fields), nil // its fields read from its new line
	return true
}

// migrateV2 renames the hookMessage role to custom as pi does (the
// member "role" of a message entry's message, however it is written),
// keeping the rest of each line as it was.
func (ss *sessionFile) migrateV2() {
	renamed := []byte(`"custom"`)
	for _, e := range ss.entries {
		if _, ok := e.msg.(rawMessage); !ok || e.Type != "message" {
			continue
		}
		at, end, ok := memberValue(e.raw, "message")
		if !ok {
			continue
		}
		roleAt, roleEnd, ok := memberValue(e.raw[at:end], "role")
		var role string
		if !ok || e.raw[at+roleAt] != '"' || !unquote(e.raw[at+roleAt:at+roleEnd], &role) || role != "hookMessage" {
			continue
		}
		e.raw = slices.Concat(e.raw[:at+roleAt], renamed, e.raw[at+roleEnd:])
		m := e.raw[at : end-(roleEnd-roleAt)+len(renamed)]
		e.msg, e.msgSize = decodeMessage(json.RawMessage(m)), len(m)
	}
}

// memberValue is where the value of the member named key of the JSON
// object obj lies, obj[at:end]: the last one of that name, its key
// written any way, as JSON.parse reads it; ok is false when there is none.
func memberValue(obj []byte, key string) (at, end int, ok bool) {
	members, valid := scanObject(obj, nil)
	for i := len(members) - 1; valid && i >= 0; i-- {
		if value := members[i].value; string(members[i].key) == key {
			at = cap(obj) - cap(value) // value is a slice of obj, from at on
			return at, at + len(value), true
		}
	}
	return 0, 0, false
}

// orderedEntry encodes an entry with type, id, parentId and timestamp
// first, then the other fields in name order.
func orderedEntry(fields map[string]json.RawMessage) []byte {
	var buf bytes.Buffer
	buf.WriteByte('{')
	first := true
	write := func(k string, v json.RawMessage) {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		buf.Write(appendJSONString(nil, k))
		buf.WriteByte(':')
		buf.Write(v)
	}
	for _, k := range []string{"type", "id", "parentId", "timestamp"} {
		if v, ok := fields[k]; ok {
			write(k, v)
			delete(fields, k)
		}
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		write(k, fields[k])
	}
	buf.WriteByte('}')
	return buf.Bytes()
}

// decodeMessageSlow is decodeMessage by encoding/json, for what the fast
// path does not take (sessionline.go). Bytes that are not UTF-8 in what
// it keeps as JSON (tool arguments: contentBlock's UnmarshalJSON;
// details; a message kept as it is) become U+FFFD, as the fast path has
// them.
func decodeMessageSlow(raw json.RawMessage) any {
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	kept := raw
	raw = plainWholeNumbers(raw, messageInts, true) // 1.0 read as 1, as the fast path reads it
	var probe struct {
		Role    string       `json:"role"`
		Content contentProbe `json:"content"`
	}
	unmarshalExact(raw, &probe)
	role := probe.Role
	if (role == "user" || role == "assistant" || role == "toolResult") && probe.Content.most > len(kept)/bytesPerBlock {
		role = "" // more blocks than its size allows: kept as it is
	}
	switch role {
	case "user":
		m := &userMessage{}
		if content := probe.Content.last; len(content) > 0 && content[0] == '"' {
			var text string
			json.Unmarshal(content, &text)
			var rest struct {
				Role      string `json:"role"`
				Timestamp int64  `json:"timestamp"`
			}
			unmarshalExact(raw, &rest)
			return &userMessage{Role: "user", Content: textBlocks(text), Timestamp: rest.Timestamp}
		}
		if unmarshalExact(raw, m) == nil {
			return m
		}
	case "assistant":
		// encoding/json cannot make the embedded *answerMeta (an
		// unexported type): its fields are read beside the answer's, and
		// kept when any is set, as the fast path keeps them.
		var m struct {
			assistantMessage
			answerMeta
		}
		if unmarshalExact(raw, &m) == nil {
			if m.answerMeta != (answerMeta{}) {
				m.assistantMessage.answerMeta = &m.answerMeta
			}
			return &m.assistantMessage
		}
	case "toolResult":
		var m struct {
			toolResultMessage
			Details json.RawMessage `json:"details"` // kept as JSON, as the fast path keeps them (canonical)
		}
		if unmarshalExact(raw, &m) == nil {
			var d jsonIn
			if m.Details != nil {
				d.reset(m.Details)
				m.toolResultMessage.Details = d.details()
			}
			if !d.fail {
				return &m.toolResultMessage
			}
		}
	case "bashExecution":
		var m bashExecutionMessage
		if unmarshalExact(raw, &m) == nil {
			return m
		}
	case "compactionSummary", "branchSummary":
		m := &summaryMessage{}
		if unmarshalExact(raw, m) == nil {
			return m
		}
	}
	clean, _ := validRaw(kept)
	return rawMessage(clean)
}

// bytesPerBlock is how many bytes of a message, as written, each of its
// content blocks needs at least: a message with more blocks than its size
// allows is not decoded but kept as it is (a rawMessage, which is not
// sent to the model). Every block pi or rpi writes takes more (the least,
// {"type":"text","text":""} and its comma, 26), and a decoded block takes
// 152 bytes on 64-bit, so a hostile file's [{},{},…] (3 bytes a block)
// holds at most about 6 times its size, not 51.
const bytesPerBlock = 24

// contentProbe is what decodeMessageSlow reads of a message's content
// before it decodes the message: the last content given, as encoding/json
// keeps it, and the most elements any given as an array has. A content
// given twice (or as "Content") is decoded by encoding/json each time,
// the last over the first, so a first [{},{},…] must be counted too.
type contentProbe struct {
	last json.RawMessage
	most int
}

func (c *contentProbe) UnmarshalJSON(b []byte) error {
	c.last = bytes.Clone(b)
	if b[0] == '[' {
		c.most = max(c.most, elements(b, skipSpace(b, 1)))
	}
	return nil
}

// loopsFileOf is where a session's durable loops are saved.
func loopsFileOf(sessionPath string) string {
	if sessionPath == "" {
		return ""
	}
	return sessionPath + ".loops.json"
}
