package main

// Benchmarks of ACP mode (docs/acp.md) beside their rpc-mode counterparts:
// the same binary, the same local model server, run by turns so that the
// machine's other work weighs on both alike.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"
)

// benchInitialize is initialize as Zed sends it, id 0, and the start of
// its answer.
const (
	benchInitialize       = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true}}}` + "\n"
	benchInitializeAnswer = `{"jsonrpc":"2.0","id":0,"result"`
)

// BenchmarkStartupACPRatio: exec → the answer to an initialize written at
// once in ACP mode (an editor's first wait: rpi writes nothing before the
// client speaks), beside exec → session_started in rpc mode and, as rpc
// mode's own first answer, exec → the answer to a get_state written at
// once; the three started by turns from the same binary with the same
// environment. It reports the medians and the ratios of ACP's to each.
func BenchmarkStartupACPRatio(b *testing.B) {
	rpc, acp := rpiStartup(b), rpiStartupACP(b)
	const getState, stateAnswer = `{"id":"first","type":"get_state"}` + "\n", `{"id":"first","type":"response"`
	var rpcTimes, answerTimes, acpTimes []time.Duration
	for b.Loop() {
		rpcTimes = append(rpcTimes, firstLineTime(b, rpc()))
		answerTimes = append(answerTimes, lineTime(b, rpc(), getState, stateAnswer))
		acpTimes = append(acpTimes, lineTime(b, acp(), benchInitialize, benchInitializeAnswer))
	}
	r, ra, a := medianDuration(rpcTimes), medianDuration(answerTimes), medianDuration(acpTimes)
	b.ReportMetric(r, "rpc-ms-median")
	b.ReportMetric(ra, "rpc-answer-ms-median")
	b.ReportMetric(a, "acp-ms-median")
	b.ReportMetric(a/r, "acp/rpc")
	b.ReportMetric(a/ra, "acp/rpc-answer")
}

// rpiStartupACP is rpiStartup for ACP mode: the built rpi acp with an
// agent directory and TMPDIR of its own, in a cwd of its own.
func rpiStartupACP(b *testing.B) func() *exec.Cmd {
	bin := rpiBinary(b)
	dir, agent, tmp := b.TempDir(), b.TempDir(), b.TempDir()
	return func() *exec.Cmd {
		cmd := exec.Command(bin, "acp")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PI_CODING_AGENT_DIR="+agent, "TMPDIR="+tmp)
		return cmd
	}
}

// streamRatioTokens is how many tokens (4 bytes each) the answer of
// BenchmarkStreamACPRatio has.
const streamRatioTokens = 16000

// BenchmarkStreamACPRatio: rpi's CPU time (user and system, from /proc as
// BenchmarkStreamTokens reads it) for one streamed answer of 16k tokens
// in ACP mode — session/prompt, every session/update read until the
// prompt's answer — beside the same answer in rpc mode (prompt →
// agent_settled), each in a fresh session. Both processes are served by
// one local model server with the same script, and take their turns
// answer by answer. It reports the CPU per answer of each (their totals
// over the iterations, which /proc's 10 ms ticks blur least), the ratio,
// and each one's stdout bytes over the answer's.
func BenchmarkStreamACPRatio(b *testing.B) {
	tokens := make([]string, streamRatioTokens)
	for i := range tokens {
		tokens[i] = "tok "
	}
	script, _ := json.Marshal(map[string]any{"text": tokens})
	agent := b.TempDir()
	startFakeModel(b, apiOpenAI, string(script), agent).repeat()
	env := withoutKeys([]string{"PI_CODING_AGENT_DIR=" + agent})
	rpc := startBench(b, env...)
	acp := startACPBench(b, env...)
	var rpcCPU, acpCPU time.Duration
	var rpcBytes, acpBytes int
	for b.Loop() {
		cpu, n := rpc.rpcAnswer(b)
		rpcCPU, rpcBytes = rpcCPU+cpu, n
		cpu, n = acp.acpAnswer(b)
		acpCPU, acpBytes = acpCPU+cpu, n
	}
	perAnswer := func(cpu time.Duration) float64 { return float64(cpu.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(perAnswer(rpcCPU), "rpc-cpu-ms/answer")
	b.ReportMetric(perAnswer(acpCPU), "acp-cpu-ms/answer")
	b.ReportMetric(float64(acpCPU)/float64(rpcCPU), "acp/rpc")
	b.ReportMetric(float64(rpcBytes)/(4*streamRatioTokens), "rpc-stdout/answer")
	b.ReportMetric(float64(acpBytes)/(4*streamRatioTokens), "acp-stdout/answer")
}

// startACPBench starts the built rpi acp with pipes and answers its
// initialize.
func startACPBench(b *testing.B, env ...string) *benchProcess {
	cmd := exec.Command(rpiBinary(b), "acp")
	cmd.Dir = b.TempDir()
	cmd.Env = append(append(os.Environ(), "PI_CODING_AGENT_DIR="+b.TempDir()), env...)
	p := startPiped(b, cmd)
	io.WriteString(p.stdin, benchInitialize)
	p.untilPrefix(b, benchInitializeAnswer)
	return p
}

// untilPrefix reads records until one that starts with prefix, and
// returns the bytes read and that record (whole only when it fits the
// reader's buffer).
func (p *benchProcess) untilPrefix(b *testing.B, prefix string) (int, []byte) {
	n := 0
	for {
		line, err := p.stdout.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			b.Fatalf("waiting for %q: %v", prefix, err)
		}
		n += len(line)
		if bytes.HasPrefix(line, []byte(prefix)) {
			return n, line
		}
	}
}

// rpcAnswer asks rpc-mode rpi p for a fresh session, then prompts it and
// reads every record until agent_settled: the CPU time rpi used from the
// prompt to there, and the bytes read.
func (p *benchProcess) rpcAnswer(b *testing.B) (time.Duration, int) {
	io.WriteString(p.stdin, `{"id":"n","type":"new_session"}`+"\n")
	p.untilPrefix(b, `{"type":"session_started"`)
	before := cpuTime(b, p.cmd.Process.Pid)
	io.WriteString(p.stdin, `{"id":"p","type":"prompt","message":"Talk"}`+"\n")
	n := p.untilSettled(b)
	return cpuTime(b, p.cmd.Process.Pid) - before, n
}

// acpAnswer opens a session in ACP-mode rpi p (session/new), then prompts
// it and reads every session/update until the prompt's answer: the CPU
// time rpi used from the prompt to there, and the bytes read. The session
// is closed afterwards, so that the sessions do not pile up.
func (p *benchProcess) acpAnswer(b *testing.B) (time.Duration, int) {
	// session/new's own updates (available_commands_update, usage_update)
	// are written after its answer: acpOpen reads them before the prompt.
	sid := p.acpOpen(b, "n")
	prompt := fmt.Sprintf(`{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"Talk"}]}}`+"\n", sid)
	before := cpuTime(b, p.cmd.Process.Pid)
	io.WriteString(p.stdin, prompt)
	n, answer := p.untilPrefix(b, `{"jsonrpc":"2.0","id":"p",`)
	cpu := cpuTime(b, p.cmd.Process.Pid) - before
	if !bytes.Contains(answer, []byte(`"stopReason":"end_turn"`)) {
		b.Fatalf("session/prompt: %.300s", answer)
	}
	p.acpClose(b, sid)
	return cpu, n
}
