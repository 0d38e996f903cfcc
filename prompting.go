package main

// Prompting: the steering and follow-up queues, the operations that start
// or queue a prompt (and report when its turn has ended), abort and
// clear_queue, and their commands.

import (
	"slices"
)

func (s *session) steeringQueued() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.steering) > 0
}

// takeQueued takes the next steering (or follow-up) messages per the
// queue's mode and reports the change.
func (s *session) takeQueued(steering bool) []*userMessage {
	s.mu.Lock()
	defer s.unlock()
	return s.takeQueuedLocked(steering)
}

func (s *session) takeQueuedLocked(steering bool) []*userMessage {
	queue, mode := &s.followUp, s.followUpMode
	if steering {
		queue, mode = &s.steering, s.steeringMode
	}
	n := len(*queue)
	if n == 0 {
		return nil
	}
	if mode == "one-at-a-time" {
		n = 1
	}
	taken := slices.Clone((*queue)[:n])
	*queue = (*queue)[n:]
	for _, m := range taken {
		s.starting = append(s.starting, queuedMessage{m, steering})
	}
	return taken
}

// takeSteeredToo takes what was steered while a prompt's run started
// (a compaction before it), as if taken at once with what was steered
// while idle (tookSome: some was): as pi 1.6's loop takes the steering
// queue once it starts, one message in one-at-a-time mode.
func (s *session) takeSteeredToo(tookSome bool) []*userMessage {
	s.mu.Lock()
	defer s.unlock()
	if tookSome && s.steeringMode == "one-at-a-time" {
		return nil
	}
	return s.takeQueuedLocked(true)
}

// queuedMessage is a message taken from a queue (the steering queue or
// not) and about to start.
type queuedMessage struct {
	msg      *userMessage
	steering bool
}

// startQueued tells, as a queued message starts (just before its
// message_start), that it has left its queue: queue_update, as pi 1.6
// tells it, one message at a time after the turn_start.
func (s *session) startQueued(m any) {
	s.mu.Lock()
	defer s.unlock()
	for i, q := range s.starting {
		if q.msg == m {
			s.starting = slices.Delete(s.starting, i, i+1)
			s.postQueue()
			return
		}
	}
}

// enqueueLocked adds a user message to a queue and posts the change;
// s.mu is held, so the report is in order with every other change.
func (s *session) enqueueLocked(steering bool, m *userMessage) {
	if steering {
		s.steering = append(s.steering, m)
	} else {
		s.followUp = append(s.followUp, m)
	}
	s.postQueue()
}

func (s *session) queueTextsLocked() queueUpdate {
	texts := func(q []*userMessage) []string {
		out := []string{}
		for _, m := range q {
			out = append(out, m.Content[0].Text)
		}
		return out
	}
	var steering, followUp []*userMessage
	for _, q := range s.starting {
		if q.steering {
			steering = append(steering, q.msg)
		} else {
			followUp = append(followUp, q.msg)
		}
	}
	return queueUpdate{Steering: texts(append(steering, s.steering...)), FollowUp: texts(append(followUp, s.followUp...))}
}

// postQueue posts queue_update with the queues as they are; s.mu is held.
func (s *session) postQueue() { s.postEvent("queue_update", s.queueTextsLocked()) }

func (s *session) emitQueue() {
	s.mu.Lock()
	defer s.unlock()
	s.postQueue()
}

// waitForPlace waits until the host's run policy may give s a place (or
// s closes: false), telling its clients the while with queue_update's
// waitingForSlot, and that the wait is over.
func (s *session) waitForPlace() bool {
	waited := false
	defer func() {
		if waited {
			s.emitQueue()
		}
	}()
	for ch := s.host.runs.placeFreed(s); ch != nil; ch = s.host.runs.placeFreed(s) {
		if !waited {
			waited = true
			s.mu.Lock()
			update := s.queueTextsLocked()
			update.WaitingForSlot = true
			s.postEvent("queue_update", update)
			s.unlock()
		}
		select {
		case <-ch:
		case <-s.ctx.Done():
			return false
		}
	}
	return true
}

// ---- Prompting ----

// startPrompt starts a run with msg, or, while one runs, queues it as
// behaviour says ("steer" or "followUp"; "" fails as busy). accepted is
// called once, when it is started or queued (before any event of its
// run) or refused; ended (nil: none) once its turn has ended (promptEnd).
// When the session file's last write failed, the file is written again
// first, in the background, and the prompt fails if that fails too.
func (s *session) startPrompt(msg *userMessage, behaviour string, accepted func(queued bool, err error), ended func(promptEnd)) {
	if s.conv.writeFailed() {
		s.goBackground(func() {
			if err := s.conv.writable(); err != nil {
				accepted(false, err)
				return
			}
			s.startPromptNow(msg, behaviour, accepted, ended)
		})
		return
	}
	s.startPromptNow(msg, behaviour, accepted, ended)
}

// startPromptNow decides under s.mu whether msg starts a run, is queued
// or is refused, and posts accepted there, so that it comes before the
// run's events (or, queued, after the queue's report and before the
// turn that takes it).
func (s *session) startPromptNow(msg *userMessage, behaviour string, accepted func(queued bool, err error), ended func(promptEnd)) {
	s.mu.Lock()
	var run *agentRun
	var err error
	queued := false
	switch {
	case s.changing > 0:
		err = errChanging // queued now, the message would be dropped with the old session
	case s.activeRun != nil && s.activeRun.leaveQueued:
		err = errCompacting // as pi 1.6: queued, it would wait for the next prompt
	case s.activeRun != nil && behaviour == "":
		err = errBusy
	case s.activeRun != nil:
		msg.ended = ended
		s.enqueueLocked(behaviour == "steer", msg)
		queued = true
	default:
		if run, err = s.tryStartRunLocked(running, false); err == nil {
			msg.ended = ended
		}
	}
	s.postCall(func() { accepted(queued, err) })
	s.unlock()
	if run == nil {
		return
	}
	pending := inputs(append([]*userMessage{msg}, s.takeQueued(true)...))
	s.goBackground(func() { s.runAgent(run, pending, prompted) })
}

// queuePrompt queues msg for the running agent: steering is delivered
// after the current tool call (the calls of that answer not yet started
// are skipped), a follow-up when the agent would otherwise stop; while
// idle it waits for the next run. ended as in startPrompt.
func (s *session) queuePrompt(msg *userMessage, steering bool, ended func(promptEnd)) {
	s.mu.Lock()
	defer s.unlock()
	msg.ended = ended
	s.enqueueLocked(steering, msg)
}

// clearQueue empties both queues and answers the texts removed; the
// messages removed end unrun.
func (s *session) clearQueue() queueUpdate {
	s.mu.Lock()
	defer s.unlock()
	return s.clearQueueLocked()
}

// clearQueueLocked is clearQueue; s.mu is held, and the ends of the
// messages removed are told once it is let go of (s.unlock).
func (s *session) clearQueueLocked() queueUpdate {
	s.starting = nil // they run, but are no longer told as queued
	removed := s.queueTextsLocked()
	if len(s.steering)+len(s.followUp) > 0 {
		dropped := [][]*userMessage{s.steering, s.followUp}
		s.steering, s.followUp = nil, nil
		s.postQueue()
		s.dropUnrunLocked(dropped...)
	}
	return removed
}

// recordThinkingInForce records, as pi 1.6 does before each run
// (_recordSelection), the thinking level in force when the current
// branch's last thinking_level_change, clamped to the current model, says
// another (a session resumed with --thinking, say); nothing when the
// branch records none or the same. Recorded before the run's first
// message, it is written with it.
func (s *session) recordThinkingInForce() {
	s.mu.Lock()
	m, now := s.model, s.effectiveThinking()
	s.mu.Unlock()
	if recorded, ok := s.conv.branchThinking(); ok && clampLevel(m, recorded) != now {
		s.conv.record("thinking_level_change", entryField{"thinkingLevel", now})
	}
}
