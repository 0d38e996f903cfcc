package main

// Every message rpi acp writes must be one the ACP schema allows: the
// schema of @agentclientprotocol/sdk 2.4 (schema/v1/schema.unstable.json:
// the stable methods and the unstable ones rpi speaks), kept in
// testdata/acp-schema (RPI_ACP_SCHEMA names another file). The one field
// outside it is the older model selector's models in a session answer
// (docs/acp.md), which clients from before config options read: it is
// taken out before the check. acpSchemaCheck checks one
// line: a request or notification of rpi's by the schema's definition of
// its method's params, an answer by its method's result (when the method
// is known) or the schema's error object. The checks are JSON Schema's,
// for what the file uses ($ref, type, const, enum, required, properties,
// additionalProperties, items, allOf, anyOf, oneOf, not, minLength,
// minimum), and stricter in two ways: a variant the schema keeps for
// custom or future values (titled "other": a severity, a status, a mode
// of rpi's own) is not one rpi may send, and every field rpi sends must
// be one the schema names (as unevaluatedProperties: false would have
// it), but inside _meta and what the schema leaves open (rawInput,
// rawOutput).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// acpSchema is the ACP schema, decoded: its definitions by name.
type acpSchema struct {
	defs map[string]map[string]any
}

// loadACPSchema reads the schema once; nil when it is not on this machine.
var loadACPSchema = sync.OnceValues(func() (*acpSchema, error) {
	path := os.Getenv("RPI_ACP_SCHEMA")
	if path == "" {
		path = filepath.Join("testdata", "acp-schema", "schema.unstable.json")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file struct {
		Defs map[string]map[string]any `json:"$defs"`
	}
	if err := json.Unmarshal(data, &file); err != nil || len(file.Defs) == 0 {
		return nil, fmt.Errorf("%s: not a JSON Schema with $defs (%v)", path, err)
	}
	return &acpSchema{file.Defs}, nil
})

// acpSchemaFor is the schema, or nil (the test is told why) when it is
// not on this machine.
func acpSchemaFor(t testing.TB) *acpSchema {
	t.Helper()
	s, err := loadACPSchema()
	if err != nil {
		t.Fatalf("the ACP schema: %v", err)
	}
	if s == nil {
		t.Log("the ACP SDK 2.4 schema is not on this machine (RPI_ACP_SCHEMA): the messages' shapes are not checked")
	}
	return s
}

// acpSchemaCheck fails t for each message of lines (rpi's, one a line)
// that the schema does not allow; methods names the client's requests by
// id, so that an answer is checked against its method's result.
func acpSchemaCheck(t testing.TB, lines []string, methods map[string]string) {
	t.Helper()
	s := acpSchemaFor(t)
	if s == nil {
		return
	}
	for _, line := range lines {
		if err := s.checkMessage(line, methods); err != nil {
			t.Errorf("not as the ACP schema has it: %v\n%s", err, line)
		}
	}
}

// checkMessage checks one message rpi writes.
func (s *acpSchema) checkMessage(line string, methods map[string]string) error {
	var msg map[string]any
	if err := json.Unmarshal([]byte(line), &msg); err != nil {
		return err
	}
	if msg["jsonrpc"] != "2.0" {
		return fmt.Errorf("jsonrpc is not \"2.0\"")
	}
	method, _ := msg["method"].(string)
	_, hasID := msg["id"]
	var def string
	var value any
	switch {
	case method != "" && hasID:
		def, value = s.defOf(method, "Request", "client"), msg["params"]
	case method != "":
		def, value = s.defOf(method, "Notification", "client", "protocol"), msg["params"]
	case msg["error"] == nil && methods[string(mustJSON(msg["id"]))] == "session/set_model":
		return nil // the older model selector's, outside the schema: {}
	case msg["error"] != nil:
		def, value = "Error", msg["error"]
	default:
		id, _ := json.Marshal(msg["id"])
		answered, ok := methods[string(id)]
		if !ok {
			return nil // an answer to a request the caller did not name
		}
		def, value = s.defOf(answered, "Response", "agent"), msg["result"]
		if result, ok := value.(map[string]any); ok && strings.HasPrefix(answered, "session/") {
			delete(result, "models") // the older model selector's, outside the schema
		}
	}
	if def == "" {
		return fmt.Errorf("the schema has no message for %q", cmpOr(method, "this answer"))
	}
	return s.check(map[string]any{"$ref": "#/$defs/" + def}, value, def)
}

// defOf is the name of the definition for method's message of a kind
// (Request, Notification, Response) sent to side's handler.
func (s *acpSchema) defOf(method, kind string, sides ...string) string {
	for name, d := range s.defs {
		side, _ := d["x-side"].(string)
		if d["x-method"] == method && strings.HasSuffix(name, kind) && slices.Contains(sides, side) {
			return name
		}
	}
	return ""
}

// check checks value against schema, and that every field of every
// object in it is one the schema names.
func (s *acpSchema) check(schema map[string]any, value any, path string) error {
	seen, open, err := s.eval(schema, value, path)
	if err != nil {
		return err
	}
	if obj, ok := value.(map[string]any); ok && !open {
		for key := range obj {
			if !seen[key] && key != "_meta" {
				return fmt.Errorf("%s.%s: not a field the schema has here", path, key)
			}
		}
	}
	return nil
}

// eval checks value against schema, and returns the fields of value (an
// object) that the schema names, and whether it leaves others open.
func (s *acpSchema) eval(schema map[string]any, value any, path string) (seen map[string]bool, open bool, err error) {
	seen = map[string]bool{}
	if ref, ok := schema["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/$defs/")
		def, ok := s.defs[name]
		if !ok {
			return nil, false, fmt.Errorf("%s: the schema has no %s", path, ref)
		}
		return s.eval(def, value, path)
	}
	// An open schema ({}, or one that says nothing of the fields) takes any
	// value and any fields.
	_, named := schema["properties"]
	_, extra := schema["additionalProperties"]
	open = !named && !extra
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if _, ok := schema[k]; ok {
			open = false
		}
	}
	if err := acpSchemaScalar(schema, value, path); err != nil {
		return nil, false, err
	}
	if obj, ok := value.(map[string]any); ok {
		if required, ok := schema["required"].([]any); ok {
			for _, r := range required {
				if _, ok := obj[r.(string)]; !ok {
					return nil, false, fmt.Errorf("%s: the required field %s is missing", path, r)
				}
			}
		}
		props, _ := schema["properties"].(map[string]any)
		for key, v := range obj {
			if p, ok := props[key].(map[string]any); ok {
				seen[key] = true
				if err := s.check(p, v, path+"."+key); err != nil {
					return nil, false, err
				}
				continue
			}
			switch more := schema["additionalProperties"].(type) {
			case bool:
				if more {
					seen[key] = true
				} else {
					return nil, false, fmt.Errorf("%s.%s: no such field", path, key)
				}
			case map[string]any:
				seen[key] = true
				if err := s.check(more, v, path+"."+key); err != nil {
					return nil, false, err
				}
			}
		}
	}
	if items, ok := schema["items"].(map[string]any); ok {
		if list, ok := value.([]any); ok {
			for i, v := range list {
				if err := s.check(items, v, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return nil, false, err
				}
			}
		}
	}
	merge := func(sub map[string]bool, subOpen bool) {
		for k := range sub {
			seen[k] = true
		}
		open = open || subOpen
	}
	for _, sub := range acpSchemaList(schema["allOf"]) {
		subSeen, subOpen, err := s.eval(sub, value, path)
		if err != nil {
			return nil, false, err
		}
		merge(subSeen, subOpen)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		variants := acpSchemaList(schema[k])
		if variants == nil {
			continue
		}
		matched, why := 0, []string{}
		for _, sub := range variants {
			if text, custom := value.(string); sub["title"] == "other" && !(custom && strings.HasPrefix(text, "_")) {
				continue // a custom or future value: never rpi's, but a name the schema leaves free (_shell)
			}
			subSeen, subOpen, err := s.eval(sub, value, path)
			if _, other := err.(acpOtherValue); err != nil && !other {
				why = append(why, err.Error()) // not a variant for another value of its tag
			}
			if err != nil {
				continue
			}
			matched++
			merge(subSeen, subOpen)
		}
		switch {
		case matched == 0 && len(why) == 0:
			return nil, false, fmt.Errorf("%s: %v is none of the values the schema has here", path, value)
		case matched == 0:
			return nil, false, fmt.Errorf("%s: none of the schema's %d variants (%s)", path, len(variants), strings.Join(why, "; "))
		case k == "oneOf" && matched > 1:
			return nil, false, fmt.Errorf("%s: more than one of oneOf's variants", path)
		}
	}
	if not, ok := schema["not"].(map[string]any); ok {
		if _, _, err := s.eval(not, value, path); err == nil {
			return nil, false, fmt.Errorf("%s: a value the schema excludes (not)", path)
		}
	}
	return seen, open, nil
}

// acpSchemaScalar checks type, const, enum, minLength and minimum.
func acpSchemaScalar(schema map[string]any, value any, path string) error {
	if t, ok := schema["type"]; ok {
		types := []string{}
		switch t := t.(type) {
		case string:
			types = append(types, t)
		case []any:
			for _, x := range t {
				types = append(types, x.(string))
			}
		}
		if !slices.Contains(types, acpJSONType(value)) && !(acpJSONType(value) == "integer" && slices.Contains(types, "number")) {
			return fmt.Errorf("%s: %s, not %s", path, acpJSONType(value), strings.Join(types, " or "))
		}
	}
	if c, ok := schema["const"]; ok && fmt.Sprint(c) != fmt.Sprint(value) {
		return acpOtherValue{fmt.Errorf("%s: %v, not %v", path, value, c)}
	}
	if enum, ok := schema["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(value) }) {
		return fmt.Errorf("%s: %v is not one of %v", path, value, enum)
	}
	if n, ok := schema["minLength"].(float64); ok {
		if str, ok := value.(string); ok && float64(len([]rune(str))) < n {
			return fmt.Errorf("%s: shorter than %v", path, n)
		}
	}
	if n, ok := schema["minimum"].(float64); ok {
		if x, ok := value.(float64); ok && x < n {
			return fmt.Errorf("%s: %v is less than %v", path, x, n)
		}
	}
	return nil
}

// acpOtherValue is a value that is not a schema's const: of a variant's
// tag, it says only that the value is another variant's.
type acpOtherValue struct{ error }

// acpJSONType is the JSON Schema type of a decoded value.
func acpJSONType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if v == math.Trunc(v) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	}
	return "object"
}

func acpSchemaList(v any) []map[string]any {
	list, _ := v.([]any)
	var out []map[string]any
	for _, x := range list {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// acpFixtureMethods names the client's requests of an ACP fixture's input
// by id (an id used twice names no method: its answers are not checked).
func acpFixtureMethods(input string) map[string]string {
	methods, twice := map[string]string{}, map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(input))
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil || m.Method == "" {
			continue
		}
		if _, ok := methods[string(m.ID)]; ok {
			twice[string(m.ID)] = true
		}
		methods[string(m.ID)] = m.Method
	}
	for id := range twice {
		delete(methods, id)
	}
	return methods
}

// TestACPFixturesFollowTheSchema: every line rpi writes in every ACP
// fixture is a message the ACP schema allows.
func TestACPFixturesFollowTheSchema(t *testing.T) {
	if acpSchemaFor(t) == nil {
		t.Skip("no ACP schema on this machine")
	}
	paths, _ := filepath.Glob("testdata/acp/*.txtar")
	for _, path := range paths {
		f, err := parseFixture(path)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, line := range strings.Split(strings.TrimSpace(f.sections["want.jsonl"]), "\n") {
			if line != "" {
				lines = append(lines, line)
			}
		}
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			acpSchemaCheck(t, lines, acpFixtureMethods(f.sections["input.jsonl"]))
		})
	}
}

// TestACPSchemaCheckRefuses: the check finds what is wrong with a message:
// a missing required field, a value that is not one of an enum's (nor a
// custom one rpi would not send), a field the schema does not name.
func TestACPSchemaCheckRefuses(t *testing.T) {
	s := acpSchemaFor(t)
	if s == nil {
		t.Skip("no ACP schema on this machine")
	}
	update := func(u string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":` + u + `}}`
	}
	for _, tt := range []struct {
		line string
		ok   bool
	}{
		{update(`{"sessionUpdate":"notice","severity":"info","title":"Hi"}`), true},
		{update(`{"sessionUpdate":"notice","severity":"loud","title":"Hi"}`), false},
		{update(`{"sessionUpdate":"notice","severity":"info","title":""}`), false},
		{update(`{"sessionUpdate":"notice","severity":"info"}`), false},
		{update(`{"sessionUpdate":"notice","severity":"info","title":"Hi","detail":"x"}`), false},
		{update(`{"sessionUpdate":"compaction_update","compactionId":"c","status":"done"}`), false},
		{update(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"},"messageId":"m"}`), true},
		{update(`{"sessionUpdate":"tool_call","toolCallId":"t","title":"x","rawInput":{"any":1},"_meta":{"x":1}}`), true},
		{`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}`, true},
		{`{"jsonrpc":"2.0","method":"$/cancel_request","params":{}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"sessionId":"s","mode":"form","message":"?","requestedSchema":{"type":"object","properties":{"answer":{"type":"string"}}}}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"sessionId":"s","mode":"form","message":"?","requestedSchema":{"type":"object","properties":{"answer":{"type":"text"}}}}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"sessionId":"s","mode":"form","message":"?"}}`, false},
		{`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`, true},
		{`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"done"}}`, false},
		{`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"x"}}`, true},
	} {
		err := s.checkMessage(tt.line, map[string]string{"2": "session/prompt"})
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok %v", tt.line, err, tt.ok)
		}
	}
}
