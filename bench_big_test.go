package main

// Benchmarks of big work, each beside what it is compared with in the
// same run: opening a big session (rpi and pi 1.6; the same session
// written in each valid form of JSON beside its compact twin), and the
// grep tool on a big tree (GNU grep and ripgrep).

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// bigSessionRun is what one program took on the big session: exec → the
// get_state answer, get_messages and export_html (each until its answer
// was read whole), its resident memory after the open and its peak.
type bigSessionRun struct {
	open, messages, export time.Duration
	rssOpen, peak          float64 // MiB
}

// runBigSession starts cmd (rpi or pi, opening the session), asks
// get_state at once, then get_messages, then export_html to htmlPath, and
// times each answer. The get_state answer must count wantMessages.
func runBigSession(b *testing.B, cmd *exec.Cmd, wantMessages int, htmlPath string) bigSessionRun {
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var run bigSessionRun
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	r := bufio.NewReaderSize(stdout, 1<<20)
	io.WriteString(stdin, `{"id":"s","type":"get_state"}`+"\n")
	state := readAnswer(b, r, "s", true)
	run.open = time.Since(start)
	var answer struct{ Data struct{ MessageCount int } }
	if err := json.Unmarshal(state, &answer); err != nil || answer.Data.MessageCount != wantMessages {
		b.Fatalf("get_state: %.300s (want %d messages)", state, wantMessages)
	}
	pid := cmd.Process.Pid
	run.rssOpen = statusMiB(b, pid, "VmRSS")

	start = time.Now()
	io.WriteString(stdin, `{"id":"m","type":"get_messages"}`+"\n")
	readAnswer(b, r, "m", false)
	run.messages = time.Since(start)

	start = time.Now()
	export, _ := json.Marshal(map[string]string{"id": "h", "type": "export_html", "outputPath": htmlPath})
	stdin.Write(append(export, '\n'))
	if exported := readAnswer(b, r, "h", true); !bytes.Contains(exported, []byte(`"success":true`)) {
		b.Fatalf("export_html: %.300s", exported)
	}
	run.export = time.Since(start)
	run.peak = statusMiB(b, pid, "VmHWM")
	os.Remove(htmlPath)
	return run
}

// readAnswer reads records until the response with id, and returns it
// when keep (else only checks that it succeeded, without holding it).
func readAnswer(b *testing.B, r *bufio.Reader, id string, keep bool) []byte {
	prefix := []byte(`"id":"` + id + `"`)
	for {
		head, err := r.ReadSlice('\n')
		whole := err == nil
		if err != nil && err != bufio.ErrBufferFull {
			b.Fatalf("waiting for the answer %s: %v", id, err)
		}
		isAnswer := bytes.Contains(head[:min(len(head), 200)], prefix) && bytes.Contains(head[:min(len(head), 200)], []byte(`"type":"response"`))
		if isAnswer && !bytes.Contains(head[:min(len(head), 200)], []byte(`"success":true`)) {
			b.Fatalf("answer %s failed: %.500s", id, head)
		}
		var line []byte
		if isAnswer && keep {
			line = append(line, head...)
		}
		for !whole {
			head, err = r.ReadSlice('\n')
			whole = err == nil
			if err != nil && err != bufio.ErrBufferFull {
				b.Fatalf("reading the answer %s: %v", id, err)
			}
			if isAnswer && keep {
				line = append(line, head...)
			}
		}
		if isAnswer {
			return line
		}
	}
}

// bigSessionMiB is the size of BenchmarkBigSession's session:
// RPI_BENCH_SESSION_MIB, 256 by default.
func bigSessionMiB(b *testing.B) int64 {
	return envMiB(b, "RPI_BENCH_SESSION_MIB", 256)
}

// envMiB is the whole number of MiB the variable name gives, or mib.
func envMiB(b *testing.B, name string, mib int64) int64 {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a whole number of MiB", name, v)
		}
		mib = n
	}
	return mib
}

// BenchmarkBigSession: a generated session of RPI_BENCH_SESSION_MIB MiB
// (default 256: about 20,000 messages of 12 KB) opened with --session,
// then get_messages and export_html, in rpi and, when RPI_BENCH_PI names
// its command (scripts/bench-pi.sh sets it), in pi by turns. It reports
// the medians of each step's time, rpi's resident memory after the open
// and its peak as multiples of the file's size, and rpi/pi for each.
func BenchmarkBigSession(b *testing.B) {
	benchSession(b, bigSessionMiB(b), 12<<10)
}

// BenchmarkSmallEntriesSession: BenchmarkBigSession on a session of many
// small entries: RPI_BENCH_SMALL_MIB MiB (default 64: about 223,000
// messages of one letter each), where what rpi holds for each entry, not
// its text, is most of the memory. The floor of rpi-rss/file is the
// file's size (issue 36: at most 2x).
func BenchmarkSmallEntriesSession(b *testing.B) {
	benchSession(b, envMiB(b, "RPI_BENCH_SMALL_MIB", 64), 1)
}

// benchSession is BenchmarkBigSession on a session of mib MiB whose
// messages hold textBytes of text each (see writeGeneratedSession).
func benchSession(b *testing.B, mib int64, textBytes int) {
	dir := b.TempDir()
	cwd := filepath.Join(dir, "cwd")
	os.Mkdir(cwd, 0o755)
	file := filepath.Join(dir, "big.jsonl")
	messages := writeGeneratedSession(b, file, cwd, mib<<20, textBytes)
	info, err := os.Stat(file)
	if err != nil {
		b.Fatal(err)
	}
	fileMiB := float64(info.Size()) / (1 << 20)
	// Each program opens a copy of its own: neither sees what the other
	// might append.
	copyFile := func(name string) string {
		dst := filepath.Join(dir, name)
		if out, err := exec.Command("cp", file, dst).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v %s", err, out)
		}
		return dst
	}
	rpiFile := copyFile("rpi.jsonl")
	piCommand := os.Getenv("RPI_BENCH_PI")
	piFile := ""
	if piCommand != "" {
		piFile = copyFile("pi.jsonl")
	}
	os.Remove(file)
	bin := rpiBinary(b)
	var rpiRuns, piRuns []bigSessionRun
	for b.Loop() {
		cmd := exec.Command(bin, "rpc", "--cwd", cwd, "--session", rpiFile)
		cmd.Env = withoutKeys(append(os.Environ(), "PI_CODING_AGENT_DIR="+b.TempDir(), "TMPDIR="+b.TempDir()))
		cmd.Stderr = os.Stderr // pi's warnings (no model) are left out
		rpiRuns = append(rpiRuns, runBigSession(b, cmd, messages, filepath.Join(dir, "rpi.html")))
		if piCommand != "" {
			cmd := exec.Command("sh", "-c", "exec "+piCommand+" --mode rpc --session "+piFile)
			cmd.Dir = cwd
			cmd.Env = withoutKeys(append(os.Environ(), "PI_CODING_AGENT_DIR="+b.TempDir(), "TMPDIR="+b.TempDir()))
			piRuns = append(piRuns, runBigSession(b, cmd, messages, filepath.Join(dir, "pi.html")))
		}
	}
	b.ReportMetric(fileMiB, "file-MiB")
	b.ReportMetric(float64(messages), "messages")
	report := func(name string, runs []bigSessionRun) map[string]float64 {
		figures := map[string]float64{
			"open-s":     medianOf(runs, func(r bigSessionRun) float64 { return r.open.Seconds() }),
			"messages-s": medianOf(runs, func(r bigSessionRun) float64 { return r.messages.Seconds() }),
			"export-s":   medianOf(runs, func(r bigSessionRun) float64 { return r.export.Seconds() }),
			"rss/file":   medianOf(runs, func(r bigSessionRun) float64 { return r.rssOpen }) / fileMiB,
			"peak/file":  medianOf(runs, func(r bigSessionRun) float64 { return r.peak }) / fileMiB,
		}
		for unit, v := range figures {
			b.ReportMetric(v, name+"-"+unit)
		}
		return figures
	}
	rpi := report("rpi", rpiRuns)
	if len(piRuns) > 0 {
		pi := report("pi", piRuns)
		for _, step := range []string{"open-s", "messages-s", "export-s"} {
			b.ReportMetric(rpi[step]/pi[step], "rpi/pi-"+strings.TrimSuffix(step, "-s"))
		}
	}
}

// medianOf is the median of figure over runs.
func medianOf[T any](runs []T, figure func(T) float64) float64 {
	values := make([]float64, len(runs))
	for i, r := range runs {
		values[i] = figure(r)
	}
	return median(values)
}

// BenchmarkLoadSessionInProcess: loadSessionFile and the conversation of a
// generated session of RPI_BENCH_SESSION_MIB MiB, in the test process,
// for profiling (-cpuprofile, -memprofile).
func BenchmarkLoadSessionInProcess(b *testing.B) {
	dir := b.TempDir()
	file := filepath.Join(dir, "big.jsonl")
	writeBigSession(b, file, dir, bigSessionMiB(b)<<20)
	for b.Loop() {
		ss, err := loadSessionFile(context.Background(), file)
		if err != nil {
			b.Fatal(err)
		}
		ss.context()
	}
}

// grepSearches are the searches BenchmarkGrepTree times: a literal, a
// rarer literal, a regular expression with a literal in it, and one
// without (each as the grep tool takes it, and as a GNU grep -E pattern).
var grepSearches = []struct{ name, pattern string }{
	{"literal", "SetDeadline"},
	{"literal-rare", "func NewReader"},
	{"regexp", `func \w+Reader\(`},
	{"regexp-no-literal", `[A-Z]{6}[0-9]{5}`},
}

// longLinesNotice ends a grep answer in which some matching lines were
// shortened.
const longLinesNotice = "\n\n[Some lines truncated to 500 chars. Use read tool to see full lines]"

// BenchmarkGrepTree: the grep tool over Go's own source tree
// ($(go env GOROOT)/src), by turns with GNU grep -rnE (one thread) and,
// when it is installed, ripgrep (rg -j1), the same search each time. It
// reports the medians of the time each took and of the CPU time each
// used (rpi searches on every core, so on a busy machine its CPU time
// says what it would take on one; /proc counts it in 10 ms ticks), rpi/grep and rpi/rg for both, and
// fails when rpi and grep do not find the same number of matches.
func BenchmarkGrepTree(b *testing.B) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatal(err)
	}
	tree := filepath.Join(strings.TrimSpace(string(out)), "src")
	s := newQuietServer(b, "--cwd", tree, "--no-session", "--tools", "grep")
	rg, _ := exec.LookPath("rg")
	for _, search := range grepSearches {
		b.Run(search.name, func(b *testing.B) {
			args, _ := json.Marshal(map[string]any{"pattern": search.pattern, "limit": 100000})
			var rpiTimes, grepTimes, rgTimes, rpiCPU, grepCPU, rgCPU []float64
			var rpiCount, grepCount, rgCount int
			for b.Loop() {
				start, before := time.Now(), cpuTime(b, os.Getpid())
				res, isError := s.runTool(context.Background(), contentBlock{Type: "toolCall", ID: "g", Name: "grep", Arguments: args})
				rpiTimes = append(rpiTimes, time.Since(start).Seconds())
				rpiCPU = append(rpiCPU, (cpuTime(b, os.Getpid()) - before).Seconds())
				if isError || len(res.Content) != 1 {
					b.Fatalf("grep tool: %+v", res)
				}
				// A match longer than 500 characters is shortened, and the
				// answer says so at its end: every match is still there.
				text := strings.TrimSuffix(res.Content[0].Text, longLinesNotice)
				if rpiCount = strings.Count(text, "\n") + 1; text == "No matches found" {
					rpiCount = 0
				} else if strings.HasSuffix(text, "]") {
					b.Fatalf("the grep tool's answer was cut: %.200s", text[max(0, len(text)-200):])
				}
				took, cpu := timeCommand(b, &grepCount, "grep", "-rnE", search.pattern, tree)
				grepTimes, grepCPU = append(grepTimes, took), append(grepCPU, cpu)
				if rg != "" {
					took, cpu := timeCommand(b, &rgCount, rg, "-j1", "-n", "--no-heading", search.pattern, tree)
					rgTimes, rgCPU = append(rgTimes, took), append(rgCPU, cpu)
				}
			}
			if rpiCount != grepCount {
				b.Errorf("the grep tool found %d matches, grep -rnE %d", rpiCount, grepCount)
			}
			b.ReportMetric(float64(rpiCount), "matches")
			report := func(unit string, rpi, grep, rg []float64) {
				r, g := median(rpi), median(grep)
				b.ReportMetric(r*1000, "rpi-"+unit)
				b.ReportMetric(g*1000, "grep-"+unit)
				b.ReportMetric(r/g, "rpi/grep-"+unit)
				if len(rg) > 0 {
					b.ReportMetric(median(rg)*1000, "rg-"+unit)
					b.ReportMetric(r/median(rg), "rpi/rg-"+unit)
				}
			}
			report("ms", rpiTimes, grepTimes, rgTimes)
			report("cpu-ms", rpiCPU, grepCPU, rgCPU)
			if rg != "" {
				b.ReportMetric(float64(rgCount), "rg-matches")
			}
		})
	}
}

// timeCommand runs a search command and returns its time and the CPU
// time it used, in seconds; it sets count to the lines it printed (a
// search that finds nothing exits 1, which is no failure).
func timeCommand(b *testing.B, count *int, name string, args ...string) (took, cpu float64) {
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	start := time.Now()
	err := cmd.Run()
	took = time.Since(start).Seconds()
	if err != nil && cmd.ProcessState.ExitCode() != 1 {
		b.Fatalf("%s: %v", name, err)
	}
	*count = bytes.Count(out.Bytes(), []byte("\n"))
	return took, (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
}

// median is the median of values (sorted in place).
func median(values []float64) float64 {
	slices.Sort(values)
	return values[len(values)/2]
}

// BenchmarkEndDuringLoad: SIGTERM, or the end of stdin, while rpi acp
// loads a generated session of RPI_BENCH_SESSION_MIB MiB (256 by
// default) for a client that reads everything: once while the file is
// read (300 ms after initialize's answer) and once while it is replayed
// (the first update read). It reports the median and the slowest time from
// the ending to rpi's exit (rpi acp promises 2 s: docs/acp.md#ending).
func BenchmarkEndDuringLoad(b *testing.B) {
	dir := b.TempDir()
	writeBigSession(b, filepath.Join(dir, "big.jsonl"), dir, bigSessionMiB(b)<<20)
	bin := rpiBinary(b)
	load, _ := json.Marshal(map[string]any{"sessionId": bigSessionID, "cwd": dir, "mcpServers": []any{}})
	input := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}` + "\n" +
		`{"jsonrpc":"2.0","id":1,"method":"session/load","params":` + string(load) + "}\n"
	took := map[string][]time.Duration{}
	for b.Loop() {
		for _, end := range []string{"SIGTERM", "EOF"} {
			for _, moment := range []string{"read", "replay"} {
				cmd := exec.Command(bin, "acp", "--session-dir", dir)
				cmd.Env = withoutKeys(append(os.Environ(), "PI_CODING_AGENT_DIR="+b.TempDir(), "TMPDIR="+b.TempDir()))
				stdin, _ := cmd.StdinPipe()
				stdout, _ := cmd.StdoutPipe()
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				initialized, replaying := make(chan struct{}), make(chan struct{})
				go func() { // reads everything, noting initialize's answer and the first update
					r := bufio.NewReaderSize(stdout, 1<<20)
					for seen := 0; ; {
						line, err := r.ReadSlice('\n')
						if seen == 0 && bytes.Contains(line, []byte(`"id":0`)) {
							seen++
							close(initialized)
						}
						if seen == 1 && bytes.Contains(line, []byte(`"session/update"`)) {
							seen++
							close(replaying)
						}
						if err != nil && err != bufio.ErrBufferFull {
							if seen == 0 {
								close(initialized)
							}
							if seen < 2 {
								close(replaying)
							}
							return
						}
					}
				}()
				io.WriteString(stdin, input)
				<-initialized
				if moment == "read" {
					time.Sleep(300 * time.Millisecond)
				} else {
					<-replaying
				}
				ended := time.Now()
				if end == "SIGTERM" {
					cmd.Process.Signal(syscall.SIGTERM)
				} else {
					stdin.Close()
				}
				cmd.Wait()
				took[end+"-"+moment] = append(took[end+"-"+moment], time.Since(ended))
				stdin.Close()
			}
		}
	}
	var all []float64
	for name, runs := range took {
		seconds := make([]float64, len(runs))
		for i, d := range runs {
			seconds[i] = d.Seconds()
		}
		all = append(all, seconds...)
		b.ReportMetric(median(seconds), name+"-s")
	}
	b.ReportMetric(slices.Max(all), "slowest-s")
}

// BenchmarkImagePrompt: one ACP prompt with an image of 49 MiB (its
// base64 text), answered by faux/faux-1 (no request at all) and by a
// local OpenAI-compatible server (the request carries the image). It
// reports rpi's peak resident memory over the prompt, its resident
// memory a second after the answer, and, for each, the peak as a
// multiple of the image.
func BenchmarkImagePrompt(b *testing.B) {
	bin := rpiBinary(b)
	image := base64.StdEncoding.EncodeToString(append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte("rpi\x00\xff\x10"), 49<<20/8)...)) // 49 MiB of base64
	for _, server := range []string{"faux", "sse"} {
		b.Run(server, func(b *testing.B) {
			var peaks, afters []float64
			for b.Loop() {
				agentDir := b.TempDir()
				args := []string{"acp", "--model", "faux/faux-1"}
				if server == "sse" {
					startFakeModel(b, apiOpenAI, `{"text":["A picture."],"usage":{"Input":12000000,"Output":3}}`, agentDir)
					args = []string{"acp", "--model", "fake/fake-model"}
				}
				cmd := exec.Command(bin, args...)
				cmd.Env = withoutKeys(append(os.Environ(), "PI_CODING_AGENT_DIR="+agentDir, "TMPDIR="+b.TempDir(), "PI_FAUX_RESPONSE=A picture."))
				p := startPiped(b, cmd)
				send := func(id int, method string, params any) {
					line, err := appendACPCall(nil, json.RawMessage(strconv.Itoa(id)), method, params)
					if err != nil {
						b.Fatal(err)
					}
					p.stdin.Write(append(line, '\n'))
				}
				answer := func(id int) []byte {
					prefix := []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,`)
					for {
						line, err := p.stdout.ReadBytes('\n')
						if err != nil {
							b.Fatalf("waiting for the answer %d: %v", id, err)
						}
						if bytes.HasPrefix(line, prefix) {
							return line
						}
					}
				}
				send(0, "initialize", map[string]any{"protocolVersion": 1})
				answer(0)
				send(1, "session/new", map[string]any{"cwd": b.TempDir(), "mcpServers": []any{}})
				var opened struct{ Result acpSessionAnswer }
				json.Unmarshal(answer(1), &opened)
				send(2, "session/prompt", map[string]any{"sessionId": opened.Result.SessionID, "prompt": []any{
					map[string]string{"type": "text", "text": "What is in the picture?"},
					map[string]string{"type": "image", "mimeType": "image/png", "data": image}}})
				if got := answer(2); !bytes.Contains(got, []byte(`"stopReason":"end_turn"`)) {
					b.Fatalf("the prompt's answer: %.300s", got)
				}
				peaks = append(peaks, statusMiB(b, cmd.Process.Pid, "VmHWM"))
				time.Sleep(time.Second)
				afters = append(afters, statusMiB(b, cmd.Process.Pid, "VmRSS"))
				p.stdin.Close()
				cmd.Wait()
			}
			b.ReportMetric(median(peaks), "peak-MiB")
			b.ReportMetric(median(afters), "rss-after-1s-MiB")
			b.ReportMetric(median(peaks)/49, "peak/image")
		})
	}
}

// ---- Sessions written in other forms ----

// A session written in each valid form of JSON beside the same session
// written compactly, as rpi and pi write it: each opened by a fresh rpi by
// turns, so that the ratio of each form's open (time and memory) to the
// compact one's is measured in the same run.

// sessionForms are the forms BenchmarkSessionFormsRatio writes the
// session in, each a rewrite of one compact line (a whole line of the
// file, header included) that keeps its JSON value.
var sessionForms = []struct {
	name    string
	rewrite func(line []byte) []byte
}{
	{"compact", func(line []byte) []byte { return line }},
	{"spaces", spacedJSON},        // ", " and ": ", as Python's json.dumps writes
	{"sorted", sortedJSON},        // keys in another order (sorted, as sort_keys=True)
	{"uescapes", asciiJSON},       // non-ASCII as \uXXXX (Python's ensure_ascii)
	{"slashes", slashedJSON},      // "/" as "\/"
	{"numbers", wholeNumbersJSON}, // whole numbers as 1.0 or 1e3
	{"extra", extraFieldsJSON},    // unknown fields beside the known ones
	{"all", func(line []byte) []byte { // every form at once
		return spacedJSON(extraFieldsJSON(wholeNumbersJSON(slashedJSON(asciiJSON(sortedJSON(line))))))
	}},
}

// walkJSON copies the compact JSON line, calling str with each string
// (its quotes included, keys too) and other with each run of bytes
// between strings, to append what stands for them.
func walkJSON(line []byte, str, other func(out, s []byte) []byte) []byte {
	var out []byte
	for i := 0; i < len(line); {
		if line[i] != '"' {
			j := i
			for j < len(line) && line[j] != '"' {
				j++
			}
			out = other(out, line[i:j])
			i = j
			continue
		}
		j := i + 1
		for line[j] != '"' {
			if line[j] == '\\' {
				j++
			}
			j++
		}
		out = str(out, line[i:j+1])
		i = j + 1
	}
	return out
}

func keep(out, s []byte) []byte { return append(out, s...) }

// spacedJSON writes a space after each ":" and "," between tokens.
func spacedJSON(line []byte) []byte {
	return walkJSON(line, keep, func(out, s []byte) []byte {
		for _, c := range s {
			out = append(out, c)
			if c == ':' || c == ',' {
				out = append(out, ' ')
			}
		}
		return out
	})
}

// asciiJSON writes every non-ASCII character of a string as \uXXXX (a
// surrogate pair beyond the BMP).
func asciiJSON(line []byte) []byte {
	return walkJSON(line, func(out, s []byte) []byte {
		for len(s) > 0 {
			r, size := utf8.DecodeRune(s)
			switch {
			case r < utf8.RuneSelf:
				out = append(out, s[0])
			case r > 0xffff:
				r -= 0x10000
				out = fmt.Appendf(out, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			default:
				out = fmt.Appendf(out, `\u%04x`, r)
			}
			s = s[size:]
		}
		return out
	}, keep)
}

// slashedJSON writes every "/" of a string as "\/".
func slashedJSON(line []byte) []byte {
	return walkJSON(line, func(out, s []byte) []byte {
		return append(out, bytes.ReplaceAll(s, []byte("/"), []byte(`\/`))...)
	}, keep)
}

// wholeNumbersJSON writes each whole number as 1.0, or as 3e3 when it
// ends in zeros.
func wholeNumbersJSON(line []byte) []byte {
	return walkJSON(line, keep, func(out, s []byte) []byte {
		for i := 0; i < len(s); {
			j := i
			for j < len(s) && (s[j] == '-' || s[j] >= '0' && s[j] <= '9' || s[j] == '.' || s[j] == 'e' || s[j] == 'E' || s[j] == '+') {
				j++
			}
			if num := s[i:j]; j > i && !bytes.ContainsAny(num, ".eE") {
				trimmed := bytes.TrimRight(num, "0")
				if zeros := len(num) - len(trimmed); zeros > 0 && len(trimmed) > 0 && trimmed[len(trimmed)-1] != '-' {
					out = fmt.Appendf(out, "%se%d", trimmed, zeros)
				} else {
					out = append(append(out, num...), ".0"...)
				}
				i = j
				continue
			} else if j > i {
				out = append(out, num...)
				i = j
				continue
			}
			out = append(out, s[i])
			i++
		}
		return out
	})
}

// extraFieldsJSON adds a field rpi does not know to the line's object and
// to its message.
func extraFieldsJSON(line []byte) []byte {
	out := bytes.Replace(line, []byte(`"message":{`), []byte(`"message":{"x-source":"another tool",`), 1)
	return append(append(out[:len(out)-1:len(out)-1], `,"x-meta":{"tool":"other","seq":[1,2,3]}`...), '}')
}

// sortedJSON writes every object's keys sorted (numbers as they were).
func sortedJSON(line []byte) []byte {
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		panic(err)
	}
	var out bytes.Buffer
	e := json.NewEncoder(&out)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n"))
}

// writeSessionForm writes the compact session file src again in form.
func writeSessionForm(tb testing.TB, src, dst string, rewrite func([]byte) []byte) {
	in, err := os.Open(src)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(out, 1<<20)
	r := bufio.NewReaderSize(in, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			w.Write(rewrite(bytes.TrimSuffix(line, []byte("\n"))))
			w.WriteByte('\n')
		}
		if err != nil {
			break
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	out.Close()
}

// formsMiB is the size of BenchmarkSessionFormsRatio's compact session:
// RPI_BENCH_FORMS_MIB, 64 by default.
func formsMiB(b *testing.B) int64 {
	if v := os.Getenv("RPI_BENCH_FORMS_MIB"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			b.Fatalf("RPI_BENCH_FORMS_MIB=%q: want a whole number of MiB", v)
		}
		return n
	}
	return 64
}

// openFormSession starts rpi on the session file, asks get_state at once and
// returns the time to its answer (which must count messages) and rpi's
// resident memory then and its peak so far, in MiB.
func openFormSession(b *testing.B, bin, cwd, file string, messages int) (took time.Duration, rss, peak float64) {
	cmd := exec.Command(bin, "rpc", "--cwd", cwd, "--session", file)
	cmd.Env = withoutKeys(append(os.Environ(), "PI_CODING_AGENT_DIR="+b.TempDir(), "TMPDIR="+b.TempDir()))
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); io.Copy(io.Discard, stdout); cmd.Wait() }()
	io.WriteString(stdin, `{"id":"s","type":"get_state"}`+"\n")
	state := readAnswer(b, bufio.NewReaderSize(stdout, 1<<20), "s", true)
	took = time.Since(start)
	var answer struct{ Data struct{ MessageCount int } }
	if err := json.Unmarshal(state, &answer); err != nil || answer.Data.MessageCount != messages {
		b.Fatalf("%s: get_state: %.300s (want %d messages)", file, state, messages)
	}
	return took, statusMiB(b, cmd.Process.Pid, "VmRSS"), statusMiB(b, cmd.Process.Pid, "VmHWM")
}

// BenchmarkSessionFormsRatio: a generated session of RPI_BENCH_FORMS_MIB
// MiB (as BenchmarkBigSession writes it) and the same session in each of
// sessionForms, each opened with --session by a fresh rpi (exec → the
// answer to a get_state written at once), the forms by turns in each
// iteration. It reports the compact open's median time and resident
// memory (over the file's size), and for each other form the ratio of
// its medians to the compact one's: FORM/compact-open and
// FORM/compact-rss. RPI_BENCH_FORMS=spaces,sorted picks the forms (the
// compact one always runs); RPI_BENCH_FORMS_BIN names another rpi binary
// to run (one built from an older commit, to compare).
func BenchmarkSessionFormsRatio(b *testing.B) {
	forms := sessionForms[:1]
	for _, form := range sessionForms[1:] {
		if only := os.Getenv("RPI_BENCH_FORMS"); only == "" || slices.Contains(strings.Split(only, ","), form.name) {
			forms = append(forms, form)
		}
	}
	dir := b.TempDir()
	cwd := filepath.Join(dir, "cwd")
	os.Mkdir(cwd, 0o755)
	compact := filepath.Join(dir, "compact.jsonl")
	messages := writeBigSession(b, compact, cwd, formsMiB(b)<<20)
	files := make([]string, len(forms))
	for i, form := range forms {
		files[i] = filepath.Join(dir, form.name+".jsonl")
		if form.name != "compact" {
			writeSessionForm(b, compact, files[i], form.rewrite)
		}
	}
	files[0] = compact
	info, err := os.Stat(compact)
	if err != nil {
		b.Fatal(err)
	}
	bin := os.Getenv("RPI_BENCH_FORMS_BIN")
	if bin == "" {
		bin = rpiBinary(b)
	}
	opens := make([][]float64, len(files))
	rss := make([][]float64, len(files))
	for b.Loop() {
		for i, file := range files {
			took, mib, _ := openFormSession(b, bin, cwd, file, messages)
			opens[i] = append(opens[i], took.Seconds())
			rss[i] = append(rss[i], mib)
		}
	}
	fileMiB := float64(info.Size()) / (1 << 20)
	b.ReportMetric(median(opens[0]), "compact-open-s")
	b.ReportMetric(median(rss[0])/fileMiB, "compact-rss/file")
	for i, form := range forms[1:] {
		b.ReportMetric(median(opens[i+1])/median(opens[0]), form.name+"/compact-open")
		b.ReportMetric(median(rss[i+1])/median(rss[0]), form.name+"/compact-rss")
	}
}

// hostileSessionForms are sessions a hostile file could be, each one line
// of blocks (or details) as many as fill the file: what a block costs
// decoded is 152 bytes, so the fewer bytes a block takes, the more a
// decoder that took each would hold.
var hostileSessionForms = []struct{ name, before, block, after string }{
	// empty blocks (3 bytes each): too many for their size, kept as written
	{"empty-blocks", `{"role":"user","content":[`, `{}`, `],"timestamp":1}`},
	// blocks with a type alone (16 bytes each): too many too
	{"typed-blocks", `{"role":"user","content":[`, `{"type":"text"}`, `],"timestamp":1}`},
	// the least block rpi writes (26 bytes each): decoded, the most a file can make rpi hold
	{"text-blocks", `{"role":"user","content":[`, `{"type":"text","text":""}`, `],"timestamp":1}`},
	// a tool result's details of empty objects: held as their JSON
	{"details", `{"role":"toolResult","toolCallId":"c","toolName":"t","content":[],"details":[`, `{}`, `],"isError":false,"timestamp":1}`},
}

// BenchmarkHostileSessionRatio: sessions of RPI_BENCH_HOSTILE_MIB MiB
// (default 16) of one hostile line each (hostileSessionForms) and a
// generated session of the same size (as BenchmarkBigSession writes it),
// each opened with --session by a fresh rpi that answers a get_state;
// by turns in each iteration. It reports the normal session's peak
// resident memory over its file's size (normal-peak/file) and, for each
// form, its peak over the normal one's (FORM/normal-peak) and its open
// time over the normal one's (FORM/normal-open). RPI_BENCH_FORMS_BIN
// names another rpi binary to run (one built from an older commit).
func BenchmarkHostileSessionRatio(b *testing.B) {
	dir := b.TempDir()
	cwd := filepath.Join(dir, "cwd")
	os.Mkdir(cwd, 0o755)
	size := envMiB(b, "RPI_BENCH_HOSTILE_MIB", 16) << 20
	normal := filepath.Join(dir, "normal.jsonl")
	messages := []int{writeBigSession(b, normal, cwd, size)}
	files := []string{normal}
	for _, form := range hostileSessionForms {
		file := filepath.Join(dir, form.name+".jsonl")
		header := fmt.Sprintf(`{"type":"session","version":3,"id":"1a2b3c4d-0000-4000-8000-00000000000f","timestamp":"2026-03-16T09:00:00.000Z","cwd":%q}`+"\n", cwd)
		head := `{"type":"message","id":"a1","parentId":null,"timestamp":"2026-03-16T09:00:01.000Z","message":` + form.before
		n := (int(size) - len(header) - len(head) - len(form.after) - 2) / (len(form.block) + 1)
		line := head + strings.Repeat(form.block+",", n-1) + form.block + form.after + "}\n"
		if err := os.WriteFile(file, []byte(header+line), 0o644); err != nil {
			b.Fatal(err)
		}
		files = append(files, file)
		messages = append(messages, 1)
	}
	bin := cmp.Or(os.Getenv("RPI_BENCH_FORMS_BIN"), rpiBinary(b))
	opens := make([][]float64, len(files))
	peaks := make([][]float64, len(files))
	for b.Loop() {
		for i, file := range files {
			took, _, peak := openFormSession(b, bin, cwd, file, messages[i])
			opens[i] = append(opens[i], took.Seconds())
			peaks[i] = append(peaks[i], peak)
		}
	}
	b.ReportMetric(median(peaks[0])/float64(size>>20), "normal-peak/file")
	for i, form := range hostileSessionForms {
		b.ReportMetric(median(peaks[i+1])/median(peaks[0]), form.name+"/normal-peak")
		b.ReportMetric(median(opens[i+1])/median(opens[0]), form.name+"/normal-open")
	}
}

// BenchmarkSmallInfoEntriesSession: sessions of RPI_BENCH_SMALL_MIB MiB
// (default 64) of small entries of one type each, session_info (a name of
// one letter), custom_message (a note of one letter) and, the floor,
// message (a user message of one letter), each opened with --session by
// a fresh rpi that answers a get_state, by turns in each iteration. It
// reports each one's resident memory over its file's size (TYPE-rss/file)
// and, for the first two, over the messages' (TYPE/message-rss), and the
// median time from exec to the answer (TYPE-open-s).
// RPI_BENCH_FORMS_BIN names another rpi binary to run.
func BenchmarkSmallInfoEntriesSession(b *testing.B) {
	dir := b.TempDir()
	cwd := filepath.Join(dir, "cwd")
	os.Mkdir(cwd, 0o755)
	size := envMiB(b, "RPI_BENCH_SMALL_MIB", 64) << 20
	kinds := []struct{ typ, fields string }{
		{"message", `"message":{"role":"user","content":[{"type":"text","text":"%c"}],"timestamp":1772355600000}`},
		{"session_info", `"name":"%c"`},
		{"custom_message", `"customType":"note","content":"%c","display":true`},
	}
	files, messages, sizes := make([]string, len(kinds)), make([]int, len(kinds)), make([]float64, len(kinds))
	for k, kind := range kinds {
		files[k] = filepath.Join(dir, kind.typ+".jsonl")
		f, err := os.Create(files[k])
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		fmt.Fprintf(w, `{"type":"session","version":3,"id":"0f0e8a52-1c4f-4a2e-9d6b-3c1f2e4d5a6b","timestamp":"2026-03-01T09:00:00.000Z","cwd":%q}`+"\n", cwd)
		n := 0
		for written := 0; written < int(size); n++ {
			parent := fmt.Sprintf(`"%08x"`, n)
			if n == 0 {
				parent = "null"
			}
			line := fmt.Sprintf(`{"type":%q,"id":"%08x","parentId":%s,"timestamp":"2026-03-01T09:00:%02d.000Z",`+kind.fields+"}\n",
				kind.typ, n+1, parent, n%60, 'a'+n%26)
			w.WriteString(line)
			written += len(line)
		}
		if err := errors.Join(w.Flush(), f.Close()); err != nil {
			b.Fatal(err)
		}
		if kind.typ != "session_info" {
			messages[k] = n
		}
		info, err := os.Stat(files[k])
		if err != nil {
			b.Fatal(err)
		}
		sizes[k] = float64(info.Size()) / (1 << 20)
	}
	bin := cmp.Or(os.Getenv("RPI_BENCH_FORMS_BIN"), rpiBinary(b))
	rss, opens := make([][]float64, len(files)), make([][]float64, len(files))
	for b.Loop() {
		for k, file := range files {
			took, mib, _ := openFormSession(b, bin, cwd, file, messages[k])
			rss[k] = append(rss[k], mib/sizes[k])
			opens[k] = append(opens[k], took.Seconds())
		}
	}
	for k, kind := range kinds {
		b.ReportMetric(median(rss[k]), kind.typ+"-rss/file")
		b.ReportMetric(median(opens[k]), kind.typ+"-open-s")
		if k > 0 {
			b.ReportMetric(median(rss[k])/median(rss[0]), kind.typ+"/message-rss")
		}
	}
}
