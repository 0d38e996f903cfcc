package main

// The session commands: opening the session at startup, new_session,
// switch_session, fork and clone (which change the conversation once the
// agent is still), and the commands that read the session's entries.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// openConversation sets up a session's conversation as o says: in memory
// only (--no-session), the file o.file (loaded when it exists, else
// created there), the cwd's session with id o.id, a copy of o.forkFrom,
// or a new file in --session-dir or pi's folder for the cwd, which must be
// writable (nothing is created until the first message).
func (s *session) openConversation(o sessionOptions) (_ *conversation, err error) {
	s.env.trace.phase("tools, model")
	defer s.env.trace.phase("session")
	cfg, cwd := s.set.cfg, s.set.cwd
	c := &conversation{clock: s.env.clock, warn: s.postWarning, deliver: s.deliver, background: s.goBackground}
	s.conv = c
	if err := s.findSessionArg(&o); err != nil { // --session ID, --continue
		return nil, err
	}
	switch {
	case cfg.noSession || o.file != "":
	case cfg.sessionDir != "":
		s.dir = resolvePath(cfg.cwd, cfg.sessionDir)
	default:
		s.dir = defaultSessionDir(s.set.agentDir, cwd)
	}
	now := s.env.clock.Now()
	var ss *sessionFile
	emptyFile := false // o.file is there but empty: the new session starts in it
	switch {
	case cfg.noSession:
		ss = newSessionFile(now, o.id, cwd, "", "", "", true) // --session-id's id, as pi's in-memory session
	case o.file != "":
		path := sessionPathIn(cwd, s.set.home, o.file)
		if _, err := os.Lstat(path); err == nil {
			loaded, hold, err := openSessionFileOrEmpty(s.ctx, path, s.lockWait())
			emptyFile = isEmptySessionFile(err) && o.startInEmpty
			if err != nil && !emptyFile {
				if hold != nil {
					hold.Close()
				}
				return nil, err
			}
			if !emptyFile {
				if notice := loaded.skippedNotice(); notice != "" {
					s.warn(notice)
				}
				_, restore := s.useSessionIn(c, loaded)
				s.warnRestore(restore)
				return c, nameOpened(c, o.name)
			}
			ss = newSessionFile(now, "", cwd, "", path, "", false)
			ss.lock = hold // held until its header is in, and after
		} else {
			ss = newSessionFile(now, "", cwd, "", path, "", false)
		}
	default:
		if err := checkWritableDir(s.dir); err != nil {
			return nil, fmt.Errorf("Cannot use session directory %s: %v", s.dir, err)
		}
		shared := "" // the cwd, in a --session-dir: the files there are every project's
		if cfg.sessionDir != "" {
			shared = cwd
		}
		var claim *sessionClaim // the id's, held by the new session until its file is (claimSessionID)
		if o.id != "" {
			if claim, err = claimSessionID(s.ctx, s.dir, o.id, cwd, shared != "", s.lockWait()); err != nil {
				return nil, err
			}
			defer func() {
				if err != nil { // the session does not open: nobody else lets go of it
					claim.release()
				}
			}()
		}
		if o.id != "" && o.forkFrom == "" {
			found, err := sessionFileWithID(s.dir, o.id, shared)
			if err != nil {
				return nil, err
			}
			if found != "" {
				claim.release()
				claim = nil
				loaded, err := openSessionFile(s.ctx, found, s.lockWait())
				if err != nil {
					return nil, err
				}
				_, restore := s.useSessionIn(c, loaded)
				s.warnRestore(restore)
				return c, nameOpened(c, o.name)
			}
		}
		ss = newSessionFile(now, o.id, cwd, s.dir, "", "", false)
		ss.claim = claim // not shared yet: no lockMu needed
		if o.forkFrom != "" {
			if o.id != "" {
				if found, err := sessionFileWithID(s.dir, o.id, shared); found != "" || err != nil {
					return nil, fmt.Errorf("Session already exists with id '%s'", o.id)
				}
			}
			path := sessionPathIn(cwd, s.set.home, o.forkFrom)
			if o.forkAll {
				var err error
				if path, err = s.forkSource(cwd, o.forkFrom); err != nil {
					return nil, err
				}
			}
			from, err := loadSessionFile(s.ctx, path)
			if err != nil {
				if _, statErr := os.Lstat(path); o.forkAll && (isEmptySessionFile(err) || errors.Is(statErr, os.ErrNotExist)) {
					return nil, fmt.Errorf("Cannot fork: source session file is empty or invalid: %s", path) // pi 1.6's words
				}
				return nil, err
			}
			switch {
			case o.forkAll:
				if notice := from.skippedNotice(); notice != "" {
					s.warn(notice) // what the copy leaves out (a half line another pi is writing)
				}
				for _, e := range from.entries {
					ss.entries = append(ss.entries, e)
					ss.byID[e.ID] = e
				}
				ss.leaf = from.leaf
			case o.forkLeaf == nil:
				copyBranch(ss, from, from.leaf)
			case *o.forkLeaf != "":
				copyBranch(ss, from, *o.forkLeaf)
			}
			ss.header.ParentSession = from.path
			_, restore := s.useSessionIn(c, ss)
			s.warnRestore(restore)
			if o.name != "" {
				c.setName(o.name) // as pi 1.6 names the copy (--name)
			}
			c.writeWhole(ss)
			return c, nil
		}
	}
	c.replace(ss, sessionContext{name: o.name})
	if emptyFile {
		c.writeHeader(ss)
	}
	s.startEntries()
	if o.writeNow && ss.path != "" {
		c.writeFile(ss)
	}
	return c, nil
}

// nameOpened names a session opened from its file when --name (or a
// hello's name) was given, as pi 1.6 names whatever session it opens: a
// session_info entry, unless the session has that name already.
func nameOpened(c *conversation, name string) error {
	if name == "" {
		return nil
	}
	_, err := c.setName(name)
	return err
}

// sessionFileWithID is the session file of dir whose header has the id
// id, as pi 1.6's findById finds it: by what the file holds, not by its
// name (the session may be in a file named otherwise), but a file pi's
// way named for another session ("<timestamp>_OTHER.jsonl",
// namedForAnother) is not it, and when several files claim the id the
// error names them (errSessionClaimedTwice) rather than one being
// picked: in a shared folder, one may be someone else's. "" when there
// is none. The folder is read, not globbed: its path may hold "*", "?"
// or "[" (a cwd named "a[1]"), which a pattern would read as wildcards
// and match another project's folder with. With cwd (a --session-dir,
// which holds every project's files), only a file whose header names cwd
// is the session, as listing there takes it. Only headers are read, as
// the session list reads them.
func sessionFileWithID(dir, id, cwd string) (string, error) {
	entries, _ := os.ReadDir(dir) // sorted by name
	var found []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".jsonl") || namedForAnother(e.Name(), id) {
			continue // a symlink is followed, as pi follows it (openRegular opens only a regular file, never blocking)
		}
		path := filepath.Join(dir, e.Name())
		if h, ok := readSessionHeaderAt(path); ok && h.ID == id && (cwd == "" || h.Cwd == cwd) {
			found = append(found, path)
		}
	}
	return oneSessionFile(id, found)
}

// oneSessionFile is the one of paths, the files that claim the session
// id: "" for none, errSessionClaimedTwice for several.
func oneSessionFile(id string, paths []string) (string, error) {
	switch len(paths) {
	case 0:
		return "", nil
	case 1:
		return paths[0], nil
	}
	slices.Sort(paths)
	return "", &errSessionClaimedTwice{id, paths}
}

// namedForAnother reports whether name, a session file's, is pi's name
// of a session whose id is not id: "<timestamp>_OTHER.jsonl", as pi and
// newSessionFile name a new session's file. Such a file claiming id in
// its header is a copy, or planted; a file named otherwise may hold any
// session (a --session file, one renamed), as in pi.
func namedForAnother(name, id string) bool {
	stamp, rest, ok := strings.Cut(name, "_")
	const form = "dddd-dd-ddTdd-dd-dd-dddZ" // d: a digit
	if !ok || rest == id+".jsonl" || len(stamp) != len(form) {
		return false
	}
	for i := range len(form) {
		if digit := stamp[i] >= '0' && stamp[i] <= '9'; form[i] == 'd' && !digit || form[i] != 'd' && stamp[i] != form[i] {
			return false
		}
	}
	return true
}

// errSessionClaimedTwice refuses a session id that several files claim:
// which one is the session cannot be told (one may be a copy, or a file
// someone else put in a shared session folder, with a cwd of their
// choosing), so none is opened.
type errSessionClaimedTwice struct {
	id    string
	paths []string
}

func (e *errSessionClaimedTwice) Error() string {
	return fmt.Sprintf("Session %s is claimed by several session files: %s. Which one is the session cannot be told: "+
		"move the others out of the folder (copies, or files someone else put there), or open one by its path", e.id, strings.Join(e.paths, ", "))
}

// forkSource is the session file --fork arg names, as pi 1.6 finds it:
// arg itself, against the cwd, when it is a path (sessionArgIsPath); else
// the session with that id, or the start of it, the cwd's first, then any
// project's (sessionByID).
func (s *session) forkSource(cwd, arg string) (string, error) {
	if sessionArgIsPath(arg) {
		return sessionPathIn(cwd, s.set.home, arg), nil
	}
	row, _, err := sessionByID(s.ctx, s.sessionStore(), arg, cwd)
	return row.Path, err
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
func (s *session) startEntries() {
	s.mu.Lock()
	m, thinking := s.model, s.effectiveThinking()
	s.mu.Unlock()
	s.conv.recordSelection(m, thinking, false)
	if name := s.conv.info().name; name != "" {
		s.conv.record("session_info", entryField{"name", name})
	}
}

// useSession makes ss the current session: its conversation and name,
// the model and thinking level startState gives it; the queues and todos
// are emptied, the loops move to the new session (loops, read before for
// a file that exists: readLoops). It reports whether the queues held
// anything, and restore: pi's warning when ss holds messages and the
// model it last used cannot be (restoreNotice). Like pi 1.6 on opening a
// session, it records the model and thinking level in a session without
// messages, the thinking level in one whose branch has none
// (conversation.openEntries).
func (s *session) useSession(ss *sessionFile, loops loopsRead) (queuesCleared bool, restore string) {
	s.moveLoops(loops)
	return s.useSessionIn(s.conv, ss)
}

func (s *session) useSessionIn(c *conversation, ss *sessionFile) (queuesCleared bool, restore string) {
	if ss.size >= bigReadBytes && int64(len(ss.entries)) >= ss.size/smallEntryBytes {
		defer debug.FreeOSMemory() // once s.mu is let go of
	}
	sc := ss.context() // ss is not shared yet
	scope, scopeLevel := s.startScope()
	s.mu.Lock()
	queuesCleared = len(s.steering)+len(s.followUp) > 0
	sc = c.replace(ss, sc)
	s.model, s.thinkingLevel = s.startState(sc, scope, scopeLevel)
	restore = s.restoreNotice(sc, s.model)
	s.dropUnrunLocked(s.steering, s.followUp)
	s.steering, s.followUp, s.starting, s.todos = nil, nil, nil, nil
	s.recoveryTried = false
	m, thinking := s.model, s.effectiveThinking()
	s.unlock()
	c.openEntries(sc, m, thinking)
	return queuesCleared, restore
}

// restoreNotice is pi 1.6's warning when a conversation holding messages
// (sc) does not go on with the model it last used, which cannot be used
// now, and m is used instead; "" when it does, or --model chose m (or
// none was found: the first prompt says so).
func (s *session) restoreNotice(sc sessionContext, m *model) string {
	if len(sc.messages) == 0 || s.startModel != nil || sc.provider == "" && sc.modelID == "" ||
		m == nil || m.Provider == sc.provider && m.ID == sc.modelID {
		return ""
	}
	return fmt.Sprintf("Could not restore model %s/%s. Using %s/%s", sc.provider, sc.modelID, m.Provider, m.ID)
}

// warnRestore sends restoreNotice's warning, if any.
func (s *session) warnRestore(restore string) {
	if restore != "" {
		s.warn(restore)
	}
}

// bigReadBytes, smallEntryBytes: reading a session file at least
// bigReadBytes big whose entries are smaller than smallEntryBytes on
// average, and making its context, grows the heap to about twice what
// stays live (the garbage of the maps and lists that check and index the
// entries), which the runtime would keep for minutes; so it is given back
// at once, before the session is used (a full collection: about 40 ms of
// marking for issue 36's 64 MiB of one-letter messages, which then take
// 1.9x the file's size in memory, not 2.5x). A file of big entries (long
// texts) has little such garbage beside what it holds, and opens without
// the collection.
const bigReadBytes, smallEntryBytes = 16 << 20, 1 << 10

// announceSession follows a session change's answer: queue_update when
// the change emptied the queues, then session_started, then the new
// session's restored loops.
func (s *session) announceSession(queuesCleared bool) {
	s.conv.flushSoon() // the session left lets go of its file once its writes are done
	if queuesCleared {
		s.emitQueue()
	}
	s.emit("session_started", s.conv.header())
	s.announceLoops()
}

// newSession starts a new, empty conversation in this session (a running
// agent is aborted first; its last events are still sent and saved),
// whose header names parent (a path; "" for none) as parentSession. done
// gets the outcome; then queue_update (when the queues held anything),
// session_started and the loops follow, all under asker's lock when the
// change is answered from the background (changeSession).
func (s *session) newSession(parent string, asker changeAsker, done func(error)) {
	cleared := false
	s.changeSession(nil, nil, func() error {
		info := s.conv.info()
		dir := s.dir
		if dir == "" && info.path != "" {
			dir = filepath.Dir(info.path)
		}
		ss := newSessionFile(s.env.clock.Now(), "", s.set.cwd, dir, "", parent, info.path == "")
		// No messages: nothing to restore; the model and thinking level
		// are recorded as in any session without messages (openEntries).
		cleared, _ = s.useSession(ss, loopsRead{path: loopsFileOf(ss.path)})
		return nil
	}, asker, func(err error) {
		done(err)
		if err == nil {
			s.announceSession(cleared)
		}
	})
}

// switchSession opens the session file at path (relative to the cwd),
// read in the background; a missing or invalid file fails and the current
// conversation stays as it was. asker and done as in newSession.
func (s *session) switchSession(path string, asker changeAsker, done func(error)) {
	path = sessionPathIn(s.set.cwd, s.set.home, path)
	cleared, used, restore := false, false, ""
	var loaded *sessionFile
	var loops loopsRead
	s.changeSession(nil, func() error {
		var err error
		if loaded, err = s.conv.open(s.ctx, path, s.lockWait()); err == nil {
			loops = s.readLoopsNow(loaded.path)
		}
		return err
	}, func() error {
		cleared, restore = s.useSession(loaded, loops)
		used = true
		return nil
	}, asker, func(err error) {
		if loaded != nil && !used { // read, and not switched to (its asker's still refused it)
			loaded.unlock()
		}
		done(err)
		if err != nil {
			return
		}
		s.announceSession(cleared)
		if notice := loaded.skippedNotice(); notice != "" {
			s.tell(uiRequest{Method: "notify", Message: notice, NotifyType: "warning"})
		}
		s.warnRestore(restore)
	})
}

// fork starts a new conversation from before one of the user's messages
// (the entry entryID): it holds the history up to, not including, that
// message, and its header names the old file as parentSession. The entry
// is looked for once the session changes asked for before are applied;
// one that is not a user message fails (nothing is aborted). done gets
// that message's text (to edit and send again), then the announcements
// of newSession and set_editor_text with the text follow (asker as
// in newSession).
func (s *session) fork(entryID string, asker changeAsker, done func(text string, err error)) {
	var old *sessionFile
	var text, leaf, restore string
	cleared := false
	s.changeSession(func() (err error) {
		old, text, leaf, err = s.forkPoint(entryID)
		return err
	}, nil, func() error {
		dir := s.dir
		if dir == "" && old.path != "" {
			dir = filepath.Dir(old.path)
		}
		forked := newSessionFile(s.env.clock.Now(), "", s.set.cwd, dir, "", old.path, old.path == "")
		if leaf != "" {
			s.conv.mu.Lock()
			copyBranch(forked, old, leaf)
			s.conv.mu.Unlock()
		}
		cleared, restore = s.useSession(forked, loopsRead{path: loopsFileOf(forked.path)})
		s.conv.writeWhole(forked)
		return nil
	}, asker, func(err error) {
		done(text, err)
		if err == nil {
			s.announceSession(cleared)
			s.warnRestore(restore)
			s.tell(uiRequest{Method: "set_editor_text", Text: text})
		}
	})
}

// forkPoint is what a fork before the user's message entryID starts
// from: the current session, that message's text, and the entry the copy
// ends at ("" for none); an entry that is not a user message fails, and
// so does one whose parent the session does not hold, as in pi 1.6
// (`Entry X not found`: it copies the branch ending at the parent).
func (s *session) forkPoint(entryID string) (from *sessionFile, text, leaf string, err error) {
	s.conv.mu.Lock()
	from = s.conv.sessionFile
	e := from.byID[entryID]
	parentHeld := e != nil && (e.ParentID == nil || from.byID[*e.ParentID] != nil)
	s.conv.mu.Unlock()
	ok := e != nil && e.Type == "message"
	if ok {
		text, ok = userText(e.msg)
	}
	if !ok {
		return nil, "", "", errors.New("Invalid entry ID for forking")
	}
	if !parentHeld {
		return nil, "", "", fmt.Errorf("Entry %s not found", *e.ParentID)
	}
	if e.ParentID != nil {
		leaf = *e.ParentID
	}
	return from, text, leaf, nil
}

// clonePoint is what a clone copies: the current session and its leaf;
// it fails when the conversation has no entry to clone.
func (s *session) clonePoint() (from *sessionFile, leaf string, err error) {
	s.conv.mu.Lock()
	defer s.conv.mu.Unlock()
	from = s.conv.sessionFile
	if from.leaf == "" {
		return nil, "", errors.New("Cannot clone session: no current entry selected")
	}
	return from, from.leaf, nil
}

// clone starts a new conversation holding the current branch as it is
// (the same entries), whose header names the old file as parentSession
// (pi 1.6). The branch is the one current once the session changes asked
// for before are applied; an empty conversation fails (nothing is
// aborted). asker and done as in newSession.
func (s *session) clone(asker changeAsker, done func(error)) {
	var old *sessionFile
	var leaf, restore string
	cleared := false
	s.changeSession(func() (err error) {
		old, leaf, err = s.clonePoint()
		return err
	}, nil, func() error {
		dir := s.dir
		if dir == "" && old.path != "" {
			dir = filepath.Dir(old.path)
		}
		cloned := newSessionFile(s.env.clock.Now(), "", s.set.cwd, dir, "", old.path, old.path == "")
		s.conv.mu.Lock()
		copyBranch(cloned, old, leaf)
		s.conv.mu.Unlock()
		cleared, restore = s.useSession(cloned, loopsRead{path: loopsFileOf(cloned.path)})
		s.conv.writeWhole(cloned)
		return nil
	}, asker, func(err error) {
		done(err)
		if err == nil {
			s.announceSession(cleared)
			s.warnRestore(restore)
		}
	})
}

// copyBranch gives ss the entries of from's branch up to leaf (the same
// ids), as pi 1.6's createBranchedSession copies a branch: the label
// entries on it left out and the others chained again (each under the
// one before it, the first a root; a compaction whose firstKeptEntryId
// named a label left out names the entry after it), then, after them,
// one label entry for each label from's entries give an entry of the
// copy (whichever branch set it), with the time it was set, in the order
// pi's labels map holds them. It ends at the last of them.
func copyBranch(ss, from *sessionFile, leaf string) {
	var parent *string
	var pending []string
	after := map[string]string{} // a label left out: the entry after it
	kept := map[string]bool{}
	for _, e := range from.branch(leaf) {
		if e.Type == "label" {
			pending = append(pending, e.ID)
			continue
		}
		for _, id := range pending {
			after[id] = e.ID
		}
		pending = pending[:0]
		firstKept := ""
		if e.Type == "compaction" {
			firstKept = after[e.info().FirstKeptEntryID]
		}
		if firstKept != "" || (parent == nil) != (e.ParentID == nil) || parent != nil && *parent != *e.ParentID {
			e = e.rechained(parent, firstKept)
		}
		ss.entries = append(ss.entries, e)
		ss.byID[e.ID] = e
		ss.leaf = e.ID
		parent, kept[e.ID] = &e.ID, true
	}
	labels := entryLabels(from.entries)
	order := slices.Collect(maps.Keys(labels))
	slices.SortFunc(order, func(a, b string) int { return cmp.Compare(labels[a].since, labels[b].since) })
	for _, target := range order {
		label := labels[target]
		if !kept[target] {
			continue
		}
		line := []byte(`{"type":"label","id":`)
		id := ss.newEntryID()
		line = appendJSONString(line, id)
		line = appendJSONString(append(line, `,"parentId":`...), *parent)
		if label.timestamp != "" {
			line = appendJSONString(append(line, `,"timestamp":`...), label.timestamp)
		}
		line = appendJSONString(append(line, `,"targetId":`...), target)
		line = appendJSONString(append(line, `,"label":`...), label.text)
		var d jsonIn
		e, err := decodeEntry(append(line, '}'), &d)
		if err != nil {
			continue // not reached: the line is rpi's own
		}
		e.keepLine(append(line, '}'), &d)
		ss.entries = append(ss.entries, e)
		ss.byID[id] = e
		ss.leaf, parent = id, &e.ID
	}
}

// rechained is a copy of e under parent (nil: a root), and, when
// firstKept is not "", a compaction keeping from that entry instead; e
// itself, which another session may share, is left as it is.
func (e *sessionEntry) rechained(parent *string, firstKept string) *sessionEntry {
	c := *e
	c.ParentID = parent
	if firstKept != "" {
		more := *e.info()
		more.FirstKeptEntryID = firstKept
		c.more = &more
	}
	if c.raw == nil {
		return &c // its line is written from its fields
	}
	value := []byte("null")
	if parent != nil {
		value = appendJSONString(nil, *parent)
	}
	c.raw = withMember(c.raw, "parentId", value)
	if firstKept != "" {
		c.raw = withMember(c.raw, "firstKeptEntryId", appendJSONString(nil, firstKept))
	}
	return &c
}

// withMember is the JSON object line with the member key set to value:
// its last member of that name given value, or, when it has none, value
// added first.
func withMember(line []byte, key string, value []byte) []byte {
	if at, end, ok := memberValue(line, key); ok {
		return slices.Concat(line[:at], value, line[end:])
	}
	at := bytes.IndexByte(line, '{') + 1
	member := append(appendJSONString(nil, key), ':')
	member = append(append(member, value...), ',')
	if rest := bytes.TrimLeft(line[at:], " \t\r\n"); len(rest) > 0 && rest[0] == '}' {
		member = member[:len(member)-1] // an empty object: no comma
	}
	return slices.Concat(line[:at], member, line[at:])
}

// ---- The commands ----

var notCancelled = struct {
	Cancelled bool `json:"cancelled"`
}{false}

// entryTree is a session's entries as a tree of positions in entries:
// each entry's first child and next sibling (-1: none), and the first
// root, so that writing it needs no recursion; and the entries' labels
// by id.
type entryTree struct {
	entries     []*sessionEntry
	first, next []int32
	root        int32
	labels      map[string]entryLabel
}

// entryLabel is an entry's label as get_tree shows it: its text, and the
// timestamp of the label entry that set it; and since, the place among
// the entries of the one that set it first after it was last cleared,
// which orders the labels as pi's map holds them (a map keeps a key's
// place while it is set again).
type entryLabel struct {
	text, timestamp string
	since           int
}

// entryLabels resolves the label entries of entries as pi does: read in
// file order, one whose label is a non-empty string sets its target's
// label, any other clears it. Targets the file does not hold are kept,
// and shown nowhere.
func entryLabels(entries []*sessionEntry) map[string]entryLabel {
	var labels map[string]entryLabel
	for i, e := range entries {
		if e.Type != "label" || e.raw == nil {
			continue
		}
		target, ok := stringMember(e.raw, "targetId")
		if !ok {
			continue
		}
		if text, ok := stringMember(e.raw, "label"); ok && text != "" {
			if labels == nil {
				labels = map[string]entryLabel{}
			}
			since := i
			if was, set := labels[target]; set {
				since = was.since
			}
			labels[target] = entryLabel{text, e.Timestamp, since}
		} else {
			delete(labels, target)
		}
	}
	return labels
}

// stringMember is the string value of the member key of the JSON object
// line (the last of that name, as JSON.parse reads it); ok is false when
// there is none or it is not a string.
func stringMember(line []byte, key string) (s string, ok bool) {
	at, end, ok := memberValue(line, key)
	if !ok || line[at] != '"' {
		return "", false
	}
	return s, unquote(line[at:end], &s)
}

// linkEntries links ss's entries as get_tree shows them: roots in file
// order, each entry's children in timestamp order (stable: file order
// among equal stamps). ss cannot loop (loadSessionFile refuses a file
// whose parentId links do). The caller holds conv.mu.
func linkEntries(ss *sessionFile) entryTree {
	n := len(ss.entries)
	t := entryTree{entries: ss.entries[:n:n], first: make([]int32, n), next: make([]int32, n), root: -1,
		labels: entryLabels(ss.entries)}
	last := make([]int32, n) // each entry's last child so far
	at := make(map[*sessionEntry]int32, n)
	for i, e := range t.entries {
		at[e] = int32(i)
		t.first[i], t.next[i], last[i] = -1, -1, -1
	}
	lastRoot := int32(-1)
	for i, e := range t.entries {
		parent, ok := int32(-1), false
		if e.ParentID != nil && *e.ParentID != e.ID {
			parent, ok = at[ss.byID[*e.ParentID]]
		}
		switch {
		case !ok && lastRoot < 0:
			t.root = int32(i)
		case !ok:
			t.next[lastRoot] = int32(i)
		case last[parent] < 0:
			t.first[parent] = int32(i)
		default:
			t.next[last[parent]] = int32(i)
		}
		if ok {
			last[parent] = int32(i)
		} else {
			lastRoot = int32(i)
		}
	}
	var children []int32
	for i := range t.entries {
		children = children[:0]
		sorted := true
		for c := t.first[i]; c >= 0; c = t.next[c] {
			if len(children) > 0 && t.entries[c].Timestamp < t.entries[children[len(children)-1]].Timestamp {
				sorted = false
			}
			children = append(children, c)
		}
		if sorted {
			continue
		}
		slices.SortStableFunc(children, func(a, b int32) int {
			return strings.Compare(t.entries[a].Timestamp, t.entries[b].Timestamp)
		})
		t.first[i] = children[0]
		for k, c := range children {
			t.next[c] = -1
			if k > 0 {
				t.next[children[k-1]] = c
			}
		}
	}
	return t
}

// appendJSON appends the roots as get_tree's nodes, {"entry":…,
// "children":[…]} and, for a labelled entry, "label" and
// "labelTimestamp", separated by commas, depth first with a stack of
// the open nodes, and hands each entry's text to spill (it stops when
// spill says the client is gone).
func (t entryTree) appendJSON(buf []byte, spill func([]byte) ([]byte, bool)) []byte {
	var open []int32
	more := true
	for n := t.root; n >= 0; {
		if buf, more = spill(appendEntryJSON(append(buf, `{"entry":`...), t.entries[n])); !more {
			return buf
		}
		buf = append(buf, `,"children":[`...)
		if t.first[n] >= 0 {
			open = append(open, n)
			n = t.first[n]
			continue
		}
		// n has no children: close it and the open nodes it ends, and go
		// on with the next sibling of the first that has one.
		for {
			buf = t.appendNodeEnd(buf, n)
			if t.next[n] >= 0 {
				buf = append(buf, ',')
				n = t.next[n]
				break
			}
			if len(open) == 0 {
				return buf
			}
			n, open = open[len(open)-1], open[:len(open)-1]
		}
	}
	return buf
}

// appendNodeEnd ends node n, after its children: its label, if any, and
// the node's "}".
func (t entryTree) appendNodeEnd(buf []byte, n int32) []byte {
	buf = append(buf, ']')
	if label, ok := t.labels[t.entries[n].ID]; ok {
		buf = appendJSONString(append(buf, `,"label":`...), label.text)
		if label.timestamp != "" {
			buf = appendJSONString(append(buf, `,"labelTimestamp":`...), label.timestamp)
		}
	}
	return append(buf, '}')
}

// entriesWritable fails when an entry of entries cannot be written (a
// message that appendMessageJSON refuses), before any of the answer is.
func entriesWritable(command string, entries []*sessionEntry) error {
	for _, e := range entries {
		if e.raw == nil && !messageAppendable(e.msg) {
			return fmt.Errorf("Internal error in %s: its answer cannot be encoded (entry %s)", command, e.ID)
		}
	}
	return nil
}

// appendEntryJSON appends e's line as encoding/json writes a
// json.RawMessage: compacted (a line read from a file may have spaces),
// and with each byte that is not UTF-8 as U+FFFD (the file keeps it).
func appendEntryJSON(buf []byte, e *sessionEntry) []byte {
	if e.raw == nil {
		return e.appendLine(buf)
	}
	b := bytes.NewBuffer(buf)
	if err := json.Compact(b, e.raw); err != nil {
		return append(buf, "null"...) // not JSON, though it was decoded: a bug
	}
	if line := b.Bytes()[len(buf):]; !utf8.Valid(line) {
		return appendValidUTF8(buf, bytes.Clone(line))
	}
	return b.Bytes()
}

// appendLeafID appends leaf as a JSON string, or null when it is empty.
func appendLeafID(buf []byte, leaf string) []byte {
	if leaf == "" {
		return append(buf, "null"...)
	}
	return appendJSONString(buf, leaf)
}

// lockWait is how long opening a session file another rpi holds waits.
func (s *session) lockWait() time.Duration { return cmp.Or(s.env.lockWait, sessionLockWait) }
