package main

// The conversation store: the messages and the session they are recorded
// in, the session file's writes (in entry order, under fileMu, outside
// every other lock) and its hold on the file.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"
)

// conversation owns the messages and the session they are recorded in.
// Its file writes happen under its own fileMu, never under the session's
// state lock, in the order the entries were made. Two kinds of callers
// add entries: the run chain and other background work, whose calls
// return once their entry is on disk (appendMessage, compacted), and the
// command loop, whose calls never wait for the disk (record, setName,
// writeFile): their writes are done by the conversation's writer, a
// goroutine that runs while there is something to write (flushSoon).
type conversation struct {
	clock      clock
	warn       func(string) // posts a notify for the client when the file cannot be written (under a lock)
	deliver    func()       // delivers what warn posted, once the locks are let go of
	background func(func()) // runs work on a goroutine shutdown waits for (host.goBackground)

	mu          mutex[convMu] // guards the fields below
	sessionFile *sessionFile
	msgs        []any
	name        string
	holds       int   // runs in progress: user bash results wait for them to end
	deferred    []any // those results
	queue       []fileWrite
	writeErr    error // the last write failure, until a write works again
	// appendWarned: the client was told an append failed (once is enough)
	appendWarned bool
	writing      bool   // the writer is running (flushSoon)
	changes      uint64 // see changed
	// replay holds the system messages of msgs[:replayed] replayed
	// (prompt), while changes is still replayedAt: a turn replays only
	// the messages added since, not the whole conversation.
	replay     promptReplay
	replayed   int
	replayedAt uint64

	fileMu mutex[convFileMu] // held while writing the file
	closed bool              // close ran: nothing is written any more (guarded by fileMu)

	lockMu  mutex[convLockMu] // guards sessions' locks and retired; taken last, held briefly
	retired []*sessionFile    // sessions no longer current whose file is held (or may be, by a queued write), until their writes are done
}

// fileWrite is one write the file still needs: an entry's line, or the
// whole file.
type fileWrite struct {
	ss      *sessionFile
	line    []byte
	whole   []byte
	opening bool // an entry openEntries made (keepOpenEntries)
	header  bool // line is the header, written into an empty file (writeHeader)
}

// convInfo is what get_state needs of the conversation.
type convInfo struct {
	path, id, name string
	messages       int
}

func (c *conversation) info() convInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return convInfo{c.sessionFile.path, c.sessionFile.header.ID, c.name, len(c.msgs)}
}

func (c *conversation) header() sessionHeader {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionFile.header
}

// messages is a copy of the conversation, oldest first.
func (c *conversation) messages() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]any{}, c.msgs...)
}

// prompt is what the conversation's system messages add up to
// (promptReplay), replayed from where the last call left off while the
// messages only grew since.
func (c *conversation) prompt() transcriptPrompt {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replayLocked()
	return c.replay.result()
}

// replayLocked brings c.replay up to the conversation's messages.
func (c *conversation) replayLocked() {
	if c.replayedAt != c.changes || c.replayed > len(c.msgs) {
		c.replay, c.replayed, c.replayedAt = promptReplay{}, 0, c.changes
	}
	c.replay.add(c.msgs[c.replayed:])
	c.replayed = len(c.msgs)
}

// loadout is which of rpi's tools (allTools, in order) the
// conversation's system messages declare now (declared), and which they
// ever added or removed (mentioned); found tells whether it has a system
// message. Each is looked up by name: a session's thousands of tools
// cost nothing here.
func (c *conversation) loadout() (declared, mentioned []string, found bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replayLocked()
	r := &c.replay
	for _, t := range allTools {
		if r.p.tool(t.name) >= 0 {
			declared = append(declared, t.name)
		}
		if r.mentioned[t.name] {
			mentioned = append(mentioned, t.name)
		}
	}
	return declared, mentioned, r.p.found
}

// changed counts the times a message left the conversation or it was
// made anew (dropLast, omit, compacted): while it holds, the messages
// only grew, and a request sent before still starts them (cachewarm.go).
func (c *conversation) changed() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changes
}

// record appends a session entry; the writer writes it (flushSoon). A
// write that fails is told to the client (noteWrite).
func (c *conversation) record(typ string, fields ...entryField) error {
	c.mu.Lock()
	err := c.addLocked(typ, fields)
	c.mu.Unlock()
	c.flushSoon()
	return err
}

// recordLine is record, returning the entry's line (its JSON).
func (c *conversation) recordLine(typ string, fields ...entryField) ([]byte, error) {
	c.mu.Lock()
	line, err := c.addLineLocked(typ, fields)
	line = slices.Clone(line) // the writer's is its own
	c.mu.Unlock()
	c.flushSoon()
	return line, err
}

// recordSelection records the model (when there is one) and the thinking
// level, as a session's first entries; opening says they are the entries
// of a session being opened (openEntries).
func (c *conversation) recordSelection(m *model, thinking string, opening bool) {
	c.mu.Lock()
	queued := len(c.queue)
	if m != nil {
		c.addLocked("model_change", []entryField{{"provider", m.Provider}, {"modelId", m.ID}})
	}
	c.addLocked("thinking_level_change", []entryField{{"thinkingLevel", thinking}})
	for i := queued; i < len(c.queue) && opening; i++ {
		c.queue[i].opening = true
	}
	c.mu.Unlock()
	c.flushSoon()
}

// openEntries records, as pi 1.6's createAgentSession does whenever it
// opens a session (a file read, a fork's or clone's copy, a new session),
// the model m and thinking level when sc, the session's context, holds no
// message, and only the thinking level when its branch has no
// thinking_level_change entry; else nothing. Written as any entry: a file
// that is there gets them appended at once (pi appends them as it
// opens it), a file not written yet with its first message.
func (c *conversation) openEntries(sc sessionContext, m *model, thinking string) {
	switch {
	case len(sc.messages) == 0:
		c.recordSelection(m, thinking, true)
	case !sc.hasThinking:
		c.recordSelection(nil, thinking, true)
	}
}

// keepOpenEntries handles the failed append of an entry openEntries
// made (w): when nothing but such entries of its session is queued, the
// file (one rpi may not have written: a read-only file opened only to be
// read) is not written again from memory now, as a failed append
// otherwise is; the entries wait in memory, and the file is written whole
// with the next user or assistant message, as a new session's. It reports whether it did so.
// c.fileMu is held.
func (c *conversation) keepOpenEntries(w fileWrite, err error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !w.opening || slices.ContainsFunc(c.queue, func(q fileWrite) bool { return q.ss == w.ss && !q.opening }) {
		return false
	}
	c.queue = slices.DeleteFunc(c.queue, func(q fileWrite) bool { return q.ss == w.ss })
	w.ss.written = false
	if w.ss == c.sessionFile {
		c.warn(fmt.Sprintf("Cannot append to the session file %s (%v): the entries rpi adds on opening it are kept in memory, and the file is written with the next message", w.ss.path, unwrapPathError(err)))
	}
	return true
}

// addLocked adds an entry in memory and queues its write; c.mu is held.
func (c *conversation) addLocked(typ string, fields []entryField) error {
	_, err := c.addLineLocked(typ, fields)
	return err
}

// addLineLocked is addLocked, returning the entry's line.
func (c *conversation) addLineLocked(typ string, fields []entryField) ([]byte, error) {
	ss := c.sessionFile
	e, line, err := ss.add(c.clock.Now(), typ, fields)
	if err != nil {
		return nil, err
	}
	switch {
	case ss.path == "":
	case ss.written:
		c.queue = append(c.queue, fileWrite{ss: ss, line: line})
	case e.startsConversation():
		// Like pi 1.6, the file appears once the session holds a
		// conversation: the first prompt is on disk before its answer.
		c.queue = append(c.queue, fileWrite{ss: ss, whole: ss.wholeFile()})
		ss.written = true
	}
	return line, nil
}

// appendMessage adds a message to the conversation and the session.
func (c *conversation) appendMessage(m any) error {
	typ, fields := "message", []entryField{{"message", m}}
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
func customMessageFields(raw rawMessage) []entryField {
	var m struct {
		CustomType string          `json:"customType"`
		Content    json.RawMessage `json:"content"`
		Display    bool            `json:"display"`
		Details    json.RawMessage `json:"details"`
	}
	json.Unmarshal(raw, &m)
	fields := []entryField{{"customType", m.CustomType}, {"content", m.Content}, {"display", m.Display}}
	if len(m.Details) > 0 {
		fields = append(fields, entryField{"details", m.Details})
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
		c.changes++
	}
}

// omit takes a failed or cut-short answer out of the context for good, as
// pi 1.6 does before it compacts and runs again: out of the conversation,
// and a context_edit entry naming its entry with "replacement":null, so
// that the session read again leaves it out too (the session keeps the
// answer's own entry). It returns the context_edit's line (nil when none
// was written).
func (c *conversation) omit(m *assistantMessage) ([]byte, error) {
	c.mu.Lock()
	if n := len(c.msgs); n > 0 && c.msgs[n-1] == any(m) {
		c.msgs = c.msgs[:n-1]
		c.changes++
	}
	var line []byte
	var err error
	entries := c.sessionFile.entries
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].msg == any(m) {
			line, err = c.addLineLocked("context_edit", []entryField{{"targetId", entries[i].ID}, {"replacement", nil}})
			line = slices.Clone(line) // the writer's is its own
			break
		}
	}
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return line, c.flush()
}

// hold makes user bash results wait until release: a run is in progress
// and they must not land between a tool call and its result.
func (c *conversation) hold() {
	c.mu.Lock()
	c.holds++
	c.mu.Unlock()
}

// release ends a hold, adding the results that waited when none is left:
// in the conversation at once (the caller may hold the session's lock, so
// that they are in before it tells the run's end), written by the next
// flush, which the caller makes outside that lock. It reports whether it
// added any.
func (c *conversation) release() (added bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holds--
	if c.holds > 0 {
		return false
	}
	for _, m := range c.deferred {
		c.msgs = append(c.msgs, m)
		c.addLocked("message", []entryField{{"message", m}}) // a failed write is told by the flush
	}
	added, c.deferred = len(c.deferred) > 0, nil
	return added
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
// is false). The writer writes its entry, as record's.
func (c *conversation) setName(name string) (changed bool, err error) {
	c.mu.Lock()
	if name == c.name {
		c.mu.Unlock()
		return false, nil
	}
	c.name = name
	err = c.addLocked("session_info", []entryField{{"name", name}})
	c.mu.Unlock()
	c.flushSoon()
	return true, err
}

// nameSessionFile names the session whose file is path, which no session
// of this process has open: a session_info entry appended under the
// file's lock (waiting at most wait for another process's), as the
// session would append it, unless that is its name already. What a
// session would warn of (the file cannot be written) is the error.
func nameSessionFile(ctx context.Context, path, name string, wait time.Duration, clock clock, background func(func())) error {
	ss, err := openSessionFile(ctx, path, wait)
	if err != nil {
		return err
	}
	var failed atomic.Pointer[string]
	c := &conversation{clock: clock, warn: func(w string) { failed.Store(&w) }, deliver: func() {}, background: background}
	c.replace(ss, ss.context())
	_, err = c.setName(name)
	c.close() // the entry written, the file let go of
	if w := failed.Load(); err == nil && w != nil {
		err = errors.New(*w)
	}
	return err
}

// replace makes ss the session and sc, its context, the conversation,
// and returns that context. The session left lets go of its file once its
// writes are done (flush), or hands its hold to ss when ss is the same
// file read again (switch_session to the current session: open found it
// so); then ss also takes the entries the session left made after the
// read (adoptLocked), and the context is made again with them (rarely:
// sc is made by the caller, outside the locks). It touches no file.
func (c *conversation) replace(ss *sessionFile, sc sessionContext) sessionContext {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.sessionFile; old != nil && old != ss {
		c.lockMu.Lock()
		if old.lock != nil && ss.lock == nil && ss.sameFileAs == old {
			ss.lock, old.lock, old.handedTo = old.lock, nil, ss
		} else {
			// Held now, or by a write still queued (its first): let go
			// of once the writes are done.
			c.retired = append(c.retired, old)
		}
		c.lockMu.Unlock()
		if ss.sameFileAs == old && c.adoptLocked(ss, old) {
			sc = ss.context()
		}
	}
	c.sessionFile, c.msgs, c.name, c.deferred = ss, sc.messages, sc.name, nil
	c.replay, c.replayed = promptReplay{}, 0 // another conversation
	return sc
}

// adoptLocked gives ss, old's file read again, the entries old made
// after the read (an aborted answer saved as the switch stopped it, a
// command's entry made meanwhile): they are on disk, or their writes are
// queued and now go in ss's name, and the next entry hangs under the
// last of them. It reports whether there were any. c.mu is held.
func (c *conversation) adoptLocked(ss, old *sessionFile) (adopted bool) {
	after := len(old.entries)
	for after > 0 && ss.byID[old.entries[after-1].ID] == nil {
		after--
	}
	if after == 0 && len(ss.entries) > 0 {
		return false // nothing in common: not the file old wrote
	}
	for _, e := range old.entries[after:] {
		ss.entries = append(ss.entries, e)
		ss.byID[e.ID] = e
		ss.leaf = e.ID
	}
	for i := range c.queue {
		if c.queue[i].ss == old {
			c.queue[i].ss = ss
		}
	}
	return after < len(old.entries)
}

// compacted records a compaction and makes the conversation its summary
// and the messages it kept, in one step.
func (c *conversation) compacted(fields []entryField) error {
	c.mu.Lock()
	err := c.addLocked("compaction", fields)
	if err == nil {
		c.msgs = c.sessionFile.context().messages
		c.changes++
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.flush()
}

// flushSoon has the queued writes done, and the files of the sessions
// left let go of, by the conversation's writer, in the background: one
// writer runs at a time, and goes on while there is something to write.
// With nothing to do (a fresh session's first entries, which pi writes
// with its first message) no writer starts.
func (c *conversation) flushSoon() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writing || c.idleLocked() {
		return
	}
	c.writing = true
	c.background(func() {
		ended := false
		defer func() { // a panic (guarded logs it) ends the write it was in only
			if !ended {
				c.mu.Lock()
				c.writing = false
				more := !c.idleLocked() // queued meanwhile (no writer was started for them), or a file left to let go of
				c.mu.Unlock()
				if more {
					c.flushSoon()
				}
			}
		}()
		for {
			c.flush()
			c.mu.Lock()
			if c.idleLocked() {
				c.writing, ended = false, true
				c.mu.Unlock()
				return
			}
			c.mu.Unlock()
		}
	})
}

// idleLocked reports whether the writer has nothing to do: no write
// queued, no file of a session left to let go of. c.mu is held.
func (c *conversation) idleLocked() bool {
	c.lockMu.Lock()
	defer c.lockMu.Unlock()
	return len(c.queue) == 0 && len(c.retired) == 0
}

// flush does the queued writes, in order. An append that fails (the file
// or its folder vanished) writes the whole file again, header first, from
// memory; a failure that stays is told to the client once and kept for
// writable to report.
func (c *conversation) flush() error {
	defer c.deliver()
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	return c.flushLocked()
}

// flushLocked is flush with c.fileMu held.
func (c *conversation) flushLocked() error {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			err := c.writeErr
			c.mu.Unlock()
			c.unlockRetired()
			return err
		}
		w := c.queue[0]
		c.queue[0] = fileWrite{} // the queue's array would keep its bytes (a whole file) alive
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
			path, follow := w.ss.writtenPath()
			if err = appendLine(path, w.line, w.header, follow); err != nil {
				if c.keepOpenEntries(w, err) {
					continue
				}
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
func (c *conversation) rewriteLocked(ss *sessionFile) error {
	c.mu.Lock()
	whole := ss.wholeFile()
	c.queue = slices.DeleteFunc(c.queue, func(w fileWrite) bool { return w.ss == ss })
	c.mu.Unlock()
	if c.closed {
		return errSessionClosed
	}
	return c.replaceFile(ss, whole)
}

func (c *conversation) noteWrite(ss *sessionFile, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ss != c.sessionFile {
		return
	}
	if err != nil && c.writeErr == nil {
		c.warn(fmt.Sprintf("Cannot write the session file %s: %v. The conversation goes on in memory; commands that need the file fail until it can be written.", ss.path, unwrapPathError(err)))
	}
	c.writeErr = err
}

// writeFailed reports whether the last write of the session file failed
// (writable tries it again).
func (c *conversation) writeFailed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeErr != nil
}

// writable reports whether the session file can be written, trying again
// (the whole file) when the last write failed.
func (c *conversation) writable() error {
	c.mu.Lock()
	failed, ss := c.writeErr != nil, c.sessionFile
	c.mu.Unlock()
	if !failed {
		return nil
	}
	c.fileMu.Lock()
	err := c.rewriteLocked(ss)
	c.fileMu.Unlock()
	c.noteWrite(ss, err)
	c.deliver()
	if err != nil {
		return fmt.Errorf("Cannot write the session file %s: %v", ss.path, unwrapPathError(err))
	}
	return nil
}

// branchThinking is the level the current branch's last
// thinking_level_change records; ok is false when it has none.
func (c *conversation) branchThinking() (level string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ss := c.sessionFile
	e := ss.byID[ss.leaf]
	for range len(ss.entries) { // parentId links never loop (a loop is refused on load): a bound all the same
		if e == nil {
			break
		}
		if e.Type == "thinking_level_change" {
			return e.info().ThinkingLevel, true
		}
		if e.ParentID == nil {
			break
		}
		e = ss.byID[*e.ParentID]
	}
	return "", false
}

// branchEntries is the current branch, root first.
func (c *conversation) branchEntries() []*sessionEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionFile.branch(c.sessionFile.leaf)
}

// writeWhole writes a session made from another's entries at once, when
// it holds a conversation (as pi does: a file appears with the first user
// or assistant message). ss is the current session by now, and a bash
// result may be joining its entries: they are read under c.mu.
func (c *conversation) writeWhole(ss *sessionFile) {
	c.mu.Lock()
	hasConversation := slices.ContainsFunc(ss.entries, (*sessionEntry).startsConversation)
	c.mu.Unlock()
	if hasConversation && ss.path != "" {
		c.writeFile(ss)
	}
}

// writeHeader has ss's header written into its file, which is there and
// empty, and its entries a line at a time after, as pi starts a session
// in an empty file. The header is appended, not written whole: the file
// keeps its inode, owner and mode (mktemp makes it 0600).
func (c *conversation) writeHeader(ss *sessionFile) {
	c.mu.Lock()
	c.queue = append(c.queue, fileWrite{ss: ss, line: ss.headerLine(), header: true})
	ss.written = true
	c.mu.Unlock()
	c.flushSoon()
}

// writeFile has ss's whole file written, and its entries a line at a
// time after; the writer writes it, as record's.
func (c *conversation) writeFile(ss *sessionFile) {
	c.mu.Lock()
	c.queue = append(c.queue, fileWrite{ss: ss, whole: ss.wholeFile()})
	ss.written = true
	c.mu.Unlock()
	c.flushSoon()
}

// replaceFile replaces ss's file with data atomically: a temp file,
// renamed over it (over the file a symlink at the path leads to, when the
// path was that link as the session was opened; a link put there since is
// refused, linkedSince). The new file is locked before it replaces the old one,
// and becomes the session's hold on its file, so another rpi never finds
// the file free meanwhile; a file at the path that the session does not
// hold is taken first (and refused when another rpi has it). c.fileMu is
// held.
func (c *conversation) replaceFile(ss *sessionFile, data []byte) error {
	if err := ss.linkedSince(); err != nil {
		return err
	}
	c.lockMu.Lock()
	held := ss.lock
	c.lockMu.Unlock()
	if !holdsFile(held, ss.path) {
		other, err := lockSessionFile(context.Background(), ss.path, 0)
		if err != nil {
			return err
		}
		if other != nil {
			defer other.Close() // held until the new file has replaced it
		}
	}
	path, _ := ss.writtenPath() // a symlink's file is written where it led at the open, as appends are: the link stays
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
		lock, err = lockSessionFile(context.Background(), f.Name(), 0) // a file nobody else knows: never refused
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
	claim := ss.claim // the file is there and held: the id needs no claim now
	ss.claim = nil
	c.lockMu.Unlock()
	claim.release()
	return nil
}

// open loads the session file at path for a session change: held, as
// openSessionFile does, or, when it is the file the current session holds,
// to take that hold over when it becomes current (replace); that file is
// read once the writes queued for it are done, with no write between
// (once the hold is handed over, the session left cannot write there).
// Waiting for the file and reading it stop when ctx ends.
func (c *conversation) open(ctx context.Context, path string, wait time.Duration) (*sessionFile, error) {
	c.mu.Lock()
	cur := c.sessionFile
	c.mu.Unlock()
	c.lockMu.Lock()
	var held *os.File
	if cur != nil {
		held = cur.lock
	}
	c.lockMu.Unlock()
	if holdsFile(held, path) {
		defer c.deliver()
		c.fileMu.Lock()
		defer c.fileMu.Unlock()
		c.flushLocked()
		ss, err := loadSessionFile(ctx, path)
		if ss != nil {
			ss.sameFileAs = cur
		}
		return ss, err
	}
	return openSessionFile(ctx, path, wait)
}

// holdFile makes sure ss holds its file before an append: a session that
// has no hold yet (it was loaded beside the current session's file, say)
// takes it, without waiting, and so does one whose hold is on a file no
// longer at its path (another program renamed a file over it): the file
// there now is held before rpi appends to it, and when another rpi holds
// it, nothing is appended. A symlink put at the path since the session
// was opened is refused (linkedSince), not followed. c.fileMu is held.
func (c *conversation) holdFile(ss *sessionFile) error {
	c.lockMu.Lock()
	holder := ss // the session whose hold this write goes on under: ss's own, or that of the session it handed its hold to
	for h := ss; h != nil; h = h.handedTo {
		if h.lock != nil {
			holder = h
			break
		}
	}
	held := holder.lock
	c.lockMu.Unlock()
	if err := ss.linkedSince(); err != nil {
		return err
	}
	if held != nil && holdsFile(held, ss.path) {
		return nil
	}
	lock, err := lockSessionFile(context.Background(), ss.path, 0)
	if err != nil || lock == nil {
		return err // no file: the append fails and writes it whole
	}
	c.lockMu.Lock()
	old := holder.lock
	holder.lock = lock
	c.lockMu.Unlock()
	if old != nil {
		old.Close() // the file it held is another's now, or none's
	}
	return nil
}

// unlockRetired lets go of the files of the sessions no longer current
// whose writes are done. A flush calls it after finding nothing queued,
// outside c.mu: meanwhile a command may have queued an entry of the
// current session and the session changed, so a session left that still
// has a write queued keeps its file (and its place in the list) until
// that write is done; let go of now, the write would take the file again
// with nothing to let go of it after. Once the conversation is closed
// nothing is written any more, and every file goes. c.fileMu is held;
// c.mu and lockMu only while the list is taken (closing a file is no
// business of a lock others wait for).
func (c *conversation) unlockRetired() {
	c.mu.Lock()
	c.lockMu.Lock()
	var locks []*os.File
	var claims []*sessionClaim
	c.retired = slices.DeleteFunc(c.retired, func(ss *sessionFile) bool {
		if !c.closed && slices.ContainsFunc(c.queue, func(w fileWrite) bool { return w.ss == ss }) {
			return false
		}
		if ss.lock != nil {
			locks = append(locks, ss.lock)
			ss.lock = nil
		}
		if ss.claim != nil {
			claims = append(claims, ss.claim)
			ss.claim = nil
		}
		return true
	})
	c.lockMu.Unlock()
	c.mu.Unlock()
	for _, f := range locks {
		f.Close()
	}
	for _, claim := range claims {
		claim.release()
	}
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
	ss := c.sessionFile
	c.mu.Unlock()
	c.unlockRetired()
	c.lockMu.Lock()
	ss.unlock()
	c.lockMu.Unlock()
}

// errSessionClosed is a write after the conversation was closed.
var errSessionClosed = errors.New("the session was closed")
