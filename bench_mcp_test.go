package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// mcpBenchConfig writes mcp.json in agentDir with n stdio servers, the
// test binary as mcpTestServer, their tools declared.
func mcpBenchConfig(b *testing.B, agentDir string, n int) {
	servers := map[string]any{}
	for i := range n {
		servers[fmt.Sprintf("s%d", i)] = map[string]any{"command": os.Args[0], "env": map[string]string{"RPI_HELPER": "mcp-server"}, "exposure": "direct"}
	}
	writeMCPServers(b, agentDir, servers)
}

// BenchmarkStartupMCP: exec → the answer to a get_state with five stdio
// MCP servers in mcp.json, beside the same rpi without any, in turns.
// The servers connect in the background once the session is announced:
// ms-added (the medians' difference) is what they cost the first answer.
func BenchmarkStartupMCP(b *testing.B) {
	bin := rpiBinary(b)
	dir, plain, withMCP, tmp := b.TempDir(), b.TempDir(), b.TempDir(), b.TempDir()
	mcpBenchConfig(b, withMCP, 5)
	rpi := func(agent string) *exec.Cmd {
		cmd := exec.Command(bin, "rpc", "--cwd", dir)
		cmd.Env = append(os.Environ(), "PI_CODING_AGENT_DIR="+agent, "TMPDIR="+tmp)
		return cmd
	}
	const command, answer = `{"id":"first","type":"get_state"}` + "\n", `{"id":"first","type":"response"`
	var none, five []time.Duration
	for b.Loop() {
		none = append(none, lineTime(b, rpi(plain), command, answer))
		five = append(five, lineTime(b, rpi(withMCP), command, answer))
	}
	n, f := medianDuration(none), medianDuration(five)
	b.ReportMetric(n, "none-ms-median")
	b.ReportMetric(f, "five-ms-median")
	b.ReportMetric(f-n, "ms-added")
}

// BenchmarkMCPCall: one MCP tool call (the test server's echo) through a
// session, beside its floor — the same server asked the same over its
// pipes by a bare client that writes a line and reads one. overhead-ms
// is the difference per call; MiB-growth what all the calls (1,000 an
// iteration, after 100 to warm up) added to the resident memory.
func BenchmarkMCPCall(b *testing.B) {
	e := newTestEnv(b)
	mcpBenchConfig(b, e.agentDir, 1)
	s := openWithMCP(b, e)
	call, err := s.decodeToolCall("mcp__s0__echo", json.RawMessage(`{"text":"hi"}`))
	if err != nil {
		b.Fatalf("%v (servers: %+v)", err, s.mcp.list())
	}
	run := func() {
		if _, err := call.run(context.Background(), s, toolRun{id: "t", update: func(toolResult) {}}); err != nil {
			b.Fatal(err)
		}
	}
	floor := bareMCPClient(b)
	const calls = 1000
	var rpiTime, floorTime time.Duration
	for range 100 {
		run()
	}
	runtime.GC()
	before := statusMiB(b, os.Getpid(), "VmRSS")
	for b.Loop() {
		start := time.Now()
		for range calls {
			run()
		}
		rpiTime += time.Since(start)
		start = time.Now()
		for range calls {
			floor()
		}
		floorTime += time.Since(start)
	}
	runtime.GC()
	growth := statusMiB(b, os.Getpid(), "VmRSS") - before
	perCall := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(calls*b.N) }
	b.ReportMetric(perCall(rpiTime), "rpi-ms/call")
	b.ReportMetric(perCall(floorTime), "floor-ms/call")
	b.ReportMetric(perCall(rpiTime)-perCall(floorTime), "overhead-ms")
	b.ReportMetric(growth, "MiB-growth")
}

// bareMCPClient starts the test server and gives a call of its echo
// tool: one line written, one read.
func bareMCPClient(b *testing.B) func() {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "RPI_HELPER=mcp-server")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	r := bufio.NewReader(stdout)
	line := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":1}}}` + "\n")
	return func() {
		if _, err := stdin.Write(line); err != nil {
			b.Fatal(err)
		}
		if _, err := r.ReadBytes('\n'); err != nil {
			b.Fatal(err)
		}
	}
}
