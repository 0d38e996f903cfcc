package main

// ACP's session methods (SPEC §12.3): the sessions on disk, found by the
// id in their header, listed in pages and deleted with the same code as
// rpc's session_list and session_delete (session_catalog.go).

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
)

// acpSessionID reads a request's sessionId: a string that can be a
// session's id (no path in it).
func acpSessionID(p acpParams) (string, error) {
	id, err := p.str("sessionId")
	if err == nil && (id == "" || strings.ContainsAny(id, `/\`) || id == "." || id == "..") {
		err = invalidParams("Invalid field sessionId: must be a session's id")
	}
	return id, err
}

// acpAbsDir reads an absolute directory path (cwd): required, or
// optional ("" when absent).
func acpAbsDir(p acpParams, field string, required bool) (string, error) {
	if !required && !p.has(field) {
		return "", nil
	}
	dir, err := p.str(field)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(dir) {
		return "", invalidParams("Invalid field %s: must be an absolute path, got %q", p.name(field), dir)
	}
	return filepath.Clean(dir), nil
}

// findSessionFile is the file of the session whose header id is id: in
// cwd's folder first (when cwd is not ""), else in any.
func findSessionFile(ctx context.Context, store sessionStore, id, cwd string) (string, error) {
	scopes := []string{""}
	if cwd != "" && !store.flat {
		scopes = []string{cwd, ""}
	}
	for _, scope := range scopes {
		rows, err := listSessions(ctx, store, scope)
		if err != nil {
			return "", err
		}
		for _, r := range rows {
			if r.SessionID == id {
				return r.Path, nil
			}
		}
	}
	return "", invalidParams("Invalid field sessionId: no session has the id %s", id)
}

// acpList lists the sessions on disk, a page at a time, newest first.
// Params: [cwd] (absolute: that directory's sessions; absent: every
// directory's), [cursor] (a nextCursor it gave). Answer: {sessions:
// [{sessionId, cwd, title, updatedAt}], [nextCursor]}.
func acpList(a *acpAgent, call *acpCall) (any, error) {
	cwd, err := acpAbsDir(call.params, "cwd", false)
	if err != nil {
		return nil, err
	}
	cursor, err := call.params.optStr("cursor")
	if err != nil {
		return nil, err
	}
	if a.noSession {
		return acpListPage{Sessions: []acpSessionRow{}}, nil
	}
	return a.answerLater(call, func() (any, error) {
		rows, err := listSessions(a.ctx, a.store, cwd)
		if err != nil {
			return nil, err
		}
		return acpPageOf(rows, cursor)
	})
}

// acpDelete deletes a session's file (and its loops file), found by its
// id; a session open in this process cannot be deleted.
// Params: sessionId. Answer: {}.
func acpDelete(a *acpAgent, call *acpCall) (any, error) {
	id, err := acpSessionID(call.params)
	if err != nil {
		return nil, err
	}
	if a.isOpen(id) {
		return nil, invalidParams("Invalid field sessionId: the session %s is open; close it first (session/close)", id)
	}
	return a.answerLater(call, func() (any, error) {
		path, err := findSessionFile(a.ctx, a.store, id, "")
		if err != nil {
			return nil, err
		}
		if err := deleteSession(a.store, path, ""); err != nil {
			return nil, fmt.Errorf("session/delete %s: %w", id, err)
		}
		return nil, nil
	})
}

// isOpen reports whether the session with id is open in this process.
func (a *acpAgent) isOpen(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.open[id]
}

// ---- Turns ----

// acpTurn is one session/prompt waiting for its answer.
type acpTurn struct {
	call *acpCall
	msg  *userMessage // the user message it became
}

// acpTurns keeps a session's prompts in the order their turns run: the
// one running and the follow-ups queued behind it (§12.4). A turn ends
// when the agent takes the next queued prompt's message, or when the
// agent settles; session/cancel ends the queued ones at once.
type acpTurns struct {
	mu        sync.Mutex // guards the fields below
	running   *acpTurn   // the turn the agent is in; nil when idle
	queued    []*acpTurn // follow-ups, in order
	cancelled bool       // session/cancel came during the running turn
}

// begin makes t the running turn (its prompt started a run).
func (ts *acpTurns) begin(t *acpTurn) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.running, ts.cancelled = t, false
}

// queue puts t behind the running turn.
func (ts *acpTurns) queue(t *acpTurn) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.queued = append(ts.queued, t)
}

// busy reports whether a turn runs or waits.
func (ts *acpTurns) busy() bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.running != nil || len(ts.queued) > 0
}

// took tells that the agent took msg, a user message, into its context:
// when it is a queued prompt's, the running turn has ended (returned,
// with whether it was cancelled) and that prompt's turn runs.
func (ts *acpTurns) took(msg *userMessage) (ended *acpTurn, cancelled bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for i, t := range ts.queued {
		if t.msg == msg {
			ended, cancelled = ts.running, ts.cancelled
			ts.running, ts.cancelled = t, false
			ts.queued = append(ts.queued[:i:i], ts.queued[i+1:]...)
			return ended, cancelled
		}
	}
	return nil, false
}

// settled tells that the agent is idle: the running turn has ended
// (returned, with whether it was cancelled), and so has every queued one
// it did not take (after a cancel: those answer cancelled).
func (ts *acpTurns) settled() (ended *acpTurn, cancelled bool, left []*acpTurn) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ended, cancelled, left = ts.running, ts.cancelled, ts.queued
	ts.running, ts.cancelled, ts.queued = nil, false, nil
	return ended, cancelled, left
}

// cancel marks the running turn cancelled and takes the queued ones,
// which answer cancelled at once.
func (ts *acpTurns) cancel() (queued []*acpTurn) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.running != nil {
		ts.cancelled = true
	}
	queued, ts.queued = ts.queued, nil
	return queued
}
