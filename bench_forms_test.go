package main

// A session written in each valid form of JSON beside the same session
// written compactly, as rpi and pi write it: each opened by a fresh rpi by
// turns, so that the ratio of each form's open (time and memory) to the
// compact one's is measured in the same run.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

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
// resident memory then, in MiB.
func openFormSession(b *testing.B, bin, cwd, file string, messages int) (time.Duration, float64) {
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
	took := time.Since(start)
	var answer struct{ Data struct{ MessageCount int } }
	if err := json.Unmarshal(state, &answer); err != nil || answer.Data.MessageCount != messages {
		b.Fatalf("%s: get_state: %.300s (want %d messages)", file, state, messages)
	}
	return took, statusMiB(b, cmd.Process.Pid, "VmRSS")
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
			took, mib := openFormSession(b, bin, cwd, file, messages)
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
