package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"
)

// BenchmarkTwoSessionsACP: rpi's CPU time for two sessions' 16k-token
// answers streamed at once (two prompts sent together, read until both
// are answered) beside one session's answer alone, in one rpi acp, each
// iteration in fresh sessions. Both are served by one local model server
// with the same script. It reports the CPU of each and their ratio: two
// at once cost at most about twice one (no global lock on the hot path
// that makes them pay for each other).
//
//	go test -run '^$' -bench 'TwoSessionsACP' -benchtime 10x .
func BenchmarkTwoSessionsACP(b *testing.B) {
	tokens := make([]string, streamRatioTokens)
	for i := range tokens {
		tokens[i] = "tok "
	}
	script, _ := json.Marshal(map[string]any{"text": tokens})
	agent := b.TempDir()
	startFakeModel(b, apiOpenAI, string(script), agent).repeat()
	p := startACPBench(b, withoutKeys([]string{"PI_CODING_AGENT_DIR=" + agent})...)
	var oneCPU, twoCPU time.Duration
	for b.Loop() {
		a := p.acpOpen(b, "a")
		before := cpuTime(b, p.cmd.Process.Pid)
		p.acpPrompts(b, a)
		oneCPU += cpuTime(b, p.cmd.Process.Pid) - before
		x, y := p.acpOpen(b, "x"), p.acpOpen(b, "y")
		before = cpuTime(b, p.cmd.Process.Pid)
		p.acpPrompts(b, x, y)
		twoCPU += cpuTime(b, p.cmd.Process.Pid) - before
		for _, sid := range []string{a, x, y} {
			p.acpClose(b, sid)
		}
	}
	perAnswer := func(cpu time.Duration) float64 { return float64(cpu.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(perAnswer(oneCPU), "one-cpu-ms")
	b.ReportMetric(perAnswer(twoCPU), "two-cpu-ms")
	b.ReportMetric(float64(twoCPU)/float64(oneCPU), "two/one")
}

// BenchmarkCancelRequestACP: the milliseconds from a $/cancel_request of
// a prompt whose answer is streaming (a huge one, a quarter of it read)
// to the prompt's cancelled answer, beside session/cancel's, each in a
// fresh session of one rpi acp.
//
//	go test -run '^$' -bench 'CancelRequestACP' -benchtime 5x .
func BenchmarkCancelRequestACP(b *testing.B) {
	agent := hugeAnswerAgent(b, hugeAnswerBytes, time.Millisecond)
	p := startACPBench(b, withoutKeys([]string{"PI_CODING_AGENT_DIR=" + agent})...)
	var byRequest, byCancel []float64
	for b.Loop() {
		for _, viaRequest := range []bool{true, false} {
			sid := p.acpOpen(b, "c")
			fmt.Fprintf(p.stdin, `{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"Write a lot"}]}}`+"\n", sid)
			for text := 0; text < maxAnswerBytes/4; {
				line, err := p.stdout.ReadBytes('\n')
				if err != nil {
					b.Fatal(err)
				}
				if bytes.Contains(line, []byte(`"agent_message_chunk"`)) {
					text += len(line)
				}
			}
			start := time.Now()
			if viaRequest {
				io.WriteString(p.stdin, `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"p"}}`+"\n")
			} else {
				fmt.Fprintf(p.stdin, `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`+"\n", sid)
			}
			_, answer := p.untilPrefix(b, `{"jsonrpc":"2.0","id":"p",`)
			ms := float64(time.Since(start).Microseconds()) / 1000
			if !bytes.Contains(answer, []byte(`"stopReason":"cancelled"`)) {
				b.Fatalf("the cancelled prompt: %.300s", answer)
			}
			if viaRequest {
				byRequest = append(byRequest, ms)
			} else {
				byCancel = append(byCancel, ms)
			}
			p.acpClose(b, sid)
		}
	}
	slices.Sort(byRequest)
	slices.Sort(byCancel)
	b.ReportMetric(byRequest[len(byRequest)/2], "ms-cancel_request")
	b.ReportMetric(byCancel[len(byCancel)/2], "ms-session/cancel")
}

// acpOpen opens a session (session/new under the request id id) and
// reads its updates; it returns the session's id.
func (p *benchProcess) acpOpen(b *testing.B, id string) string {
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "session/new",
		"params": map[string]any{"cwd": b.TempDir(), "mcpServers": []any{}}})
	p.stdin.Write(append(req, '\n'))
	_, line := p.untilPrefix(b, `{"jsonrpc":"2.0","id":"`+id+`",`)
	var opened struct {
		Result struct{ SessionID string }
	}
	if err := json.Unmarshal(line, &opened); err != nil || opened.Result.SessionID == "" {
		b.Fatalf("session/new: %.300s", line)
	}
	p.untilPrefix(b, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"`+opened.Result.SessionID+`","update":{"sessionUpdate":"usage_update"`)
	return opened.Result.SessionID
}

// acpPrompts sends a prompt to each session at once and reads until
// every one is answered end_turn.
func (p *benchProcess) acpPrompts(b *testing.B, sessions ...string) {
	var batch bytes.Buffer
	for i, sid := range sessions {
		fmt.Fprintf(&batch, `{"jsonrpc":"2.0","id":"p%d","method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"Talk"}]}}`+"\n", i, sid)
	}
	p.stdin.Write(batch.Bytes())
	for answered := 0; answered < len(sessions); answered++ {
		_, answer := p.untilPrefix(b, `{"jsonrpc":"2.0","id":"p`)
		if !bytes.Contains(answer, []byte(`"stopReason":"end_turn"`)) {
			b.Fatalf("session/prompt: %.300s", answer)
		}
	}
}

// acpClose closes a session and waits for the answer.
func (p *benchProcess) acpClose(b *testing.B, sid string) {
	fmt.Fprintf(p.stdin, `{"jsonrpc":"2.0","id":"close","method":"session/close","params":{"sessionId":%q}}`+"\n", sid)
	p.untilPrefix(b, `{"jsonrpc":"2.0","id":"close",`)
}
