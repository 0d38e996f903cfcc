package main

// Reading a session file's lines: the header first, then the entries in
// parts read side by side (sessionParts), each line decoded by
// decodeEntry (sessionline.go).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"
)

// ---- Reading a session file ----

// errLineTooLong: a line of the file is longer than maxSessionLineBytes.
var errLineTooLong = errors.New("line too long")

// sessionParts is how many parts to read a session file of size bytes
// in: one per core, each of at least 4 MiB.
func sessionParts(size int64) int {
	return int(max(1, min(int64(runtime.GOMAXPROCS(0)), size/(4<<20))))
}

// readHeaderLine reads the line of f that must be its header: the first
// that passedOverBeforeHeader keeps, trimmed (trimLine; nil when there is
// none), the number of that line (counting from 1), where the line after
// it starts (with no such line, the file's end: 0 for an empty file), and
// the lines before it that are not blank. A byte order mark that starts
// the file is skipped. Reading stops when ctx ends (with its error): the
// lines passed over may be all of a large file.
func readHeaderLine(ctx context.Context, f *os.File) (header []byte, lineNo int, next int64, passedOver lineNumbers, err error) {
	r := io.NewSectionReader(f, 0, math.MaxInt64)
	br := bufio.NewReaderSize(ctxReader{ctx, r}, 64<<10)
	var long []byte
	for {
		line, tooLong, err := nextLine(br, &long, maxSessionLineBytes)
		if lineNo++; lineNo == 1 {
			line = bytes.TrimPrefix(line, byteOrderMark)
		}
		if tooLong {
			return nil, lineNo, 0, passedOver, errLineTooLong
		}
		if err != nil && err != io.EOF {
			return nil, lineNo, 0, passedOver, err
		}
		line, blank := trimLine(line)
		keep := !passedOverBeforeHeader(line, blank)
		if !keep && !blank {
			passedOver.add(lineNo)
		}
		if keep || err == io.EOF {
			pos, _ := r.Seek(0, io.SeekCurrent)
			if keep {
				line = bytes.Clone(line)
			} else {
				line = nil
			}
			return line, lineNo, pos - int64(br.Buffered()), passedOver, nil
		}
	}
}

// passedOverBeforeHeader reports whether a line before a session file's
// header (trimmed by trimLine, and whether it is blank) is passed over, as
// pi's loader passes it over: a blank line, one that is no JSON, or one
// whose JSON JavaScript counts as false (null, false, "", a zero), which
// pi drops as it drops a line that is no JSON. The first line kept must
// be the header. A number is a zero when JSON.parse reads it as one: one
// too small for a double (1e-400) too, as ParseFloat, correctly rounded
// like JavaScript, reads it.
func passedOverBeforeHeader(line []byte, blank bool) bool {
	if blank || !json.Valid(line) {
		return true
	}
	switch string(line) {
	case "null", "false", `""`:
		return true
	}
	if c := line[0]; c != '-' && (c < '0' || c > '9') {
		return false // a string, an array, an object or true
	}
	f, _ := strconv.ParseFloat(string(line), 64) // ±Inf when too large: not a zero
	return f == 0
}

// maxToldLines is how many of the lines a load skips it keeps the numbers
// of, to tell the client; the others are only counted. Each number was
// kept, and told, so that a file of short lines that are no entries
// ("x\n") made rpi hold 4 and send 4.5 times its size.
const maxToldLines = 100

// lineNumbers are lines a load skipped: the numbers of the first
// maxToldLines of them, and how many there are in all.
type lineNumbers struct {
	first []int
	n     int
}

func (l *lineNumbers) add(line int) {
	if l.n++; len(l.first) < maxToldLines {
		l.first = append(l.first, line)
	}
}

// join adds the lines of m, after them, their numbers moved by offset.
func (l *lineNumbers) join(m lineNumbers, offset int) {
	for _, line := range m.first {
		l.add(line + offset)
	}
	l.n += m.n - len(m.first) // only counted in m: l has maxToldLines already
}

// sessionEntries are the entries of a session file, in file order.
type sessionEntries struct {
	entries []*sessionEntry
	skipped lineNumbers // lines that are not entries, besides a torn last one
	tooLong int         // the first line longer than maxSessionLineBytes
}

// readEntries reads the entries of f from the offset from on, where line
// lineNo+1 starts. The file is cut at line ends into parts (at most
// parts), each read and decoded on a goroutine of its own; the parts are
// joined in order. keepLines: entries keep their lines
// (keepLine), else a copy of each. A line that is not an entry is
// skipped, unless it is the last one and has no "\n" (a torn write): then
// it goes unreported. err is errLineTooLong (tooLong is its line) or a
// read error.
func readEntries(ctx context.Context, f *os.File, from int64, lineNo int, keepLines bool, parts int) (read sessionEntries, err error) {
	info, err := f.Stat()
	if err != nil {
		return read, err
	}
	size := info.Size()
	starts := []int64{from}
	for k := 1; k < parts; k++ {
		if at := nextLineStart(f, from+(size-from)*int64(k)/int64(parts)); at > starts[len(starts)-1] && at < size {
			starts = append(starts, at)
		}
	}
	results := make([]entryPart, len(starts))
	var panicked helperPanic
	var wg sync.WaitGroup
	for i, start := range starts {
		n := math.MaxInt64 - start // the last part reads on to the end, should the file have grown
		if i+1 < len(starts) {
			n = starts[i+1] - start
		}
		wg.Go(func() {
			defer panicked.catch()
			results[i] = readEntryPart(ctxReader{ctx, io.NewSectionReader(f, start, n)}, keepLines)
		})
	}
	wg.Wait()
	panicked.raise()
	for i, part := range results {
		switch {
		case part.err != nil:
			return read, part.err
		case part.tooLong > 0:
			read.tooLong = lineNo + part.tooLong
			return read, errLineTooLong
		}
		read.entries = append(read.entries, part.entries...)
		bad := part.bad
		if i == len(results)-1 && part.torn { // the last of bad, unreported
			bad.n--
			bad.first = bad.first[:min(len(bad.first), bad.n)]
		}
		read.skipped.join(bad, lineNo)
		lineNo += part.lines
	}
	return read, nil
}

// ctxReader reads r until ctx ends, then fails with ctx's error: a long
// read stops at its next chunk.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// nextLineStart is where the first line that starts at or after at
// starts, or -1 when none does within the next MiB.
func nextLineStart(f *os.File, at int64) int64 {
	buf := make([]byte, 64<<10)
	for end := at + 1<<20; at < end; {
		n, err := f.ReadAt(buf, at-1)
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			return at + int64(i)
		}
		if err != nil {
			return -1
		}
		at += int64(n)
	}
	return -1
}

// entryPart is what one part of a session file holds; line numbers count
// from its start.
type entryPart struct {
	entries []*sessionEntry
	lines   int         // its lines, the last one counted even without "\n"
	bad     lineNumbers // lines that are not entries
	torn    bool        // the last line is one of them and has no "\n"
	tooLong int         // a line longer than maxSessionLineBytes, where reading stopped
	err     error       // a read error, where reading stopped
}

// readEntryPart reads and decodes the entries of one part.
func readEntryPart(r io.Reader, keepLines bool) (part entryPart) {
	br := bufio.NewReaderSize(r, 256<<10)
	var long []byte // a line longer than br's buffer
	var d jsonIn
	for {
		line, tooLong, err := nextLine(br, &long, maxSessionLineBytes)
		if err == io.EOF && len(line) == 0 && !tooLong {
			return part // after the last "\n"
		}
		part.lines++
		if tooLong {
			part.tooLong = part.lines
			return part
		}
		if err != nil && err != io.EOF {
			part.err = err
			return part
		}
		if line, blank := trimLine(line); !blank {
			if e, derr := decodeEntry(line, &d); derr == nil && e.Type != "" {
				if keepLines {
					e.keepLine(line, &d)
					d.prevID = &e.ID // not in older versions, whose ids migrateV1 may change
				} else {
					e.raw = bytes.Clone(line)
				}
				part.entries = append(part.entries, e)
			} else {
				part.bad.add(part.lines)
				part.torn = err == io.EOF
			}
		}
		if err == io.EOF {
			return part
		}
	}
}

// byteOrderMark is U+FEFF in UTF-8, which an editor may put at the start
// of a file.
var byteOrderMark = []byte("\uFEFF")

// trimLine is line without the white space JSON allows around a value
// (space, tab, "\r"), and whether it is blank: no more than white space
// of any kind and byte order marks, as pi's trim has it. Other spaces
// (\v, U+00A0) stay: a line they surround is no JSON, and so no entry,
// for encoding/json, for pi, and for mendEnd, which would cut it as torn.
func trimLine(line []byte) (_ []byte, blank bool) {
	line = bytes.Trim(line, " \t\r\n")
	rest := bytes.TrimSpace(line)
	for bytes.HasPrefix(rest, byteOrderMark) {
		rest = bytes.TrimSpace(rest[len(byteOrderMark):])
	}
	return line, len(rest) == 0
}

// nextLine returns the next line without its "\n", valid until the next
// call: a slice of br's buffer, or of *long when the line is longer than
// that. tooLong is set (and the line skipped) once more than max bytes
// came before the "\n". err is non-nil only at the end of input, possibly
// with a final partial line.
func nextLine(br *bufio.Reader, long *[]byte, max int) (line []byte, tooLong bool, err error) {
	line, err = br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		buf := append((*long)[:0], line...)
		for err == bufio.ErrBufferFull && len(buf) <= max {
			line, err = br.ReadSlice('\n')
			buf = append(buf, line...)
		}
		*long = buf[:0]
		for err == bufio.ErrBufferFull {
			_, err = br.ReadSlice('\n')
			tooLong = true
		}
		line = buf
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	if tooLong || len(line) > max {
		return nil, true, err
	}
	return line, false, err
}
