package main

// The session store: pi's session file format (version 3), written as the
// conversation happens and read back (with versions 1 and 2 migrated).

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// sessionEntry is one entry of a session file. The fields rpi reads are
// decoded; raw keeps the line as it was, so entries and fields rpi does
// not know survive a rewrite untouched.
type sessionEntry struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	ParentID         *string         `json:"parentId"`
	Message          json.RawMessage `json:"message"`
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

	raw []byte
}

// session is the conversation's record: its header, its entries as a
// tree, and the file they are written to.
type session struct {
	header  sessionHeader
	path    string // "" for an in-memory session (--no-session)
	written bool   // the file exists and holds every entry so far
	entries []*sessionEntry
	byID    map[string]*sessionEntry
	leaf    string // the current entry; "" before the first
}

// newSession starts an empty session whose file (unless in memory) will be
// path, or a fresh name in dir.
func newSession(cwd, dir, path, parent string, inMemory bool) *session {
	now := time.Now()
	s := &session{header: sessionHeader{Version: 3, ID: newUUIDv7(now), Timestamp: timestamp(now), Cwd: cwd, ParentSession: parent},
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
		rand.Read(b[:])
		if id := hex.EncodeToString(b[:]); ss.byID[id] == nil {
			return id
		}
	}
}

// append adds an entry under the current leaf. fields are the entry's own
// fields in order after type, id, parentId and timestamp. The file is
// created, whole, once the first assistant message exists; after that
// every entry is appended with one write.
func (ss *session) append(typ string, fields ...any) (*sessionEntry, error) {
	id := ss.newEntryID()
	var parent *string
	if ss.leaf != "" {
		p := ss.leaf
		parent = &p
	}
	var line bytes.Buffer
	head, _ := encodeJSON(struct {
		Type      string  `json:"type"`
		ID        string  `json:"id"`
		ParentID  *string `json:"parentId"`
		Timestamp string  `json:"timestamp"`
	}{typ, id, parent, timestamp(time.Now())})
	line.Write(head[:len(head)-1])
	for i := 0; i+1 < len(fields); i += 2 {
		value, err := encodeJSON(fields[i+1])
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&line, ",%q:%s", fields[i], value)
	}
	line.WriteString("}")
	e := &sessionEntry{}
	if err := json.Unmarshal(line.Bytes(), e); err != nil {
		return nil, err
	}
	e.raw = line.Bytes()
	ss.entries = append(ss.entries, e)
	ss.byID[id] = e
	ss.leaf = id
	return e, ss.persist(e)
}

// persist writes what the file still lacks.
func (ss *session) persist(e *sessionEntry) error {
	if ss.path == "" {
		return nil
	}
	if ss.written {
		return appendLine(ss.path, e.raw)
	}
	if e.Type == "message" && messageRole(e.Message) == "assistant" {
		return ss.rewrite()
	}
	return nil
}

// rewrite writes the whole file: the header, then every entry.
func (ss *session) rewrite() error {
	var buf bytes.Buffer
	header, _ := encodeJSON(struct {
		Type string `json:"type"`
		sessionHeader
	}{"session", ss.header})
	buf.Write(header)
	buf.WriteByte('\n')
	for _, e := range ss.entries {
		buf.Write(e.raw)
		buf.WriteByte('\n')
	}
	if err := os.MkdirAll(filepath.Dir(ss.path), 0o755); err != nil {
		return err
	}
	tmp := ss.path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, ss.path); err != nil {
		return err
	}
	ss.written = true
	return nil
}

// appendLine appends one line to a file with a single write.
func appendLine(path string, line []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(append([]byte{}, line...), '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func messageRole(raw json.RawMessage) string {
	var m struct{ Role string }
	json.Unmarshal(raw, &m)
	return m.Role
}

// loadSession reads a session file: a header line, then entries. Lines
// that are not JSON (a torn last line, say) are skipped. Version 1 and 2
// files are migrated in memory (and rewritten on the next append).
func loadSession(path string) (*session, error) {
	if info, err := os.Stat(path); err == nil && !info.Mode().IsRegular() {
		return nil, fmt.Errorf("Not a valid session file: %s (not a regular file)", path)
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("Session file not found: %s", path)
	}
	if err != nil {
		return nil, fmt.Errorf("Cannot read session file %s: %v", path, unwrapPathError(err))
	}
	ss := &session{path: path, written: true, byID: map[string]*sessionEntry{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxLineBytes)
	first := true
	var header struct {
		Type    string `json:"type"`
		Version *int   `json:"version"` // absent in version 1
		sessionHeader
	}
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if first {
			first = false
			if json.Unmarshal(line, &header) != nil || header.Type != "session" || header.ID == "" {
				return nil, fmt.Errorf("Not a valid session file: %s (the first line is not a session header)", path)
			}
			continue
		}
		e := &sessionEntry{}
		if json.Unmarshal(line, e) != nil || e.Type == "" {
			continue
		}
		e.raw = bytes.Clone(line)
		ss.entries = append(ss.entries, e)
	}
	if first {
		return nil, fmt.Errorf("Not a valid session file: %s (it is empty)", path)
	}
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
	for _, e := range ss.entries {
		ss.byID[e.ID] = e
	}
	if len(ss.entries) > 0 {
		ss.leaf = ss.entries[len(ss.entries)-1].ID
	}
	if version < 3 {
		ss.written = false // the next append rewrites the file as version 3
	}
	return ss, nil
}

// migrateV1 gives version 1's linear entries ids and parents, and turns a
// compaction's firstKeptEntryIndex into firstKeptEntryId.
func (ss *session) migrateV1() {
	ids := map[string]*sessionEntry{}
	prev := ""
	for _, e := range ss.entries {
		for e.ID == "" || ids[e.ID] != nil {
			var b [4]byte
			rand.Read(b[:])
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
		if e.Type == "message" && messageRole(e.Message) == "hookMessage" {
			e.Message = bytes.Replace(e.Message, old, renamed, 1)
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
		fmt.Fprintf(&buf, "%q:%s", k, v)
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

// branch is the path of entries from the root to the leaf.
func (ss *session) branch(leaf string) []*sessionEntry {
	var path []*sessionEntry
	for e := ss.byID[leaf]; e != nil; {
		path = append([]*sessionEntry{e}, path...)
		if e.ParentID == nil {
			break
		}
		e = ss.byID[*e.ParentID]
	}
	return path
}

// sessionContext is what a session says the conversation is.
type sessionContext struct {
	messages      []any
	thinkingLevel string
	provider      string
	modelID       string
	name          string
}

// context rebuilds the conversation from the leaf's branch: the latest
// compaction's summary first, then the entries it kept and those after
// it; the last model and thinking level on the branch; the session name.
func (ss *session) context() sessionContext {
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
			var m struct{ Role, Provider, Model string }
			json.Unmarshal(e.Message, &m)
			if m.Role == "assistant" {
				c.provider, c.modelID = m.Provider, m.Model
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
			if m := decodeMessage(e.Message); m != nil {
				c.messages = append(c.messages, m)
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
			fields, _ := encodeJSON(struct {
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

// decodeMessage reads a stored message into its type.
func decodeMessage(raw json.RawMessage) any {
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

// compactionSettings are pi's settings.json "compaction" block.
type compactionSettings struct {
	ReserveTokens    int `json:"reserveTokens"`
	KeepRecentTokens int `json:"keepRecentTokens"`
}

// openSession sets up the session at startup: --no-session (memory only),
// --session FILE (loaded when it exists, else created there), or a new
// file in --session-dir or pi's default folder, which must be writable.
func (s *server) openSession(agentDir string) error {
	cfg := s.cfg
	switch {
	case cfg.noSession:
		s.session = newSession(cfg.cwd, "", "", "", true)
	case cfg.sessionFile != "":
		path := resolvePath(cfg.cwd, cfg.sessionFile)
		if _, err := os.Stat(path); err == nil {
			ss, err := loadSession(path)
			if err != nil {
				return err
			}
			s.useSession(ss)
			return nil
		}
		s.session = newSession(cfg.cwd, "", path, "", false)
	default:
		dir := defaultSessionDir(agentDir, cfg.cwd)
		if cfg.sessionDir != "" {
			dir = resolvePath(cfg.cwd, cfg.sessionDir)
		}
		if err := checkWritableDir(dir); err != nil {
			return fmt.Errorf("Cannot use session directory %s: %v", dir, err)
		}
		s.sessionDir = dir
		s.session = newSession(cfg.cwd, dir, "", "", false)
	}
	s.header = s.session.header
	s.startEntries()
	return nil
}

// checkWritableDir creates dir if needed and proves a file can be made there.
func checkWritableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return unwrapPathError(err)
	}
	f, err := os.CreateTemp(dir, ".rpi-check-*")
	if err != nil {
		return unwrapPathError(err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// startEntries records a fresh session's model, thinking level and name,
// as pi does. s.mu must be held or the server not yet serving.
func (s *server) startEntries() {
	if s.model != nil {
		s.record("model_change", "provider", s.model.Provider, "modelId", s.model.ID)
	}
	s.record("thinking_level_change", "thinkingLevel", s.effectiveThinking())
	if s.sessionName != "" {
		s.record("session_info", "name", s.sessionName)
	}
}

// record appends a session entry; a failure to write is reported on
// stderr (the conversation goes on in memory). s.mu must be held.
func (s *server) record(typ string, fields ...any) *sessionEntry {
	e, err := s.session.append(typ, fields...)
	if err != nil {
		fmt.Fprintf(s.stderr, "rpi: cannot write session file %s: %v\n", s.session.path, err)
	}
	return e
}

// useSession makes ss the current session: its conversation, model,
// thinking level and name; the queues are emptied. It reports whether
// they held anything. s.mu must be held or the server not serving.
func (s *server) useSession(ss *session) (queuesCleared bool) {
	queuesCleared = len(s.steering)+len(s.followUp) > 0
	c := ss.context()
	s.session, s.header = ss, ss.header
	s.messages = c.messages
	s.sessionName = c.name
	if c.thinkingLevel != "" && oneOf(c.thinkingLevel, thinkingLevels) {
		s.thinkingLevel = c.thinkingLevel
	}
	for _, m := range s.usableModels() {
		if m.Provider == c.provider && m.ID == c.modelID {
			s.model = m
		}
	}
	s.steering, s.followUp, s.deferred, s.todos = nil, nil, nil, nil
	return queuesCleared
}

// stopRun aborts a running agent and waits for it to settle, so a session
// change finds the conversation still.
func (s *server) stopRun() error {
	s.mu.Lock()
	run := s.run
	s.mu.Unlock()
	if run == nil {
		return nil
	}
	run.cancel()
	select {
	case <-run.settled:
		return nil
	case <-time.After(exitLimit):
		return errors.New("The running agent did not stop in time; try again")
	}
}

// switchTo answers r with data, then (when the change emptied the queues)
// queue_update and session_started for the new session.
func (s *server) switchTo(r *request, data any, queuesCleared bool) (any, error) {
	s.reply(r, data, nil)
	if queuesCleared {
		s.emitQueue()
	}
	s.emit("session_started", s.header)
	return noReply{}, nil
}

var notCancelled = struct {
	Cancelled bool `json:"cancelled"`
}{false}

// newSessionCommand starts a new, empty session (a running agent is
// aborted first; its last events are still sent and saved).
// Fields: [parentSession] (path recorded in the new header).
// Answer: {"cancelled":false}. Events: session_started after the answer.
func (s *server) newSessionCommand(r *request) (any, error) {
	parent, err := r.optStr("parentSession")
	if err != nil {
		return nil, err
	}
	if err := s.stopRun(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	inMemory := s.session.path == ""
	dir := s.sessionDir
	if dir == "" && !inMemory {
		dir = filepath.Dir(s.session.path)
	}
	cleared := s.useSession(newSession(s.cfg.cwd, dir, "", parent, inMemory))
	s.messages, s.sessionName = nil, ""
	s.startEntries()
	s.mu.Unlock()
	return s.switchTo(r, notCancelled, cleared)
}

// switchSession opens another session file. A missing or invalid file
// fails and the current session stays as it was.
// Fields: sessionPath. Answer: {"cancelled":false}. Events:
// session_started with the loaded header after the answer.
func (s *server) switchSession(r *request) (any, error) {
	path, err := r.str("sessionPath")
	if err != nil {
		return nil, err
	}
	ss, err := loadSession(resolvePath(s.cfg.cwd, path))
	if err != nil {
		return nil, err
	}
	if err := s.stopRun(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	cleared := s.useSession(ss)
	s.mu.Unlock()
	return s.switchTo(r, notCancelled, cleared)
}

// userText joins the text blocks of a stored user message.
func userText(raw json.RawMessage) (string, bool) {
	m, ok := decodeMessage(raw).(*userMessage)
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
	s.mu.Lock()
	old := s.session
	e := old.byID[id]
	s.mu.Unlock()
	var text string
	ok := e != nil && e.Type == "message"
	if ok {
		text, ok = userText(e.Message)
	}
	if !ok {
		return nil, errors.New("Invalid entry ID for forking")
	}
	if err := s.stopRun(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	dir := s.sessionDir
	if dir == "" && old.path != "" {
		dir = filepath.Dir(old.path)
	}
	forked := newSession(s.cfg.cwd, dir, "", old.path, old.path == "")
	if e.ParentID != nil {
		for _, pe := range old.branch(*e.ParentID) {
			forked.entries = append(forked.entries, pe)
			forked.byID[pe.ID] = pe
			forked.leaf = pe.ID
		}
	}
	cleared := s.useSession(forked)
	for _, pe := range forked.entries {
		if pe.Type == "message" && messageRole(pe.Message) == "assistant" && forked.path != "" {
			if err := forked.rewrite(); err != nil {
				fmt.Fprintf(s.stderr, "rpi: cannot write session file %s: %v\n", forked.path, err)
			}
			break
		}
	}
	s.mu.Unlock()
	s.switchTo(r, struct {
		Text      string `json:"text"`
		Cancelled bool   `json:"cancelled"`
	}{text, false}, cleared)
	s.tell(uiRequest{Method: "set_editor_text", Text: text})
	return noReply{}, nil
}

// getForkMessages lists the user messages a fork can start from, in file
// order, every branch included.
// Fields: none. Answer: {"messages":[{entryId, text}]}.
func (s *server) getForkMessages(r *request) (any, error) {
	type forkPoint struct {
		EntryID string `json:"entryId"`
		Text    string `json:"text"`
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	points := []forkPoint{}
	for _, e := range s.session.entries {
		if e.Type != "message" {
			continue
		}
		if text, ok := userText(e.Message); ok && text != "" {
			points = append(points, forkPoint{e.ID, text})
		}
	}
	return struct {
		Messages []forkPoint `json:"messages"`
	}{points}, nil
}

// ---- Export ----

// exportHTML writes the conversation as one self-contained HTML file,
// every piece of text escaped.
// Fields: [outputPath] (relative to the cwd; default: beside the session
// file, or rpi-session-<id>.html in the cwd without one).
// Answer: {"path": …}.
func (s *server) exportHTML(r *request) (any, error) {
	out, err := r.optStr("outputPath")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	messages := append([]any{}, s.messages...)
	header, name, path := s.header, s.sessionName, s.session.path
	s.mu.Unlock()
	if len(messages) == 0 {
		return nil, errors.New("Nothing to export yet - start a conversation first")
	}
	switch {
	case out != "":
		out = resolvePath(s.cfg.cwd, out)
	case path != "":
		out = strings.TrimSuffix(path, ".jsonl") + ".html"
	default:
		out = filepath.Join(s.cfg.cwd, "rpi-session-"+header.ID+".html")
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, fmt.Errorf("Cannot write %s: %v", out, unwrapPathError(err))
	}
	if err := os.WriteFile(out, renderHTML(header, name, messages), 0o644); err != nil {
		return nil, fmt.Errorf("Cannot write %s: %v", out, unwrapPathError(err))
	}
	return struct {
		Path string `json:"path"`
	}{out}, nil
}

// renderHTML is the export page: a header, then one block per message.
func renderHTML(h sessionHeader, name string, messages []any) []byte {
	var b strings.Builder
	esc := htmlEscape
	title := "rpi session " + h.ID
	if name != "" {
		title = name
	}
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + esc(title) + "</title>\n<style>" +
		"body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#222}" +
		".m{border-left:4px solid #ccc;margin:1rem 0;padding:.5rem 1rem;background:#fafafa}" +
		".user{border-color:#36c}.assistant{border-color:#393}.toolResult{border-color:#999}.error{border-color:#c33}" +
		".role{font-size:.8rem;color:#666;text-transform:uppercase}pre{white-space:pre-wrap;word-break:break-word;margin:.3rem 0}" +
		".thinking{color:#777;font-style:italic}</style></head><body>\n")
	fmt.Fprintf(&b, "<h1>%s</h1>\n<p>Session %s, started %s in <code>%s</code></p>\n", esc(title), esc(h.ID), esc(h.Timestamp), esc(h.Cwd))
	block := func(class, role string, body string) {
		fmt.Fprintf(&b, "<div class=\"m %s\"><div class=\"role\">%s</div>%s</div>\n", class, esc(role), body)
	}
	pre := func(text string) string { return "<pre>" + esc(text) + "</pre>" }
	contentHTML := func(content []contentBlock) string {
		var parts strings.Builder
		for _, c := range content {
			switch c.Type {
			case "text":
				parts.WriteString(pre(c.Text))
			case "thinking":
				parts.WriteString("<pre class=\"thinking\">" + esc(c.Thinking) + "</pre>")
			case "toolCall":
				parts.WriteString(pre("→ " + c.Name + " " + string(c.Arguments)))
			case "image":
				if strings.HasPrefix(c.MimeType, "image/") {
					parts.WriteString("<img alt=\"image\" style=\"max-width:100%\" src=\"data:" + esc(c.MimeType) + ";base64," + esc(c.Data) + "\">")
				}
			}
		}
		return parts.String()
	}
	for _, m := range messages {
		switch m := m.(type) {
		case *userMessage:
			block("user", "user", contentHTML(m.Content))
		case *assistantMessage:
			class, body := "assistant", contentHTML(m.Content)
			if m.ErrorMessage != "" {
				class, body = "assistant error", body+pre(m.StopReason+": "+m.ErrorMessage)
			}
			block(class, "assistant · "+m.Provider+"/"+m.Model, body)
		case *toolResultMessage:
			class := "toolResult"
			if m.IsError {
				class += " error"
			}
			block(class, "result of "+m.ToolName, contentHTML(m.Content))
		case bashExecutionMessage:
			block("user", "bash", pre("$ "+m.Command+"\n"+m.Output))
		case *summaryMessage:
			block("user", m.Role, pre(m.Summary))
		case rawMessage:
			block("user", messageRole(json.RawMessage(m)), pre(string(m)))
		}
	}
	b.WriteString("</body></html>\n")
	return []byte(b.String())
}

// htmlEscape escapes text for HTML element content and attribute values.
func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;").Replace(s)
}

// ---- Compaction ----

// compactionResult is the answer to compact and auto_compaction_end's result.
type compactionResult struct {
	Summary          string            `json:"summary"`
	FirstKeptEntryID string            `json:"firstKeptEntryId"`
	TokensBefore     int               `json:"tokensBefore"`
	Details          compactionDetails `json:"details"`
}

type compactionDetails struct {
	ReadFiles     []string `json:"readFiles"`
	ModifiedFiles []string `json:"modifiedFiles"`
}

// estimateTokens guesses a message's size in tokens (4 bytes each).
func estimateTokens(m any) int {
	data, _ := json.Marshal(m)
	return len(data) / 4
}

// contextTokens is how full the context is: the last answer's reported
// usage, or an estimate when there is none.
func contextTokens(messages []any) int {
	for i := len(messages) - 1; i >= 0; i-- {
		if a, ok := messages[i].(*assistantMessage); ok && a.Usage.TotalTokens > 0 && a.StopReason != "error" {
			return a.Usage.TotalTokens
		}
	}
	total := 0
	for _, m := range messages {
		total += estimateTokens(m)
	}
	return total
}

// compactionPlan is what a compaction will summarise and keep.
type compactionPlan struct {
	model        *model
	summarise    []any  // the messages before the kept turns
	firstKept    string // the entry the kept part starts at
	tokensBefore int
	details      compactionDetails
}

// planCompaction decides what to summarise: everything before the most
// recent turns worth keepRecentTokens (the cut falls on a user message).
// It fails when there is no usable model or too little to summarise.
func (s *server) planCompaction() (*compactionPlan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.model == nil || !s.model.usable() {
		return nil, errors.New(noModelMessage)
	}
	plan := &compactionPlan{model: s.model, tokensBefore: contextTokens(s.messages),
		details: compactionDetails{ReadFiles: []string{}, ModifiedFiles: []string{}}}
	path := s.session.branch(s.session.leaf)
	start := len(path)
	kept := 0
	for i := len(path) - 1; i >= 0 && kept < s.compaction.KeepRecentTokens; i-- {
		if path[i].Type == "message" {
			kept += len(path[i].Message) / 4
		}
		start = i
	}
	for start > 0 && start < len(path) && !(path[start].Type == "message" && messageRole(path[start].Message) == "user") {
		start--
	}
	for _, e := range path[:start] {
		switch e.Type {
		case "compaction":
			plan.summarise = []any{&summaryMessage{Role: "compactionSummary", Summary: e.Summary}}
		case "message":
			msg := decodeMessage(e.Message)
			plan.summarise = append(plan.summarise, msg)
			if a, ok := msg.(*assistantMessage); ok {
				collectFiles(a, &plan.details)
			}
		}
	}
	if start == 0 || start >= len(path) || len(plan.summarise) == 0 {
		return nil, errors.New("Nothing to compact (session too small)")
	}
	plan.firstKept = path[start].ID
	return plan, nil
}

// compactNow carries out a plan: the current model writes the summary, a
// compaction entry records it, and the context becomes the summary plus
// the kept turns.
func (s *server) compactNow(ctx context.Context, plan *compactionPlan, instructions string) (compactionResult, error) {
	s.mu.Lock()
	s.isCompacting = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.isCompacting = false
		s.mu.Unlock()
	}()
	var transcript strings.Builder
	for _, msg := range contextMessages(plan.summarise) {
		data, _ := encodeJSON(msg)
		transcript.Write(data)
		transcript.WriteString("\n")
	}
	prompt := "Summarise the conversation below so that work on it can go on without it: the goal, decisions made, " +
		"files read and changed, the current state, and what remains to do. Be concise and concrete."
	if instructions != "" {
		prompt += "\n\nAlso: " + instructions
	}
	answer := &assistantMessage{Role: "assistant", Content: []contentBlock{}}
	req := streamRequest{model: plan.model, system: "You write summaries of coding conversations.", thinking: "off",
		messages: []any{&userMessage{Role: "user", Content: textBlocks(prompt + "\n\n<conversation>\n" + transcript.String() + "</conversation>")}}}
	cctx, cancel := context.WithTimeout(ctx, modelTimeout)
	defer cancel()
	if err := callModel(cctx, req, answer, func() {}, func(assistantEvent) {}); err != nil {
		if ctx.Err() != nil {
			return compactionResult{}, errors.New("Compaction cancelled")
		}
		return compactionResult{}, fmt.Errorf("Compaction failed: %v", err)
	}
	summary := strings.TrimSpace(answer.text())
	if summary == "" {
		return compactionResult{}, errors.New("Compaction failed: the model gave an empty summary")
	}
	res := compactionResult{Summary: summary, FirstKeptEntryID: plan.firstKept, TokensBefore: plan.tokensBefore, Details: plan.details}
	s.mu.Lock()
	s.record("compaction", "summary", res.Summary, "firstKeptEntryId", res.FirstKeptEntryID, "tokensBefore", res.TokensBefore, "details", res.Details)
	s.messages = s.session.context().messages
	s.mu.Unlock()
	return res, nil
}

// collectFiles notes the files an answer's tool calls read and changed.
func collectFiles(a *assistantMessage, d *compactionDetails) {
	for _, c := range a.Content {
		if c.Type != "toolCall" {
			continue
		}
		var args struct{ Path string }
		json.Unmarshal(c.Arguments, &args)
		if args.Path == "" {
			continue
		}
		switch c.Name {
		case "read":
			if !oneOf(args.Path, d.ReadFiles) {
				d.ReadFiles = append(d.ReadFiles, args.Path)
			}
		case "write", "edit":
			if !oneOf(args.Path, d.ModifiedFiles) {
				d.ModifiedFiles = append(d.ModifiedFiles, args.Path)
			}
		}
	}
}

// compact summarises the older part of the conversation (a running agent
// is aborted first).
// Fields: [customInstructions]. Answer: {summary, firstKeptEntryId,
// tokensBefore, details:{readFiles, modifiedFiles}}.
func (s *server) compact(r *request) (any, error) {
	instructions, err := r.optStr("customInstructions")
	if err != nil {
		return nil, err
	}
	if err := s.stopRun(); err != nil {
		return nil, err
	}
	plan, err := s.planCompaction()
	if err != nil {
		return nil, err
	}
	s.answerLater(r, func() (any, error) {
		res, err := s.compactNow(s.ctx, plan, instructions)
		if err != nil {
			return nil, err
		}
		return res, nil
	})
	return noReply{}, nil
}

// autoCompaction payloads.
type compactionStart struct {
	Reason string `json:"reason"`
}

type compactionEnd struct {
	Result       *compactionResult `json:"result,omitempty"`
	Aborted      bool              `json:"aborted"`
	WillRetry    bool              `json:"willRetry"`
	ErrorMessage string            `json:"errorMessage,omitempty"`
}

// contextOverflow matches provider errors that say the context is too long.
var contextOverflow = regexp.MustCompile(`(?i)context.?(length|window)|maximum context|too many tokens|prompt is too long|input is too long`)

// autoCompact compacts after a run when the context nears the window
// (reason "threshold"), or when the answer failed because it overflowed
// ("overflow"; the caller then retries once). It reports whether to retry.
func (s *server) autoCompact(run *agentRun, last *assistantMessage, overflowRetried bool) bool {
	s.mu.Lock()
	enabled, m := s.autoCompaction, s.model
	tokens := contextTokens(s.messages)
	reserve := s.compaction.ReserveTokens
	s.mu.Unlock()
	if !enabled || m == nil || last == nil {
		return false
	}
	reason := ""
	switch {
	case last.StopReason == "error" && contextOverflow.MatchString(last.ErrorMessage):
		reason = "overflow"
	case last.StopReason != "error" && last.StopReason != "aborted" && tokens > m.ContextWindow-reserve:
		reason = "threshold"
	default:
		return false
	}
	s.emit("auto_compaction_start", compactionStart{reason})
	if reason == "overflow" && overflowRetried {
		s.emit("auto_compaction_end", compactionEnd{ErrorMessage: "Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model."})
		return false
	}
	if reason == "overflow" {
		s.mu.Lock()
		if n := len(s.messages); n > 0 && s.messages[n-1] == any(last) {
			s.messages = s.messages[:n-1] // the failed answer is not part of what gets compacted
		}
		s.mu.Unlock()
	}
	plan, err := s.planCompaction()
	var res compactionResult
	if err == nil {
		res, err = s.compactNow(run.ctx, plan, "")
	}
	switch {
	case run.ctx.Err() != nil:
		s.emit("auto_compaction_end", compactionEnd{Aborted: true})
		return false
	case err != nil:
		prefix := "Auto-compaction failed: "
		if reason == "overflow" {
			prefix = "Context overflow recovery failed: "
		}
		s.emit("auto_compaction_end", compactionEnd{ErrorMessage: prefix + strings.TrimPrefix(err.Error(), "Compaction failed: ")})
		return false
	}
	s.emit("auto_compaction_end", compactionEnd{Result: &res, WillRetry: reason == "overflow"})
	s.tell(uiRequest{Method: "notify", NotifyType: "info",
		Message: fmt.Sprintf("Compacted the conversation (%d tokens before; %s)", res.TokensBefore, reason)})
	return reason == "overflow"
}
