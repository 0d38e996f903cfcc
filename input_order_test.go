package main

// Hostile tests of the orderings the input, output and delta changes
// claim: answers to one process's writes come in the order asked, none is
// lost, and every write after a closeStdin's answer fails.

import (
	"fmt"
	"strings"
	"testing"
)

// TestPipelinedWritesAnsweredInOrder pipelines writes to processes that close
// stdin (closeStdin) or exit (head) in the middle of them, many times:
// every write is answered once, in the order it was asked, and once a
// write's answer says stdin is closed (or the process exited) every later
// write fails too.
func TestPipelinedWritesAnsweredInOrder(t *testing.T) {
	endToEnd(t)
	ps := startSession(t)
	const rounds, writes = 30, 12
	for round := range rounds {
		argv := []string{"sh", "-c", "cat >/dev/null; sleep 30"}
		if round%3 == 2 {
			argv = []string{"sh", "-c", "head -c 30 >/dev/null"}
		}
		spawnID := fmt.Sprintf("s%d", round)
		ps.send(spawnLine(spawnID, argv, ""))
		ps.waitFor(fmt.Sprintf(`"id":%q`, spawnID))
		id := processIDs(ps.records())[spawnID]
		closeAt := round % writes
		for i := range writes {
			extra := `,"dataBase64":"aGVsbG8K"`
			if round%3 != 2 && i == closeAt {
				extra += `,"closeStdin":true`
			}
			ps.send(fmt.Sprintf(`{"id":"w%d-%d","type":"process_write","processId":%q%s}`, round, i, id, extra))
		}
		ps.send(fmt.Sprintf(`{"id":"k%d","type":"process_describe","processId":%q}`, round, id))
		ps.send(fmt.Sprintf(`{"id":"stop%d","type":"process_stop","processId":%q}`, round, id))
		waitUntil(t, ps, func(out string) bool {
			return strings.Contains(out, fmt.Sprintf(`"id":"w%d-%d"`, round, writes-1)) &&
				strings.Contains(out, fmt.Sprintf(`"id":"stop%d"`, round))
		})
		next, failed := 0, false
		for _, rec := range ps.records() {
			rid, _ := rec["id"].(string)
			if rec["type"] != "response" || !strings.HasPrefix(rid, fmt.Sprintf("w%d-", round)) {
				continue
			}
			if want := fmt.Sprintf("w%d-%d", round, next); rid != want {
				t.Fatalf("round %d: answer %s where %s was due", round, rid, want)
			}
			next++
			if rec["success"] == true && failed {
				t.Fatalf("round %d: %s succeeded after an earlier write failed", round, rid)
			}
			if rec["success"] != true {
				failed = true
			}
			if round%3 != 2 && next-1 > closeAt && rec["success"] == true {
				t.Fatalf("round %d: %s succeeded after closeStdin", round, rid)
			}
		}
		if next != writes {
			t.Fatalf("round %d: %d write answers, want %d", round, next, writes)
		}
	}
	ps.close()
}

// TestDeltaBatchKeepsEachDeltasUsage feeds a deltaBatch deltas of two blocks and
// other events whose usage grows: each delta goes out once, in order, with
// the usage of its own last text, whether the next event, a block change
// or close sends it.
func TestDeltaBatchKeepsEachDeltasUsage(t *testing.T) {
	type sent struct {
		typ   string
		index int
		delta string
		out   int
	}
	var got []sent
	b := &deltaBatch{clock: realClock{}, deliver: func() {}, post: func(ev assistantEvent, u usage) {
		s := sent{typ: ev.Type, index: ev.ContentIndex, out: u.Output}
		if ev.Delta != nil {
			s.delta = *ev.Delta
		}
		got = append(got, s)
	}}
	str := func(s string) *string { return &s }
	b.add(assistantEvent{Type: "thinking_delta", ContentIndex: 0, Delta: str("a")}, usage{Output: 1})
	b.add(assistantEvent{Type: "thinking_delta", ContentIndex: 0, Delta: str("b")}, usage{Output: 2})
	b.add(assistantEvent{Type: "text_delta", ContentIndex: 1, Delta: str("c")}, usage{Output: 3})
	b.add(assistantEvent{Type: "text_end", ContentIndex: 1}, usage{Output: 4})
	b.add(assistantEvent{Type: "toolcall_start", ContentIndex: 2}, usage{Output: 5})
	b.add(assistantEvent{Type: "toolcall_delta", ContentIndex: 2, Delta: str(`{"x"`)}, usage{Output: 6})
	b.add(assistantEvent{Type: "toolcall_delta", ContentIndex: 2, Delta: str(`:1}`)}, usage{Output: 7})
	b.close()
	want := []sent{
		{"thinking_delta", 0, "ab", 2},
		{"text_delta", 1, "c", 3},
		{"text_end", 1, "", 4},
		{"toolcall_start", 2, "", 5},
		{"toolcall_delta", 2, `{"x":1}`, 7},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sent %v\nwant %v", got, want)
	}
}
