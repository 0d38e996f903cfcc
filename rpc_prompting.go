package main

import (
	"errors"
	"fmt"
	"strings"
)

// The rpc front end's prompting commands: prompt, steer, follow_up,
// abort, abort_retry, clear_queue and compact (docs/protocol.md).

// compactCommand summarises the older part of the conversation, in the
// background. A running agent is aborted first; abort cancels the
// compaction itself (it then fails with "Compaction cancelled").
// Fields: [customInstructions]. Answer: {summary, firstKeptEntryId,
// tokensBefore, estimatedTokensAfter, usage, details:{readFiles,
// modifiedFiles}}. Events: compaction_start and compaction_end (reason
// "manual") before the answer.
func (s *rpcServer) compactCommand(r *rpcRequest) (any, error) {
	instructions, err := r.optStr("customInstructions")
	if err != nil {
		return nil, err
	}
	s.compact(instructions, true, func(res compactionResult, err error) {
		if err != nil {
			s.reply(r, nil, err)
			return
		}
		s.reply(r, res, nil)
	})
	return noReply{}, nil
}

// userInput reads a command's message and images into a user message.
func (s *rpcServer) userInput(r *rpcRequest) (*userMessage, error) {
	text, err := r.str("message")
	if err != nil {
		return nil, err
	}
	text = s.expandSlash(text)
	var images []contentBlock
	if r.has("images") {
		if err := r.decodeField("images", "an array of images", &images); err != nil {
			return nil, err
		}
	}
	if strings.TrimSpace(text) == "" && len(images) == 0 {
		return nil, invalid("message", "a non-empty string")
	}
	content := textBlocks(text)
	for i, img := range images {
		if img.Type != "image" || !strings.HasPrefix(img.MimeType, "image/") {
			return nil, invalid("images", `an array of {"type":"image","data":"<base64>","mimeType":"image/…"}`)
		}
		block, ok := base64Image(img.Data)
		if !ok {
			return nil, invalid(fmt.Sprintf("images[%d].data", i), imageDataWanted)
		}
		content = append(content, block)
	}
	return &userMessage{Role: "user", Content: content, Timestamp: s.env.clock.Now().UnixMilli()}, nil
}

// promptCommand starts a run with a user message, or queues it while one runs.
// Fields: message; [images] ([{type:"image",data,mimeType}]);
// [streamingBehavior] ("steer"|"followUp", needed while a run streams).
// Answer: null once accepted (before agent_start); pi's mode answers
// {disposition: started|queued}. Events: agent_start, turn_start,
// message_start/end, message_update, tool_execution_*, turn_end,
// agent_end, agent_settled; queue_update when queued. Over rpi serve, a
// prompt while --max-running other sessions run waits for a place:
// queue_update with waitingForSlot: true, then one without it once the
// wait is over; the answer comes when it starts.
func (s *rpcServer) promptCommand(r *rpcRequest) (any, error) {
	msg, err := s.userInput(r)
	if err != nil {
		return nil, err
	}
	behaviour := ""
	if r.has("streamingBehavior") {
		if behaviour, err = r.enum("streamingBehavior", []string{"steer", "followUp"}); err != nil {
			return nil, err
		}
	}
	var accepted func(queued bool, err error)
	accepted = func(queued bool, err error) {
		if s.served != nil && errors.Is(err, errElsewhere) { // rpi serve: wait for a place, then try again
			s.goBackground(func() {
				if s.waitForPlace() {
					s.startPrompt(msg, behaviour, accepted, nil)
				} else {
					s.reply(r, nil, errors.New("The session closed while the prompt waited for a place to run"))
				}
			})
			return
		}
		how := "started"
		if queued {
			how = "queued"
		}
		s.reply(r, piOnly{data: disposition{how}}, err)
	}
	s.startPrompt(msg, behaviour, accepted, nil)
	return noReply{}, nil
}

// steerCommand queues a message for the running agent: it is delivered after the
// current tool call, and the calls of that answer not yet started are
// skipped. While idle it waits for the next run.
// Fields: message, [images]. Answer: null (pi's mode: {disposition:"queued"}).
// Events: queue_update.
func (s *rpcServer) steerCommand(r *rpcRequest) (any, error) {
	return s.queueCommand(r, true)
}

// followUpCommand queues a message delivered when the agent would otherwise stop.
// Fields: message, [images]. Answer: null (pi's mode: {disposition:"queued"}).
// Events: queue_update.
func (s *rpcServer) followUpCommand(r *rpcRequest) (any, error) {
	return s.queueCommand(r, false)
}

func (s *rpcServer) queueCommand(r *rpcRequest, steering bool) (any, error) {
	msg, err := s.userInput(r)
	if err != nil {
		return nil, err
	}
	s.queuePrompt(msg, steering, nil)
	return piOnly{data: disposition{"queued"}}, nil
}

// abortCommand stops the running agent (or compaction): its model stream,
// running tool, open dialogs and any retry wait. The queues are kept. It
// answers after the run's agent_end and agent_settled; while idle, at once.
// Fields: none. Answer: null.
func (s *rpcServer) abortCommand(r *rpcRequest) (any, error) {
	return s.answerWhenSettled(r, s.abort())
}

// abortRetryCommand cancels a pending auto-retry wait; the run then ends with
// auto_retry_end {success:false, finalError:"Retry cancelled"} and
// agent_settled, and abortRetry answers after them. With no retry waiting
// it answers at once and changes nothing.
// Fields: none. Answer: null.
func (s *rpcServer) abortRetryCommand(r *rpcRequest) (any, error) {
	return s.answerWhenSettled(r, s.abortRetry())
}

// answerWhenSettled answers r with null once settled is closed: at once
// when it is nil, else from the background.
func (s *rpcServer) answerWhenSettled(r *rpcRequest, settled <-chan struct{}) (any, error) {
	if settled == nil {
		return nil, nil
	}
	s.answerLater(r.typ, s.replyTo(r), func() (any, error) {
		<-settled
		return nil, nil
	})
	return noReply{}, nil
}

// clearQueueCommand empties both queues.
// Fields: none. Answer: {steering:[…], followUp:[…]}, the texts removed.
// Events: queue_update when anything was removed.
func (s *rpcServer) clearQueueCommand(r *rpcRequest) (any, error) {
	return s.clearQueue(), nil
}
