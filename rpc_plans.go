package main

import (
	"errors"
	"slices"
	"strings"
	"time"
)

// The rpc front end's plan commands: the todos (get_todos, set_todos,
// todo_op) and the loops (loop_*) (docs/todos-and-loops.md).

// loopCreateCommand schedules a prompt. With fireImmediately the loop is created
// one interval in the past, so it fires at once (after the answer).
// Fields: interval ("300", "3s", "5m", "2h", "1d", or a number of
// seconds), prompt, [fireImmediately]=true, [durable]=false (saved beside
// the session file). Answer: LoopTask. Events: loop_created before the
// answer; then, when it fires at once, loop_fired (or loop_queued while
// the agent is busy) and the run's events.
func (s *rpcServer) loopCreateCommand(r *rpcRequest) (any, error) {
	rawInterval, err := loopIntervalField(r)
	if err != nil {
		return nil, err
	}
	prompt, err := r.str("prompt")
	if err != nil {
		return nil, err
	}
	fireNow, err := r.optBool("fireImmediately", true)
	if err != nil {
		return nil, err
	}
	durable, err := r.optBool("durable", false)
	if err != nil {
		return nil, err
	}
	task, err := s.addLoop(rawInterval, prompt, fireNow, durable)
	if err != nil {
		return nil, err
	}
	s.reply(r, task, nil)
	s.fireDueLoops()
	return noReply{}, nil
}

// loopUpdateCommand changes a loop's interval or prompt. A new interval that
// would make the loop due at once counts from now instead.
// Fields: taskId, [interval], [prompt]. Answer: LoopTask. Events:
// loop_updated.
func (s *rpcServer) loopUpdateCommand(r *rpcRequest) (any, error) {
	id, err := r.str("taskId")
	if err != nil {
		return nil, err
	}
	var rawInterval any
	if r.has("interval") {
		if rawInterval, err = loopIntervalField(r); err != nil {
			return nil, err
		}
	}
	prompt, err := r.optStr("prompt")
	if err != nil {
		return nil, err
	}
	if rawInterval == nil && !r.has("prompt") {
		return nil, errors.New("nothing to update; provide interval and/or prompt")
	}
	var secs int64
	if rawInterval != nil {
		if secs, err = parseLoopInterval(rawInterval); err != nil {
			return nil, err
		}
	}
	if prompt = strings.TrimSpace(prompt); r.has("prompt") && prompt == "" {
		return nil, errors.New("loop prompt cannot be empty")
	}
	if !loopPromptFits(prompt) {
		return nil, errLoopPromptTooLong
	}
	change := func(t *loopTask, now time.Time) {
		if prompt != "" {
			t.Prompt = prompt
		}
		if secs > 0 {
			t.IntervalSecs = secs
			if !t.nextFire().After(now) {
				t.LastFiredAt = now
			}
		}
	}
	now := s.env.clock.Now()
	l := s.loops
	return s.editLoop(id, func(t *loopTask) (any, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.findLocked(id) != t {
			return nil, noLoop(id) // expired meanwhile
		}
		change(t, now)
		s.postEvent("loop_updated", loopUpdated{t.asJSON()})
		s.armLoopsLocked()
		return t.asJSON(), nil
	})
}

// loopListCommand answers the loops, oldest first, as a bare array as the
// original does.
// Fields: none. Answer: [LoopTask]. Events: none.
func (s *rpcServer) loopListCommand(r *rpcRequest) (any, error) {
	l := s.loops
	l.mu.Lock()
	defer l.mu.Unlock()
	tasks := []loopTaskJSON{}
	for _, t := range l.tasks {
		tasks = append(tasks, t.asJSON())
	}
	return tasks, nil
}

// loopDeleteCommand removes a loop; a run of it in progress goes on (without
// loop_finished).
// Fields: taskId. Answer: true, or false when no loop has that id (as the
// original: no failure). Events: loop_removed {reason: deleted}.
func (s *rpcServer) loopDeleteCommand(r *rpcRequest) (any, error) { return s.removeLoop(r, false) }

// loopCancelCommand removes a loop and aborts its run in progress, answering
// once that run has settled.
// Fields: taskId. Answer: true, or false when no loop has that id.
// Events: loop_removed {reason: cancelled}, then the aborted run's end
// (agent_end, agent_settled).
func (s *rpcServer) loopCancelCommand(r *rpcRequest) (any, error) { return s.removeLoop(r, true) }

func (s *rpcServer) removeLoop(r *rpcRequest, cancel bool) (any, error) {
	id, err := r.str("taskId")
	if err != nil {
		return nil, err
	}
	reason := "deleted"
	if cancel {
		reason = "cancelled"
	}
	var aborted *agentRun
	_, err = s.editLoop(id, func(t *loopTask) (any, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.loops.mu.Lock()
		defer s.loops.mu.Unlock()
		if s.loops.findLocked(id) != t {
			return nil, noLoop(id) // expired meanwhile
		}
		aborted = s.dropLoopLocked(t, reason, cancel)
		s.armLoopsLocked()
		return nil, nil
	})
	var none *noLoopError
	switch {
	case errors.As(err, &none):
		return false, nil
	case err != nil:
		return nil, err
	case aborted == nil:
		return true, nil
	}
	s.answerLater(r.typ, s.replyTo(r), func() (any, error) {
		<-aborted.settled
		return true, nil
	})
	return noReply{}, nil
}

// setTodosCommand replaces the plan. Tasks without an id get task-<hash of phase
// and content>; ready and blockedBy are recomputed.
// Fields: phases ([{name, tasks:[{[id], content, status, [dependsOn],
// [agent]}]}]). Answer: {phases, completedTasks, summary}. Events:
// todo_updated. UI: setWidget (todos).
func (s *rpcServer) setTodosCommand(r *rpcRequest) (any, error) {
	const want = "an array of {name, tasks:[{[id], content, status, [dependsOn], [agent]}]} " +
		"with status one of pending, in_progress, completed, abandoned"
	if !r.has("phases") {
		return nil, missing("phases", want)
	}
	var phases []todoPhase
	if err := r.decodeField("phases", want, &phases); err != nil || phases == nil {
		return nil, invalid("phases", want)
	}
	for _, p := range phases {
		for _, t := range p.Tasks {
			if !slices.Contains(todoStatuses, t.Status) {
				return nil, invalid("phases", want)
			}
		}
	}
	return s.changeTodos(func([]todoPhase) ([]todoPhase, todoError) {
		return phases, prepareTodos(phases)
	})
}

// todoOpCommand applies one operation to the plan (todo_op).
// Fields: op (init|start|done|drop|rm|append|add_dependency|
// remove_dependency|update_dependencies|view) and the op's own: init
// [list]:[{phase, items, [agents]}] or [items] + [phase]; start task;
// done/drop [task], [phase]; rm [task], [phase], [cascade]; append phase,
// items; the dependency ops task (an id) and dependsOn. Answer: {phases,
// completedTasks, summary}. Events: todo_updated (view too). UI:
// setWidget (todos).
func (s *rpcServer) todoOpCommand(r *rpcRequest) (any, error) {
	op, err := todoOpFrom(r)
	if err != nil {
		return nil, err
	}
	return s.applyTodoOp(op)
}

// getTodosCommand answers the plan.
// Fields: none. Answer: {"phases":[TodoPhase]}. Events: none.
func (s *rpcServer) getTodosCommand(r *rpcRequest) (any, error) {
	return struct {
		Phases []todoPhase `json:"phases"`
	}{s.todoPlan()}, nil
}

// loopIntervalField reads interval: a string, or a number of seconds.
func loopIntervalField(r *rpcRequest) (any, error) {
	const want = `a string like "300", "3s", "5m", "2h" or "1d", or a number of seconds`
	if !r.has("interval") {
		return nil, missing("interval", want)
	}
	var v any
	if err := r.decodeField("interval", want, &v); err != nil {
		return nil, err
	}
	switch v.(type) {
	case string, float64:
		return v, nil
	}
	return nil, invalid("interval", want)
}

// todoOpFrom reads todo_op's fields.
func todoOpFrom(r *rpcRequest) (op todoOp, err error) {
	if op.Op, err = r.enum("op", todoOps); err != nil {
		return op, err
	}
	if r.has("list") {
		const want = "an array of {phase, items, [agents]}"
		if err := r.decodeField("list", want, &op.List); err != nil || op.List == nil {
			return op, invalid("list", want)
		}
	}
	if op.Items, err = r.optStrings("items"); err != nil {
		return op, err
	}
	if op.DependsOn, err = r.optStrings("dependsOn"); err != nil {
		return op, err
	}
	if op.Phase, err = r.optStr("phase"); err != nil {
		return op, err
	}
	if op.Task, err = r.optStr("task"); err != nil {
		return op, err
	}
	op.Cascade, err = r.optBool("cascade", false)
	return op, err
}
