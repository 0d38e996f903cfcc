package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The rpc front end's session commands: new_session, switch_session,
// fork, clone, get_fork_messages, get_entries, get_tree, export_html,
// set_session_name, session_list and session_delete (docs/sessions.md).

// setSessionNameCommand names the session (a session_info entry, written only
// when the name changes); get_state reports it.
// Fields: name (non-empty after trimming). Answer: null. Events:
// session_info_changed before the answer, when the name changed. UI: setTitle.
func (s *rpcServer) setSessionNameCommand(r *rpcRequest) (any, error) {
	name, err := r.str("name")
	if err != nil {
		return nil, err
	}
	return nil, s.setSessionName(name)
}

// exportHTMLCommand writes the conversation as one self-contained HTML file,
// every piece of text escaped, in the background; it only writes regular
// files, and never the session's own file.
// Fields: [outputPath] (relative to the cwd; default: beside the session
// file, or rpi-session-<id>.html in the cwd without one).
// Answer: {"path": …}.
func (s *rpcServer) exportHTMLCommand(r *rpcRequest) (any, error) {
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
	s.answerLater(r.typ, s.replyTo(r), func() (any, error) {
		if isSameFile(out, info.path) {
			return nil, fmt.Errorf("Cannot write %s: it is this session's own file", out)
		}
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return nil, fmt.Errorf("Cannot write %s: %v", out, unwrapPathError(err))
		}
		err := replaceFileWith(out, func(w *bufio.Writer) error { return writeHTML(w, header, info.name, messages) })
		if err != nil {
			return nil, fileError("write", out, err)
		}
		return struct {
			Path string `json:"path"`
		}{out}, nil
	})
	return noReply{}, nil
}

// isSameFile reports whether paths a and b name one file: the same path,
// or two paths to the same file on disk.
func isSameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ai, aerr := os.Stat(a)
	bi, berr := os.Stat(b)
	return aerr == nil && berr == nil && os.SameFile(ai, bi)
}

// sessionListCommand lists the session files on disk, read in the background.
// Fields: [scope]: "current" (default: the sessions of this cwd) or
// "all_projects". Answer: {"sessions":[{sessionId, name, cwd, path,
// summary, modifiedEpoch, size, messageCount}]}, newest first.
func (s *rpcServer) sessionListCommand(r *rpcRequest) (any, error) {
	scope := "current"
	if r.has("scope") {
		var err error
		if scope, err = r.enum("scope", []string{"current", "all_projects"}); err != nil {
			return nil, err
		}
	}
	store, cwd := s.sessionStore(), s.set.cwd
	if scope == "all_projects" {
		cwd = ""
	}
	s.answerLater(r.typ, s.replyTo(r), func() (any, error) {
		rows, err := listSessions(s.ctx, store, cwd)
		if s.served != nil {
			s.served.sh.markLive(rows)
		}
		return struct {
			Sessions []sessionRow `json:"sessions"`
		}{rows}, err
	})
	return noReply{}, nil
}

// sessionDeleteCommand deletes a session file and its loops file, in the
// background.
// Fields: sessionPath (relative to the cwd, or absolute). Answer: null.
// Fails "Cannot delete the current session" for the session in use, and
// "Cannot delete <path>: …" for a path that is not a session file inside
// the session directory (nothing is deleted then).
func (s *rpcServer) sessionDeleteCommand(r *rpcRequest) (any, error) {
	path, err := r.str("sessionPath")
	if err != nil {
		return nil, err
	}
	path = sessionPathIn(s.set.cwd, s.set.home, path)
	store, current := s.sessionStore(), s.conv.info().path
	s.answerLater(r.typ, s.replyTo(r), func() (any, error) {
		// Once the writes queued are done: a session just left is let go
		// of then (flush), and its loops file's writes (it gets none
		// after: moveLoops) do not bring that file back.
		s.conv.flush()
		var deleted error
		s.afterLoopsWrites(func() { deleted = deleteSession(store, path, current) })
		return nil, deleted
	})
	return noReply{}, nil
}

// newSessionCommand starts a new, empty session (a running agent is
// aborted first; its last events are still sent and saved).
// Fields: [parentSession] (path recorded in the new header).
// Answer: {"cancelled":false}, from the background when a run had to
// stop first. Events: session_started after the answer.
func (s *rpcServer) newSessionCommand(r *rpcRequest) (any, error) {
	parent, err := r.optStr("parentSession")
	if err != nil {
		return nil, err
	}
	apart := func() (any, error) { return s.served.newSessionApart(parent) }
	if s.served != nil && s.served.shared() {
		return apart()
	}
	s.newSession(parent, s.changeAsker(), s.changeDone(r, notCancelled, apart))
	return noReply{}, nil
}

// switchSessionCommand opens another session file, read in the background. A
// missing or invalid file fails and the current session stays as it was.
// Fields: sessionPath. Answer: {"cancelled":false}. Events:
// session_started with the loaded header after the answer.
func (s *rpcServer) switchSessionCommand(r *rpcRequest) (any, error) {
	path, err := r.str("sessionPath")
	if err != nil {
		return nil, err
	}
	if s.served != nil {
		if data, done, err := s.served.switchApart(path); done {
			return data, err
		}
	}
	apart := func() (any, error) { return s.served.switchAway(path) }
	s.switchSession(path, s.changeAsker(), s.changeDone(r, notCancelled, apart))
	return noReply{}, nil
}

// forkCommand starts a new session from before one of the user's messages: it
// holds the history up to (not including) that message, and its header
// names the old file as parentSession.
// Fields: entryId (of a user message entry). Answer: {text (that
// message's text, to edit and send again), cancelled:false}. Events:
// session_started after the answer. UI: set_editor_text with the text.
func (s *rpcServer) forkCommand(r *rpcRequest) (any, error) {
	id, err := r.str("entryId")
	if err != nil {
		return nil, err
	}
	apart := func() (any, error) {
		_, text, leaf, err := s.forkPoint(id)
		if err != nil {
			return nil, err
		}
		return s.served.copyApart(&leaf, forkAnswer{text, false}, &uiRequest{Method: "set_editor_text", Text: text})
	}
	if s.served != nil && s.served.shared() {
		return apart()
	}
	s.fork(id, s.changeAsker(), func(text string, err error) {
		s.changeDone(r, forkAnswer{text, false}, apart)(err)
	})
	return noReply{}, nil
}

// changeAsker is this connection as the asker of a change of its
// session made in place: its answer lock, and over rpi serve whether the
// change is still its to make (servedRPC.stillOn).
func (s *rpcServer) changeAsker() changeAsker {
	a := changeAsker{lock: &s.conn.answerMu}
	if s.served != nil {
		a.still = func() (func(), error) { return s.served.stillOn(s) }
	}
	return a
}

// changeDone answers r, a change of the session made in place, with data
// once it is made. Over rpi serve, a change that finds other clients on
// the session when its turn comes (errNowShared) is made apart instead,
// as it would have been had they watched when it was asked: the session
// stays theirs, and the connection moves to one of its own.
func (s *rpcServer) changeDone(r *rpcRequest, data any, apart func() (any, error)) func(error) {
	return func(err error) {
		if errors.Is(err, errNowShared) {
			data, err = apart()
			s.reply(r, data, err)
			s.served.announceOpened()
			return
		}
		s.reply(r, data, err)
	}
}

// forkAnswer is fork's answer: the message forked before, to edit and
// send again.
type forkAnswer struct {
	Text      string `json:"text"`
	Cancelled bool   `json:"cancelled"`
}

// cloneCommand starts a new session holding the current branch as it is (the same
// entries), whose header names the old file as parentSession (pi 1.6).
// Fields: none. Answer: {"cancelled":false}. Events: session_started after
// the answer.
func (s *rpcServer) cloneCommand(r *rpcRequest) (any, error) {
	apart := func() (any, error) {
		if _, _, err := s.clonePoint(); err != nil {
			return nil, err
		}
		return s.served.copyApart(nil, notCancelled, nil)
	}
	if s.served != nil && s.served.shared() {
		return apart()
	}
	s.clone(s.changeAsker(), s.changeDone(r, notCancelled, apart))
	return noReply{}, nil
}

// getEntriesCommand answers the session's entries in file order (every branch),
// or only those after one. The answer, as big as the session, is written
// entry by entry (output.stream), never held whole.
// Fields: [since] (an entry id). Answer: {entries, leafId (null when the
// session is empty)}; an unknown since fails "Entry not found: <id>",
// and so does a null one, as in pi 1.6 (which looks for the id null).
func (s *rpcServer) getEntriesCommand(r *rpcRequest) (any, error) {
	if raw, ok := r.field("since"); ok && string(raw) == "null" {
		return nil, errors.New("Entry not found: null")
	}
	since, err := r.optStr("since")
	if err != nil {
		return nil, err
	}
	s.conv.mu.Lock()
	ss := s.conv.sessionFile
	entries, leaf := ss.entries[:len(ss.entries):len(ss.entries)], ss.leaf
	s.conv.mu.Unlock()
	if r.has("since") { // "" too, as pi: no entry has that id
		i := slices.IndexFunc(entries, func(e *sessionEntry) bool { return e.ID == since })
		if i < 0 {
			return nil, fmt.Errorf("Entry not found: %s", since)
		}
		entries = entries[i+1:]
	}
	if err := entriesWritable(r.typ, entries); err != nil {
		return nil, err
	}
	s.out.stream(func(buf []byte, spill func([]byte) ([]byte, bool)) []byte {
		buf = append(appendResponseHead(buf, r.id, r.typ), `,"success":true,"data":{"entries":[`...)
		more := true
		for i, e := range entries {
			if !more {
				break
			}
			if i > 0 {
				buf = append(buf, ',')
			}
			buf, more = spill(appendEntryJSON(buf, e))
		}
		buf = appendLeafID(append(buf, `],"leafId":`...), leaf)
		return append(buf, "}}"...)
	})
	return noReply{}, nil
}

// getTreeCommand answers the session's entries as a tree (pi 1.6's shape, plus
// the original's activeLeafId): roots are the entries without a parent
// (or whose parent is missing), children in timestamp order, each node
// with its entry's label when it has one (entryLabels). The tree is
// written from links between the entries, without recursion (a chain of
// a million entries nests a million deep), entry by entry (output.stream).
// Fields: none. Answer: {tree:[{entry, children, [label],
// [labelTimestamp]}], leafId, activeLeafId
// (the leaf the next entry hangs under; rpi has no other leaf, so it is
// leafId)}.
func (s *rpcServer) getTreeCommand(r *rpcRequest) (any, error) {
	s.conv.mu.Lock()
	ss := s.conv.sessionFile
	tree, leaf := linkEntries(ss), ss.leaf
	s.conv.mu.Unlock()
	if err := entriesWritable(r.typ, tree.entries); err != nil {
		return nil, err
	}
	s.out.stream(func(buf []byte, spill func([]byte) ([]byte, bool)) []byte {
		buf = append(appendResponseHead(buf, r.id, r.typ), `,"success":true,"data":{"tree":[`...)
		buf = tree.appendJSON(buf, spill)
		buf = appendLeafID(append(buf, `],"leafId":`...), leaf)
		buf = appendLeafID(append(buf, `,"activeLeafId":`...), leaf)
		return append(buf, "}}"...)
	})
	return noReply{}, nil
}

// getForkMessagesCommand lists the user messages a fork can start from, in file
// order, every branch included.
// Fields: none. Answer: {"messages":[{entryId, text}]}.
func (s *rpcServer) getForkMessagesCommand(r *rpcRequest) (any, error) {
	type forkPoint struct {
		EntryID string `json:"entryId"`
		Text    string `json:"text"`
	}
	s.conv.mu.Lock()
	defer s.conv.mu.Unlock()
	points := []forkPoint{}
	for _, e := range s.conv.sessionFile.entries {
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
