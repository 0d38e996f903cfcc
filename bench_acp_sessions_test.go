package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// listedSessions and listedSessionBytes are the sessions
// BenchmarkSessionListPagesACP pages through, and each one's size.
const listedSessions, listedSessionBytes = 1000, 32 << 10

// BenchmarkSessionListPagesACP: session/list paged through the 1,000
// sessions of one directory (20 pages of 50), each file 32 KiB of
// conversation, in one rpi acp. Each iteration first gives every file a
// new modification time, so that its first page reads every file again
// (cold) and the pages after it find them unchanged. It reports the
// milliseconds of the first page and of a page after it (medians),
// each beside a floor measured by turns in the same run: for the first
// page, reading the folder and every file whole (os.ReadDir, os.ReadFile);
// for the others, reading the folder and the status of each file in it
// (os.ReadDir, Lstat), the least a listing that notices a changed file
// must do.
//
//	go test -run '^$' -bench 'SessionListPagesACP' -benchtime 5x .
func BenchmarkSessionListPagesACP(b *testing.B) {
	agent, cwd := b.TempDir(), b.TempDir()
	writeListedSessions(b, agent, cwd, listedSessionBytes)
	folder := defaultSessionDir(agent, cwd)
	p := startACPBench(b, withoutKeys([]string{"PI_CODING_AGENT_DIR=" + agent})...)
	var firsts, readFloors, pages, statFloors []float64
	since := func(start time.Time) float64 { return float64(time.Since(start).Microseconds()) / 1000 }
	floor := func(read func(string) error) float64 {
		start := time.Now()
		entries, err := os.ReadDir(folder)
		for _, e := range entries {
			if err := read(filepath.Join(folder, e.Name())); err != nil {
				b.Fatal(err)
			}
		}
		if err != nil || len(entries) != listedSessions {
			b.Fatalf("the floor read %d files: %v", len(entries), err)
		}
		return since(start)
	}
	iteration := 0
	for b.Loop() {
		iteration++
		b.StopTimer()
		touched := time.Date(2026, 1, 1, 0, 0, iteration, 0, time.UTC)
		entries, _ := os.ReadDir(folder)
		for _, e := range entries {
			os.Chtimes(filepath.Join(folder, e.Name()), touched, touched)
		}
		b.StartTimer()
		readFloors = append(readFloors, floor(func(path string) error { _, err := os.ReadFile(path); return err }))
		cursor, listed := "", 0
		for {
			params := map[string]any{"cwd": cwd}
			if cursor != "" {
				params["cursor"] = cursor
			}
			req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "list", "method": "session/list", "params": params})
			start := time.Now()
			p.stdin.Write(append(req, '\n'))
			_, line := p.untilPrefix(b, `{"jsonrpc":"2.0","id":"list",`)
			if cursor == "" {
				firsts = append(firsts, since(start))
			} else {
				pages = append(pages, since(start))
				statFloors = append(statFloors, floor(func(path string) error { _, err := os.Lstat(path); return err }))
			}
			var page struct{ Result acpListPage }
			if err := json.Unmarshal(line, &page); err != nil || len(page.Result.Sessions) == 0 {
				b.Fatalf("session/list: %.300s", line)
			}
			listed += len(page.Result.Sessions)
			if cursor = page.Result.NextCursor; cursor == "" {
				break
			}
		}
		if listed != listedSessions {
			b.Fatalf("session/list listed %d sessions of %d", listed, listedSessions)
		}
	}
	first, readFloor, page, statFloor := median(firsts), median(readFloors), median(pages), median(statFloors)
	b.ReportMetric(first, "ms/first-page")
	b.ReportMetric(readFloor, "ms/read-floor")
	b.ReportMetric(first/readFloor, "first/read-floor")
	b.ReportMetric(page, "ms/page")
	b.ReportMetric(statFloor, "ms/stat-floor")
	b.ReportMetric(page/statFloor, "page/stat-floor")
}

// concurrentLists is how many session/list requests
// BenchmarkConcurrentSessionListsACP sends at once.
const concurrentLists = 64

// BenchmarkConcurrentSessionListsACP: a folder of 1,000 sessions of 4
// KiB each, in one rpi acp. Each iteration gives every file a new
// modification time (so that a listing reads each file again), sends one
// session/list and waits for its answer (the floor), then does the same
// with concurrentLists session/list written at once, waiting for every
// answer. It reports rpi's CPU time for each (medians) and their ratio,
// many/one: the listings share the folder's scan, so it stays near 2
// (the scan under way when they come, then one for all of them), where
// one scan for each made it near concurrentLists.
//
//	go test -run '^$' -bench 'ConcurrentSessionListsACP' -benchtime 3x .
func BenchmarkConcurrentSessionListsACP(b *testing.B) {
	agent, cwd := b.TempDir(), b.TempDir()
	writeListedSessions(b, agent, cwd, 4<<10)
	folder := defaultSessionDir(agent, cwd)
	p := startACPBench(b, withoutKeys([]string{"PI_CODING_AGENT_DIR=" + agent})...)
	touch := func(n int) {
		touched := time.Date(2026, 1, 1, 0, 0, n, 0, time.UTC)
		entries, _ := os.ReadDir(folder)
		for _, e := range entries {
			os.Chtimes(filepath.Join(folder, e.Name()), touched, touched)
		}
	}
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "list", "method": "session/list", "params": map[string]any{"cwd": cwd}})
	req = append(req, '\n')
	lists := func(n int) float64 {
		before := cpuTime(b, p.cmd.Process.Pid)
		p.stdin.Write(bytes.Repeat(req, n))
		for range n {
			_, line := p.untilPrefix(b, `{"jsonrpc":"2.0","id":"list",`)
			var page struct{ Result acpListPage }
			if err := json.Unmarshal(line, &page); err != nil || len(page.Result.Sessions) != acpPageSize {
				b.Fatalf("session/list: %.300s", line)
			}
		}
		return float64(cpuTime(b, p.cmd.Process.Pid)-before) / float64(time.Millisecond)
	}
	var ones, manys []float64
	iteration := 0
	for b.Loop() {
		iteration += 2
		touch(iteration)
		ones = append(ones, lists(1))
		touch(iteration + 1)
		manys = append(manys, lists(concurrentLists))
	}
	b.ReportMetric(median(ones), "cpu-ms/one")
	b.ReportMetric(median(manys), "cpu-ms/many")
	b.ReportMetric(median(manys)/median(ones), "many/one")
}

// writeListedSessions writes listedSessions sessions of cwd in agent's
// folder, each with about size bytes of assistant messages.
func writeListedSessions(b *testing.B, agent, cwd string, size int) {
	filler := strings.Repeat("x", 1000)
	for i := range listedSessions {
		path := writeTestSession(b, agent, cwd, fmt.Sprintf("0199%04d-0000-7000-8000-%012d", i, i), i%1440, fmt.Sprintf("session %d", i))
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		for n := 0; n < size/len(filler); n++ {
			fmt.Fprintf(f, `{"type":"message","id":"f%07d","parentId":"e0000001","timestamp":"2025-01-01T00:00:00.000Z","message":{"role":"assistant","content":[{"type":"text","text":%q}],"timestamp":1}}`+"\n", n, filler)
		}
		f.Close()
	}
}
