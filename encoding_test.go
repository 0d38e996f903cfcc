package main

// The wire's fast paths checked against encoding/json: the one-pass
// envelope scan against json.Unmarshal into a map, and every string and
// payload rpi appends itself against json.Marshal of the same value.

import (
	"bytes"
	"encoding/json"
	"maps"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeRequest: scanObject accepts exactly the lines that are one
// JSON object, and finds the members encoding/json finds, the last of
// duplicate keys winning.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"id":"1","type":"get_state"}`,
		` { "type" : "prompt" , "message" : "hi \"there\" \u00e9\ud800" , "images":[{"a":[1,-2.5e+3,true,false,null]}] } `,
		`{"type":"a","type":"b","ty\u0070e":"c"}`,
		`{}`, `[]`, `null`, `{"a":01}`, `{"a":1.}`, `{"a":"\x"}`, `{"a":1,}`, `{"a" 1}`, `{"a":1}x`,
		`{"a":{"b":[{"c":{}}]}}`, `{"a":"` + "\t" + `"}`, `{"a":-}`, `{"a":1e}`, `{"a":tru}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if !utf8.Valid(line) {
			return
		}
		members, ok := scanObject(line)
		var fields map[string]json.RawMessage
		err := json.Unmarshal(line, &fields)
		if !ok {
			if err == nil && fields != nil && bytes.Count(line, []byte("{"))+bytes.Count(line, []byte("[")) <= maxScanDepth {
				t.Fatalf("scanObject refused %q, which encoding/json takes", line)
			}
			return
		}
		if err != nil || fields == nil {
			t.Fatalf("scanObject took %q, which encoding/json refuses: %v", line, err)
		}
		got := map[string]json.RawMessage{}
		for _, m := range members {
			got[string(m.key)] = m.value
		}
		if !maps.EqualFunc(got, fields, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Fatalf("%q: scanObject found %q, encoding/json %q", line, got, fields)
		}
	})
}

// FuzzAppendJSONString: appendJSONString writes what encoding/json writes
// with SetEscapeHTML(false), for any bytes.
func FuzzAppendJSONString(f *testing.F) {
	for _, seed := range []string{"", "plain", "quote \" back \\ nl \n cr \r tab \t", "\x00\x1f\x7f", "<>&", "\u2028\u2029", "\xff\xfe bad", "é中😀"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := marshalJSON(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendJSONString(%q) = %s, encoding/json gives %s", s, got, want)
		}
	})
}
