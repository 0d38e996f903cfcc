package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// hostileStrings are strings that JSON must escape, or that encoding/json
// rewrites: quotes, backslashes, control characters, invalid UTF-8,
// U+2028/U+2029, HTML's <>& (not escaped by rpi), the empty string.
var hostileStrings = []string{
	"", "plain", `"quoted"`, `back\slash`, "\x00\x01\x1f\x7f", "\b\f\n\r\t",
	"\u2028\u2029", "<script>&amp;</script>", "\xff", "a\xc3", "\xc3(", "\xed\xa0\x80",
	"\xf4\x90\x80\x80", "héllo wörld 日本語 🎉", "\ufffd", strings.Repeat("x\"\n", 100),
}

// TestProcessAppendersMatchEncodingJSON checks that the process and bash
// payloads' appendJSON writes exactly what marshalJSON does.
func TestProcessAppendersMatchEncodingJSON(t *testing.T) {
	var values []jsonAppender
	ptrs := []*string{nil}
	for _, s := range hostileStrings {
		ptrs = append(ptrs, &s)
	}
	// pi's shape echoes the request's id as sent: a JSON string or number.
	rawIDs := []json.RawMessage{nil, json.RawMessage("7"), json.RawMessage("-1.5e3")}
	for _, s := range hostileStrings {
		raw, _ := marshalJSON(s)
		rawIDs = append(rawIDs, raw)
	}
	for i, s := range hostileStrings {
		for _, id := range ptrs {
			values = append(values, bashUpdate{RequestID: id, Stream: hostileStrings[(i+1)%len(hostileStrings)], Chunk: s})
		}
		for _, id := range rawIDs {
			values = append(values, piBashUpdate{ID: id, Delta: s})
		}
	}
	datas := [][]byte{nil, {}, {0}, {0xff, 0xfe}, []byte("abc"), []byte("abcd"), []byte("\xff\x00<>&\u2028"), bytes.Repeat([]byte{0xfb, 0xff, 0xbf}, 1000)}
	cursors := []int64{0, 1, -1, 1 << 40, -1 << 63, 1<<63 - 1}
	for i, s := range hostileStrings {
		for j, data := range datas {
			values = append(values, processOutputData{ID: s, OwnerID: hostileStrings[(i+j)%len(hostileStrings)],
				Stream: hostileStrings[(i+2*j)%len(hostileStrings)], StartCursor: cursors[(i+j)%len(cursors)],
				Cursor: cursors[j%len(cursors)], Data: data})
		}
	}
	for _, v := range values {
		want, err := marshalJSON(v)
		if err != nil {
			t.Fatalf("%#v: %v", v, err)
		}
		prefix := []byte("prefix")
		got := v.appendJSON(prefix)
		if !bytes.Equal(got[:len(prefix)], []byte("prefix")) || !bytes.Equal(got[len(prefix):], want) {
			t.Errorf("%#v:\nappendJSON  %s\nmarshalJSON %s", v, got, want)
		}
	}
}

// TestAppendBase64 checks appendBase64 against encoding/base64 for every
// length up to a few blocks and every byte value.
func TestAppendBase64(t *testing.T) {
	src := make([]byte, 300)
	for i := range src {
		src[i] = byte(i*151 + 7)
	}
	for n := range len(src) + 1 {
		want := base64.StdEncoding.AppendEncode([]byte("x"), src[:n])
		if got := appendBase64([]byte("x"), src[:n]); !bytes.Equal(got, want) {
			t.Fatalf("%d bytes:\ngot  %s\nwant %s", n, got, want)
		}
	}
}
