package main

// Sessions: pi's session file format (version 3), read back with versions
// 1 and 2 migrated; the conversation store that owns the messages and
// writes the file; and the session commands.

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// sessionEntry is one entry of a session file. The fields rpi reads are
// decoded (decodeEntry); raw keeps the line as it was, so entries and
// fields rpi does not know survive a rewrite untouched. A message entry
// whose line is exactly what rpi would write for its decoded message
// keeps no raw: the message is held once, and its line is written again
// from it (line).
type sessionEntry struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	ParentID         *string         `json:"parentId"`
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
	Timestamp        string          `json:"timestamp"`

	raw     []byte
	msg     any // a message entry's message, as decodeMessage gives it
	msgSize int // the bytes of its JSON
}

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
// type, id, parentId, timestamp and the message (appendMessageJSON); ok
// is false when the message cannot be written so.
func (e *sessionEntry) appendMessageLine(buf []byte) (_ []byte, ok bool) {
	return e.appendMessageLineFrom(buf, nil)
}

// appendMessageLineFrom is appendMessageLine copying what sources hold.
func (e *sessionEntry) appendMessageLineFrom(buf []byte, sources blockSources) (_ []byte, ok bool) {
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
	buf = append(buf, `,"message":`...)
	buf, ok = appendMessageFrom(buf, e.msg, sources)
	return append(buf, '}'), ok
}

// keepLine sets the entry's raw to a copy of line, just decoded by d,
// unless it is a message entry that appendMessageLine writes byte for
// byte. The check copies the texts d found written as appendJSONString
// writes them (d.sources) instead of encoding them again.
func (e *sessionEntry) keepLine(line []byte, d *jsonIn) {
	if e.Type == "message" && e.msg != nil {
		again, ok := e.appendMessageLineFrom(d.scratch[:0], d.sources)
		d.scratch = again[:0]
		if ok && bytes.Equal(again, line) {
			e.raw = nil
			return
		}
	}
	e.raw = bytes.Clone(line)
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

// session is the conversation's record: its header, its entries as a
// tree, and the file they are written to.
type session struct {
	header  sessionHeader
	path    string // "" for an in-memory session (--no-session)
	written bool   // the file exists and holds every entry so far
	loaded  bool   // read from an existing file: its end is checked before the first append
	entries []*sessionEntry
	byID    map[string]*sessionEntry
	leaf    string // the current entry; "" before the first
	skipped []int  // lines that were not entries, besides a torn last one
	// lock is the session's hold on its file (see lockSessionFile), nil
	// until it has one; guarded by the conversation's lockMu.
	lock *os.File
}

// maxSessionLineBytes is the longest session line rpi reads: far more
// than any entry rpi or pi writes (a 64 MiB image prompt), and a bound on
// what a hostile file can make it hold.
const maxSessionLineBytes = 256 << 20

// skippedNotice tells the client about lines a load had to skip, or "".
func (ss *session) skippedNotice() string {
	if len(ss.skipped) == 0 {
		return ""
	}
	return fmt.Sprintf("Skipped %d line(s) of %s that are not session entries (line %v): what they held is not in the conversation", len(ss.skipped), ss.path, ss.skipped)
}

// newSession starts an empty session whose id is id (a fresh UUID when
// "", the only one made) and whose file (unless in memory) will be path,
// or a fresh name in dir.
func newSession(now time.Time, id, cwd, dir, path, parent string, inMemory bool) *session {
	if id == "" {
		id = newUUIDv7(now)
	}
	s := &session{header: sessionHeader{Version: 3, ID: id, Timestamp: timestamp(now), Cwd: cwd, ParentSession: parent},
		byID: map[string]*sessionEntry{}}
	switch {
	case inMemory:
	case path != "":
		s.path = path
	default:
		name := strings.NewReplacer(":", "-", ".", "-").Replace(s.header.Timestamp)
		s.path = filepath.Join(dir, name+"_"+s.header.ID+".jsonl")
	}
	return s
}

// defaultSessionDir is pi's session folder for a cwd: the path without
// its leading slash, with /, \ and : turned into -.
func defaultSessionDir(agentDir, cwd string) string {
	safe := strings.NewReplacer("/", "-", "\\", "-", ":", "-").Replace(strings.TrimLeft(cwd, "/\\"))
	return filepath.Join(agentDir, "sessions", "--"+safe+"--")
}

// newEntryID is 8 hex characters not yet used in the session.
func (ss *session) newEntryID() string {
	for {
		var b [4]byte
		randomID(b[:])
		if id := hex.EncodeToString(b[:]); ss.byID[id] == nil {
			return id
		}
	}
}

// field is one of an entry's own fields, in order after type, id,
// parentId and timestamp.
type field struct {
	name  string
	value any
}

// add appends an entry under the current leaf, in memory.
func (ss *session) add(now time.Time, typ string, fields []field) (*sessionEntry, error) {
	id := ss.newEntryID()
	line := []byte(`{"type":`)
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
			return nil, err
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
			return nil, err
		}
		e.keepLine(line, &d)
	}
	ss.entries = append(ss.entries, e)
	ss.byID[id] = e
	ss.leaf = id
	return e, nil
}

// setText sets the text field whose JSON name is name, as json.Unmarshal
// of the entry's line would; false for a name that is not one.
func (e *sessionEntry) setText(name, text string) bool {
	switch name {
	case "provider":
		e.Provider = text
	case "modelId":
		e.ModelID = text
	case "thinkingLevel":
		e.ThinkingLevel = text
	case "summary":
		e.Summary = text
	case "firstKeptEntryId":
		e.FirstKeptEntryID = text
	case "name":
		e.Name = text
	case "fromId":
		e.FromID = text
	case "customType":
		e.CustomType = text
	default:
		return false
	}
	return true
}

// headerLine is the file's first line: the header with "type":"session"
// first.
func (ss *session) headerLine() []byte {
	line := ss.header.appendMembers([]byte(`{"type":"session"`))
	return append(line, '}')
}

// wholeFile is the file as it should be: the header, then every entry.
func (ss *session) wholeFile() []byte {
	buf := append(ss.headerLine(), '\n')
	for _, e := range ss.entries {
		buf = append(e.appendLine(buf), '\n')
	}
	return buf
}

// replaceFile replaces ss's file with data atomically: a temp file,
// renamed over it. The new file is locked before it replaces the old one,
// and becomes the session's hold on its file, so another rpi never finds
// the file free meanwhile; a file at the path that the session does not
// hold is taken first (and refused when another rpi has it). c.fileMu is
// held.
func (c *conversation) replaceFile(ss *session, data []byte) error {
	c.lockMu.Lock()
	held := ss.lock
	c.lockMu.Unlock()
	if !holdsFile(held, ss.path) {
		other, err := lockSessionFile(ss.path, 0)
		if err != nil {
			return err
		}
		if other != nil {
			defer other.Close() // held until the new file has replaced it
		}
	}
	path := ss.path
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// A fresh name (O_EXCL): nothing planted beside the file is followed.
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	var lock *os.File
	if err == nil {
		lock, err = lockSessionFile(f.Name(), 0) // a file nobody else knows: never refused
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		os.Remove(f.Name())
		return err
	}
	c.lockMu.Lock()
	if ss.lock != nil {
		ss.lock.Close()
	}
	ss.lock = lock
	c.lockMu.Unlock()
	return nil
}

// appendLine appends one line to an existing file with a single write.
// When the file does not end with "\n" (a crash tore its last line), the
// torn bytes are dropped first, or, when they are a whole entry, ended.
func appendLine(path string, line []byte, checkEnd bool) error {
	f, err := openRegular(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if checkEnd {
		if err := mendEnd(f); err != nil {
			return err
		}
	}
	if _, err := f.Write(append(slices.Clip(line), '\n')); err != nil {
		return err
	}
	return f.Sync()
}

// mendEnd makes the file end with "\n" before an append: a last line
// without one is kept (and ended) when it is a whole JSON object, and cut
// off when it is torn.
func mendEnd(f *os.File) error {
	info, err := f.Stat()
	if err != nil || info.Size() == 0 {
		return err
	}
	size := info.Size()
	const window = 64 << 10
	for end := size; end > 0; {
		start := max(end-window, 0)
		buf := make([]byte, end-start)
		if _, err := f.ReadAt(buf, start); err != nil && err != io.EOF {
			return err
		}
		if end == size && buf[len(buf)-1] == '\n' {
			return nil
		}
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 || start == 0 {
			lineStart := start + int64(i) + 1
			tail := make([]byte, size-lineStart)
			f.ReadAt(tail, lineStart)
			var obj map[string]json.RawMessage
			if json.Unmarshal(tail, &obj) == nil && obj != nil {
				_, err := f.Write([]byte("\n"))
				return err
			}
			return f.Truncate(lineStart)
		}
		end = start
	}
	return nil
}

func messageRole(raw json.RawMessage) string {
	var m struct{ Role string }
	json.Unmarshal(raw, &m)
	return m.Role
}

// loadSession reads a session file: a header line, then entries. Lines
// that are not JSON (a torn last line, say) are skipped; lines of any
// length are read as they stream by. Version 1 and 2 files are migrated
// in memory (and rewritten on the next append). A file where two entries
// have one id, or whose parentId links loop, is refused.
func loadSession(path string) (*session, error) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("Session file not found: %s", path)
	}
	var nr *errNotRegular
	if errors.As(err, &nr) {
		return nil, fmt.Errorf("Not a valid session file: %s (%s)", path, nr.kind)
	}
	if err != nil {
		return nil, fmt.Errorf("Cannot read session file %s: %v", path, unwrapPathError(err))
	}
	defer f.Close()
	ss := &session{path: path, written: true, loaded: true, byID: map[string]*sessionEntry{}}
	tooLong := func(line int) error {
		return fmt.Errorf("Not a valid session file: %s (line %d is longer than %d bytes)", path, line, maxSessionLineBytes)
	}
	line, lineNo, next, err := readHeaderLine(f)
	switch {
	case err == errLineTooLong:
		return nil, tooLong(lineNo)
	case err != nil:
		return nil, fmt.Errorf("Cannot read session file %s: %v", path, err)
	case line == nil:
		return nil, fmt.Errorf("Not a valid session file: %s (it is empty)", path)
	}
	var header struct {
		Type    string `json:"type"`
		Version *int   `json:"version"` // absent in version 1
		sessionHeader
	}
	if json.Unmarshal(line, &header) != nil || header.Type != "session" || header.ID == "" {
		return nil, fmt.Errorf("Not a valid session file: %s (the first line is not a session header)", path)
	}
	// Version 3 lines are written again as they are (keepLine); older
	// ones are kept for the migrations below.
	var parts int
	if info, err := f.Stat(); err == nil {
		parts = sessionParts(info.Size() - next)
	}
	read, err := readEntries(f, next, lineNo, header.Version != nil && *header.Version >= 3, parts)
	switch {
	case err == errLineTooLong:
		return nil, tooLong(read.tooLong)
	case err != nil:
		return nil, fmt.Errorf("Cannot read session file %s: %v", path, err)
	}
	ss.entries, ss.skipped = read.entries, read.skipped
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
	if id := duplicateID(ss.entries); id != nil {
		return nil, fmt.Errorf("Not a valid session file: %s (two entries have the id %q, so a parentId naming it "+
			"could mean either: each entry's id must be unique in its file)", path, *id)
	}
	for _, e := range ss.entries {
		ss.byID[e.ID] = e
	}
	if id := ss.parentLoop(); id != "" {
		return nil, fmt.Errorf("Not a valid session file: %s (the parentId links from entry %s loop)", path, id)
	}
	if len(ss.entries) > 0 {
		ss.leaf = ss.entries[len(ss.entries)-1].ID
	}
	if version < 3 {
		ss.written = false // the next append rewrites the file as version 3
	}
	return ss, nil
}

// duplicateID returns an id that two of entries have, or nil. A file
// with one is refused rather than repaired: which of the two an entry's
// parentId means cannot be known, and the tree built from either guess
// may loop.
func duplicateID(entries []*sessionEntry) *string {
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if seen[e.ID] {
			return &e.ID
		}
		seen[e.ID] = true
	}
	return nil
}

// parentLoop returns an entry whose chain of parents loops, or "".
func (ss *session) parentLoop() string {
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	for _, start := range ss.entries {
		var path []string
		for e := start; e != nil && state[e.ID] != done; {
			if state[e.ID] == visiting {
				return e.ID
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
	return ""
}

// branch is the path of entries from the root to leaf; it stops at an
// entry seen twice (loaded files never loop: see parentLoop).
func (ss *session) branch(leaf string) []*sessionEntry {
	var path []*sessionEntry
	seen := map[string]bool{}
	for e := ss.byID[leaf]; e != nil && !seen[e.ID]; {
		seen[e.ID] = true
		path = append(path, e)
		if e.ParentID == nil {
			break
		}
		e = ss.byID[*e.ParentID]
	}
	slices.Reverse(path)
	return path
}

// migrateV1 gives version 1's linear entries ids and parents, and turns a
// compaction's firstKeptEntryIndex into firstKeptEntryId.
func (ss *session) migrateV1() {
	ids := map[string]*sessionEntry{}
	prev := ""
	for _, e := range ss.entries {
		for e.ID == "" || ids[e.ID] != nil {
			var b [4]byte
			randomID(b[:])
			e.ID = hex.EncodeToString(b[:])
		}
		ids[e.ID] = e
		if prev != "" {
			p := prev
			e.ParentID = &p
		}
		prev = e.ID
	}
	for _, e := range ss.entries {
		var fields map[string]json.RawMessage
		json.Unmarshal(e.raw, &fields)
		fields["id"], _ = json.Marshal(e.ID)
		fields["parentId"], _ = json.Marshal(e.ParentID)
		if index, ok := fields["firstKeptEntryIndex"]; ok && e.Type == "compaction" {
			var i int
			// The index counts the file's lines, the header being 0.
			if json.Unmarshal(index, &i) == nil && i >= 1 && i <= len(ss.entries) {
				e.FirstKeptEntryID = ss.entries[i-1].ID
				fields["firstKeptEntryId"], _ = json.Marshal(e.FirstKeptEntryID)
			}
			delete(fields, "firstKeptEntryIndex")
		}
		e.raw = orderedEntry(fields)
	}
}

// migrateV2 renames the hookMessage role to custom, keeping the rest of
// each line as it was.
func (ss *session) migrateV2() {
	old, renamed := []byte(`"role":"hookMessage"`), []byte(`"role":"custom"`)
	for _, e := range ss.entries {
		if m, ok := e.msg.(rawMessage); ok && e.Type == "message" && e.role() == "hookMessage" {
			m = bytes.Replace(m, old, renamed, 1)
			e.msg, e.msgSize = decodeMessage(json.RawMessage(m)), len(m)
			e.raw = bytes.Replace(e.raw, old, renamed, 1)
		}
	}
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

// sessionContext is what a session says the conversation is.
type sessionContext struct {
	messages      []any
	thinkingLevel string
	provider      string
	modelID       string
	name          string
}

// conversation rebuilds the conversation from the leaf's branch: the latest
// compaction's summary first, then the entries it kept and those after
// it; the last model and thinking level on the branch; the session name.
func (ss *session) conversation() sessionContext {
	var c sessionContext
	path := ss.branch(ss.leaf)
	compaction := -1
	for i, e := range path {
		switch e.Type {
		case "thinking_level_change":
			c.thinkingLevel = e.ThinkingLevel
		case "model_change":
			c.provider, c.modelID = e.Provider, e.ModelID
		case "message":
			if provider, model, ok := e.answeredBy(); ok {
				c.provider, c.modelID = provider, model
			}
		case "compaction":
			compaction = i
		}
	}
	for _, e := range ss.entries {
		if e.Type == "session_info" {
			c.name = strings.TrimSpace(e.Name)
		}
	}
	start := 0
	if compaction >= 0 {
		comp := path[compaction]
		c.messages = append(c.messages, &summaryMessage{Role: "compactionSummary", Summary: comp.Summary,
			TokensBefore: comp.TokensBefore, Timestamp: entryMillis(comp)})
		for start = 0; start < compaction && path[start].ID != comp.FirstKeptEntryID; start++ {
		}
		if start == compaction {
			start = compaction + 1
		}
	}
	for i := start; i < len(path); i++ {
		if i == compaction {
			continue
		}
		switch e := path[i]; e.Type {
		case "message":
			if e.msg != nil {
				c.messages = append(c.messages, e.msg)
			}
		case "branch_summary":
			if e.Summary != "" {
				c.messages = append(c.messages, &summaryMessage{Role: "branchSummary", Summary: e.Summary, FromID: e.FromID, Timestamp: entryMillis(e)})
			}
		case "custom_message":
			var display struct {
				Display bool            `json:"display"`
				Details json.RawMessage `json:"details"`
			}
			json.Unmarshal(e.raw, &display)
			fields, _ := marshalJSON(struct {
				Role       string          `json:"role"`
				CustomType string          `json:"customType"`
				Content    json.RawMessage `json:"content"`
				Display    bool            `json:"display"`
				Details    json.RawMessage `json:"details,omitempty"`
				Timestamp  int64           `json:"timestamp"`
			}{"custom", e.CustomType, e.Content, display.Display, display.Details, entryMillis(e)})
			c.messages = append(c.messages, rawMessage(fields))
		}
	}
	return c
}

// answeredBy is the provider and model of an assistant message entry.
func (e *sessionEntry) answeredBy() (provider, model string, ok bool) {
	switch m := e.msg.(type) {
	case *assistantMessage:
		return m.Provider, m.Model, true
	case rawMessage:
		var probe struct{ Role, Provider, Model string }
		json.Unmarshal(m, &probe)
		return probe.Provider, probe.Model, probe.Role == "assistant"
	}
	return "", "", false
}

func entryMillis(e *sessionEntry) int64 {
	t, err := time.Parse(time.RFC3339Nano, e.Timestamp)
	if err != nil {
		return 0
	}
	return t.UnixMilli()
}

// summaryMessage is pi's compactionSummary and branchSummary message.
type summaryMessage struct {
	Role         string `json:"role"`
	Summary      string `json:"summary"`
	TokensBefore int    `json:"tokensBefore,omitempty"`
	FromID       string `json:"fromId,omitempty"`
	Timestamp    int64  `json:"timestamp"`
}

// rawMessage is a message of a kind rpi does not model (an extension's
// custom message, say), kept as it was.
type rawMessage json.RawMessage

func (m rawMessage) MarshalJSON() ([]byte, error) { return json.RawMessage(m), nil }

// decodeMessageSlow is decodeMessage by encoding/json, for what the fast
// path does not take (sessionline.go).
func decodeMessageSlow(raw json.RawMessage) any {
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	switch messageRole(raw) {
	case "user":
		var probe struct{ Content json.RawMessage }
		json.Unmarshal(raw, &probe)
		m := &userMessage{}
		if len(probe.Content) > 0 && probe.Content[0] == '"' {
			var text string
			json.Unmarshal(probe.Content, &text)
			var rest struct {
				Role      string
				Timestamp int64
			}
			json.Unmarshal(raw, &rest)
			return &userMessage{Role: "user", Content: textBlocks(text), Timestamp: rest.Timestamp}
		}
		if json.Unmarshal(raw, m) == nil {
			return m
		}
	case "assistant":
		m := &assistantMessage{}
		if json.Unmarshal(raw, m) == nil {
			return m
		}
	case "toolResult":
		m := &toolResultMessage{}
		if json.Unmarshal(raw, m) == nil {
			return m
		}
	case "bashExecution":
		var m bashExecutionMessage
		if json.Unmarshal(raw, &m) == nil {
			return m
		}
	case "compactionSummary", "branchSummary":
		m := &summaryMessage{}
		if json.Unmarshal(raw, m) == nil {
			return m
		}
	}
	return rawMessage(bytes.Clone(raw))
}

// ---- The server's session ----
// ---- The conversation store ----

// conversation owns the messages and the session they are recorded in.
// Its file writes happen under its own fileMu, never under the server's
// state lock, in the order the entries were made; a write that returned
// is on disk.
type conversation struct {
	clock clock
	warn  func(string) // tells the client (a notify) when the file cannot be written

	mu       sync.Mutex // guards the fields below
	session  *session
	msgs     []any
	name     string
	holds    int   // runs in progress: user bash results wait for them to end
	deferred []any // those results
	queue    []fileWrite
	writeErr error // the last write failure, until a write works again
	// appendWarned: the client was told an append failed (once is enough)
	appendWarned bool

	fileMu sync.Mutex // held while writing the file
	closed bool       // close ran: nothing is written any more (guarded by fileMu)

	lockMu  sync.Mutex // guards sessions' locks and retired; taken last, held briefly
	retired []*session // sessions no longer current whose file is still held, until their writes are done
}

// fileWrite is one write the file still needs: an entry's line, or the
// whole file.
type fileWrite struct {
	ss       *session
	line     []byte
	whole    []byte
	checkEnd bool
}

// convInfo is what get_state needs of the conversation.
type convInfo struct {
	path, id, name string
	messages       int
}

func (c *conversation) info() convInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return convInfo{c.session.path, c.session.header.ID, c.name, len(c.msgs)}
}

func (c *conversation) header() sessionHeader {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session.header
}

// messages is a copy of the conversation, oldest first.
func (c *conversation) messages() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]any{}, c.msgs...)
}

// record appends a session entry and writes it.
func (c *conversation) record(typ string, fields ...field) error {
	c.mu.Lock()
	err := c.addLocked(typ, fields)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.flush()
}

// addLocked adds an entry in memory and queues its write; c.mu is held.
func (c *conversation) addLocked(typ string, fields []field) error {
	ss := c.session
	e, err := ss.add(c.clock.Now(), typ, fields)
	if err != nil {
		return err
	}
	switch {
	case ss.path == "":
	case ss.written:
		c.queue = append(c.queue, fileWrite{ss: ss, line: e.line(), checkEnd: ss.loaded})
		ss.loaded = false
	case e.Type == "message" && e.role() == "assistant":
		// Like pi, the file appears once the first answer exists.
		c.queue = append(c.queue, fileWrite{ss: ss, whole: ss.wholeFile()})
		ss.written = true
	}
	return nil
}

// appendMessage adds a message to the conversation and the session.
func (c *conversation) appendMessage(m any) error {
	typ, fields := "message", []field{{"message", m}}
	if raw, ok := m.(rawMessage); ok && messageRole(json.RawMessage(raw)) == "custom" {
		typ, fields = "custom_message", customMessageFields(raw)
	}
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	err := c.addLocked(typ, fields)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.flush()
}

// customMessageFields are the fields of the custom_message entry pi
// records a custom message as.
func customMessageFields(raw rawMessage) []field {
	var m struct {
		CustomType string          `json:"customType"`
		Content    json.RawMessage `json:"content"`
		Display    bool            `json:"display"`
		Details    json.RawMessage `json:"details"`
	}
	json.Unmarshal(raw, &m)
	fields := []field{{"customType", m.CustomType}, {"content", m.Content}, {"display", m.Display}}
	if len(m.Details) > 0 {
		fields = append(fields, field{"details", m.Details})
	}
	return fields
}

// dropLast takes m out of the conversation again (a failed answer about
// to be retried); the session keeps its entry.
func (c *conversation) dropLast(m any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.msgs); n > 0 && c.msgs[n-1] == m {
		c.msgs = c.msgs[:n-1]
	}
}

// hold makes user bash results wait until release: a run is in progress
// and they must not land between a tool call and its result.
func (c *conversation) hold() {
	c.mu.Lock()
	c.holds++
	c.mu.Unlock()
}

// release ends a hold, adding the results that waited when none is left.
func (c *conversation) release() {
	c.mu.Lock()
	c.holds--
	var waiting []any
	if c.holds == 0 {
		waiting, c.deferred = c.deferred, nil
	}
	c.mu.Unlock()
	for _, m := range waiting {
		c.appendMessage(m)
	}
}

// addBashResult adds a user bash command's result now, or after the run
// in progress.
func (c *conversation) addBashResult(m bashExecutionMessage) {
	c.mu.Lock()
	if c.holds > 0 {
		c.deferred = append(c.deferred, m)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.appendMessage(m)
}

// setName names the session; an unchanged name writes nothing (changed
// is false).
func (c *conversation) setName(name string) (changed bool, err error) {
	c.mu.Lock()
	if name == c.name {
		c.mu.Unlock()
		return false, nil
	}
	c.name = name
	err = c.addLocked("session_info", []field{{"name", name}})
	c.mu.Unlock()
	if err != nil {
		return true, err
	}
	return true, c.flush()
}

// replace makes ss the session, its context the conversation. The
// session left lets go of its file once its writes are done (flush), or
// hands its hold to ss when ss is the same file (switch_session to the
// current session).
func (c *conversation) replace(ss *session, sc sessionContext) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.session; old != nil && old != ss {
		c.lockMu.Lock()
		if old.lock != nil && ss.lock == nil && holdsFile(old.lock, ss.path) {
			ss.lock, old.lock = old.lock, nil
		} else if old.lock != nil {
			c.retired = append(c.retired, old)
		}
		c.lockMu.Unlock()
	}
	c.session, c.msgs, c.name, c.deferred = ss, sc.messages, sc.name, nil
}

// compacted records a compaction and makes the conversation its summary
// and the messages it kept, in one step.
func (c *conversation) compacted(fields []field) error {
	c.mu.Lock()
	err := c.addLocked("compaction", fields)
	if err == nil {
		c.msgs = c.session.conversation().messages
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.flush()
}

// flush does the queued writes, in order. An append that fails (the file
// or its folder vanished) writes the whole file again, header first, from
// memory; a failure that stays is told to the client once and kept for
// writable to report.
func (c *conversation) flush() error {
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			err := c.writeErr
			c.mu.Unlock()
			c.unlockRetired()
			return err
		}
		w := c.queue[0]
		c.queue = c.queue[1:]
		c.mu.Unlock()
		var err error
		switch {
		case c.closed:
			err = errSessionClosed
		case w.line != nil:
			if err = c.holdFile(w.ss); err != nil {
				break // another rpi has the file: it is not written over
			}
			if err = appendLine(w.ss.path, w.line, w.checkEnd); err != nil {
				if !c.appendWarned {
					c.appendWarned = true
					c.warn(fmt.Sprintf("Cannot append to the session file %s (%v): writing it again from memory", w.ss.path, unwrapPathError(err)))
				}
				err = c.rewriteLocked(w.ss)
			}
		default:
			err = c.replaceFile(w.ss, w.whole)
		}
		c.noteWrite(w.ss, err)
	}
}

// rewriteLocked writes ss's whole file, dropping the queued writes it
// covers; c.fileMu is held.
func (c *conversation) rewriteLocked(ss *session) error {
	c.mu.Lock()
	whole := ss.wholeFile()
	c.queue = slices.DeleteFunc(c.queue, func(w fileWrite) bool { return w.ss == ss })
	c.mu.Unlock()
	if c.closed {
		return errSessionClosed
	}
	return c.replaceFile(ss, whole)
}

func (c *conversation) noteWrite(ss *session, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ss != c.session {
		return
	}
	if err != nil && c.writeErr == nil {
		c.warn(fmt.Sprintf("Cannot write the session file %s: %v. The conversation goes on in memory; commands that need the file fail until it can be written.", ss.path, unwrapPathError(err)))
	}
	c.writeErr = err
}

// writable reports whether the session file can be written, trying again
// (the whole file) when the last write failed.
func (c *conversation) writable() error {
	c.mu.Lock()
	failed, ss := c.writeErr != nil, c.session
	c.mu.Unlock()
	if !failed {
		return nil
	}
	c.fileMu.Lock()
	err := c.rewriteLocked(ss)
	c.fileMu.Unlock()
	c.noteWrite(ss, err)
	if err != nil {
		return fmt.Errorf("Cannot write the session file %s: %v", ss.path, unwrapPathError(err))
	}
	return nil
}

// branchEntries is the current branch, root first.
func (c *conversation) branchEntries() []*sessionEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session.branch(c.session.leaf)
}

// ---- The server's session ----

// openConversation sets up the session at startup: --no-session (memory
// only), --session FILE (loaded when it exists, else created there), or a
// new file in --session-dir or pi's default folder, which must be
// writable (nothing is created until the first answer).
func (s *server) openConversation() (*conversation, error) {
	s.env.trace.phase("tools, model")
	defer s.env.trace.phase("session")
	cfg := s.set.cfg
	c := &conversation{clock: s.env.clock, warn: func(msg string) {
		if !s.serving { // during startup: a notice after session_started
			s.set.notices = append(s.set.notices, msg)
			return
		}
		s.tell(uiRequest{Method: "notify", Message: msg, NotifyType: "warning"})
	}}
	now := s.env.clock.Now()
	var ss *session
	switch {
	case cfg.noSession:
		ss = newSession(now, "", cfg.cwd, "", "", "", true)
	case cfg.sessionFile != "":
		path := resolvePath(cfg.cwd, cfg.sessionFile)
		if _, err := os.Lstat(path); err == nil {
			loaded, err := openSession(path, s.lockWait())
			if err != nil {
				return nil, err
			}
			if notice := loaded.skippedNotice(); notice != "" {
				s.set.notices = append(s.set.notices, notice)
			}
			s.useSessionIn(c, loaded)
			return c, nil
		}
		ss = newSession(now, "", cfg.cwd, "", path, "", false)
	default:
		dir := s.sessionDir()
		if err := checkWritableDir(dir); err != nil {
			return nil, fmt.Errorf("Cannot use session directory %s: %v", dir, err)
		}
		if cfg.sessionID != "" && cfg.forkFrom == "" {
			if found, _ := filepath.Glob(filepath.Join(dir, "*_"+cfg.sessionID+".jsonl")); len(found) > 0 {
				loaded, err := openSession(found[0], s.lockWait())
				if err != nil {
					return nil, err
				}
				s.useSessionIn(c, loaded)
				return c, nil
			}
		}
		ss = newSession(now, cfg.sessionID, cfg.cwd, dir, "", "", false)
		if cfg.forkFrom != "" {
			from, err := loadSession(resolvePath(cfg.cwd, cfg.forkFrom))
			if err != nil {
				return nil, err
			}
			copyBranch(ss, from, from.leaf)
			ss.header.ParentSession = from.path
			s.useSessionIn(c, ss)
			s.conv = c
			c.writeWhole(ss)
			return c, nil
		}
	}
	c.replace(ss, sessionContext{name: cfg.name})
	s.conv = c
	s.startEntries()
	return c, nil
}

// sessionDir is where new session files go: --session-dir, or pi's folder
// for the cwd ("" with --no-session or --session).
func (s *server) sessionDir() string {
	cfg := s.set.cfg
	switch {
	case cfg.noSession || cfg.sessionFile != "":
		return ""
	case cfg.sessionDir != "":
		return resolvePath(cfg.cwd, cfg.sessionDir)
	}
	return defaultSessionDir(s.set.agentDir, cfg.cwd)
}

// checkWritableDir proves that dir, or the nearest folder above it that
// exists, can hold a new file (canCreateIn), without leaving anything
// behind.
func checkWritableDir(dir string) error {
	for {
		info, err := os.Stat(dir)
		if err == nil {
			if !info.IsDir() {
				return fmt.Errorf("%s is not a directory", dir)
			}
			return canCreateIn(dir)
		}
		if !errors.Is(err, os.ErrNotExist) || filepath.Dir(dir) == dir {
			return unwrapPathError(err)
		}
		dir = filepath.Dir(dir)
	}
}

// startEntries records a fresh session's model, thinking level and name,
// as pi does.
func (s *server) startEntries() {
	s.mu.Lock()
	m, thinking := s.model, s.effectiveThinking()
	s.mu.Unlock()
	if m != nil {
		s.conv.record("model_change", field{"provider", m.Provider}, field{"modelId", m.ID})
	}
	s.conv.record("thinking_level_change", field{"thinkingLevel", thinking})
	if name := s.conv.info().name; name != "" {
		s.conv.record("session_info", field{"name", name})
	}
}

// useSession makes ss the current session: its conversation, model,
// thinking level and name; the queues and todos are emptied, the loops
// move to the new session (loops.go). It reports
// whether the queues held anything.
func (s *server) useSession(ss *session) (queuesCleared bool) {
	s.moveLoops(ss.path)
	return s.useSessionIn(s.conv, ss)
}

func (s *server) useSessionIn(c *conversation, ss *session) (queuesCleared bool) {
	sc := ss.conversation()
	s.mu.Lock()
	defer s.mu.Unlock()
	queuesCleared = len(s.steering)+len(s.followUp) > 0
	if sc.thinkingLevel != "" && slices.Contains(thinkingLevels, sc.thinkingLevel) {
		s.thinkingLevel = sc.thinkingLevel
	}
	for _, m := range s.usableModels(s.model) {
		if m.Provider == sc.provider && m.ID == sc.modelID {
			s.model = m
		}
	}
	s.steering, s.followUp, s.todos = nil, nil, nil
	c.replace(ss, sc)
	return queuesCleared
}

// announceSession follows a session change's answer: queue_update when
// the change emptied the queues, then session_started, then the new
// session's restored loops.
func (s *server) announceSession(queuesCleared bool) {
	s.conv.flush() // the session left lets go of its file
	if queuesCleared {
		s.emitQueue()
	}
	s.emit("session_started", s.conv.header(), nil)
	s.announceLoops()
}

var notCancelled = struct {
	Cancelled bool `json:"cancelled"`
}{false}

// newSessionCommand starts a new, empty session (a running agent is
// aborted first; its last events are still sent and saved).
// Fields: [parentSession] (path recorded in the new header).
// Answer: {"cancelled":false}, from the background when a run had to
// stop first. Events: session_started after the answer.
func (s *server) newSessionCommand(r *request) (any, error) {
	parent, err := r.optStr("parentSession")
	if err != nil {
		return nil, err
	}
	cleared := false
	return s.whenIdle(r, nil, func() (any, error) {
		info := s.conv.info()
		dir := s.sessionDir()
		if dir == "" && info.path != "" {
			dir = filepath.Dir(info.path)
		}
		ss := newSession(s.env.clock.Now(), "", s.set.cwd, dir, "", parent, info.path == "")
		cleared = s.useSession(ss)
		s.startEntries()
		return notCancelled, nil
	}, func() { s.announceSession(cleared) })
}

// switchSession opens another session file, read in the background. A
// missing or invalid file fails and the current session stays as it was.
// Fields: sessionPath. Answer: {"cancelled":false}. Events:
// session_started with the loaded header after the answer.
func (s *server) switchSession(r *request) (any, error) {
	path, err := r.str("sessionPath")
	if err != nil {
		return nil, err
	}
	path = resolvePath(s.set.cwd, path)
	cleared := false
	var loaded *session
	return s.whenIdle(r, func() error {
		loaded, err = s.conv.open(path, s.lockWait())
		return err
	}, func() (any, error) {
		cleared = s.useSession(loaded)
		return notCancelled, nil
	}, func() {
		s.announceSession(cleared)
		if notice := loaded.skippedNotice(); notice != "" {
			s.tell(uiRequest{Method: "notify", Message: notice, NotifyType: "warning"})
		}
	})
}

// userText joins the text blocks of a user message.
func userText(msg any) (string, bool) {
	m, ok := msg.(*userMessage)
	if !ok {
		return "", false
	}
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String(), true
}

// fork starts a new session from before one of the user's messages: it
// holds the history up to (not including) that message, and its header
// names the old file as parentSession.
// Fields: entryId (of a user message entry). Answer: {text (that
// message's text, to edit and send again), cancelled:false}. Events:
// session_started after the answer. UI: set_editor_text with the text.
func (s *server) fork(r *request) (any, error) {
	id, err := r.str("entryId")
	if err != nil {
		return nil, err
	}
	s.conv.mu.Lock()
	old := s.conv.session
	e := old.byID[id]
	s.conv.mu.Unlock()
	var text string
	ok := e != nil && e.Type == "message"
	if ok {
		text, ok = userText(e.msg)
	}
	if !ok {
		return nil, errors.New("Invalid entry ID for forking")
	}
	cleared := false
	return s.whenIdle(r, nil, func() (any, error) {
		dir := s.sessionDir()
		if dir == "" && old.path != "" {
			dir = filepath.Dir(old.path)
		}
		forked := newSession(s.env.clock.Now(), "", s.set.cwd, dir, "", old.path, old.path == "")
		if e.ParentID != nil {
			s.conv.mu.Lock()
			copyBranch(forked, old, *e.ParentID)
			s.conv.mu.Unlock()
		}
		cleared = s.useSession(forked)
		s.conv.writeWhole(forked)
		return struct {
			Text      string `json:"text"`
			Cancelled bool   `json:"cancelled"`
		}{text, false}, nil
	}, func() {
		s.announceSession(cleared)
		s.tell(uiRequest{Method: "set_editor_text", Text: text})
	})
}

// copyBranch gives ss the entries of from's branch up to leaf (the same
// ids), ending there.
func copyBranch(ss, from *session, leaf string) {
	for _, e := range from.branch(leaf) {
		ss.entries = append(ss.entries, e)
		ss.byID[e.ID] = e
		ss.leaf = e.ID
	}
}

// writeWhole writes a session made from another's entries at once, when
// it holds an answer (as pi does: a file appears with the first answer).
func (c *conversation) writeWhole(ss *session) {
	hasAnswer := slices.ContainsFunc(ss.entries, func(e *sessionEntry) bool {
		return e.Type == "message" && e.role() == "assistant"
	})
	if !hasAnswer || ss.path == "" {
		return
	}
	c.mu.Lock()
	c.queue = append(c.queue, fileWrite{ss: ss, whole: ss.wholeFile()})
	ss.written = true
	c.mu.Unlock()
	c.flush()
}

// clone starts a new session holding the current branch as it is (the same
// entries), whose header names the old file as parentSession (pi 1.6).
// Fields: none. Answer: {"cancelled":false}. Events: session_started after
// the answer.
func (s *server) clone(r *request) (any, error) {
	s.conv.mu.Lock()
	old := s.conv.session
	leaf := old.leaf
	s.conv.mu.Unlock()
	if leaf == "" {
		return nil, errors.New("Cannot clone session: no current entry selected")
	}
	cleared := false
	return s.whenIdle(r, nil, func() (any, error) {
		dir := s.sessionDir()
		if dir == "" && old.path != "" {
			dir = filepath.Dir(old.path)
		}
		cloned := newSession(s.env.clock.Now(), "", s.set.cwd, dir, "", old.path, old.path == "")
		s.conv.mu.Lock()
		copyBranch(cloned, old, leaf)
		s.conv.mu.Unlock()
		cleared = s.useSession(cloned)
		s.conv.writeWhole(cloned)
		return notCancelled, nil
	}, func() { s.announceSession(cleared) })
}

// entriesAnswer is get_entries' answer.
type entriesAnswer struct {
	Entries []json.RawMessage `json:"entries"`
	LeafID  *string           `json:"leafId"`
}

// getEntries answers the session's entries in file order (every branch),
// or only those after one.
// Fields: [since] (an entry id). Answer: {entries, leafId (null when the
// session is empty)}; an unknown since fails "Entry not found: <id>".
func (s *server) getEntries(r *request) (any, error) {
	since, err := r.optStr("since")
	if err != nil {
		return nil, err
	}
	s.conv.mu.Lock()
	defer s.conv.mu.Unlock()
	ss := s.conv.session
	entries := ss.entries
	if since != "" {
		i := slices.IndexFunc(entries, func(e *sessionEntry) bool { return e.ID == since })
		if i < 0 {
			return nil, fmt.Errorf("Entry not found: %s", since)
		}
		entries = entries[i+1:]
	}
	answer := entriesAnswer{Entries: []json.RawMessage{}}
	for _, e := range entries {
		answer.Entries = append(answer.Entries, e.line())
	}
	if ss.leaf != "" {
		leaf := ss.leaf
		answer.LeafID = &leaf
	}
	return answer, nil
}

// treeNode is one node of get_tree: an entry and the entries under it.
type treeNode struct {
	Entry    json.RawMessage `json:"entry"`
	Children []*treeNode     `json:"children"`
}

// getTree answers the session's entries as a tree (pi 1.6's shape, plus
// the original's activeLeafId): roots are the entries without a parent
// (or whose parent is missing), children in timestamp order.
// Fields: none. Answer: {tree:[{entry, children}], leafId, activeLeafId
// (the leaf the next entry hangs under; rpi has no other leaf, so it is
// leafId)}.
func (s *server) getTree(r *request) (any, error) {
	s.conv.mu.Lock()
	defer s.conv.mu.Unlock()
	ss := s.conv.session
	nodes := map[string]*treeNode{}
	for _, e := range ss.entries {
		nodes[e.ID] = &treeNode{Entry: e.line(), Children: []*treeNode{}}
	}
	roots := []*treeNode{}
	for _, e := range ss.entries {
		if e.ParentID != nil && nodes[*e.ParentID] != nil && *e.ParentID != e.ID {
			parent := nodes[*e.ParentID]
			parent.Children = append(parent.Children, nodes[e.ID])
		} else {
			roots = append(roots, nodes[e.ID])
		}
	}
	stamp := map[*treeNode]string{}
	for _, e := range ss.entries {
		stamp[nodes[e.ID]] = e.Timestamp
	}
	for _, n := range nodes {
		slices.SortStableFunc(n.Children, func(a, b *treeNode) int { return strings.Compare(stamp[a], stamp[b]) })
	}
	var leaf *string
	if ss.leaf != "" {
		l := ss.leaf
		leaf = &l
	}
	return struct {
		Tree         []*treeNode `json:"tree"`
		LeafID       *string     `json:"leafId"`
		ActiveLeafID *string     `json:"activeLeafId"`
	}{roots, leaf, leaf}, nil
}

// getForkMessages lists the user messages a fork can start from, in file
// order, every branch included.
// Fields: none. Answer: {"messages":[{entryId, text}]}.
func (s *server) getForkMessages(r *request) (any, error) {
	type forkPoint struct {
		EntryID string `json:"entryId"`
		Text    string `json:"text"`
	}
	s.conv.mu.Lock()
	defer s.conv.mu.Unlock()
	points := []forkPoint{}
	for _, e := range s.conv.session.entries {
		if e.Type != "message" {
			continue
		}
		if text, ok := userText(e.msg); ok && text != "" {
			points = append(points, forkPoint{e.ID, text})
		}
	}
	return struct {
		Messages []forkPoint `json:"messages"`
	}{points}, nil
}

// ---- Export ----

// replaceFileWith is replaceFile with the content written by write
// through a buffer, as it is made.
func replaceFileWith(path string, extraFlag int, write func(w *bufio.Writer) error) error {
	f, err := openRegular(path, os.O_WRONLY|extraFlag, 0o644)
	if err != nil {
		return err
	}
	err = f.Truncate(0)
	if err == nil {
		err = write(bufio.NewWriterSize(f, 256<<10))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// exportHTML writes the conversation as one self-contained HTML file,
// every piece of text escaped, in the background; it only writes regular
// files.
// Fields: [outputPath] (relative to the cwd; default: beside the session
// file, or rpi-session-<id>.html in the cwd without one).
// Answer: {"path": …}.
func (s *server) exportHTML(r *request) (any, error) {
	out, err := r.optStr("outputPath")
	if err != nil {
		return nil, err
	}
	messages := s.conv.messages()
	info := s.conv.info()
	header := s.conv.header()
	if len(messages) == 0 {
		return nil, errors.New("Nothing to export yet - start a conversation first")
	}
	switch {
	case out != "":
		out = resolvePath(s.set.cwd, out)
	case info.path != "":
		out = strings.TrimSuffix(info.path, ".jsonl") + ".html"
	default:
		out = filepath.Join(s.set.cwd, "rpi-session-"+header.ID+".html")
	}
	s.answerLater(r, func() (any, error) {
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return nil, fmt.Errorf("Cannot write %s: %v", out, unwrapPathError(err))
		}
		err := replaceFileWith(out, os.O_CREATE, func(w *bufio.Writer) error { return writeHTML(w, header, info.name, messages) })
		if err != nil {
			return nil, fileError("write", out, err)
		}
		return struct {
			Path string `json:"path"`
		}{out}, nil
	})
	return noReply{}, nil
}

// writeHTML writes the export page to w as it goes, never held whole: a
// header, then one block per message.
func writeHTML(w *bufio.Writer, h sessionHeader, name string, messages []any) error {
	title := "rpi session " + h.ID
	if name != "" {
		title = name
	}
	text := func(parts ...string) {
		for _, part := range parts {
			writeHTMLEscaped(w, part)
		}
	}
	w.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>")
	text(title)
	w.WriteString("</title>\n<style>" +
		"body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#222}" +
		".m{border-left:4px solid #ccc;margin:1rem 0;padding:.5rem 1rem;background:#fafafa}" +
		".user{border-color:#36c}.assistant{border-color:#393}.toolResult{border-color:#999}.error{border-color:#c33}" +
		".role{font-size:.8rem;color:#666;text-transform:uppercase}pre{white-space:pre-wrap;word-break:break-word;margin:.3rem 0}" +
		".thinking{color:#777;font-style:italic}</style></head><body>\n<h1>")
	text(title)
	w.WriteString("</h1>\n<p>Session ")
	text(h.ID)
	w.WriteString(", started ")
	text(h.Timestamp)
	w.WriteString(" in <code>")
	text(h.Cwd)
	w.WriteString("</code></p>\n")
	// A block is opened with its class and role, then its body is written.
	open := func(class string, role ...string) {
		w.WriteString(`<div class="m ` + class + `"><div class="role">`)
		text(role...)
		w.WriteString("</div>")
	}
	pre := func(parts ...string) {
		w.WriteString("<pre>")
		text(parts...)
		w.WriteString("</pre>")
	}
	content := func(blocks []contentBlock) {
		for _, c := range blocks {
			switch c.Type {
			case "text":
				pre(c.Text)
			case "thinking":
				w.WriteString(`<pre class="thinking">`)
				text(c.Thinking)
				w.WriteString("</pre>")
			case "toolCall":
				pre("→ ", c.Name, " ", string(c.Arguments))
			case "image":
				if strings.HasPrefix(c.MimeType, "image/") {
					w.WriteString(`<img alt="image" style="max-width:100%" src="data:`)
					text(c.MimeType)
					w.WriteString(";base64,")
					text(c.Data)
					w.WriteString(`">`)
				}
			}
		}
	}
	for _, m := range messages {
		switch m := m.(type) {
		case *userMessage:
			open("user", "user")
			content(m.Content)
		case *assistantMessage:
			class := "assistant"
			if m.ErrorMessage != "" {
				class = "assistant error"
			}
			open(class, "assistant · ", m.Provider, "/", m.Model)
			content(m.Content)
			if m.ErrorMessage != "" {
				pre(m.StopReason, ": ", m.ErrorMessage)
			}
		case *toolResultMessage:
			class := "toolResult"
			if m.IsError {
				class += " error"
			}
			open(class, "result of ", m.ToolName)
			content(m.Content)
		case bashExecutionMessage:
			open("user", "bash")
			pre("$ ", m.Command, "\n", m.Output)
		case *summaryMessage:
			open("user", m.Role)
			pre(m.Summary)
		case rawMessage:
			open("user", messageRole(json.RawMessage(m)))
			pre(string(m))
		default:
			continue
		}
		w.WriteString("</div>\n")
	}
	w.WriteString("</body></html>\n")
	return w.Flush()
}

// writeHTMLEscaped writes text escaped for HTML element content and
// attribute values.
func writeHTMLEscaped(w *bufio.Writer, text string) {
	start := 0
	for i := 0; i < len(text); i++ {
		var escaped string
		switch text[i] {
		case '&':
			escaped = "&amp;"
		case '<':
			escaped = "&lt;"
		case '>':
			escaped = "&gt;"
		case '"':
			escaped = "&quot;"
		case '\'':
			escaped = "&#39;"
		default:
			continue
		}
		w.WriteString(text[start:i])
		w.WriteString(escaped)
		start = i + 1
	}
	w.WriteString(text[start:])
}

// ---- The session file's lock ----

// Two rpi processes writing one session file would each chain entries
// to its own last one, and the other's would fall off the conversation.
// So a session holds its file: an advisory lock (flock on Unix, LockFileEx
// on Windows; tryLock in sys_*.go) on an open descriptor of the file,
// taken before the file is read and held while the session is current.
// Another rpi that opens the file waits up to sessionLockWait for it, then
// is refused. A session lets go of its file when it stops being current
// (once its writes are done) and when rpi shuts down, as soon as its last
// entry is written (conversation.close).

// sessionLockWait is how long opening a file another rpi holds waits for
// it: a client that hands a session from one process to the next (pi-acp's
// session/load stops the old one and starts the new one at once) must not
// be refused while the old one writes its last entry.
const sessionLockWait = 5 * time.Second

// errSessionClosed is a write after the conversation was closed.
var errSessionClosed = errors.New("the session was closed")

// lockSessionFile takes rpi's hold on the file at path, waiting up to wait
// while another rpi has it, and returns the descriptor that holds it (nil
// when there is no file yet: it is held from when rpi creates it).
func lockSessionFile(path string, wait time.Duration) (*os.File, error) {
	deadline := time.Now().Add(wait)
	for {
		f, err := openLockable(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		var nr *errNotRegular
		if errors.As(err, &nr) {
			return nil, fmt.Errorf("Not a valid session file: %s (%s)", path, nr.kind)
		}
		if err != nil {
			return nil, fmt.Errorf("Cannot read session file %s: %v", path, unwrapPathError(err))
		}
		ok, err := tryLock(f)
		switch {
		case err != nil:
			f.Close()
			return nil, fmt.Errorf("Cannot lock session file %s: %v", path, err)
		case ok && holdsFile(f, path):
			return f, nil
		}
		// Another rpi has it, or replaced it meanwhile: try again.
		f.Close()
		if !ok && !time.Now().Before(deadline) {
			return nil, fmt.Errorf("Session file %s is in use by another rpi process, which did not let go of it within %v. "+
				"End that process (or close the session there) and try again; to work on a copy instead, start rpi with --fork %s.",
				path, wait, path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// holdsFile reports whether lock holds the file now at path.
func holdsFile(lock *os.File, path string) bool {
	if lock == nil {
		return false
	}
	held, err := lock.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(path)
	return err == nil && os.SameFile(held, now)
}

// openSession loads the session file at path, holding it (see
// lockSessionFile); unlock lets go of it.
func openSession(path string, wait time.Duration) (*session, error) {
	lock, err := lockSessionFile(path, wait)
	if err != nil {
		return nil, err
	}
	ss, err := loadSession(path)
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		return nil, err
	}
	ss.lock = lock // not shared yet: no lockMu needed
	return ss, nil
}

// unlock lets go of the session's file: another rpi may open it then.
// lockMu is held, and no write of the session is under way.
func (ss *session) unlock() {
	if ss.lock != nil {
		ss.lock.Close()
		ss.lock = nil
	}
}

// open loads the session file at path for a session change: held, as
// openSession does, or, when it is the file the current session holds,
// to take that hold over when it becomes current (replace).
func (c *conversation) open(path string, wait time.Duration) (*session, error) {
	c.mu.Lock()
	cur := c.session
	c.mu.Unlock()
	c.lockMu.Lock()
	same := cur != nil && holdsFile(cur.lock, path)
	c.lockMu.Unlock()
	if same {
		return loadSession(path)
	}
	return openSession(path, wait)
}

// lockWait is how long opening a session file another rpi holds waits.
func (s *server) lockWait() time.Duration { return cmp.Or(s.env.lockWait, sessionLockWait) }

// holdFile makes sure ss holds its file before an append: a session that
// has no hold yet (it was loaded beside the current session's file, say)
// takes it, without waiting. c.fileMu is held.
func (c *conversation) holdFile(ss *session) error {
	c.lockMu.Lock()
	held := ss.lock != nil
	c.lockMu.Unlock()
	if held {
		return nil
	}
	lock, err := lockSessionFile(ss.path, 0)
	if err != nil || lock == nil {
		return err // no file: the append fails and writes it whole
	}
	c.lockMu.Lock()
	ss.lock = lock
	c.lockMu.Unlock()
	return nil
}

// unlockRetired lets go of the files of the sessions no longer current;
// their writes are done. c.fileMu is held.
func (c *conversation) unlockRetired() {
	c.lockMu.Lock()
	defer c.lockMu.Unlock()
	for _, ss := range c.retired {
		ss.unlock()
	}
	c.retired = nil
}

// close writes what is queued, then lets go of every session file and
// writes nothing more: rpi is shutting down, or (ACP's session/close) the
// conversation ends while rpi goes on.
func (c *conversation) close() {
	c.flush()
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	c.closed = true
	c.mu.Lock()
	ss := c.session
	c.mu.Unlock()
	c.unlockRetired()
	c.lockMu.Lock()
	ss.unlock()
	c.lockMu.Unlock()
}
