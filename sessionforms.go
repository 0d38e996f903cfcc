package main

// Every valid form of a session line at the fast path's speed. JSON
// lets a line be written in many ways that mean the same: whitespace
// between tokens, keys in any order, any character escaped (\u00e9, \/),
// a whole number as 1.0 or 1e3 (as JavaScript, and so pi, reads it into
// an integer). The fast path (sessionline.go) reads them all; what is
// here is what it needs for that:
//
//   - wholeNumber: a number written any way that is a whole number, for
//     the fields rpi holds as integers, and plainWholeNumbers, which
//     writes those fields plainly before encoding/json reads a line the
//     fast path declined, so that both read 1.0 as 1;
//   - sameJSON: whether a line is the same JSON value as the line rpi
//     writes for what it decoded, so that the entry keeps no copy of it
//     (keepLine): a session written another way costs the memory of one
//     written compactly.

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// numberParts splits the valid JSON number n into its sign and its
// significant digits (no leading or trailing zeros; none for zero) into
// buf, and exp, so that n = digits × 10^exp. ok is false when the digits
// do not fit in buf or the exponent is out of int32's range.
func numberParts(n []byte, buf *[40]byte) (neg bool, digits []byte, exp int, ok bool) {
	i := 0
	if i < len(n) && n[i] == '-' {
		neg, i = true, 1
	}
	digits = buf[:0]
	for ; i < len(n) && n[i] >= '0' && n[i] <= '9'; i++ {
		if len(digits) > 0 || n[i] != '0' {
			if len(digits) == len(buf) {
				return neg, nil, 0, false
			}
			digits = append(digits, n[i])
		} else if len(digits) == 0 {
			continue
		}
	}
	if i < len(n) && n[i] == '.' {
		for i++; i < len(n) && n[i] >= '0' && n[i] <= '9'; i++ {
			exp--
			if len(digits) > 0 || n[i] != '0' {
				if len(digits) == len(buf) {
					return neg, nil, 0, false
				}
				digits = append(digits, n[i])
			}
		}
	}
	if i < len(n) && (n[i] == 'e' || n[i] == 'E') {
		e, err := strconv.ParseInt(string(n[i+1:]), 10, 32)
		if err != nil {
			return neg, nil, 0, false
		}
		exp += int(e)
	}
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits, exp = digits[:len(digits)-1], exp+1
	}
	if len(digits) == 0 {
		exp = 0
	}
	return neg, digits, exp, true
}

// wholeNumber is the value of the valid JSON number n when it is a whole
// number of at most 18 digits, however it is written (7, 7.0, 0.7e1,
// 700e-2).
func wholeNumber(n []byte) (int64, bool) {
	var buf [40]byte
	neg, digits, exp, ok := numberParts(n, &buf)
	if !ok || exp < 0 || len(digits)+exp > 18 {
		return 0, false
	}
	var v int64
	for _, c := range digits {
		v = v*10 + int64(c-'0')
	}
	for range exp {
		v *= 10
	}
	if neg {
		v = -v
	}
	return v, true
}

// sameNumber reports whether the valid JSON numbers a and b have one
// value (-0 is 0, as float64's == has it).
func sameNumber(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var bufA, bufB [40]byte
	negA, digitsA, expA, okA := numberParts(a, &bufA)
	negB, digitsB, expB, okB := numberParts(b, &bufB)
	return okA && okB && bytes.Equal(digitsA, digitsB) && expA == expB && (negA == negB || len(digitsA) == 0)
}

// Integer fields, by the object they are members of.
var (
	headerInts  = []string{"version"}
	entryInts   = []string{"tokensBefore"}
	messageInts = []string{"timestamp", "exitCode", "tokensBefore"}
	usageInts   = []string{"input", "output", "cacheRead", "cacheWrite", "totalTokens"}
)

// plainWholeNumbers returns the object raw with each member named by ints
// (exactly) whose value is a whole number written otherwise than plainly
// (1.0, 1e3) written plainly, and so inside a member "usage" with
// usageInts when nested; raw itself when there is none, or raw is not an
// object the fast path's scanner reads. encoding/json then reads into an
// integer what the fast path does.
func plainWholeNumbers(raw []byte, ints []string, nested bool) []byte {
	var d jsonIn
	d.reset(raw)
	var out []byte
	last := 0
	d.object(func(key []byte) {
		start := d.i
		d.skip()
		value, plain := raw[start:d.i], []byte(nil)
		switch {
		case nested && string(key) == "usage" && len(value) > 0 && value[0] == '{':
			if again := plainWholeNumbers(value, usageInts, false); &again[0] != &value[0] {
				plain = again
			}
		case slices.Contains(ints, string(key)) && len(value) > 0 && (value[0] == '-' || value[0] >= '0' && value[0] <= '9') &&
			bytes.ContainsAny(value, ".eE"):
			if v, ok := wholeNumber(value); ok {
				plain = strconv.AppendInt(nil, v, 10)
			}
		}
		if plain != nil {
			out = append(append(out, raw[last:start]...), plain...)
			last = d.i
		}
	})
	if d.fail || out == nil {
		return raw
	}
	return append(out, raw[last:]...)
}

// sameJSON reports whether the valid JSON texts a and b hold the same
// value: whitespace aside, an object's members in any order (a key given
// twice is not the same), strings however escaped, numbers however
// written. It reads each text once where their members come in one
// order.
func sameJSON(a, b []byte) bool {
	i, j, ok := sameValue(a, 0, b, 0, 0)
	return ok && skipSpace(a, i) == len(a) && skipSpace(b, j) == len(b)
}

// sameValue compares the values at a[i] and b[j] (after whitespace), and
// returns where they end when they are the same.
func sameValue(a []byte, i int, b []byte, j int, depth int) (int, int, bool) {
	if i, j = skipSpace(a, i), skipSpace(b, j); i >= len(a) || j >= len(b) || depth > maxScanDepth {
		return i, j, false
	}
	isNumber := func(c byte) bool { return c == '-' || c >= '0' && c <= '9' }
	switch c := a[i]; {
	case isNumber(c):
		endA, endB := skipNumber(a, i), -1
		if isNumber(b[j]) {
			endB = skipNumber(b, j)
		}
		return endA, endB, endA >= 0 && endB >= 0 && sameNumber(a[i:endA], b[j:endB])
	case c != b[j]:
		return i, j, false
	case c == '"':
		return sameStringAt(a, i, b, j)
	case c == '[':
		i, j = skipSpace(a, i+1), skipSpace(b, j+1)
		for a[i] != ']' && b[j] != ']' {
			var same bool
			if i, j, same = sameValue(a, i, b, j, depth+1); !same {
				return i, j, false
			}
			if i, j = skipSpace(a, i), skipSpace(b, j); a[i] == ',' && b[j] == ',' {
				i, j = skipSpace(a, i+1), skipSpace(b, j+1)
			}
		}
		return i + 1, j + 1, a[i] == ']' && b[j] == ']'
	case c == '{':
		return sameObject(a, i, b, j, depth)
	}
	endA, endB := skipValue(a, i, 0), skipValue(b, j, 0) // true, false or null
	return endA, endB, endA >= 0 && endB >= 0 && bytes.Equal(a[i:endA], b[j:endB])
}

// sameObject compares the objects at a[i] and b[j]: a's members in
// order, each against b's member at the same place while their keys come
// in one order, else against b's member with its key (b's members
// listed as far as the key is looked for, once).
func sameObject(a []byte, i int, b []byte, j int, depth int) (int, int, bool) {
	var room [24]span
	var inB otherMembers
	i, j = skipSpace(a, i+1), skipSpace(b, j+1)
	for n := 0; a[i] != '}'; n++ {
		keyA := endOfString(a, i)
		if keyA < 0 {
			return i, j, false
		}
		keyB := -1
		if inB.list == nil && b[j] != '}' {
			if _, end, same := sameStringAt(a, i, b, j); same {
				keyB = end
			}
		}
		if keyB < 0 {
			if inB.list == nil {
				inB = otherMembers{list: room[:0], next: j, used: 1<<n - 1, listed: n} // the first n matched in order
			}
			if keyB = inB.find(a, i, b); keyB < 0 {
				return i, j, false
			}
		}
		endA, endValueB, same := sameValue(a, skipSpace(a, keyA)+1, b, skipSpace(b, keyB)+1, depth+1)
		if !same {
			return i, j, false
		}
		if i = skipSpace(a, endA); a[i] == ',' {
			i = skipSpace(a, i+1)
		}
		if inB.list == nil {
			if j = skipSpace(b, endValueB); b[j] == ',' {
				j = skipSpace(b, j+1)
			}
		}
	}
	if inB.list == nil {
		return i + 1, j + 1, b[j] == '}'
	}
	end := inB.find(nil, 0, b) // to b's end: a member a lacks is not the same
	return i + 1, inB.end, end < 0 && inB.end >= 0 && inB.used == 1<<inB.listed-1
}

// otherMembers are the members of an object of b whose keys come in
// another order than a's: those listed so far (after the first listed,
// which matched in order and are not in list), which of them matched
// (used), and where the next starts.
type otherMembers struct {
	list   []span // the keys of those listed after the first matched in order
	listed int    // how many are listed, those matched in order included
	used   uint64 // which of them matched, by place
	next   int    // where the next member of b starts
	end    int    // where b's object ends, once listed to it (else 0; -1 when too deep or too big)
}

// find returns where the value's key of b's member whose key is the
// string at a[i] ends, listing b's members as far as needed, or -1 when
// there is none not matched yet (with a nil: lists them all).
func (m *otherMembers) find(a []byte, i int, b []byte) int {
	for k, at := range m.list {
		place := m.listed - len(m.list) + k
		if m.used&(1<<place) == 0 && a != nil {
			if end, _, same := sameStringAt(b, at.key, a, i); same {
				m.used |= 1 << place
				return end
			}
		}
	}
	for m.end == 0 {
		if b[m.next] == '}' {
			m.end = m.next + 1
			break
		}
		key := m.next
		keyEnd := endOfString(b, key)
		value := skipSpace(b, skipSpace(b, keyEnd)+1)
		end := skipValue(b, value, 0)
		if end < 0 || m.listed == 64 {
			m.end = -1 // too deep, or more than 64 members: not told apart here, the line is kept
			break
		}
		if m.next = skipSpace(b, end); b[m.next] == ',' {
			m.next = skipSpace(b, m.next+1)
		}
		m.list = append(m.list, span{key, value})
		m.listed++
		if a != nil {
			if _, _, same := sameStringAt(b, key, a, i); same {
				m.used |= 1 << (m.listed - 1)
				return keyEnd
			}
		}
	}
	return -1
}

// span is where a member's key and value start in its text.
type span struct{ key, value int }

// endOfString returns the index just past the valid JSON string at b[i],
// or -1; it skips eight bytes at a time between escapes.
func endOfString(b []byte, i int) int {
	for i++; ; {
		i, _ = stringRun(b, i)
		switch {
		case i >= len(b) || b[i] < 0x20:
			return -1
		case b[i] == '"':
			return i + 1
		}
		i += 2 // an escape: the four digits of \uXXXX are plain
	}
}

// sameStringAt compares the valid JSON strings at a[i] and b[j] once
// unescaped, as encoding/json unescapes them, and returns where they
// end. Alike bytes are compared eight at a time; from the first that
// differ, the texts are compared piece by piece (textPiece). A string
// with invalid UTF-8 or a lone surrogate, which becomes U+FFFD, is not
// the same as any other.
func sameStringAt(a []byte, i int, b []byte, j int) (int, int, bool) {
	if i >= len(a) || j >= len(b) || a[i] != '"' || b[j] != '"' {
		return i, j, false
	}
	k := 1 // a[i:i+k] and b[j:j+k] are alike, and k is not inside an escape
	for i+k+8 <= len(a) && j+k+8 <= len(b) {
		x := binary.LittleEndian.Uint64(a[i+k:])
		if x != binary.LittleEndian.Uint64(b[j+k:]) {
			break
		}
		stops := stringStops(x)
		if stops == 0 {
			k += 8
			continue
		}
		at := k + bits.TrailingZeros64(stops)/8
		switch c := a[i+at]; {
		case c == '"':
			return i + at + 1, j + at + 1, true
		case c < 0x20:
			return i, j, false
		}
		// An escape: alike when its next byte is (the four digits of
		// \uXXXX are plain, and compared as such).
		if i+at+1 >= len(a) || j+at+1 >= len(b) || a[i+at+1] != b[j+at+1] {
			break
		}
		k = at + 2
	}
	for k > 1 && a[i+k]&0xc0 == 0x80 {
		k-- // to the start of a character
	}
	var pa, pb textPiece
	pa.s, pa.i, pb.s, pb.i = a, i+k, b, j+k
	var x, y []byte
	for {
		if len(x) == 0 {
			x = pa.next()
		}
		if len(y) == 0 {
			y = pb.next()
		}
		switch {
		case pa.bad || pb.bad:
			return pa.i, pb.i, false
		case pa.end || pb.end:
			return pa.i, pb.i, pa.end && pb.end && len(x) == 0 && len(y) == 0
		}
		n := min(len(x), len(y))
		if !bytes.Equal(x[:n], y[:n]) {
			return pa.i, pb.i, false
		}
		x, y = x[n:], y[n:]
	}
}

// textPiece reads a JSON string's text a piece at a time: a run of plain
// bytes, or what one escape stands for.
type textPiece struct {
	s        []byte
	i        int
	buf      [4]byte
	end, bad bool // the closing quote was read; the text is not valid (or holds what becomes U+FFFD)
}

// next returns the next piece, empty at the end (or when bad).
func (p *textPiece) next() []byte {
	s, i := p.s, p.i
	if i >= len(s) {
		p.bad = true
		return nil
	}
	switch c := s[i]; {
	case c == '"':
		p.end, p.i = true, i+1
		return nil
	case c < 0x20 || i+1 >= len(s):
		p.bad = true
		return nil
	case c != '\\':
		end, high := stringRun(s, i)
		if high && !utf8.Valid(s[i:end]) {
			p.bad = true
			return nil
		}
		p.i = end
		return s[i:end]
	}
	p.i = i + 2
	switch e := s[i+1]; e {
	case '"', '\\', '/':
		p.buf[0] = e
	case 'b':
		p.buf[0] = '\b'
	case 'f':
		p.buf[0] = '\f'
	case 'n':
		p.buf[0] = '\n'
	case 'r':
		p.buf[0] = '\r'
	case 't':
		p.buf[0] = '\t'
	case 'u':
		r := hex4(s[i+2:])
		p.i = i + 6
		if utf16.IsSurrogate(r) {
			low := rune(-1)
			if p.i+1 < len(s) && s[p.i] == '\\' && s[p.i+1] == 'u' {
				low = hex4(s[p.i+2:])
			}
			if r = utf16.DecodeRune(r, low); r == utf8.RuneError {
				p.bad = true // a lone surrogate
				return nil
			}
			p.i += 6
		}
		if r < 0 {
			p.bad = true
			return nil
		}
		return utf8.AppendRune(p.buf[:0], r)
	default:
		p.bad = true
		return nil
	}
	return p.buf[:1]
}
