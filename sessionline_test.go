package main

// The session line decoder and the message appenders checked against
// encoding/json: what the fast path takes it decodes exactly as
// json.Unmarshal and decodeMessageSlow do, and every message it decodes is
// written again as marshalJSON writes it.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"
)

// sessionLineSeeds are lines of every kind: the fixtures' session files,
// and lines built to hit each corner of the fast path.
func sessionLineSeeds(t testing.TB) []string {
	var lines []string
	files, _ := filepath.Glob("testdata/sessions/*.jsonl")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(strings.TrimSpace(string(data)), "\n")...)
	}
	head := `{"type":"message","id":"a1","parentId":"a0","timestamp":"2026-03-15T22:40:20.000Z","message":`
	for _, msg := range []string{
		`{"role":"user","content":[{"type":"text","text":"esc \" \\ \/ \b\f\n\r\t \u00e9 \u2028 \ud83d\ude00 \ud800 \udc00x \ud800\u0041 é 中"}],"timestamp":1}`,
		`{"role":"user","content":"plain string","timestamp":-0}`,
		`{"role":"user","content":null,"timestamp":null}`,
		`{"role":"user","content":[],"timestamp":9007199254740993}`,
		`{"role":"user","content":[null]}`,
		`{"role":"user","content":[{"type":"text","text":"a"}],"Content":"b"}`,
		`{"role":"user","content":"a","content":"b"}`,
		`{"role":"user","timestamp":1.0}`,
		`{"role":"user","timestamp":1e3}`,
		`{"role":"user","timestamp":"1"}`,
		`{"role":"user","timestamp":99999999999999999999}`,
		`{"role":"user","x":{"deep":[1,2,{"a":null}]},"ROLE":"assistant"}`,
		`{"role":"user","conte\u006et":"sneaky"}`,
		`{"role":"user","ſummary":1}`,
		`{"role":"user","content":[{"type":"text","text":"a","Text":"b"}]}`,
		`{"content":[],"role":"user"}`,
		`{"role":"assistant","content":[{"type":"thinking","thinking":"t","thinkingSignature":"s"},{"type":"toolCall","id":"c1","name":"read","arguments":{ "path" : "a.txt" },"thoughtSignature":"g"},{"type":"image","data":"AAA=","mimeType":"image/png"},{"type":"text","text":"x","textSignature":"m"},{"type":"redacted","extra":[1]}],"api":"anthropic-messages","provider":"anthropic","model":"m","usage":{"input":10,"output":5,"cacheRead":1,"cacheWrite":2,"totalTokens":18,"cost":{"input":0.00003,"output":7.5e-05,"cacheRead":0,"cacheWrite":1E+2,"total":0.000105}},"stopReason":"error","errorMessage":"boom","timestamp":1773614422000}`,
		`{"role":"assistant","content":[{"type":"thinking","thinking":"[Reasoning redacted]","thinkingSignature":"RW5j","redacted":true},{"type":"thinking","thinking":"t","redacted":false},{"type":"text","text":"x","redacted":true},{"type":"thinking","thinking":"t","redacted":null}]}`,
		`{"role":"assistant","content":[{"redacted":true,"thinkingSignature":"RW5j","type":"thinking","thinking":"[Reasoning redacted]"},{"type":"thinking","REDACTED":true,"thinkingSignature":"s"},{"type":"thinking","redacted":"true"},{"type":"thinking","redacted":1},{"type":"thinking","redacted":true,"redacted":false},{"type":"thinking","redacted":true},{"type":"toolCall","id":"c","redacted":true,"arguments":{}},{"type":"image","data":"AAA=","mimeType":"image/png","redacted":true},{"type":"thinking","thinking":"t","thoughtSignature":"g","redacted":true}]}`,
		`{"role":"assistant","content":"not blocks"}`,
		`{"role":"assistant","usage":null,"content":[{"type":"toolCall","arguments":null}]}`,
		`{"role":"assistant","usage":{"input":1.5}}`,
		`{"role":"assistant","usage":{"cost":{"total":1e999}}}`,
		// pi 1.6's response details: on an answer, a tool result's durationMs, and where no role has them.
		`{"role":"assistant","content":[],"api":"a","provider":"p","model":"m","usage":{},"stopReason":"stop","timestamp":1,"responseId":"r","responseModel":"m2","rawStopReason":"end_turn","durationMs":12,"thinkingLevel":"high"}`,
		`{"role":"assistant","content":[],"responseId":"","durationMs":null,"thinkingLevel":null}`,
		`{"role":"assistant","content":[],"durationMs":1.0}`, `{"role":"assistant","durationMs":1e3}`, `{"role":"assistant","durationMs":1.5}`,
		`{"role":"assistant","responseId":"a","responseId":"b","DurationMs":2,"durationMs":null}`,
		`{"role":"assistant","content":"not blocks","responseId":"r"}`,
		`{"role":"toolResult","content":[],"durationMs":7}`, `{"role":"toolResult","durationMs":7.0}`, `{"role":"toolResult","durationMs":7e0,"responseId":"r"}`,
		`{"role":"user","content":[],"durationMs":1.5,"responseId":"r"}`, `{"role":"bashExecution","command":"ls","thinkingLevel":"high","durationMs":3}`,
		`{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"out"}],"details":{"z":1,"a":[true,false,null,"s",{"b":-2.5e-7}],"m":{}},"isError":true,"timestamp":5}`,
		`{"role":"toolResult","details":null,"isError":null}`,
		`{"role":"toolResult","details":{"k":"v","k":"w"}}`,
		`{"role":"toolResult","details":{"\u006b":"escaped key"}}`,
		`{"role":"bashExecution","command":"ls","output":"a\nb","exitCode":2,"cancelled":false,"truncated":true,"fullOutputPath":"/tmp/x","excludeFromContext":true,"timestamp":7}`,
		`{"role":"bashExecution","command":"ls","exitCode":null}`,
		`{"role":"bashExecution","exitCode":3000000000}`,
		`{"role":"compactionSummary","summary":"s","tokensBefore":120,"timestamp":3}`,
		`{"role":"branchSummary","summary":"s","fromId":"f","timestamp":3}`,
		`{"role":"custom","customType":"x","content":"c","display":true}`,
		`{"role":"hookMessage","content":"c"}`,
		`{"role":5}`, `{}`, `[]`, `"text"`, `null`, `7`,
		`{"role":"user","content":[{"type":"text","text":"bad utf8 ` + "\xff\xfe" + ` end"}]}`,
		`{"role":"user","content":[{"type":"text","text":"ctl ` + "\x01" + `"}]}`,
		`{"role":"user","content":[{"type":"text","text":"esc\n then bad ` + "\xff\xe2\x80" + ` and \t é ` + "\xed\xa0\x80" + ` \u2028 ` + "\u2029" + ` end"}],"timestamp":1}`,
		`{"role":"user",}`, `{"role":"user"`,
		// One content block per 24 bytes of the message at most (bytesPerBlock): 30 bytes hold one, 33 not two.
		`{"role":"user","content":[{}]}`, `{"role":"user","content":[{},{}]}`, `{"role":"assistant","content":[{},{}]}`,
		`{"role":"toolResult","content":[{},{}]}`, `{"role":"user","content":[{"type":"text"},{"type":"text"},{"type":"text"},{"type":"text"}]}`,
		`{"role":"user","content":[{"type":"text","text":""},{"type":"text","text":""},{"type":"text","text":""}]}`,
		`{"role":"assistant","content":[{"type":"toolCall","id":"c","name":"bash","arguments":{"command":"ls ` + "\xff" + `"}}]}`,
		`{"role":"assistant","content":[{"type":"toolCall","id":"c","name":"bash","arguments":{"command":"ls ` + "ÿþ" + `"}}]}`,
		`{"role":"toolResult","details":{"b":"` + "ÿ" + `","a":[1.0,1e3,"é\/"]}}`,
		`{"role":"toolResult","details":{"b":1,"a":{"d":2,"c":3,"d":4}},"content":[]}`,
		`{"role":"toolResult","details":[1e400]}`, `{"role":"toolResult","details":{"a":12345678901234567890}}`,
		`{"role":"toolResult","details":` + strings.Repeat("[", 520) + strings.Repeat("]", 520) + `}`,
		`{"role":"mystery","text":"` + "ÿ" + `"}`,
	} {
		lines = append(lines, head+msg+"}")
	}
	lines = append(lines,
		`{"type":"compaction","id":"c","parentId":null,"timestamp":"t","summary":"s","firstKeptEntryId":"a","tokensBefore":42,"details":{"readFiles":[]}}`,
		`{"type":"custom_message","id":"c","parentId":"p","timestamp":"t","customType":"x","content":[{"type":"text","text":"hi"}],"display":true}`,
		`{"type":"custom_message","id":"c","content":null}`,
		`{"type":"custom_message","id":"c","content":[{"type":"text","text":"`+"\xff"+`"}],"customType":"x"}`,
		`{"type":"custom_message","id":"c","content":[{"type":"text","text":"`+"ÿ"+`"}],"customType":"x"}`,
		`{"type":"custom_message","id":"c","content":"`+"ÿ"+`","Content":"x"}`,
		head+`{"role":"user","content":[],"x":"`+"ÿ"+`"},"y":"`+"þ"+`"}`,
		`{"type":"model_change","id":"m","parentId":"p","provider":"p","modelId":"m","provider":"q"}`,
		`{"type":"x","Type":"y"}`, `{"type":"x","iD":"y"}`, `{"type":"x","parentId":5}`, `{"type":"x","tokensBefore":1.5}`,
		// Keys that name a field only when case is ignored, which name
		// none (as for JSON.parse).
		`{"type":"message","ID":"z","id":"a","parentId":"p","ParentId":null,"timestamp":"t","message":{"Role":"assistant","role":"user","content":"one","CONTENT":"x","timestamp":1,"Timestamp":2}}`,
		head+`{"role":"assistant","content":[{"type":"text","text":"x","TEXT":"y"},{"type":"thinking","thinKing":"k","thinking":"t"}],"api":"a","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","ſtopReason":"error","timestamp":4}}`,
		`{"type":"session_info","id":"i","parentId":null,"timestamp":"t","name":"n","Name":"m","NAME":"o"}`,
		`{"type":"compaction","id":"c","parentId":null,"timestamp":"t","summary":"s","firstKeptEntryId":"a","tokensBefore":4.2e1}`,
		head+`{"role":"user","content":[{"type":"text","text":"plain \"q\"\n\t\u0001 é"}],"timestamp":1}}`,
		head+`{"role":"user","content":[{"type":"text","text":"\u00e9"}],"timestamp":1}}`,
		head+`{"role":"user","content":[{"type":"text","text":"a\/b"}],"timestamp":1}}`,
		head+`{"role":"user","content":[{"type":"text","text":"\u001B"}],"timestamp":1}}`,
		head+`{"role":"user","content":[{"type":"text","text":"\u000a"}],"timestamp":1}}`,
		head+`{"role":"user","content":[{"type":"text","text":"\u2028 and `+" "+`"}],"timestamp":1}}`,
		head+`{"role":"user","content":[{"type":"text","text":"`+" "+`"}],"timestamp":1}}`,
		head+`{"role":"user","content":[{"type":"text","text":"\u001f"}],"timestamp":1}}`,
		head+`{"role":"assistant","content":[{"type":"thinking","thinking":"t\n","thinkingSignature":"s"},{"type":"image","data":"AA\/A","mimeType":"image/png"},{"type":"text","text":"x","textSignature":"m"}],"api":"a","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0.00003,"output":0,"cacheRead":0,"cacheWrite":0,"total":0.00003}},"stopReason":"stop","timestamp":4}}`,
		head+`{"role":"user","content":[{"text":"swapped","type":"text"}],"timestamp":1}}`,
		head+`{"role":"user","content":[{"type":"thinking","text":"not written","thinking":"t"}],"timestamp":1}}`,
		`{"type":"message","id":"a","message":{"role":"user"}} trailing`, ` {"type":"message"} `, `{"type":"message","id":"a"`,
		`{"type":"message","message":{"role":"user","content":[{"type":"text","text":"`+strings.Repeat("[", 600)+`"}]},"x":`+strings.Repeat("[", 600)+strings.Repeat("]", 600)+`}`,
	)
	return lines
}

// checkDecodeEntry fails when the fast path takes line and gives anything
// other than encoding/json with keys matched exactly (unmarshalExact;
// reading a whole number written 1.0 or 1e3 as
// the slow path reads it: plainWholeNumbers), or when keepLine drops a
// line that appendMessageLine does not write again byte for byte.
func checkDecodeEntry(t *testing.T, line []byte) (fast bool) {
	var again jsonIn
	if e, err := decodeEntry(line, &again); err == nil {
		// Keys are matched exactly, as JSON.parse matches them: a key
		// that differs from "id" or "type" only in case names neither.
		for name, got := range map[string]string{"type": e.Type, "id": e.ID} {
			var s string
			if v, ok := exactMember(line, name); ok && v[0] == '"' && utf8.Valid(v) && unquote(v, &s) && s != got {
				t.Fatalf("%q: %s read as %q, but the line's %s is %q", line, name, got, name, s)
			}
		}
		e.keepLine(line, &again)
		if written, _ := e.appendMessageLine(nil); e.raw == nil && !bytes.Equal(written, line) && !sameValueByJSON(t, line, written) {
			t.Fatalf("keepLine dropped %q, which is written again as %q", line, written)
		}
	}
	var d jsonIn
	got := &sessionEntry{}
	if !d.entry(line, got) {
		return false
	}
	want := &sessionEntry{}
	withMessage := struct {
		*sessionEntry
		entryMore
		Message json.RawMessage `json:"message"`
	}{sessionEntry: want}
	if err := unmarshalExact(plainWholeNumbers(line, entryInts, false), &withMessage); err != nil {
		t.Fatalf("the fast path took %q, which encoding/json refuses: %v", line, err)
	}
	want.msg, want.msgSize = decodeMessageSlow(withMessage.Message), len(withMessage.Message)
	withMessage.entryMore.Content, _ = validRaw(withMessage.entryMore.Content) // bytes not UTF-8 as U+FFFD
	if !reflect.DeepEqual(*got.info(), withMessage.entryMore) {
		t.Fatalf("%q:\nfast path     %#v\nencoding/json %#v", line, *got.info(), withMessage.entryMore)
	}
	got.more = nil // compared above
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\nfast path     %#v\n  message %#v\nencoding/json %#v\n  message %#v", line, got, got.msg, want, want.msg)
	}
	return true
}

// TestSharedStrings: in a file of many entries, the names that come back
// from line to line (an entry's type, a message's role, a block's type)
// are one string, and a parentId that is the id of the entry before
// points at it; one written with escapes, or naming another entry, is
// read as it says.
func TestSharedStrings(t *testing.T) {
	line := func(id, parent string) string {
		return `{"type":"message","id":"` + id + `","parentId":` + parent + `,"timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"x"}],"timestamp":1}}` + "\n"
	}
	part := readEntryPart(strings.NewReader(line("a1", "null")+line("b2", `"a1"`)+line("c3", `"\u0062\u0032"`)+line("d4", `"a1"`)), true)
	e := part.entries
	if len(e) != 4 {
		t.Fatalf("read %d entries, want 4", len(e))
	}
	if e[1].ParentID != &e[0].ID {
		t.Errorf("b2's parentId is not a1's id")
	}
	if *e[2].ParentID != "b2" || *e[3].ParentID != "a1" || e[3].ParentID == &e[2].ID {
		t.Errorf("parentIds read %q, %q", *e[2].ParentID, *e[3].ParentID)
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	for _, x := range e[1:] {
		m, n := x.msg.(*userMessage), e[0].msg.(*userMessage)
		if !same(x.Type, e[0].Type) || !same(m.Role, n.Role) || !same(m.Content[0].Type, n.Content[0].Type) {
			t.Errorf("%s: its names are copies", x.ID)
		}
		if x.raw != nil {
			t.Errorf("%s keeps its line", x.ID)
		}
	}
}

// TestDecodeEntryMatchesEncodingJSON: every seed line is decoded as
// encoding/json decodes it, and the lines rpi and pi write take the fast
// path.
func TestDecodeEntryMatchesEncodingJSON(t *testing.T) {
	taken := 0
	for _, line := range sessionLineSeeds(t) {
		if checkDecodeEntry(t, []byte(line)) {
			taken++
		}
	}
	for _, line := range []string{
		`{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"line\n\"q\" é"}],"timestamp":1}}`,
		`{"type":"session_info","id":"a","parentId":"b","timestamp":"t","name":"n"}`,
		`{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"assistant","content":[{"type":"thinking","thinking":"[Reasoning redacted]","thinkingSignature":"RW5j","redacted":true},{"type":"toolCall","id":"toolu_1","name":"read","arguments":{"path":"a.txt"}}],"api":"anthropic-messages","provider":"anthropic","model":"m","usage":{"input":10,"output":5,"cacheRead":1,"cacheWrite":2,"totalTokens":18,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse","timestamp":1773614422000}}`,
		// pi 1.6's reasoning_details, the JSON kept as a thinkingSignature.
		`{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"assistant","content":[{"type":"thinking","thinking":"Plan.","thinkingSignature":"[{\"type\":\"reasoning.text\",\"text\":\"Plan.\\n\\\"a\\\"\",\"format\":\"google-gemini-v1\",\"index\":0},{\"type\":\"reasoning.encrypted\",\"data\":\"CiQB\",\"id\":\"tool_1\",\"format\":\"google-gemini-v1\",\"index\":0}]"},{"type":"toolCall","id":"tool_1","name":"read","arguments":{"path":"a.txt"}}],"api":"openai-completions","provider":"openrouter","model":"google/gemini-3-pro-preview","usage":{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":15,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse","timestamp":1773614422000}}`,
	} {
		if !checkDecodeEntry(t, []byte(line)) {
			t.Errorf("the fast path declined %s", line)
		}
	}
	if taken < 40 {
		t.Errorf("the fast path took only %d seed lines", taken)
	}
}

// FuzzDecodeEntry: whatever line the fast path takes, it decodes as
// encoding/json does.
func FuzzDecodeEntry(f *testing.F) {
	for _, line := range sessionLineSeeds(f) {
		f.Add([]byte(line))
	}
	_, forms, _ := formLines(f)
	for _, line := range forms {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkDecodeEntry(t, line) })
}

// FuzzDecodeMessage: decodeMessage (fast path first) gives what
// decodeMessageSlow gives, for any bytes.
func FuzzDecodeMessage(f *testing.F) {
	for _, line := range sessionLineSeeds(f) {
		if _, msg, ok := strings.Cut(line, `"message":`); ok {
			f.Add([]byte(strings.TrimSuffix(msg, "}")))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if got, want := decodeMessage(raw), decodeMessageSlow(raw); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\nfast path     %#v\nencoding/json %#v", raw, got, want)
		}
	})
}

// checkAppendMessage fails when appendMessageJSON or messageAppendable
// disagree with marshalJSON on m, or messageJSONSize with the length of
// json.Marshal's encoding (0 when it fails).
func checkAppendMessage(t *testing.T, m any) {
	if marshalled, _ := json.Marshal(m); messageJSONSize(m) != len(marshalled) {
		t.Fatalf("%#v: messageJSONSize %d, json.Marshal wrote %d bytes", m, messageJSONSize(m), len(marshalled))
	}
	want, err := marshalJSON(m)
	got, ok := appendMessageJSON([]byte("prefix"), m)
	if ok != (err == nil) || messageAppendable(m) != ok {
		t.Fatalf("%#v: appendMessageJSON ok %v, messageAppendable %v, encoding/json error %v", m, ok, messageAppendable(m), err)
	}
	if ok && !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("%#v:\nappendMessageJSON %s\nencoding/json     %s", m, got, want)
	}
}

// TestAppendMessageMatchesEncodingJSON: each kind of message, hostile
// strings included, is written as encoding/json writes it; what
// encoding/json refuses the appenders refuse.
func TestAppendMessageMatchesEncodingJSON(t *testing.T) {
	hostile := "q\" b\\ \n\r\t\x00\x1f <>& \u2028\u2029 \xff é😀"
	long := strings.Repeat("é😀\u2028<\x00\xff\xe2\x80", 700) + "\xf0\x9f" // characters across messageJSONSize's pieces
	longArgs, _ := json.Marshal(map[string]string{"content": long})
	code := 3
	for _, m := range []any{
		&userMessage{Role: "user", Content: []contentBlock{{Type: "text", Text: long}, {Type: "image", Data: long, MimeType: "image/png"},
			{Type: "thinking", Thinking: strings.Repeat("\x01", 3000)}}},
		&assistantMessage{Content: []contentBlock{{Type: "toolCall", ID: "c", Name: "write", Arguments: longArgs}}},
		&userMessage{Role: "user", Content: textBlocks(hostile), Timestamp: 1},
		&userMessage{Role: hostile},
		&userMessage{Content: []contentBlock{}},
		&assistantMessage{Role: "assistant", Content: []contentBlock{
			{Type: "thinking", Thinking: hostile, Signature: hostile, Text: "ignored"},
			{Type: "thinking"},
			{Type: "toolCall", ID: "i", Name: hostile, Arguments: json.RawMessage(" { \"a\" : [ 1 , \"\u2028<\" ] } "), Signature: "s"},
			{Type: "toolCall"},
			{Type: "image", Data: "AAA", MimeType: "image/png"},
			{Type: hostile, Text: hostile, Signature: "m"},
		}, API: "a", Provider: "p", Model: hostile, Usage: usage{Input: 1, Output: 2, TotalTokens: 3,
			Cost: costBreakdown{Input: 1e-7, Output: 3e21, CacheRead: 0.1 + 0.2, Total: -0.0}},
			StopReason: "error", ErrorMessage: hostile, Timestamp: -5},
		&assistantMessage{Usage: usage{Cost: costBreakdown{Total: nan()}}},
		&assistantMessage{Role: "assistant", answerMeta: &answerMeta{ResponseID: hostile, ResponseModel: long, RawStopReason: hostile,
			DurationMs: new(int64(-1 << 63)), ThinkingLevel: hostile}},
		&assistantMessage{answerMeta: &answerMeta{}}, &assistantMessage{answerMeta: &answerMeta{DurationMs: new(int64(0))}},
		&toolResultMessage{Role: "toolResult", DurationMs: new(int64(1 << 62))},
		&assistantMessage{Content: []contentBlock{{Type: "toolCall", Arguments: json.RawMessage(`{"a":`)}}},
		&assistantMessage{Content: []contentBlock{{Type: "toolCall", Arguments: json.RawMessage{}}}},
		&toolResultMessage{Role: "toolResult", ToolCallID: "c", ToolName: "t", Content: textBlocks("x"), IsError: true, Timestamp: 2,
			Details: map[string]any{"z": 1.5, "a": []any{true, nil, "s", map[string]any{}, []any{}}, hostile: map[string]any{"n": 1e-9}}},
		&toolResultMessage{Details: map[string]int{"firstChangedLine": 4}},
		&toolResultMessage{Details: map[string]any{"bad": nan()}},
		&toolResultMessage{Details: []any(nil)},
		&toolResultMessage{Details: func() {}},
		bashExecutionMessage{Role: "bashExecution", Command: hostile, Output: hostile, ExitCode: &code, Cancelled: true, Truncated: true,
			FullOutputPath: hostile, ExcludeFromContext: true, Timestamp: 9},
		bashExecutionMessage{},
		&summaryMessage{Role: "compactionSummary", Summary: hostile, TokensBefore: 7, FromID: hostile, Timestamp: 1},
		&summaryMessage{},
		rawMessage(`{"role":"custom", "content" : "c\u2028"}`),
		rawMessage(`{"role":`),
		rawMessage(nil),
		struct{ Role string }{"other"},
	} {
		checkAppendMessage(t, m)
	}
}

func nan() float64 { zero := 0.0; return zero / zero }

// FuzzAppendMessage: any message json.Unmarshal can make (decodeMessageSlow)
// is written as encoding/json writes it.
func FuzzAppendMessage(f *testing.F) {
	for _, line := range sessionLineSeeds(f) {
		if _, msg, ok := strings.Cut(line, `"message":`); ok {
			f.Add([]byte(strings.TrimSuffix(msg, "}")))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if m := decodeMessageSlow(raw); m != nil {
			checkAppendMessage(t, m)
		}
	})
}

// TestSessionKeepsOneCopy: a loaded message entry whose line holds what
// rpi would write for it (byte for byte, or the same JSON value written
// another way, or with members rpi does not know, kept on their own)
// keeps no copy of that line (its message is held once); one whose
// message would be written otherwise keeps its line and is written back
// exactly as it was read; the others are written back as rpi writes them.
func TestSessionKeepsOneCopy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	lines := []string{
		`{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}`,
		`{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"é \"q\"\n"}],"timestamp":1}}`,
		`{"type":"message","id":"b","parentId":"a","timestamp":"t","message":{"role":"user","content":"plain","timestamp":2}}`,
		`{"type":"message","id":"c","parentId":"b","timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"\u00e9"}],"timestamp":3}}`,
		`{"type":"message","id":"d","parentId":"c","timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"x"}],"api":"a","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0.00003,"output":0,"cacheRead":0,"cacheWrite":0,"total":0.00003}},"stopReason":"stop","timestamp":4},"extra":1}`,
		`{"type":"message","id":"e","parentId":"d","timestamp":"t","message":{"role":"toolResult","toolCallId":"c","toolName":"t","content":[],"details":{"a":1,"b":2},"isError":false,"timestamp":5}}`,
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ss, err := loadSessionFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	written := slices.Clone(lines)
	written[3] = strings.Replace(lines[3], `\u00e9`, "é", 1) // the same JSON value, written as rpi writes it
	for i, keeps := range []bool{false, true, false, false, false} {
		e := ss.entries[i]
		if (e.raw != nil) != keeps {
			t.Errorf("entry %s keeps its line: %v, want %v", e.ID, e.raw != nil, keeps)
		}
		if got := string(e.line()); got != written[i+1] {
			t.Errorf("entry %s is written back as\n%s\nwant\n%s", e.ID, got, written[i+1])
		}
	}
	if got := string(ss.wholeFile()); got != strings.Join(written, "\n")+"\n" {
		t.Errorf("the whole file is written back as\n%s", got)
	}
}

// TestRecordedMessageHeldOnce: a message the conversation records is its
// entry's message itself, not a second copy decoded from the entry's line
// (an image prompt was held twice for the session's life), and the
// entry, its line and its size are what decoding that line gives.
func TestRecordedMessageHeldOnce(t *testing.T) {
	ss := newSessionFile(time.Unix(1e9, 0), "", "/", "", "", "", true)
	hostile := "q\" b\\ \n\t\x00 <>& \u2028 é😀"
	code := 1
	for _, m := range []any{
		&userMessage{Role: "user", Content: []contentBlock{{Type: "text", Text: hostile},
			{Type: "image", Data: strings.Repeat("iVBORw0KGgo", 1000), MimeType: "image/png"}}, Timestamp: 1},
		&assistantMessage{Role: "assistant", Content: []contentBlock{{Type: "thinking", Thinking: hostile, Signature: "s"},
			{Type: "toolCall", ID: "c1", Name: "bash", Arguments: json.RawMessage(`{"command":"ls <x>"}`)}},
			API: "a", Provider: "p", Model: "m", Usage: usage{Input: 1, TotalTokens: 1, Cost: costBreakdown{Total: 0.5}},
			StopReason: "toolUse", Timestamp: 2},
		&toolResultMessage{Role: "toolResult", ToolCallID: "c1", ToolName: "bash", Content: textBlocks(hostile),
			Details: json.RawMessage(`{"exitCode":0}`), IsError: true, Timestamp: 3}, // details are read back as their JSON
		bashExecutionMessage{Role: "bashExecution", Command: "ls", Output: hostile, ExitCode: &code, Timestamp: 4},
		&summaryMessage{Role: "compactionSummary", Summary: hostile, TokensBefore: 9, Timestamp: 5},
	} {
		e, line, err := ss.add(time.Unix(1e9, 0), "message", []entryField{{"message", m}})
		if err != nil {
			t.Fatal(err)
		}
		if e.msg != m {
			t.Errorf("%T: the entry holds a copy of the message", m)
		}
		var d jsonIn
		want, err := decodeEntry(line, &d)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if e.Type != want.Type || e.ID != want.ID || !reflect.DeepEqual(e.ParentID, want.ParentID) || e.Timestamp != want.Timestamp ||
			e.msgSize != want.msgSize || !reflect.DeepEqual(e.msg, want.msg) || e.raw != nil || !bytes.Equal(e.line(), line) {
			t.Errorf("%T: entry %+v with the line\n%s\nwant %+v", m, e, line, want)
		}
	}
}

// TestReadEntriesInParts: a session file read in parts, each on its own
// goroutine, gives what it gives read in one: the same entries, the same
// line numbers for the lines that are not entries, and a torn last line
// left unreported only when it has no "\n".
func TestReadEntriesInParts(t *testing.T) {
	block := strings.Join([]string{
		`{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"x\ny"}],"timestamp":1}}`,
		``,
		`not json`,
		"  {\"type\":\"model_change\",\"id\":\"b\",\"provider\":\"p\"} \r",
		`{"no":"type"}`,
		" \t",
	}, "\n") + "\n"
	header := "\n" + `{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}` + "\n"
	for _, tail := range []string{"", `{"type":"x","id":"last"}`, `{"torn`, "{\"torn\n", "  "} {
		content := header + strings.Repeat(block, 40) + tail
		path := filepath.Join(t.TempDir(), "s.jsonl")
		os.WriteFile(path, []byte(content), 0o644)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		_, lineNo, next, _, err := readHeaderLine(context.Background(), f)
		if err != nil || lineNo != 2 || content[next-1] != '\n' || content[next] != '{' {
			t.Fatalf("header: line %d, next %d, %v", lineNo, next, err)
		}
		var want sessionEntries
		for parts := 1; parts <= 7; parts++ {
			got, err := readEntries(context.Background(), f, next, lineNo, true, parts)
			if err != nil {
				t.Fatal(err)
			}
			if parts == 1 {
				want = got
				// Lines 5 and 7 of each block (from line 3) are not entries.
				var skipped []int
				for b := range 40 {
					skipped = append(skipped, 3+6*b+2, 3+6*b+4)
				}
				if tail == "{\"torn\n" {
					skipped = append(skipped, 3+6*40)
				}
				if len(got.entries) != 80+strings.Count(tail, "last") || !reflect.DeepEqual(got.skipped.first, skipped) || got.skipped.n != len(skipped) {
					t.Errorf("tail %q: %d entries, skipped lines %v, want %v", tail, len(got.entries), got.skipped, skipped)
				}
				continue
			}
			if len(got.entries) != len(want.entries) || !reflect.DeepEqual(got.skipped, want.skipped) {
				t.Errorf("tail %q, %d parts: %d entries, skipped %v; in one part %d, %v", tail, parts, len(got.entries), got.skipped, len(want.entries), want.skipped)
				continue
			}
			for i, e := range got.entries {
				if !bytes.Equal(e.line(), want.entries[i].line()) {
					t.Errorf("tail %q, %d parts: entry %d is %s, want %s", tail, parts, i, e.line(), want.entries[i].line())
				}
			}
		}
		f.Close()
	}
}

// TestOnlyJSONSpaceAroundALine: a line with a space JSON does not allow
// around its object (\v, \f, U+00A0, U+2028, U+0085, a byte order mark)
// is no entry, as encoding/json and pi's JSON.parse have it, and a line
// of such spaces alone is blank, as pi's trim has it (a byte order mark
// alone was reported as a skipped line). Such a line was trimmed as
// Unicode has it and loaded: as the last line, without "\n", the next
// append cut it (mendEnd keeps a JSON object), so an entry the session
// showed was lost, and a header alone went with the file's first append.
func TestOnlyJSONSpaceAroundALine(t *testing.T) {
	header := `{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}`
	entry := func(id, parent string) string {
		return `{"type":"session_info","id":"` + id + `","parentId":` + parent + `,"timestamp":"t","name":"n"}`
	}
	ids := func(ss *sessionFile) (ids []string) {
		for _, e := range ss.entries {
			ids = append(ids, e.ID)
		}
		return ids
	}
	for _, space := range []string{"\v", "\f", "\u00a0", "\u2028", "\u0085", "\uFEFF"} {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		os.WriteFile(path, []byte(header+"\n"+entry("a", "null")+"\n"+space+entry("b", `"a"`)+"\n"+entry("c", `"a"`)+space+"\n"+space+"\n"), 0o644)
		ss, err := loadSessionFile(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(ss); !slices.Equal(got, []string{"a"}) || !slices.Equal(ss.skipped.first, []int{3, 4}) || ss.skipped.n != 2 {
			t.Errorf("%q: entries %v, skipped lines %v; want [a], [3 4]", space, got, ss.skipped)
		}
		// The last line, without "\n": what the load kept, an append keeps.
		os.WriteFile(path, []byte(header+"\n"+entry("a", "null")+"\n"+entry("b", `"a"`)+space), 0o644)
		if ss, err = loadSessionFile(t.Context(), path); err != nil {
			t.Fatal(err)
		}
		appendLine(path, []byte(entry("c", `"a"`)), false, false)
		again, err := loadSessionFile(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids(ss) {
			if !slices.Contains(ids(again), id) {
				t.Errorf("%q: entry %s was loaded, and an append dropped it (entries after it: %v)", space, id, ids(again))
			}
		}
		// A header alone: refused, or kept by an append.
		os.WriteFile(path, []byte(header+space), 0o644)
		if _, err := loadSessionFile(t.Context(), path); err == nil {
			appendLine(path, []byte(entry("a", "null")), false, false)
			if _, err := loadSessionFile(t.Context(), path); err != nil {
				t.Errorf("%q: a header was loaded, and an append dropped it: %v", space, err)
			}
		}
	}
}

// TestByteOrderMarkHeaderAlone: a file of a byte order mark and a header
// without "\n" (as an editor may save it) loads, and its first append
// keeps the header: mendEnd took the line for torn (the mark is no JSON)
// and cut the file to nothing, so the file had no header after it.
func TestByteOrderMarkHeaderAlone(t *testing.T) {
	header := `{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}`
	path := filepath.Join(t.TempDir(), "s.jsonl")
	os.WriteFile(path, []byte("\uFEFF"+header), 0o644)
	if _, err := loadSessionFile(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	if err := appendLine(path, []byte(`{"type":"session_info","id":"a","parentId":null,"timestamp":"t","name":"n"}`), false, false); err != nil {
		t.Fatal(err)
	}
	ss, err := loadSessionFile(t.Context(), path)
	if err != nil {
		data, _ := os.ReadFile(path)
		t.Fatalf("a header was loaded, and an append dropped it: %v (the file: %q)", err, data)
	}
	if len(ss.entries) != 1 {
		t.Errorf("%d entries after the append, want 1", len(ss.entries))
	}
}

// ---- Big sessions ----

// writeBigSession writes a session file of about size bytes to path, as
// rpi and pi write one: a header, a model and a thinking level change,
// then user and assistant messages by turns, each of about 12 KB of text
// (lines of prose and code: tabs, a quoted word in 12, a non-ASCII one in
// 100, so that decoding has escapes to undo). It returns the number of messages.
func writeBigSession(tb testing.TB, path, cwd string, size int64) int {
	return writeGeneratedSession(tb, path, cwd, size, 12<<10)
}

// writeGeneratedSession is writeBigSession with messages of textBytes of text
// each (at least: whole lines of code-like prose), or of one letter when
// textBytes is 1.
func writeGeneratedSession(tb testing.TB, path, cwd string, size int64, textBytes int) int {
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(26, 2026))
	words := strings.Fields("the session file grows as an agent reads big files and runs chatty commands for days " +
		"func return err nil if for range := buffer line decode encode message content assistant user tool " +
		"path/to/file.go 0x1f 42 3.14 map[string]any { } ( ) , ; == != && ||")
	rare := strings.Fields("résumé naïve → “quoted” 中文")
	pool := make([]string, 2048)
	for i := range pool {
		var b strings.Builder
		b.WriteString(strings.Repeat("\t", rng.IntN(3)))
		for b.Len() < 40+rng.IntN(60) {
			word := words[rng.IntN(len(words))]
			switch rng.IntN(100) {
			case 0:
				word = rare[rng.IntN(len(rare))]
			case 1, 2, 3, 4, 5, 6, 7, 8:
				word = `"` + word + `"`
			}
			b.WriteString(word + " ")
		}
		pool[i] = b.String()
	}
	text := func() string {
		if textBytes == 1 {
			return string(rune('a' + rng.IntN(26)))
		}
		var b strings.Builder
		for b.Len() < textBytes {
			b.WriteString(pool[rng.IntN(len(pool))])
			b.WriteByte('\n')
		}
		return b.String()
	}
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	header := sessionHeader{Version: 3, ID: "0f0e8a52-1c4f-4a2e-9d6b-3c1f2e4d5a6b", Timestamp: timestamp(start), Cwd: cwd}
	w.Write(append(header.appendMembers([]byte(`{"type":"session"`)), "}\n"...))
	written, entries := int64(0), 0
	// add writes an entry as session.add makes one: type, id, parentId
	// and timestamp, then its fields.
	add := func(now time.Time, typ string, fields ...entryField) {
		line := fmt.Appendf(nil, `{"type":%q,"id":"%08x","parentId":`, typ, entries+1)
		if entries == 0 {
			line = append(line, "null"...)
		} else {
			line = fmt.Appendf(line, `"%08x"`, entries)
		}
		line = fmt.Appendf(line, `,"timestamp":%q`, timestamp(now))
		for _, f := range fields {
			value, err := marshalJSON(f.value)
			if err != nil {
				tb.Fatal(err)
			}
			line = fmt.Appendf(line, ",%q:%s", f.name, value)
		}
		line = append(line, "}\n"...)
		w.Write(line)
		written += int64(len(line))
		entries++
	}
	add(start, "model_change", entryField{"provider", "anthropic"}, entryField{"modelId", "claude-sonnet-4-5"})
	add(start, "thinking_level_change", entryField{"thinkingLevel", "medium"})
	messages := 0
	for written < size {
		now := start.Add(time.Duration(messages) * time.Second)
		var m any = &userMessage{Role: "user", Content: textBlocks(text()), Timestamp: now.UnixMilli()}
		if messages%2 == 1 {
			m = &assistantMessage{Role: "assistant", Content: textBlocks(text()), API: "anthropic-messages",
				Provider: "anthropic", Model: "claude-sonnet-4-5", StopReason: "stop", Timestamp: now.UnixMilli(),
				Usage: usage{Input: 3000 + messages, Output: 3000, TotalTokens: 6000 + messages,
					Cost: costBreakdown{Input: 0.009, Output: 0.045, Total: 0.054}}}
		}
		add(now, "message", entryField{"message", m})
		messages++
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	return messages
}

// writeSizes is a stdout that keeps what is written and the largest
// single write.
type writeSizes struct {
	mu      sync.Mutex
	out     bytes.Buffer
	largest int
}

func (w *writeSizes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.largest = max(w.largest, len(p))
	return w.out.Write(p)
}

func (w *writeSizes) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.out.Bytes())
}

// TestGetMessagesStreamed: the get_messages answer of a big session is
// what encoding/json writes for the conversation, written whole and
// uninterrupted while a child's output streams beside it, but never held
// whole: no single write is near its size.
func TestGetMessagesStreamed(t *testing.T) {
	e, cwd := newTestEnv(t), t.TempDir()
	path := filepath.Join(cwd, "big.jsonl")
	writeBigSession(t, path, cwd, 4<<20)
	ss, err := loadSessionFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := marshalJSON(struct {
		Messages []any `json:"messages"`
	}{ss.context().messages})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"m","type":"response","command":"get_messages","success":true,"data":` + string(data) + "}"
	stdout := &writeSizes{}
	stdin, input := io.Pipe()
	done := make(chan struct{})
	go func() {
		runRPI(t, e, []string{"rpc", "--cwd", cwd, "--session", path}, stdin, stdout)
		close(done)
	}()
	io.WriteString(input, spawnLine("p", []string{"sh", "-c", "for i in $(seq 1 20000); do echo line $i; done"}, "")+"\n")
	for !bytes.Contains(stdout.bytes(), []byte(`"type":"process_output"`)) {
		time.Sleep(time.Millisecond)
	}
	io.WriteString(input, `{"id":"m","type":"get_messages"}`+"\n")
	for !bytes.Contains(stdout.bytes(), []byte(`{"id":"m"`)) {
		time.Sleep(time.Millisecond)
	}
	input.Close()
	<-done
	found := false
	for _, line := range bytes.Split(bytes.TrimSuffix(stdout.bytes(), []byte("\n")), []byte("\n")) {
		if !json.Valid(line) {
			t.Fatalf("a record is not whole JSON: %.200s…", line)
		}
		if bytes.HasPrefix(line, []byte(`{"id":"m"`)) {
			found = true
			if string(line) != want {
				t.Errorf("get_messages answered %d bytes, differing from encoding/json's %d", len(line), len(want))
			}
		}
	}
	if !found {
		t.Fatal("no get_messages answer")
	}
	if stdout.largest > 2*maxPending {
		t.Errorf("a single write of %d bytes for a %d byte answer: it was held whole", stdout.largest, len(want))
	}
}

// TestExportHTMLBlocks: the export page, now written as it goes, shows
// each kind of message as before, every text escaped.
func TestExportHTMLBlocks(t *testing.T) {
	code := 2
	messages := []any{
		&userMessage{Role: "user", Content: []contentBlock{{Type: "text", Text: `<b>&'"`}, {Type: "image", MimeType: "image/png", Data: "A<B"}, {Type: "image", MimeType: "text/x", Data: "z"}}},
		&assistantMessage{Role: "assistant", Provider: "p", Model: "m", Content: []contentBlock{{Type: "thinking", Thinking: "hm"}, {Type: "toolCall", Name: "bash", Arguments: json.RawMessage(`{"command":"ls <x>"}`)}}},
		&assistantMessage{Role: "assistant", Provider: "p", Model: "m", ErrorMessage: "boom", StopReason: "error"},
		&toolResultMessage{Role: "toolResult", ToolName: "bash", IsError: true, Content: textBlocks("out")},
		bashExecutionMessage{Role: "bashExecution", Command: "echo", Output: "hi", ExitCode: &code},
		&summaryMessage{Role: "compactionSummary", Summary: "sum"},
		rawMessage(`{"role":"custom","content":"<x>"}`),
	}
	var page bytes.Buffer
	if err := writeHTML(bufio.NewWriterSize(&page, 16), sessionHeader{ID: "id", Timestamp: "t", Cwd: "/a'b"}, "N<", messages); err != nil {
		t.Fatal(err)
	}
	want := `<h1>N&lt;</h1>
<p>Session id, started t in <code>/a&#39;b</code></p>
<div class="m user"><div class="role">user</div><pre>&lt;b&gt;&amp;&#39;&quot;</pre><img alt="image" style="max-width:100%" src="data:image/png;base64,A&lt;B"></div>
<div class="m assistant"><div class="role">assistant · p/m</div><pre class="thinking">hm</pre><pre>→ bash {&quot;command&quot;:&quot;ls &lt;x&gt;&quot;}</pre></div>
<div class="m assistant error"><div class="role">assistant · p/m</div><pre>error: boom</pre></div>
<div class="m toolResult error"><div class="role">result of bash</div><pre>out</pre></div>
<div class="m user"><div class="role">bash</div><pre>$ echo
hi</pre></div>
<div class="m user"><div class="role">compactionSummary</div><pre>sum</pre></div>
<div class="m user"><div class="role">custom</div><pre>{&quot;role&quot;:&quot;custom&quot;,&quot;content&quot;:&quot;&lt;x&gt;&quot;}</pre></div>
</body></html>
`
	if got := page.String(); !strings.HasPrefix(got, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>N&lt;</title>") || !strings.HasSuffix(got, want) {
		t.Errorf("page:\n%s\nwant it to end with:\n%s", got, want)
	}
}

// TestHostileLineHeldAtItsSize: what a hostile session line can make rpi
// hold grows with its size by a small factor. A message with more content
// blocks than one per bytesPerBlock of it ([{},{},…]) is kept as it is
// written, not decoded into a 184-byte block per 3 bytes, by the fast
// path and by encoding/json's alike; blocks as rpi writes them, however
// many, are decoded; and a tool result's details are held as their JSON,
// no bigger than written, not as maps and slices.
func TestHostileLineHeldAtItsSize(t *testing.T) {
	many := func(block string, n int) string { return "[" + strings.Repeat(block+",", n-1) + block + "]" }
	head := `{"type":"message","id":"a1","parentId":null,"timestamp":"t","message":`
	deep := `{"x":` + strings.Repeat("[", maxScanDepth) + strings.Repeat("]", maxScanDepth) + `}`
	for _, msg := range []string{
		`{"role":"user","content":` + many(`{}`, 1<<18) + `,"timestamp":1}`,
		`{"role":"assistant","content":` + many(`{}`, 1<<18) + `,"timestamp":1}`,
		`{"role":"toolResult","content":` + many(`{"type":"text"}`, 1<<16) + `,"timestamp":1}`,
		`{"role":"user","content":` + many(`{ }`, 1<<16) + `,"r\u006fle":"user"}`, // encoding/json's path
		// A block nested deeper than skipValue follows, first or after the
		// eighth: the blocks after it are counted all the same.
		`{"role":"user","content":[` + deep + `,` + many(`{}`, 1<<18)[1:] + `}`,
		`{"role":"assistant","content":[{},{},{},{},{},{},{},{},` + deep + `,` + many(`{}`, 1<<18)[1:] + `}`,
		// content given twice: encoding/json decodes the first too, then
		// the last over it.
		`{"role":"user","content":` + many(`{}`, 1<<18) + `,"content":[]}`,
		`{"role":"toolResult","\u0063ontent":` + many(`{}`, 1<<18) + `,"content":[{"type":"text","text":"hi"}]}`,
	} {
		for path, m := range map[string]any{"decodeMessage": decodeMessage([]byte(msg)), "encoding/json": decodeMessageSlow([]byte(msg))} {
			if raw, ok := m.(rawMessage); !ok || string(raw) != msg {
				t.Errorf("%s of %.60s…: %T, want the message kept as written", path, msg, m)
			}
		}
		var d jsonIn
		if e, err := decodeEntry([]byte(head+msg+"}"), &d); err != nil {
			t.Errorf("%.60s…: %v", msg, err)
		} else if _, ok := e.msg.(rawMessage); !ok {
			t.Errorf("the entry of %.60s…: %T, want the message kept as written", msg, e.msg)
		}
	}
	typed := `{"role":"user","content":` + many(`{"type":"text","text":""}`, 1<<16) + `}`
	if m, ok := decodeMessage([]byte(typed)).(*userMessage); !ok || len(m.Content) != 1<<16 {
		t.Errorf("65,536 empty text blocks as rpi writes them: %T, want them decoded", decodeMessage([]byte(typed)))
	}
	details := many(`{}`, 1<<18)
	for path, m := range map[string]any{
		"decodeMessage": decodeMessage([]byte(`{"role":"toolResult","details":` + details + `}`)),
		"encoding/json": decodeMessageSlow([]byte(`{"role":"toolResult","details":` + details + `,"Role":"toolResult"}`)),
	} {
		r, ok := m.(*toolResultMessage)
		if !ok {
			t.Fatalf("%s: %T", path, m)
		}
		if raw, ok := r.Details.(json.RawMessage); !ok || string(raw) != details || cap(raw) > 2*len(details) {
			t.Errorf("%s: details held as %T (%d bytes of capacity), want their %d bytes of JSON", path, r.Details, cap(raw), len(details))
		}
	}
}

// TestCustomMessageTextPastABadBlock: a custom message's text blocks go to
// the model whatever else a block holds, as encoding/json read them into
// the struct a block was: a member of a type rpi does not take (an id
// given as a number, a signature as an object) loses no block's text.
func TestCustomMessageTextPastABadBlock(t *testing.T) {
	for content, want := range map[string]string{
		`[{"type":"text","text":"a","id":5},{"type":"text","text":"b"}]`:                                             "a\nb",
		`[{"type":"text","text":"a"},{"type":"text","text":"b","textSignature":{}},null,{"type":"text","text":"c"}]`: "a\nb\nc",
		`[{"type":"image","data":1,"mimeType":"image/png"},{"type":"text","text":"d"}]`:                              "d",
	} {
		msg := rawMessage(`{"role":"custom","customType":"x","content":` + content + `,"display":true}`)
		ctx := contextMessages([]any{msg})
		if len(ctx) != 1 {
			t.Errorf("%s: context %#v, want text %q", content, ctx, want)
		} else if u, ok := ctx[0].(*userMessage); !ok || joinTexts(u.Content) != want {
			t.Errorf("%s: context %#v, want text %q", content, ctx, want)
		}
	}
}

// TestCustomMessageImages: a custom message (pi's custom_message entry, an
// extension's message) goes to the model as pi's convertToLlm makes it, a
// user message of its blocks in their order: its images too, not only its
// text. An image whose data is no image a model takes is a note; one
// with no data, and a message of no text and no image, go nowhere.
func TestCustomMessageImages(t *testing.T) {
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n...."))
	msg := rawMessage(`{"role":"custom","customType":"shot","content":[{"type":"text","text":"Look:"},` +
		`{"type":"image","data":"` + png + `","mimeType":"image/png"},{"type":"text","text":"and"},` +
		`{"type":"image","data":"bm90IGFuIGltYWdl","mimeType":"image/png"},{"type":"image","mimeType":"image/png"}],"display":true}`)
	ctx := contextMessages([]any{msg, rawMessage(`{"role":"custom","customType":"x","content":[{"type":"image","data":""}],"display":false}`)})
	want := []contentBlock{{Type: "text", Text: "Look:"}, {Type: "image", Data: png, MimeType: "image/png"}, {Type: "text", Text: "and"},
		{Type: "text", Text: "[image image/png omitted: not an image a model takes]"}}
	if len(ctx) != 1 {
		t.Fatalf("context %#v, want one user message", ctx)
	}
	if u, ok := ctx[0].(*userMessage); !ok || fmt.Sprint(u.Content) != fmt.Sprint(want) {
		t.Errorf("context %#v\nwant %+v", ctx[0], want)
	}
}

// TestPassedOverBeforeHeader: before the header, blank lines, lines that
// are no JSON and JSON that JavaScript counts as false are passed over;
// any other JSON is kept, and must be the header. A number is false when
// JSON.parse reads it as a zero: 1e-400 too (checked against node).
func TestPassedOverBeforeHeader(t *testing.T) {
	for line, want := range map[string]bool{
		"": true, "garbage": true, `{"torn`: true, "null": true, "false": true, `""`: true, "0": true, "-0": true,
		"0.0": true, "0e5": true, "-0.000E+10": true, "00": true,
		"1": false, "0.1": false, "10": false, "1e0": false, "-1": false, `"0"`: false, `" "`: false, "true": false,
		"[]": false, "{}": false, `{"type":"session"}`: false,
		// Numbers JavaScript reads as a zero, being too small for a double,
		// count as false too; the smallest that is not, and Infinity, do not.
		"1e-400": true, "-1e-400": true, "0." + strings.Repeat("0", 400) + "1": true, "2.4703282292062327e-324": true,
		"2.4703282292062328e-324": false, "5e-324": false, "1e400": false, "-1e400": false,
	} {
		trimmed, blank := trimLine([]byte(line))
		if got := passedOverBeforeHeader(trimmed, blank); got != want {
			t.Errorf("%q: passed over %v, want %v", line, got, want)
		}
	}
}

// TestTimestampNotText: an entry whose timestamp is no string is kept,
// as pi 1.6 keeps it, with the time pi's new Date() makes of it (fixture
// session_timestamp_not_text); rpi skipped the line, and the
// conversation lost what it held.
func TestTimestampNotText(t *testing.T) {
	for value, want := range map[string]string{
		`1773651602000.9`:            "2026-03-16T09:00:02.000Z",
		`-1.5`:                       "1969-12-31T23:59:59.999Z",
		`true`:                       "1970-01-01T00:00:00.001Z",
		`false`:                      "1970-01-01T00:00:00.000Z",
		`{"at":"now"}`:               "",
		`[1]`:                        "",
		`1e300`:                      "",
		`"2026-03-16T09:00:00.000Z"`: "2026-03-16T09:00:00.000Z",
		`null`:                       "",
	} {
		line := `{"type":"branch_summary","id":"b","parentId":null,"timestamp":` + value + `,"fromId":"a","summary":"s"}`
		var d jsonIn
		e, err := decodeEntry([]byte(line), &d)
		if err != nil {
			t.Errorf("timestamp %s: the entry is not kept: %v", value, err)
			continue
		}
		if e.Timestamp != want || e.info().Summary != "s" {
			t.Errorf("timestamp %s: read as %q (summary %q), want %q", value, e.Timestamp, e.info().Summary, want)
		}
	}
}

// TestSessionKeysMatchExactly: a session line whose keys name a field
// only when case is ignored ("Id", "ParentId", "Timestamp", "Role",
// "Content", "ſtopReason" with the long s, "thinKing" with the Kelvin
// sign), before or after the exact key, is read as pi reads it with
// JSON.parse: such a key names nothing, and the line is written again as
// it was. The session list reads the header's id, the name and the first
// message the same way.
func TestSessionKeysMatchExactly(t *testing.T) {
	lines := []string{
		`{"type":"session","version":3,"ID":"folded","id":"exact","timestamp":"2026-03-16T09:00:00.000Z","cwd":"/x","CWD":"/y"}`,
		`{"type":"message","id":"a","Id":"z","parentId":null,"ParentId":"z","timestamp":"2026-03-16T09:00:01.000Z","Timestamp":"2000-01-01T00:00:00.000Z","message":{"role":"user","Role":"assistant","content":"one","Content":"not one","timestamp":1,"TIMESTAMP":9}}`,
		`{"Type":"label","type":"message","iD":"z","id":"b","ParentID":null,"parentId":"a","timestamp":"2026-03-16T09:00:02.000Z","message":{"role":"assistant","content":[{"type":"thinking","thinking":"real","thin` + "\u212a" + `ing":"fake"}],"api":"a","provider":"p","model":"m","usage":{"input":1,"Input":2,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":1,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0,"TOTAL":5}},"stopReason":"stop","` + "\u017f" + `topReason":"error","timestamp":2}}`,
		`{"type":"session_info","id":"c","parentId":"b","timestamp":"2026-03-16T09:00:03.000Z","name":"real","NAME":"fake"}`,
	}
	var d jsonIn
	for i, want := range []struct {
		id, parent, stamp string
		msg               any
	}{
		{"a", "", "2026-03-16T09:00:01.000Z", &userMessage{Role: "user", Content: textBlocks("one"), Timestamp: 1}},
		{"b", "a", "2026-03-16T09:00:02.000Z", &assistantMessage{Role: "assistant", Content: []contentBlock{{Type: "thinking", Thinking: "real"}},
			API: "a", Provider: "p", Model: "m", Usage: usage{Input: 1, TotalTokens: 1}, StopReason: "stop", Timestamp: 2}},
		{"c", "b", "2026-03-16T09:00:03.000Z", nil},
	} {
		line := []byte(lines[i+1])
		e, err := decodeEntry(line, &d)
		if err != nil {
			t.Fatal(err)
		}
		parent := ""
		if e.ParentID != nil {
			parent = *e.ParentID
		}
		if e.ID != want.id || parent != want.parent || e.Timestamp != want.stamp || !reflect.DeepEqual(e.msg, want.msg) {
			t.Errorf("line %d read as id %q, parentId %q, timestamp %q, message %#v", i+1, e.ID, parent, e.Timestamp, e.msg)
		}
		if e.keepLine(line, &d); !bytes.Equal(e.line(), line) {
			t.Errorf("line %d written again as\n%s", i+1, e.line())
		}
	}
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	row, ok := readSessionRow(path)
	if !ok || row.SessionID != "exact" || row.Cwd != "/x" || row.Name == nil || *row.Name != "real" || row.Summary != "one" {
		t.Errorf("the session list reads %+v (ok %v)", row, ok)
	}
	ss, err := loadSessionFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if ss.header.ID != "exact" || len(ss.entries) != 3 || ss.entries[2].info().Name != "real" {
		t.Errorf("opened with header %+v and %d entries", ss.header, len(ss.entries))
	}
}
