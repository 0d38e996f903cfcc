package main

// The forms of a session line the fast path takes, checked against
// encoding/json: whole numbers however written, sameJSON, and each form
// of a line decoded as its compact twin is.

import (
	"bytes"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sameValueByJSON reports whether encoding/json reads a and b as the same
// value, numbers compared exactly (as fractions; two numbers with an
// exponent too big for big.Rat count as the same).
func sameValueByJSON(t *testing.T, a, b []byte) bool {
	decode := func(raw []byte) any {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		return v
	}
	var same func(x, y any) bool
	same = func(x, y any) bool {
		switch x := x.(type) {
		case map[string]any:
			y, ok := y.(map[string]any)
			if !ok || len(x) != len(y) {
				return false
			}
			for k, v := range x {
				if w, ok := y[k]; !ok || !same(v, w) {
					return false
				}
			}
			return true
		case []any:
			y, ok := y.([]any)
			if !ok || len(x) != len(y) {
				return false
			}
			for i := range x {
				if !same(x[i], y[i]) {
					return false
				}
			}
			return true
		case json.Number:
			y, ok := y.(json.Number)
			if !ok || x == y {
				return ok
			}
			rx, okx := new(big.Rat).SetString(string(x))
			ry, oky := new(big.Rat).SetString(string(y))
			if !okx || !oky {
				return true // an exponent too big for big.Rat: not judged here
			}
			return rx.Cmp(ry) == 0
		}
		return reflect.DeepEqual(x, y)
	}
	return same(decode(a), decode(b))
}

// TestWholeNumber: wholeNumber reads each way of writing a whole number,
// and refuses what is not one or does not fit.
func TestWholeNumber(t *testing.T) {
	for n, want := range map[string]int64{"0": 0, "-0": 0, "-0.0": 0, "7": 7, "7.0": 7, "7.000": 7, "0.7e1": 7, "700e-2": 7,
		"1e3": 1000, "1E+3": 1000, "-12.50e1": -125, "1773614420000.0": 1773614420000, "1.77361442e12": 1773614420000,
		"0e999999": 0, "999999999999999999": 999999999999999999, "-999999999999999999": -999999999999999999} {
		if got, ok := wholeNumber([]byte(n)); !ok || got != want {
			t.Errorf("wholeNumber(%s) = %d, %v; want %d", n, got, ok, want)
		}
	}
	for _, n := range []string{"0.5", "1e-1", "1.5e0", "1000000000000000000", "1e18", "1e999999", "9223372036854775807", "1e9999999999",
		"0." + strings.Repeat("0", 50) + "1"} {
		if got, ok := wholeNumber([]byte(n)); ok {
			t.Errorf("wholeNumber(%s) = %d, want it refused", n, got)
		}
	}
}

// formLines are lines of a session in each form the fast path takes:
// each rewrite of BenchmarkSessionFormsRatio of lines rpi writes, with
// the compact line each was written from and the form's name.
func formLines(t testing.TB) (compact, forms, names []string) {
	for _, line := range sessionLineSeeds(t) {
		var d jsonIn
		e, err := decodeEntry([]byte(line), &d)
		if err != nil || e.Type != "message" || !json.Valid([]byte(line)) {
			continue
		}
		written, ok := e.appendMessageLine(nil)
		if _, raw := e.msg.(rawMessage); raw || e.msg == nil || !ok || string(written) != line {
			continue // not a line of a message rpi models, as rpi writes it
		}
		for _, form := range sessionForms[1:] {
			compact = append(compact, line)
			forms = append(forms, string(form.rewrite([]byte(line))))
			names = append(names, form.name)
		}
	}
	return compact, forms, names
}

// TestFastPathTakesEveryForm: a line rpi writes, written in each other
// form, takes the fast path, decodes as encoding/json does, keeps no
// copy of its line and is written again as its compact twin (with the
// fields rpi does not know, when it has them: the same JSON value).
func TestFastPathTakesEveryForm(t *testing.T) {
	compact, forms, names := formLines(t)
	if len(compact) < 20 {
		t.Fatalf("only %d lines in other forms", len(compact))
	}
	for i, line := range forms {
		if !checkDecodeEntry(t, []byte(line)) {
			t.Errorf("the fast path declined %s", line)
			continue
		}
		var d jsonIn
		e, _ := decodeEntry([]byte(line), &d)
		if e.keepLine([]byte(line), &d); e.raw != nil {
			t.Errorf("%s keeps its line", line)
		}
		written, _ := e.appendMessageLine(nil)
		switch {
		case names[i] == "extra" || names[i] == "all":
			if e.extras() == nil || !sameValueByJSON(t, written, []byte(line)) {
				t.Errorf("%s\nis written again as %s", line, written)
			}
		case names[i] == "sorted": // a tool result's details keep their keys' order, as pi keeps it
			if !sameValueByJSON(t, written, []byte(compact[i])) {
				t.Errorf("%s\nis written again as %s\nits compact twin is %s", line, written, compact[i])
			}
		case string(written) != compact[i]:
			t.Errorf("%s\nis written again as %s\nits compact twin is %s", line, written, compact[i])
		}
	}
}

// TestSlowPathReadsWholeNumbers: a line the fast path declines (a key
// given twice) reads a whole number written 1.0 as 1, in the header, an
// entry, a message and its usage, as the fast path does.
func TestSlowPathReadsWholeNumbers(t *testing.T) {
	m := decodeMessage([]byte(`{"role":"assistant","timestamp":5.0,"usage":{"input":1e1,"cost":{"total":2.50}},"model":"a","model":"b"}`))
	if a, ok := m.(*assistantMessage); !ok || a.Timestamp != 5 || a.Usage.Input != 10 || a.Usage.Cost.Total != 2.5 || a.Model != "b" {
		t.Errorf("got %#v", m)
	}
	var d jsonIn
	e, err := decodeEntry([]byte(`{"type":"compaction","id":"a","tokensBefore":4.2e1,"id":"b"}`), &d)
	if err != nil || e.info().TokensBefore != 42 || e.ID != "b" {
		t.Errorf("got %#v, %v", e, err)
	}
}

// TestFormsTwins: the fixture session written in every form
// (testdata/sessions/forms-every.jsonl) holds the messages of its compact
// twin exactly, timestamps included (the fixtures hide them), and keeps
// no copy of a message line, those with fields rpi does not know too.
func TestFormsTwins(t *testing.T) {
	every, err := loadSessionFile(t.Context(), "testdata/sessions/forms-every.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	compact, err := loadSessionFile(t.Context(), "testdata/sessions/forms-compact.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(every.entries) != len(compact.entries) {
		t.Fatalf("%d entries, the compact twin %d", len(every.entries), len(compact.entries))
	}
	for i, e := range every.entries {
		twin := compact.entries[i]
		got, _ := appendMessageJSON(nil, e.msg)
		want, _ := appendMessageJSON(nil, twin.msg)
		if !bytes.Equal(got, want) || e.ID != twin.ID || e.Type != twin.Type {
			t.Errorf("entry %d: %s %s\n%s\nthe compact twin: %s %s\n%s", i, e.Type, e.ID, got, twin.Type, twin.ID, want)
		}
		if e.Type == "message" && e.raw != nil {
			t.Errorf("entry %d keeps its line", i)
		}
	}
}

// loadSession loads the session file of content, written in a fresh
// folder.
func loadSession(t *testing.T, content string) *sessionFile {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.jsonl")
	os.WriteFile(path, []byte(content), 0o644)
	ss, err := loadSessionFile(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// TestMigrateV2ReadsEveryForm: a version 2 file's hookMessage role
// becomes custom as pi renames it, however the line is written: with
// spaces around its colon, with escapes, or after an object of the
// message with a member "role" of its own, which stays as it was. The
// first two were missed, the last renamed in the wrong place.
func TestMigrateV2ReadsEveryForm(t *testing.T) {
	v2 := `{"type":"session","version":2,"id":"s","timestamp":"t","cwd":"/"}` + "\n"
	for _, message := range []string{
		`{"role":"hookMessage","customType":"x","content":"c","display":true,"timestamp":1}`,
		`{"role" : "hookMessage", "customType":"x","content":"c","display":true,"timestamp":1}`,
		`{"r\u006fle":"hook\u004dessage","customType":"x","content":"c","display":true,"timestamp":1}`,
		`{"details":{"role":"hookMessage"},"role":"hookMessage","customType":"x","content":"c","display":true,"timestamp":1}`,
	} {
		e := loadSession(t, v2+`{"type":"message","id":"a","parentId":null,"timestamp":"t","message":`+message+"}\n").entries[0]
		var line struct {
			Message struct {
				Role    string
				Details struct{ Role string }
			}
		}
		json.Unmarshal(e.line(), &line)
		wantDetails := ""
		if strings.Contains(message, "details") {
			wantDetails = "hookMessage"
		}
		if e.role() != "custom" || line.Message.Role != "custom" || line.Message.Details.Role != wantDetails {
			t.Errorf("%s: role %q, written again as %s", message, e.role(), e.line())
		}
	}
}

// TestMigrateV1ReadsEveryForm: a version 1 compaction's
// firstKeptEntryIndex written 2.0 or 2e0 names its entry, as pi reads it;
// it was dropped, and the entries the compaction kept with it.
func TestMigrateV1ReadsEveryForm(t *testing.T) {
	v1 := `{"type":"session","id":"s","timestamp":"t","cwd":"/"}` + "\n" +
		`{"type":"message","timestamp":"t","message":{"role":"user","content":"one","timestamp":1}}` + "\n" +
		`{"type":"message","timestamp":"t","message":{"role":"user","content":"two","timestamp":2}}` + "\n"
	for _, index := range []string{"2", "2.0", "2e0", "0.2e1"} {
		ss := loadSession(t, v1+`{"type":"compaction","timestamp":"t","summary":"s","firstKeptEntryIndex":`+index+`,"tokensBefore":9}`+"\n")
		if kept := ss.entries[2].info().FirstKeptEntryID; kept == "" || kept != ss.entries[1].ID {
			t.Errorf("firstKeptEntryIndex %s: firstKeptEntryId %q, want %q", index, kept, ss.entries[1].ID)
		}
	}
}
