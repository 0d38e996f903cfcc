package main

// The editor's terminals (docs/acp.md, "The editor's terminal"): when the
// client offers terminal/* and the session's shell option is editor, the
// model's bash runs in a terminal of the editor's — terminal/create, its
// card showing it, terminal/wait_for_exit, terminal/output, and always
// terminal/release (terminal/kill first on a timeout or a cancel) — and
// its result has the shape rpi's own bash gives.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// acpTerminalGrace bounds the wait for the answers to the requests that
// end an editor's terminal (kill, the output after a timeout, release),
// all of them together: a client that does not answer them holds a call
// up no longer than that.
const acpTerminalGrace = 5 * time.Second

// acpMaxSignalName bounds the signal name an editor gives that is passed
// on to the model.
const acpMaxSignalName = 64

// ---- The shell option ----

// setShell sets where the model's bash runs: rpi's own shell, or the
// editor's terminal (terminal/*); a call already started keeps where it
// started. Offered only to a client with terminals.
func (as *acpSession) setShell(value string) error {
	as.mu.Lock()
	defer as.mu.Unlock()
	switch {
	case as.shell == "":
		return acpUnknownConfigID(false)
	case !slices.ContainsFunc(acpShellValues, func(v acpConfigValue) bool { return v.Value == value }):
		return invalidParams("Invalid field value: shell must be one of rpi, editor")
	}
	as.shell = value
	return nil
}

// offersShell reports whether the session has the shell option: its
// client has terminals.
func (as *acpSession) offersShell() bool {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.shell != ""
}

// inEditor reports whether the model's bash runs in the editor's terminal
// now (the shell option is editor).
func (as *acpSession) inEditor() bool {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.shell == "editor"
}

// ---- The requests ----

// acpCreateTerminal is terminal/create's params.
type acpCreateTerminal struct {
	SessionID       string   `json:"sessionId"`
	Command         string   `json:"command"`
	Args            []string `json:"args"`
	Env             []acpEnv `json:"env"`
	Cwd             string   `json:"cwd"`
	OutputByteLimit int      `json:"outputByteLimit"`
}

// acpEnv is a variable terminal/create sets in the command's environment
// (the schema's EnvVariable), over the editor's own.
type acpEnv struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// acpTerminalEnv is what the model's command in the editor's terminal gets
// of rpi's environment: the agent markers and the session's variables as
// they are now (sessionValues), as its bash in rpi gets them. Nothing else
// of rpi's is sent (the editor's environment is the command's): neither a
// provider's key nor anything rpi inherited.
func acpTerminalEnv(s *session) []acpEnv {
	var env []acpEnv
	for _, kv := range append(slices.Clone(agentMarkers), s.sessionValues()...) {
		name, value, _ := strings.Cut(kv, "=")
		env = append(env, acpEnv{name, value})
	}
	return env
}

// acpTerminalParams are the params of the other terminal/* requests.
type acpTerminalParams struct {
	SessionID  string `json:"sessionId"`
	TerminalID string `json:"terminalId"`
}

// acpExitStatus is how a command in an editor's terminal ended, as the
// editor tells it: its exit code, or the signal that ended it (either
// may be missing).
type acpExitStatus struct {
	code   *int
	signal string
}

// createTerminal has the client start a command in a terminal of its own
// (terminal/create) and returns the terminal's id.
func (c *acpConn) createTerminal(ctx context.Context, params acpCreateTerminal) (string, error) {
	raw, err := c.request(ctx, "terminal/create", params)
	if err != nil {
		return "", err
	}
	var result struct {
		TerminalID *string `json:"terminalId"`
	}
	if json.Unmarshal(raw, &result) != nil || result.TerminalID == nil || *result.TerminalID == "" {
		return "", errors.New("the editor answered terminal/create without a terminalId")
	}
	return *result.TerminalID, nil
}

// waitForTerminalExit waits for the command in a terminal to end
// (terminal/wait_for_exit). An exit code that is not a whole number from
// 0 to 2^32-1, or a signal that is not a string, is taken as not given,
// as the schema's readers take it.
func (c *acpConn) waitForTerminalExit(ctx context.Context, sessionID, terminalID string) (acpExitStatus, error) {
	raw, err := c.request(ctx, "terminal/wait_for_exit", acpTerminalParams{sessionID, terminalID})
	if err != nil {
		return acpExitStatus{}, err
	}
	var result struct {
		ExitCode json.RawMessage `json:"exitCode"`
		Signal   json.RawMessage `json:"signal"`
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &result) != nil {
		return acpExitStatus{}, errors.New("the editor answered terminal/wait_for_exit without an exit status")
	}
	var exit acpExitStatus
	var code int64
	// The schema's exit code is a uint32; on a 32-bit system one past what
	// an int holds is no exit code.
	if json.Unmarshal(result.ExitCode, &code) == nil && code >= 0 && code <= min(1<<32-1, math.MaxInt) && string(result.ExitCode) != "null" {
		n := int(code)
		exit.code = &n
	}
	if json.Unmarshal(result.Signal, &exit.signal) != nil || len(exit.signal) > acpMaxSignalName {
		exit.signal = ""
	}
	return exit, nil
}

// terminalOutput reads what a terminal's command printed
// (terminal/output): the output the client kept, and whether it cut
// its start.
func (c *acpConn) terminalOutput(ctx context.Context, sessionID, terminalID string) (output string, truncated bool, err error) {
	raw, err := c.request(ctx, "terminal/output", acpTerminalParams{sessionID, terminalID})
	if err != nil {
		return "", false, err
	}
	var result struct {
		Output    *string `json:"output"`
		Truncated bool    `json:"truncated"`
	}
	if json.Unmarshal(raw, &result) != nil || result.Output == nil {
		return "", false, errors.New("the editor answered terminal/output without the output")
	}
	return *result.Output, result.Truncated, nil
}

// killTerminal ends a terminal's command and keeps the terminal
// (terminal/kill); releaseTerminal ends it and lets go of the terminal
// (terminal/release), whose id is dead after.
func (c *acpConn) killTerminal(ctx context.Context, sessionID, terminalID string) error {
	_, err := c.request(ctx, "terminal/kill", acpTerminalParams{sessionID, terminalID})
	return err
}

func (c *acpConn) releaseTerminal(ctx context.Context, sessionID, terminalID string) error {
	_, err := c.request(ctx, "terminal/release", acpTerminalParams{sessionID, terminalID})
	return err
}

// ---- The runner ----

// acpTerminals runs a session's bash calls in the editor's terminals: the
// session's commandRunner. It takes the calls that started while the
// shell option was editor (acpUpdates.inEditorTerminal), and leaves the
// others to rpi's own shell.
type acpTerminals struct{ as *acpSession }

// runCommand runs c in a new terminal of the editor's and waits for it to
// end. A client's error answer is the call's error. The command's output
// is what terminal/output gives, its end at most c.keep bytes (the client
// is asked to keep no more: outputByteLimit), whatever the client sends.
// A cancel (ctx ending) returns at once, and kills and releases the
// terminal behind it; so does a timeout, which reads the output first.
// The timeout counts from terminal/create: an editor slow to make the
// terminal holds the call no longer than it.
func (r acpTerminals) runCommand(ctx context.Context, c commandCall) (commandEnd, bool, error) {
	if !r.as.updates.inEditorTerminal(c.id) {
		return commandEnd{}, false, nil
	}
	runCtx, stop := ctx, context.CancelFunc(func() {})
	if c.timeout > 0 {
		runCtx, stop = context.WithTimeout(ctx, c.timeout)
	}
	defer stop()
	terminal, err := r.create(runCtx, c)
	switch {
	case err != nil && ctx.Err() != nil:
		return commandEnd{}, true, nil // aborted (a terminal made after all is ended: create)
	case err != nil && runCtx.Err() != nil:
		return commandEnd{timedOut: true}, true, nil // no terminal yet (one made after all is ended: create)
	case err != nil:
		return commandEnd{}, true, fmt.Errorf("Cannot run the command in the editor's terminal: terminal/create failed: %v", err)
	}
	r.as.updates.terminalCreated(c.id, terminal)
	end, err := r.wait(ctx, runCtx, c, terminal)
	return end, true, err
}

// create asks the client for a terminal running c. It waits until ctx
// ends; the request itself waits for its answer until the connection
// closes or rpi shuts down, past the session's close too (the client may
// ignore $/cancel_request, and answer), so that a terminal the client
// makes once the call was cancelled is still killed and released.
func (r acpTerminals) create(ctx context.Context, c commandCall) (string, error) {
	as := r.as
	params := acpCreateTerminal{SessionID: as.id, Command: "bash", Args: []string{"-c", c.command}, Env: acpTerminalEnv(as.s), Cwd: c.cwd, OutputByteLimit: c.keep}
	type created struct {
		id  string
		err error
	}
	answer := make(chan created, 1)
	as.agent.h.goBackground(func() {
		id, err := as.agent.conn.createTerminal(as.agent.h.ctx, params)
		answer <- created{id, err}
	})
	select {
	case got := <-answer:
		return got.id, got.err
	case <-ctx.Done():
		as.agent.h.goBackground(func() {
			if got := <-answer; got.err == nil {
				r.end(got.id, true)
			}
		})
		return "", ctx.Err()
	}
}

// wait waits for the command in terminal to exit, reads its output and
// releases the terminal; its timeout (waitCtx ending) and a cancel (ctx)
// kill it first. The timeout holds while the output is read too.
func (r acpTerminals) wait(ctx, waitCtx context.Context, c commandCall, terminal string) (commandEnd, error) {
	as, conn := r.as, r.as.agent.conn
	exit, err := conn.waitForTerminalExit(waitCtx, as.id, terminal)
	switch {
	case ctx.Err() != nil:
		// Cancelled: the call ends now, the terminal behind it.
		as.agent.h.goBackground(func() { r.end(terminal, true) })
		return commandEnd{}, nil
	case waitCtx.Err() != nil:
		// Timed out: killed, its output read (what it printed is the
		// model's, as rpi's own bash gives it), released. A cancel
		// meanwhile ends the call at once, and the terminal behind it, as
		// a cancel before the timeout does: the kill and the release are
		// not withdrawn with the call.
		grace, stop := context.WithTimeout(ctx, acpTerminalGrace)
		defer stop()
		end := commandEnd{timedOut: true}
		conn.killTerminal(grace, as.id, terminal)
		if ctx.Err() == nil {
			end.output, end.truncated, _ = r.output(grace, terminal, c.keep) // none when the editor fails to give it
		}
		if ctx.Err() != nil {
			as.agent.h.goBackground(func() { r.end(terminal, true) })
			return commandEnd{}, nil
		}
		r.end(terminal, false)
		return end, nil
	case err != nil:
		r.end(terminal, false)
		return commandEnd{}, fmt.Errorf("Cannot run the command in the editor's terminal: terminal/wait_for_exit failed: %v", err)
	}
	output, truncated, err := r.output(waitCtx, terminal, c.keep)
	switch {
	case ctx.Err() != nil:
		as.agent.h.goBackground(func() { r.end(terminal, false) })
		return commandEnd{}, nil
	case waitCtx.Err() != nil:
		// Timed out while the client held the output back: released.
		r.end(terminal, false)
		return commandEnd{timedOut: true}, nil
	}
	r.end(terminal, false)
	if err != nil {
		return commandEnd{}, fmt.Errorf("Cannot read the command's output from the editor's terminal: terminal/output failed: %v", err)
	}
	return commandEnd{output: output, truncated: truncated, exitCode: exit.code, signal: exit.signal}, nil
}

// output reads the terminal's output, its last keep bytes at most (from
// the start of a character): a client that sends more than it was asked
// to keep is cut as it would have cut.
func (r acpTerminals) output(ctx context.Context, terminal string, keep int) (string, bool, error) {
	output, truncated, err := r.as.agent.conn.terminalOutput(ctx, r.as.id, terminal)
	if len(output) > keep {
		cut := len(output) - keep
		for cut < len(output) && !utf8.RuneStart(output[cut]) {
			cut++
		}
		output, truncated = output[cut:], true
	}
	return output, truncated, err
}

// end kills the terminal's command (kill) and releases the terminal,
// waiting for the answers at most acpTerminalGrace in all. The session
// closing withdraws neither (it is often why the terminal ends); the
// connection closing, or rpi shutting down, ends the wait.
func (r acpTerminals) end(terminal string, kill bool) {
	as := r.as
	grace, stop := context.WithTimeout(as.agent.h.ctx, acpTerminalGrace)
	defer stop()
	if kill {
		as.agent.conn.killTerminal(grace, as.id, terminal)
	}
	as.agent.conn.releaseTerminal(grace, as.id, terminal)
}
