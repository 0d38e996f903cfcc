package main

// The strings of a session line: read as encoding/json reads them
// (escapes undone, invalid UTF-8 and lone surrogates as U+FFFD), eight
// bytes at a time between escapes; and, for a file of many small
// entries, kept once where the same string comes back from line to line
// (jsonIn.name, jsonIn.plainString).

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// maxNames and maxNameBytes bound what name keeps.
const maxNames, maxNameBytes = 256, 64

// name reads a string that takes few values, the same from line to line
// (a type, a role, a model, a tool's name): each, when it is plain ASCII
// without escapes, is made once for the decoder and shared by the
// entries it reads, as str would read it otherwise.
func (d *jsonIn) name(dst *string) {
	if d.nullLost() {
		return
	}
	b, start := d.b, d.i+1
	if d.fail || start > len(b) || b[d.i] != '"' {
		d.fail = true
		return
	}
	end, high := stringRun(b, start)
	if high || end >= len(b) || b[end] != '"' || end-start > maxNameBytes {
		if s, ok := d.stringValue(); ok {
			*dst = s
		}
		return
	}
	s, ok := d.names[string(b[start:end])]
	if !ok {
		s = string(b[start:end])
		if d.names == nil {
			d.names = map[string]string{}
		}
		if len(d.names) < maxNames {
			d.names[s] = s
		}
	}
	*dst, d.i = s, end+1
}

// plainString reads the string at i when it is s written plainly (no
// escapes), and reports whether it was.
func (d *jsonIn) plainString(s string) bool {
	b, start := d.b, d.i+1
	end := start + len(s)
	if d.fail || end >= len(b) || b[d.i] != '"' || b[end] != '"' || string(b[start:end]) != s {
		return false
	}
	if run, _ := stringRun(b, start); run != end {
		return false
	}
	d.i = end + 1
	return true
}

// str reads a string into dst; null leaves dst as it was.
func (d *jsonIn) str(dst *string) {
	if d.nullLost() {
		return
	}
	if s, ok := d.stringValue(); ok {
		*dst = s
	}
}

// stringValue reads a string, unescaped as encoding/json does: invalid
// UTF-8 and lone surrogates become U+FFFD.
func (d *jsonIn) stringValue() (string, bool) {
	b := d.b
	if d.fail || d.i >= len(b) || b[d.i] != '"' {
		d.fail = true
		return "", false
	}
	start := d.i + 1
	i, high := stringRun(b, start)
	if high && !utf8.Valid(b[start:i]) {
		i = start
	} else if i < len(b) && b[i] == '"' {
		d.i = i + 1
		return string(b[start:i]), true
	}
	return d.unescape(start, i)
}

// unescape reads the rest of a string whose start b[start:i] is plain
// and valid UTF-8.
func (d *jsonIn) unescape(start, i int) (string, bool) {
	b := d.b
	out := append(d.scratch[:0], b[start:i]...)
	defer func() { d.scratch = out[:0] }()
	run, runAt := i, len(out) // the plain bytes since the last escape start at b[run], copied to out[runAt]
	var seen uint64
	for i < len(b) {
		// Plain bytes are copied eight at a time, as they are tested
		// (stringStops): what a stop leaves is written over next.
		if i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			o := len(out)
			out = slices.Grow(out, 8)[:o+8]
			binary.LittleEndian.PutUint64(out[o:], x)
			found := stringStops(x)
			if found == 0 {
				seen |= x
				i += 8
				continue
			}
			at := bits.TrailingZeros64(found) / 8
			seen |= x & (1<<(8*at) - 1)
			i, out = i+at, out[:o+at]
		} else if c := b[i]; c >= 0x20 && c != '"' && c != '\\' {
			seen |= uint64(c)
			out = append(out, c)
			i++
			continue
		}
		if seen&everyByte80 != 0 && !utf8.Valid(b[run:i]) {
			out = appendValidUTF8(out[:runAt], b[run:i])
			d.lossy = true // U+FFFD is another text
		}
		seen = 0
		switch c := b[i]; {
		case c == '"':
			d.i = i + 1
			return string(out), true
		case c < 0x20 || i+1 >= len(b):
			d.fail = true
			return "", false
		}
		switch e := b[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(b[i+2:])
			if r < 0 {
				d.fail = true
				return "", false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// A pair makes one rune; a lone half is U+FFFD and what
				// follows it is read on its own.
				if i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
					if dec := utf16.DecodeRune(r, hex4(b[i+2:])); dec != utf8.RuneError {
						r = dec
						i += 6
					}
				}
				if utf16.IsSurrogate(r) {
					r, d.lossy = utf8.RuneError, true // a lone half is another text
				}
			}
			out = utf8.AppendRune(out, r)
			run, runAt = i, len(out)
			continue
		default:
			d.fail = true
			return "", false
		}
		i += 2
		run, runAt = i, len(out)
	}
	d.fail = true
	return "", false
}

// appendValidUTF8 appends b with each byte that is not part of a valid
// UTF-8 sequence replaced by U+FFFD, as encoding/json unquotes it.
func appendValidUTF8(out, b []byte) []byte {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, r)
		} else {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}

// hex4 is the value of the 4 hex digits b starts with, or -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
