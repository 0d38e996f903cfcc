package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"sync"
	"time"
)

// The rpc front end's process commands (process_*) and the user's own
// shell command (bash, abort_bash) (docs/processes.md).

// requestProcess finds the process a command names in its processId field.
func (s *rpcServer) requestProcess(r *rpcRequest) (*process, error) {
	id, err := r.str("processId")
	if err != nil {
		return nil, err
	}
	return s.findProcess(id)
}

// processSpawnCommand starts a background process (argv exec'd directly, no shell).
// Fields: spec {argv, cwd (absolute), [env] ({K: string|null} over rpi's
// environment), [tty], [terminalSize] {rows, cols}, [label], [timeoutMs],
// [outputBytes]}.
// Answer: ProcessInfo. Events: process_started before the answer, then
// process_output chunks, then process_exited after the last of them.
// A bad spec fails at once; the start itself (which waits for the
// program's exec, seconds on a slow disk) runs in the background, so the
// commands after it are not held up, and the client's spawns start and
// answer in the order they came (spawnsBefore). Each waiting spawn holds
// a goroutine and its spec, so one past maxWaitingSpawns of the client's
// not yet answered fails at once: 4× maxRunningProcesses leaves room for
// a burst of short commands, each ending as the next starts, and a client
// past it asks for more than can ever run.
func (s *rpcServer) processSpawnCommand(r *rpcRequest) (any, error) {
	if !r.has("spec") {
		return nil, missing("spec", "an object {argv, cwd, …}")
	}
	rawSpec, _ := r.field("spec")
	spec, err := decodeProcessSpec(rawSpec, "")
	if err != nil {
		return nil, err
	}
	waiting := &s.conn.spawnsWaiting
	if waiting.Add(1) > maxWaitingSpawns {
		waiting.Add(-1)
		return nil, fmt.Errorf("spawn limit reached (maximum %d process_spawn commands waiting to start)", maxWaitingSpawns)
	}
	before, started := s.spawnsBefore, make(chan struct{})
	s.spawnsBefore = started
	// While it waits it holds its spec and the request's id, not its
	// line. Its place is given back before its answer goes out, so a
	// client that sends the next spawn on an answer always finds one.
	id, typ := bytes.Clone(r.id), r.typ
	var once sync.Once
	answer := func(info any, err error) {
		once.Do(func() { waiting.Add(-1) })
		s.writeResponse(id, typ, info, err)
	}
	s.goBackground(func() {
		defer close(started)
		defer once.Do(func() { waiting.Add(-1) }) // a panic outside safely: unanswered, but its place goes back
		if before != nil {
			<-before
		}
		_, err := s.safely(typ, func() (any, error) { // a panic is answered as on the command loop
			_, err := s.spawn(spec, "client", func(info processInfo) { answer(info, nil) })
			return nil, err
		})
		if err != nil {
			answer(nil, err)
		}
	})
	return noReply{}, nil
}

// processListCommand answers every process not yet removed (ended ones
// included, the maxEndedProcesses of the client's and of the model's that
// ended last), oldest first, as a
// bare array as the original does.
// Fields: none. Answer: [ProcessInfo].
func (s *rpcServer) processListCommand(r *rpcRequest) (any, error) {
	return s.listProcesses(), nil
}

// processDescribeCommand answers one process's ProcessInfo.
// Fields: processId. Answer: ProcessInfo.
func (s *rpcServer) processDescribeCommand(r *rpcRequest) (any, error) {
	p, err := s.requestProcess(r)
	if err != nil {
		return nil, err
	}
	return p.info(), nil
}

// processLogsCommand answers kept output from a byte cursor on.
// Fields: processId, [cursor] (default 0), [limitBytes] (default 262144).
// Answer: {requestedCursor, startCursor, cursor (the next to ask for),
// lost, lostBytes (output the ring no longer holds), chunks:[{startCursor,
// cursor, stream:"combined", dataBase64}], eof (ended and all read)}.
func (s *rpcServer) processLogsCommand(r *rpcRequest) (any, error) {
	p, err := s.requestProcess(r)
	if err != nil {
		return nil, err
	}
	cursor, err := r.optInt64("cursor", 0, -1, 0) // a process writes more than a 32-bit int counts
	if err != nil {
		return nil, err
	}
	limit, err := r.optInt("limitBytes", 1, 16<<20, defaultLogBytes)
	if err != nil {
		return nil, err
	}
	logs, _ := p.logs(cursor, limit)
	return logs, nil
}

// processWriteCommand writes to a process's stdin, after its earlier writes and
// keys, and can close stdin.
// Fields: processId, [dataBase64], [closeStdin] (at least one of them).
// Answer: null once written.
func (s *rpcServer) processWriteCommand(r *rpcRequest) (any, error) {
	p, err := s.requestProcess(r)
	if err != nil {
		return nil, err
	}
	var data []byte
	if r.has("dataBase64") {
		text, err := r.str("dataBase64")
		if err != nil {
			return nil, err
		}
		if data, err = base64.StdEncoding.DecodeString(text); err != nil {
			return nil, invalid("dataBase64", "base64 (standard alphabet, padded)")
		}
	}
	closeStdin, err := r.optBool("closeStdin", false)
	if err != nil {
		return nil, err
	}
	if len(data) == 0 && !closeStdin {
		return nil, missing("dataBase64", "non-empty base64 data, unless closeStdin is true")
	}
	return s.afterInput(r, p, data, closeStdin)
}

// afterInput answers r once data has been written after the process's
// earlier input (p.input). A process whose stdin is already closed fails
// at once, in order with the other answers, unless an earlier write's
// answer is still to come (the one that closed stdin, say): then the
// failure follows it. A write past what may wait fails at once. While it
// waits, the write holds its data and the request's id, not its line.
func (s *rpcServer) afterInput(r *rpcRequest, p *process, data []byte, closeStdin bool) (any, error) {
	p.mu.Lock()
	closed, idle := p.stdinClosed, p.inputsPending == 0
	p.mu.Unlock()
	if closed && idle {
		return nil, p.writeInput(s.ctx, nil, false)
	}
	id, typ := bytes.Clone(r.id), r.typ
	s.background.add()
	err := p.input(s.ctx, data, closeStdin, func(err error) {
		defer s.background.done()
		s.writeResponse(id, typ, nil, err)
	})
	if err != nil {
		s.background.done()
		return nil, err
	}
	return noReply{}, nil
}

// processKeys presses keys: each is written as the bytes a terminal
// sends (ENTER is "\r", CTRL_C is 0x03), with or without a terminal.
// Fields: processId, keys ([ProcessKey]). Answer: null once written.
func (s *rpcServer) processKeysCommand(r *rpcRequest) (any, error) {
	p, err := s.requestProcess(r)
	if err != nil {
		return nil, err
	}
	keys, err := r.optStrings("keys")
	if err == nil && len(keys) == 0 {
		err = missing("keys", "a non-empty array of keys")
	}
	if err != nil {
		return nil, err
	}
	data, err := keyInput(keys)
	if err != nil {
		return nil, err
	}
	return s.afterInput(r, p, data, false)
}

// processResizeCommand sets the size of a process's terminal (the process gets
// SIGWINCH).
// Fields: processId, cols, rows (1–65535). Answer: null, always before
// the output the process writes after it.
func (s *rpcServer) processResizeCommand(r *rpcRequest) (any, error) {
	p, err := s.requestProcess(r)
	if err != nil {
		return nil, err
	}
	cols, err := r.optInt("cols", 1, 65535, 0)
	if err == nil && cols == 0 {
		err = missing("cols", "a whole number from 1 to 65535")
	}
	if err != nil {
		return nil, err
	}
	rows, err := r.optInt("rows", 1, 65535, 0)
	if err == nil && rows == 0 {
		err = missing("rows", "a whole number from 1 to 65535")
	}
	if err != nil {
		return nil, err
	}
	if err := p.resize(rows, cols, func() { s.reply(r, nil, nil) }); err != nil {
		return nil, err
	}
	return noReply{}, nil
}

// processSignalCommand sends a signal to a process's whole group; once the
// process has ended it does nothing.
// Fields: processId, signal (ProcessSignal). Answer: null, always before
// the process_exited the signal may cause.
func (s *rpcServer) processSignalCommand(r *rpcRequest) (any, error) {
	p, err := s.requestProcess(r)
	if err != nil {
		return nil, err
	}
	name, err := r.enum("signal", processSignals)
	if err != nil {
		return nil, err
	}
	err = p.sendSignal(signalNumber(name), func() { s.reply(r, nil, nil) })
	if err != nil {
		return nil, err
	}
	return noReply{}, nil
}

// processStopCommand stops a process: SIGTERM to its group, then SIGKILL if it
// has not exited a second later.
// Fields: processId. Answer: the final ProcessInfo, after process_exited.
func (s *rpcServer) processStopCommand(r *rpcRequest) (any, error) {
	p, err := s.requestProcess(r)
	if err != nil {
		return nil, err
	}
	if p.ended() {
		return p.info(), nil // in order with the commands around it
	}
	release, err := p.waiter("stop")
	if err != nil {
		return nil, err
	}
	s.answerLater(r.typ, s.replyTo(r), func() (any, error) { defer release(); return p.stop(), nil })
	return noReply{}, nil
}

// processWaitCommand waits for a process to end, in the background.
// Fields: processId, [timeoutMs]. Answer: the final ProcessInfo, after
// process_exited; a timeout fails ("timed out waiting for process <id>").
func (s *rpcServer) processWaitCommand(r *rpcRequest) (any, error) {
	p, err := s.requestProcess(r)
	if err != nil {
		return nil, err
	}
	timeout, err := r.optDuration("timeoutMs", time.Millisecond)
	if err != nil {
		return nil, err
	}
	if p.ended() {
		return p.info(), nil // in order with the commands around it
	}
	release, err := p.waiter("wait for")
	if err != nil {
		return nil, err
	}
	s.answerLater(r.typ, s.replyTo(r), func() (any, error) {
		defer release()
		return p.wait(context.Background(), timeout)
	})
	return noReply{}, nil
}

// processRemoveCommand forgets an ended process (rpi's addition to docs/processes.md).
// Fields: processId. Answer: null; a running process is an error.
func (s *rpcServer) processRemoveCommand(r *rpcRequest) (any, error) {
	p, err := s.requestProcess(r)
	if err != nil {
		return nil, err
	}
	return nil, s.removeProcess(p)
}

// bashCommand runs the user's own shell command (not the model's tool) with
// `bash -c` in the session cwd, in its own process group, and answers when
// it ends; the commands after it are answered meanwhile.
// Fields: command (string), [timeout] (seconds; on expiry the command is
// killed and answers cancelled:true), [excludeFromContext] (bool).
// Answer: {exitCode (null when killed by a signal), stdout, stderr, output
// (both interleaved as they arrived), cancelled, truncated, [fullOutputPath]};
// a nonzero exit is still a success.
// Events: bash_execution_update per chunk of output, with the request's id.
func (s *rpcServer) bashCommand(r *rpcRequest) (any, error) {
	command, err := r.str("command")
	if err != nil {
		return nil, err
	}
	timeout, err := r.optDuration("timeout", time.Second)
	if err != nil {
		return nil, err
	}
	exclude, err := r.optBool("excludeFromContext", false)
	if err != nil {
		return nil, err
	}
	requestID := r.idString()
	out := newShellOutput(s.session, func(stream, text string) {
		s.postEvent("bash_execution_update", bashUpdate{requestID, stream, text, r.id})
	})
	ctx, cancel := context.WithCancel(s.ctx)
	run := &bashRun{cancel: cancel, abortAnswered: make(chan struct{})}
	s.userBash.add(run)
	s.answerLater(r.typ, s.replyTo(r), func() (any, error) {
		defer cancel()
		end, err := s.runShell(ctx, command, s.set.childEnv, timeout, out)
		if aborted := s.userBash.remove(run); aborted {
			<-run.abortAnswered
		}
		if err != nil {
			return nil, err
		}
		code := end.exitCode()
		res := out.finish(code, ctx.Err() != nil || end.timedOut)
		pi := piBashResult{Output: res.Output, ExitCode: res.ExitCode, Cancelled: res.Cancelled, Truncated: res.Truncated, FullOutputPath: res.FullOutputPath}
		s.conv.addBashResult(bashExecutionMessage{
			Role: "bashExecution", Command: command, Output: res.Output, ExitCode: code,
			Cancelled: res.Cancelled, Truncated: res.Truncated, FullOutputPath: res.FullOutputPath,
			ExcludeFromContext: exclude, Timestamp: s.env.clock.Now().UnixMilli(),
		})
		return piOnly{data: pi, otherwise: res}, nil
	})
	return noReply{}, nil
}

// abortBashCommand kills every running user bash command of the session
// (the whole process group, SIGKILL); each then answers cancelled:true,
// after this answer.
// Fields: none. Answer: null. Events: none.
func (s *rpcServer) abortBashCommand(r *rpcRequest) (any, error) {
	runs := s.userBash.abortAll()
	for _, run := range runs {
		run.cancel()
	}
	s.reply(r, nil, nil)
	for _, run := range runs {
		close(run.abortAnswered)
	}
	return noReply{}, nil
}

func (u bashUpdate) appendJSON(buf []byte) []byte {
	buf = append(buf, `{"requestId":`...)
	if u.RequestID == nil {
		buf = append(buf, "null"...)
	} else {
		buf = appendJSONString(buf, *u.RequestID)
	}
	buf = append(buf, `,"stream":`...)
	buf = appendJSONString(buf, u.Stream)
	buf = append(buf, `,"chunk":`...)
	buf = appendJSONString(buf, u.Chunk)
	return append(buf, '}')
}
