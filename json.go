package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// JSON as rpi reads and writes it without reflection on its hot paths:
// an object decoded once, in one pass, its members read by exact key on
// demand (rpc's commands and ACP's params both wrap it), the typed
// error a field that is missing or invalid gives, and the appenders that
// write strings and payloads as encoding/json would. Off those paths, a
// configuration file's JSON error in words (jsonError).

// A jsonAppender is a payload on a hot path that appends its own JSON,
// without reflection. What it appends must equal marshalJSON of the same
// value, byte for byte; TestAppendersMatchEncodingJSON and the fuzz tests
// check each one.
type jsonAppender interface {
	appendJSON(buf []byte) []byte
}

// jsonNull is an answer's data that is null in every shape. pi answers
// cycle_model and cycle_thinking_level with "data":null when there is
// nothing to cycle, where its commands that have no data leave "data"
// out (which rpi's pi shape does for a nil answer).
type jsonNull struct{}

func (jsonNull) appendJSON(buf []byte) []byte { return append(buf, "null"...) }

func (jsonNull) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

// appendPayload appends data's JSON: by its own appender when it has one,
// by encoding/json otherwise.
func appendPayload(buf []byte, data any) ([]byte, error) {
	if a, ok := data.(jsonAppender); ok {
		// A non-finite float is no JSON: encoding/json refuses it, and so
		// must the appenders (they write it as NaN or +Inf).
		if f, ok := data.(interface{ finiteJSON() bool }); !ok || f.finiteJSON() {
			return a.appendJSON(buf), nil
		}
	}
	return appendMarshal(buf, data)
}

// marshalJSON encodes v like the writer does: no HTML escaping.
func marshalJSON(v any) ([]byte, error) { return appendMarshal(nil, v) }

// appendMarshal appends v's JSON (no HTML escaping) to buf, straight from
// encoding/json's own buffer: a large value is not copied once more on
// its way (an answer of a few MiB goes out in several records).
func appendMarshal(buf []byte, v any) ([]byte, error) {
	w := appendWriter{buf}
	enc := json.NewEncoder(&w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(w.buf, []byte("\n")), nil
}

// appendWriter appends what is written to buf, leaving room for the
// few bytes that close a record, so that a large value is not copied
// again for them.
type appendWriter struct{ buf []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	if cap(w.buf)-len(w.buf) < len(p) {
		w.buf = slices.Grow(w.buf, len(p)+64)
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// appendJSONString appends s as a JSON string, escaped as encoding/json
// does with SetEscapeHTML(false): quotes, backslashes and control
// characters, U+2028 and U+2029; invalid UTF-8 becomes U+FFFD.
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		j, high := stringRun(s, i)
		if run := s[i:j]; high && (!utf8.ValidString(run) || strings.Contains(run, "\u2028") || strings.Contains(run, "\u2029")) {
			buf = appendEscapedRunes(buf, run)
		} else {
			buf = append(buf, run...)
		}
		if j == len(s) {
			break
		}
		switch c := s[j]; c {
		case '"', '\\':
			buf = append(buf, '\\', c)
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case '\t':
			buf = append(buf, '\\', 't')
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\f':
			buf = append(buf, '\\', 'f')
		default:
			buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i = j + 1
	}
	return append(buf, '"')
}

const hexDigits = "0123456789abcdef"

// appendEscapedRunes appends a run of s with no control character, quote
// or backslash: invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendEscapedRunes(buf []byte, run string) []byte {
	start := 0
	for i := 0; i < len(run); {
		r, size := utf8.DecodeRuneInString(run[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			buf = append(buf, run[start:i]...)
			buf = append(buf, `\ufffd`...)
			start = i + size
		case r == '\u2028' || r == '\u2029':
			buf = append(buf, run[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			start = i + size
		}
		i += size
	}
	return append(buf, run[start:]...)
}

// stringRun returns the index of the first byte from i on that a JSON
// string cannot hold as it is (a control character, '"' or '\\'), or
// len(s) when there is none, and whether a byte of a multi-byte UTF-8
// sequence came before it. It tests eight bytes at a time.
func stringRun[T string | []byte](s T, i int) (end int, high bool) {
	var seen uint64
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8] // one bounds check, and one load
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		if found := stringStops(x); found != 0 {
			at := bits.TrailingZeros64(found) / 8
			seen |= x & (1<<(8*at) - 1)
			return i + at, seen&everyByte80 != 0
		}
		seen |= x
	}
	high = seen&everyByte80 != 0
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == '"' || c == '\\':
			return i, high
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	return i, high
}

// stringStops marks, with its high bit, each byte of x (eight bytes of a
// string, the first in the low byte) that a JSON string cannot hold as it
// is: below 0x20, '"' or '\\'. A borrow can mark bytes after the first
// one marked, never before it: the lowest mark is always true.
func stringStops(x uint64) uint64 {
	quote, backslash := x^(everyByte01*'"'), x^(everyByte01*'\\')
	return ((x - everyByte01*0x20) | (quote - everyByte01) | (backslash - everyByte01)) &^ x & everyByte80
}

// A member is one key and its raw value, both slices of the line (the key
// unescaped into its own bytes when it had escapes).
// fields is a JSON object decoded once (scanObject), its members kept in
// line order; a field is read on demand, by its exact key (the last of a
// key given twice), and a missing or invalid one is a *fieldError that
// names it.
type fields struct {
	members []member  // the object's members in line order
	room    [4]member // members' first home: most objects have a few
}

type member struct {
	key, value []byte
}

// unquote decodes a valid JSON string into s, without encoding/json when
// it has no escapes.
func unquote(raw []byte, s *string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		*s = string(raw[1 : len(raw)-1])
		return true
	}
	return json.Unmarshal(raw, s) == nil
}

// maxScanDepth is how deep scanObject follows nested values; deeper lines
// go to encoding/json.
const maxScanDepth = 512

// objectMembers are the members of obj, a JSON object, by their exact
// names (as JSON.parse reads them): scanObject's, or, for an object
// nested deeper than it follows, encoding/json's (a map, which keeps the
// last of a name given twice, as JSON.parse does). nil when obj is no
// JSON object.
func objectMembers(obj []byte) []member {
	if members, ok := scanObject(obj, nil); ok {
		return members
	}
	var all map[string]json.RawMessage
	if len(obj) == 0 || json.Unmarshal(obj, &all) != nil {
		return nil
	}
	members := make([]member, 0, len(all))
	for k, v := range all {
		members = append(members, member{[]byte(k), v})
	}
	return members
}

// exactMember is the value of obj's member named key (the last, when it
// is given twice), by its exact name: objectMembers'.
func exactMember(obj []byte, key string) ([]byte, bool) {
	members := objectMembers(obj)
	for i := len(members) - 1; i >= 0; i-- {
		if string(members[i].key) == key {
			return members[i].value, true
		}
	}
	return nil, false
}

// scanObject splits a line holding one JSON object into its members, in
// one pass that also checks the whole line is valid JSON (the line is
// already valid UTF-8). ok is false for anything else.
// The members are appended to dst.
func scanObject(line []byte, dst []member) (members []member, ok bool) {
	members = dst
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return nil, false
	}
	i = skipSpace(line, i+1)
	if i < len(line) && line[i] == '}' {
		return nil, skipSpace(line, i+1) == len(line)
	}
	for {
		keyStart := i
		if i = skipString(line, i); i < 0 {
			return nil, false
		}
		key := line[keyStart+1 : i-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if json.Unmarshal(line[keyStart:i], &k) != nil {
				return nil, false
			}
			key = []byte(k)
		}
		if i = skipSpace(line, i); i >= len(line) || line[i] != ':' {
			return nil, false
		}
		i = skipSpace(line, i+1)
		valueStart := i
		if i = skipValue(line, i, 0); i < 0 {
			return nil, false
		}
		members = append(members, member{key, line[valueStart:i]})
		if i = skipSpace(line, i); i >= len(line) {
			return nil, false
		}
		switch line[i] {
		case ',':
			i = skipSpace(line, i+1)
		case '}':
			return members, skipSpace(line, i+1) == len(line)
		default:
			return nil, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value starting at b[i],
// or -1 when there is no valid value there.
func skipValue(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{' || c == '[':
		if depth >= maxScanDepth {
			return -1
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == end {
			return i + 1
		}
		for {
			if c == '{' {
				if i = skipString(b, i); i < 0 {
					return -1
				}
				if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
					return -1
				}
				i = skipSpace(b, i+1)
			}
			if i = skipValue(b, i, depth+1); i < 0 {
				return -1
			}
			if i = skipSpace(b, i); i >= len(b) {
				return -1
			}
			if b[i] == end {
				return i + 1
			}
			if b[i] != ',' {
				return -1
			}
			i = skipSpace(b, i+1)
		}
	case c == '-' || c >= '0' && c <= '9':
		return skipNumber(b, i)
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	}
	return -1
}

// skipString returns the index just past the JSON string at b[i], or -1.
func skipString(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for i++; i < len(b); i++ {
		i, _ = stringRun(b, i) // to the next quote, escape or control character, eight bytes at a time
		if i >= len(b) {
			return -1
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if i++; i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// skipNumber returns the index just past the JSON number at b[i], or -1.
func skipNumber(b []byte, i int) int {
	digits := func(i int) int {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return -1
		}
		return i
	}
	if b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if i = digits(i); i < 0 {
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if i = digits(i + 1); i < 0 {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i = digits(i); i < 0 {
			return -1
		}
	}
	return i
}

func skipLiteral(b []byte, i int, lit string) int {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return -1
	}
	return i + len(lit)
}

// A fieldError is a command field that is missing, or present but not
// what it must be. Its text is the failure the rpc wire answers (docs/protocol.md);
// another wire can tell it from other failures (ACP: -32602).
type fieldError struct {
	name    string // the field, as the command spells it ("spec.cwd" inside an object)
	want    string // what it must be
	missing bool
}

func (e *fieldError) Error() string {
	if e.missing {
		return "Missing field " + e.name + ": must be " + e.want
	}
	return "Invalid field " + e.name + ": must be " + e.want
}

func missing(name, want string) error { return &fieldError{name, want, true} }

func invalid(name, want string) error { return &fieldError{name, want, false} }

// field is the raw value of the member called name; as with any JSON
// object decoded in Go, the last of duplicate keys wins.
func (r *fields) field(name string) (json.RawMessage, bool) {
	for i := len(r.members) - 1; i >= 0; i-- {
		if string(r.members[i].key) == name {
			return r.members[i].value, true
		}
	}
	return nil, false
}

// keys are the object's member names, in line order.
func (r *fields) keys() []string {
	keys := make([]string, len(r.members))
	for i, m := range r.members {
		keys[i] = string(m.key)
	}
	return keys
}

func (r *fields) has(name string) bool {
	raw, ok := r.field(name)
	return ok && string(raw) != "null"
}

// decodeField decodes a present field into v, which must be of kind want;
// the keys of its objects name v's fields exactly, as for JSON.parse
// (unmarshalExact).
func (r *fields) decodeField(name, want string, v any) error {
	raw, _ := r.field(name)
	if err := unmarshalExact(raw, v); err != nil {
		return invalid(name, want)
	}
	return nil
}

func (r *fields) str(name string) (string, error) {
	if !r.has(name) {
		return "", missing(name, "a string")
	}
	var s string
	if raw, _ := r.field(name); raw[0] != '"' || !unquote(raw, &s) {
		return "", invalid(name, "a string")
	}
	return s, nil
}

func (r *fields) optStr(name string) (string, error) {
	if !r.has(name) {
		return "", nil
	}
	return r.str(name)
}

func (r *fields) boolean(name string) (bool, error) {
	if !r.has(name) {
		return false, missing(name, "true or false")
	}
	var b bool
	return b, r.decodeField(name, "true or false", &b)
}

// optBool reads an optional boolean (otherwise when absent).
func (r *fields) optBool(name string, otherwise bool) (bool, error) {
	if !r.has(name) {
		return otherwise, nil
	}
	return r.boolean(name)
}

// enum reads a required string field that must be one of values.
func (r *fields) enum(name string, values []string) (string, error) {
	want := "one of " + strings.Join(values, ", ")
	if !r.has(name) {
		return "", missing(name, want)
	}
	var s string
	if err := r.decodeField(name, want, &s); err != nil || !slices.Contains(values, s) {
		return "", invalid(name, want)
	}
	return s, nil
}

// optDuration reads an optional timeout in unit (time.Second for a field
// in seconds, time.Millisecond for one in ms): absent is 0 (no timeout);
// a present one must lie between 1 ms and a day.
func (r *fields) optDuration(name string, unit time.Duration) (time.Duration, error) {
	if !r.has(name) {
		return 0, nil
	}
	want := "a number of milliseconds from 1 to 86400000"
	if unit == time.Second {
		want = "a number of seconds from 0.001 to 86400"
	}
	var f float64
	if err := r.decodeField(name, want, &f); err != nil {
		return 0, err
	}
	d := f * float64(unit)
	if math.IsNaN(d) || d < float64(time.Millisecond) || d > float64(24*time.Hour) {
		return 0, invalid(name, want)
	}
	return time.Duration(d), nil
}

// optInt reads an optional whole number between lo and hi (hi < lo: no
// upper bound but what an int holds).
func (r *fields) optInt(name string, lo, hi, otherwise int) (int, error) {
	n, err := r.optWhole(name, int64(lo), int64(hi), int64(otherwise), math.MaxInt)
	return int(n), err
}

// optInt64 is optInt for a number that may pass a 32-bit int (a cursor
// into a stream), an int64 on every platform.
func (r *fields) optInt64(name string, lo, hi, otherwise int64) (int64, error) {
	return r.optWhole(name, lo, hi, otherwise, math.MaxInt64)
}

// optWhole is optInt and optInt64: top bounds a number with no upper
// bound of its own (hi < lo).
func (r *fields) optWhole(name string, lo, hi, otherwise, top int64) (int64, error) {
	if !r.has(name) {
		return otherwise, nil
	}
	want := fmt.Sprintf("a whole number from %d to %d", lo, hi)
	if hi < lo {
		hi, want = top, fmt.Sprintf("a whole number, at least %d", lo)
	}
	var n int64
	if err := r.decodeField(name, want, &n); err != nil || n < lo || n > hi {
		return 0, invalid(name, want)
	}
	return n, nil
}

// optStrings reads an optional array of strings (nil when absent).
func (r *fields) optStrings(name string) ([]string, error) {
	if !r.has(name) {
		return nil, nil
	}
	list := []string{}
	if err := r.decodeField(name, "an array of strings", &list); err != nil {
		return nil, err
	}
	return list, nil
}

const everyByte01, everyByte80 = 0x0101010101010101, 0x8080808080808080

// appendJSONStrings appends a string array; nil is null.
func appendJSONStrings(buf []byte, list []string) []byte {
	if list == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, '[')
	for i, s := range list {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendJSONString(buf, s)
	}
	return append(buf, ']')
}

// base64Pairs maps 12 bits to their two characters of standard base64,
// the first in the low byte; built at first use, not at startup.
var base64Pairs = lazy[*[4096]uint16]{build: func() *[4096]uint16 {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var t [4096]uint16
	for v := range t {
		t[v] = uint16(alphabet[v>>6]) | uint16(alphabet[v&63])<<8
	}
	return &t
}}

// appendBase64 appends src in standard base64 with padding, as
// base64.StdEncoding.AppendEncode does, about twice as fast: it encodes 6
// bytes at a time, two characters per table look-up.
func appendBase64(dst, src []byte) []byte {
	n := base64.StdEncoding.EncodedLen(len(src))
	dst = slices.Grow(dst, n)
	out := dst[len(dst) : len(dst)+n]
	pairs := base64Pairs.get()
	for len(src) >= 8 { // 8 bytes are loaded, 6 encoded
		v := binary.BigEndian.Uint64(src)
		binary.LittleEndian.PutUint64(out, uint64(pairs[v>>52])|uint64(pairs[v>>40&0xfff])<<16|
			uint64(pairs[v>>28&0xfff])<<32|uint64(pairs[v>>16&0xfff])<<48)
		src, out = src[6:], out[8:]
	}
	base64.StdEncoding.Encode(out, src)
	return dst[:len(dst)+n]
}

// jsonError is a failure to decode data, a file a person wrote, as that
// person reads it: where it is (line and column) and, for a value of the
// wrong type, its path in the file and the type expected in words, not
// Go's: "line 3, column 40: providers.foo.models[0].contextWindow:
// expected a whole number, got a string". A string found is never
// quoted, since it may be a key.
func jsonError(data []byte, err error) error {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax) && syntax.Offset > 0:
		return fmt.Errorf("%s: %v", lineColumn(data, syntax.Offset), err)
	case errors.As(err, &typeErr):
		return fmt.Errorf("%s: %s", lineColumn(data, typeErr.Offset), jsonMismatch(data, typeErr))
	}
	return err
}

// lineColumn is where offset is in data, as "line L, column C".
func lineColumn(data []byte, offset int64) string {
	before := data[:min(int(max(offset, 0)), len(data))]
	return fmt.Sprintf("line %d, column %d", bytes.Count(before, []byte("\n"))+1, len(before)-bytes.LastIndexByte(before, '\n')-1)
}

// jsonMismatch says what a type error found in data, and where:
// "models[0].contextWindow: expected a whole number, got a string" (no
// path for the value at the top).
func jsonMismatch(data []byte, typeErr *json.UnmarshalTypeError) string {
	path, found := jsonValueAt(data, typeErr.Offset)
	if found == "" { // data is not the document the error is about
		found = typeErr.Value
	}
	if path != "" {
		path += ": "
	}
	return path + "expected " + jsonTypeWords(typeErr.Type) + ", got " + found
}

// jsonValueAt is the path (providers.foo.models[0].contextWindow) of the
// value in data that ends at offset, or whose first byte ends there (an
// object or array), as encoding/json's type errors count offsets, and
// that value in words: "a string", "an object", "an array", a number or
// true or false as written. found is "" when no value is there.
func jsonValueAt(data []byte, offset int64) (path, found string) {
	type level struct {
		array bool
		key   string // an object's member being read
		index int    // an array's element being read
		inKey bool   // an object's next token is a key (or its end)
	}
	var levels []level
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	ended := func() { // a value ended: the next one is the next element or member
		if n := len(levels); n > 0 {
			if levels[n-1].array {
				levels[n-1].index++
			} else {
				levels[n-1].inKey = true
			}
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", ""
		}
		top := len(levels) - 1
		if top >= 0 && levels[top].inKey {
			if key, ok := tok.(string); ok {
				levels[top].key, levels[top].inKey = key, false
				continue
			}
		}
		if tok == json.Delim('}') || tok == json.Delim(']') {
			levels = levels[:top]
			ended()
			continue
		}
		if dec.InputOffset() >= offset {
			var b strings.Builder
			for _, l := range levels {
				switch {
				case l.array:
					fmt.Fprintf(&b, "[%d]", l.index)
				case isPathWord(l.key) && b.Len() > 0:
					b.WriteString("." + l.key)
				case isPathWord(l.key):
					b.WriteString(l.key)
				default:
					fmt.Fprintf(&b, "[%q]", l.key)
				}
			}
			return b.String(), jsonFoundWords(tok)
		}
		switch tok {
		case json.Delim('{'):
			levels = append(levels, level{inKey: true})
		case json.Delim('['):
			levels = append(levels, level{array: true})
		default:
			ended()
		}
	}
}

// isPathWord reports whether a path shows key after a dot (letters,
// digits, _ and -); any other key is quoted.
func isPathWord(key string) bool {
	return key != "" && strings.Trim(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == ""
}

// jsonFoundWords is a token of a JSON document in words.
func jsonFoundWords(tok json.Token) string {
	switch tok := tok.(type) {
	case json.Delim:
		if tok == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return tok.String()
	case bool:
		return fmt.Sprint(tok)
	}
	return "null"
}

// jsonTypeWords is what a value of Go type t is in a JSON file, in words:
// "a whole number", "an array of strings".
func jsonTypeWords(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if of := jsonElementWords(t.Elem()); of != "" {
			return "an array of " + of
		}
		return "an array"
	case reflect.Map:
		if of := jsonElementWords(t.Elem()); of != "" {
			return "an object of " + of
		}
		return "an object"
	case reflect.Struct:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another value"
}

// jsonElementWords is what each element of an array or object of Go type
// t is, in the plural ("strings"); "" where that is not simply said.
func jsonElementWords(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "strings"
	case reflect.Int, reflect.Int64:
		return "whole numbers"
	case reflect.Float64:
		return "numbers"
	case reflect.Bool:
		return "true or false"
	case reflect.Struct, reflect.Map:
		return "objects"
	}
	return ""
}

// jsonObject is a JSON object whose members keep their order and their
// values as written (the last of a name that repeats, as JavaScript reads it).
type jsonObject struct {
	names  []string
	values map[string]json.RawMessage
}

func (o *jsonObject) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("not a JSON object")
	}
	o.names, o.values = nil, map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		o.set(t.(string), v)
	}
	_, err := dec.Token()
	return err
}

func (o *jsonObject) MarshalJSON() ([]byte, error) {
	buf := []byte{'{'}
	for i, name := range o.names {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendJSONString(buf, name)
		buf = append(buf, ':')
		buf = append(buf, o.values[name]...)
	}
	return append(buf, '}'), nil
}

// get is the member's value; nil when there is none.
func (o *jsonObject) get(name string) json.RawMessage {
	if o == nil {
		return nil
	}
	return o.values[name]
}

func (o *jsonObject) set(name string, v json.RawMessage) {
	if o.values == nil {
		o.values = map[string]json.RawMessage{}
	}
	if _, ok := o.values[name]; !ok {
		o.names = append(o.names, name)
	}
	o.values[name] = v
}

func (o *jsonObject) del(names ...string) {
	for _, name := range names {
		if _, ok := o.values[name]; ok {
			delete(o.values, name)
			o.names = slices.DeleteFunc(o.names, func(n string) bool { return n == name })
		}
	}
}

// decodeRPCError reads a JSON-RPC answer's error object, strictly: its
// code a whole number (not a string of one, nor a fraction) within 64
// bits, its message a string; ok is false for anything else. ACP's
// codes are narrower (decodeACPError).
func decodeRPCError(raw json.RawMessage) (code int64, message string, ok bool) {
	var e struct {
		Code    json.RawMessage `json:"code"`
		Message *string         `json:"message"`
	}
	if json.Unmarshal(raw, &e) != nil || len(e.Code) == 0 || e.Code[0] == '"' || e.Message == nil {
		return 0, "", false
	}
	n, err := strconv.ParseInt(string(e.Code), 10, 64)
	return n, *e.Message, err == nil
}
