package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// exactProbe is a struct of every kind unmarshalExact walks into: nested
// structs, slices and maps of them, an embedded struct, and the values
// it leaves alone (any, json.RawMessage, a map's keys).
type exactProbe struct {
	exactEmbedded
	ID    string                    `json:"id"`
	Name  *string                   `json:"name"`
	Sub   *exactProbe               `json:"sub"`
	List  []exactItem               `json:"list"`
	ByKey map[string]exactItem      `json:"byKey"`
	Any   any                       `json:"any"`
	Raw   json.RawMessage           `json:"raw"`
	Args  map[string]map[string]any `json:"args"`
	Plain string                    // no tag: its Go name
}

type exactEmbedded struct {
	Kind string `json:"kind"`
}

type exactItem struct {
	Stop string `json:"stopReason"`
	Ask  bool   `json:"ask,omitempty"`
}

// exactProbeShape is exactProbe's fields for the reference decoder
// (dropFoldedKeys), written out by hand rather than found by reflection.
var exactProbeShape = func() *keyShape {
	item := &keyShape{fields: map[string]*keyShape{"stopReason": nil, "ask": nil}}
	probe := &keyShape{fields: map[string]*keyShape{"kind": nil, "id": nil, "name": nil, "list": {elem: item},
		"byKey": {elem: item, isMap: true}, "any": nil, "raw": nil, "args": nil, "Plain": nil}}
	probe.fields["sub"] = probe
	return probe
}()

// TestUnmarshalExact: a key names a struct's field only when it is the
// field's name, as for JSON.parse: one that differs in ASCII case or by
// Unicode's simple folding (ſ for s, the Kelvin sign for k), plain or
// written with escapes, names nothing, wherever it is; the exact key
// counts whether it comes first or last; keys inside a map, an
// interface or a json.RawMessage are kept as written; an error's offset
// is where it is in the data.
func TestUnmarshalExact(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{`{"ID":"x","Id":"y","iD":"z"}`, `{}`},
		{`{"id":"a","ID":"b"}`, `{"id":"a"}`},
		{`{"Id":"b","id":"a"}`, `{"id":"a"}`},
		{`{"\u0049d":"b","\u0069d":"a"}`, `{"id":"a"}`},
		{`{"KIND":"x","kind":"k","Kind":"y"}`, `{"kind":"k"}`},
		{`{"plain":"x","Plain":"p","PLAIN":"y"}`, `{"Plain":"p"}`},
		{`{"list":[{"ſtopReason":"error","stopReason":"stop","STOPREASON":"x"}]}`, `{"list":[{"stopReason":"stop"}]}`},
		{`{"byKey":{"A":{"stopReason":"s","Stopreason":"t"},"a":{"aſk":true}}}`, `{"byKey":{"A":{"stopReason":"s"},"a":{}}}`},
		{`{"sub":{"sub":{"Name":"n","name":"m"}}}`, `{"sub":{"sub":{"name":"m"}}}`},
		{"{\"list\":[{\"as\u212a\":true}]}", `{"list":[{}]}`},
		{`{"any":{"ID":1,"id":2},"raw":{"Kind":"k"},"args":{"x":{"Name":"n"}}}`, `{"any":{"ID":1,"id":2},"raw":{"Kind":"k"},"args":{"x":{"Name":"n"}}}`},
		{`{"Sub":{"id":"x"},"LIST":[{"stopReason":"s"}],"bykey":{"a":{}}}`, `{}`},
	} {
		var got, want exactProbe
		if err := unmarshalExact([]byte(c.data), &got); err != nil {
			t.Errorf("%s: %v", c.data, err)
			continue
		}
		json.Unmarshal([]byte(c.want), &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: read %+v, want %+v", c.data, got, want)
		}
	}
	// An error's offset is where it is in the data (a key made to name
	// nothing keeps its length).
	data := []byte(`{"ID":"x","Kind":"y","id":5}`)
	var typeErr *json.UnmarshalTypeError
	if err := unmarshalExact(data, &exactProbe{}); !errors.As(err, &typeErr) || typeErr.Offset != int64(bytes.Index(data, []byte("5"))+1) {
		t.Errorf("%s: %v (offset %v)", data, err, typeErr)
	}
	if exactKeys([]byte(`{"id":"a","list":[{"stopReason":"s"}]}`), reflect.TypeFor[*exactProbe]()) != nil {
		t.Errorf("data without a key that differs only in case is copied")
	}
}

// FuzzUnmarshalExact: unmarshalExact reads what encoding/json reads of
// the data with each key that names a field only when case is ignored
// (bytes.EqualFold) taken out, for any data.
func FuzzUnmarshalExact(f *testing.F) {
	for _, seed := range []string{
		`{"ID":"x","id":"a","Kind":"k","Plain":"p","plain":"q"}`,
		`{"sub":{"Sub":{"id":"x"},"sub":{"NAME":"n"}},"list":[{"ſtopReason":"e","stopReason":"s"},null],"byKey":{"K":{"asK":true}}}`,
		`{"any":{"ID":1},"raw":{"Kind":"k"},"args":{"a":{"Id":1}},"\u0069\u0044":"x"}`,
		`{"id":5,"ID":"s"}`,
		`[{"id":"a"}]`,
		`{"list":{"id":1},"sub":[1]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got, want exactProbe
		gotErr := unmarshalExact(data, &got)
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var out bytes.Buffer
		wantErr := dropFoldedKeys(dec, exactProbeShape, &out)
		if wantErr == nil && len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")) > 0 {
			wantErr = errors.New("more after the value")
		}
		if wantErr == nil {
			wantErr = json.Unmarshal(out.Bytes(), &want)
		}
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: unmarshalExact %v, the reference %v", data, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\nunmarshalExact %+v\nthe reference  %+v", data, got, want)
		}
	})
}

// keyShape is what the reference decoder knows of a type: a struct's
// fields by name (nil: a value it leaves alone), or the elements of a
// slice or map.
type keyShape struct {
	fields map[string]*keyShape
	elem   *keyShape
	isMap  bool
}

// dropFoldedKeys writes the value dec reads to out, without the members
// of a struct's objects whose key differs from a field's name but
// equals it by bytes.EqualFold.
func dropFoldedKeys(dec *json.Decoder, shape *keyShape, out *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('['):
		out.WriteByte('[')
		var elem *keyShape
		if shape != nil && shape.fields == nil && !shape.isMap {
			elem = shape.elem
		}
		for first := true; dec.More(); first = false {
			if !first {
				out.WriteByte(',')
			}
			if err := dropFoldedKeys(dec, elem, out); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		out.WriteByte(']')
		return err
	case json.Delim('{'):
		out.WriteByte('{')
		for first := true; dec.More(); {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			key := tok.(string)
			var next *keyShape
			drop := false
			switch {
			case shape != nil && shape.fields != nil:
				f, exact := shape.fields[key]
				next = f
				for name := range shape.fields {
					drop = drop || !exact && bytes.EqualFold([]byte(name), []byte(key))
				}
			case shape != nil && shape.isMap:
				next = shape.elem
			}
			if drop {
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					return err
				}
				continue
			}
			if !first {
				out.WriteByte(',')
			}
			first = false
			k, _ := json.Marshal(key)
			out.Write(k)
			out.WriteByte(':')
			if next == nil {
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					return err
				}
				out.Write(raw)
			} else if err := dropFoldedKeys(dec, next, out); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		out.WriteByte('}')
		return err
	}
	v, err := json.Marshal(tok)
	out.Write(v)
	return err
}

// TestConfigKeysMatchExactly: the files pi reads with JSON.parse are read
// with keys matched exactly: in settings.json, auth.json, mcp.json and a
// loops file, a key that differs from a field's name only in case names
// nothing, given before or after the exact one.
func TestConfigKeysMatchExactly(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	file, _, err := readSettingsFile(write("settings.json", `{"DefaultModel":"b","defaultModel":"a","defaultProvider":"p","DEFAULTPROVIDER":"q","ShellPath":"/bin/evil"}`))
	if err != nil || file.DefaultModel != "a" || file.DefaultProvider != "p" || file.ShellPath != "" {
		t.Errorf("settings.json read as %+v (%v)", file, err)
	}
	write("auth.json", `{"p":{"type":"api_key","key":"k","Key":"evil"},"q":{"Type":"oauth","type":"api_key","KEY":"x","key":"j"}}`)
	var setup modelSetup
	auth, err := loadAuth(dir, &setup)
	if err != nil || auth["p"].Key != "k" || auth["q"].Key != "j" || len(setup.warnings) != 0 {
		t.Errorf("auth.json read as %+v (%v, %q)", auth, err, setup.warnings)
	}
	write("mcp.json", `{"MCPServers":{"x":{"command":"x"}},"mcpServers":{"s":{"command":"a","Command":"b","ARGS":["c"]}}}`)
	configs, warnings := loadMCPConfig(dir, t.TempDir(), false, nil, func(v string, _ bool) (string, error) { return v, nil })
	if len(configs) != 1 || configs[0].name != "s" || configs[0].command != "a" || len(configs[0].args) != 0 || len(warnings) != 0 {
		t.Errorf("mcp.json read as %+v (%q)", configs, warnings)
	}
	task := `"id":"0123456789ab","intervalSecs":60,"prompt":"p","durable":true,"createdAt":"2026-03-16T09:00:00.000Z","expiresAt":"2099-03-16T09:00:00.000Z","runCount":0`
	tasks, invalid, err := readLoopsFile(write("s.loops.json", `{"version":1,"tasks":[{`+task+`,"Prompt":"evil","ID":"ba9876543210"}],"TASKS":[]}`))
	if err != nil || invalid != 0 || len(tasks) != 1 || tasks[0].ID != "0123456789ab" || tasks[0].Prompt != "p" {
		t.Errorf("the loops file read as %v, %d invalid (%v)", tasks, invalid, err)
	}
}

// TestDecodeEntryDeepNestingLinear: a session line nested thousands of
// levels deep with members beside each level (a hostile file) goes to
// the slow path, which reads it in work linear in its size. The walk of
// its keys scanned each level as deep as skipValue follows before
// walking into it, 512 times the line's work: 15 s for this line of
// 7 MB (it fails with -timeout 10s), where it now takes a tenth of one.
func TestDecodeEntryDeepNestingLinear(t *testing.T) {
	const depth = 9000
	level := "[" + strings.Repeat("1,", 400)
	line := `{"type":"custom","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:00Z","customType":"k","data":` +
		strings.Repeat(level, depth) + "[]" + strings.Repeat("]", depth) + `}`
	e, err := decodeEntry([]byte(line), &jsonIn{})
	if err != nil || e.Type != "custom" || e.ID != "a" {
		t.Fatalf("decodeEntry: %v, %+v", err, e)
	}
}
