package main

// Strict tools: pi 1.6's built-in tools ask for JSON-schema constrained
// sampling where the model's host offers it (their constrainedSampling
// strict "prefer"), so that the model cannot write arguments the schema
// does not take. rpi's read, bash, edit and write ask for it alike.

import (
	"encoding/json"
	"slices"
)

// strictRefusedKeys are the schema keywords no host's strict mode takes
// (pi's UNSUPPORTED_STRICT_SCHEMA_KEYS): a schema with one goes as it is.
var strictRefusedKeys = []string{"$ref", "$defs", "definitions", "allOf", "oneOf", "patternProperties",
	"dependentSchemas", "dependencies", "unevaluatedProperties", "propertyNames", "contains", "prefixItems",
	"not", "if", "then", "else"}

// numberBounds are the keywords of a number's bounds, which strict
// schemas leave out (makeStrict).
var numberBounds = []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}

// anthropicRefusesStrict reports a keyword Anthropic's strict tool use
// refuses (the whole request, with a 400), as pi lists them: a tool whose
// schema has one goes to Anthropic as it is.
func anthropicRefusesStrict(key string, v any) bool {
	switch key {
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "maxItems", "uniqueItems",
		"minContains", "maxContains", "minProperties", "maxProperties":
		return true
	case "minItems":
		n, ok := v.(float64)
		return !ok || n != 0 && n != 1
	case "format":
		s, ok := v.(string)
		return !ok || !slices.Contains([]string{"date-time", "time", "date", "duration", "email", "hostname", "uri",
			"ipv4", "ipv6", "uuid"}, s)
	}
	return false
}

// strictSchema is a tool's schema made strict, and whether it could be
// (strictParameters).
type strictSchema struct {
	schema json.RawMessage
	ok     bool
}

// strictFor is strictParameters of t for any host's strict mode, or
// with anthropic for Anthropic's (anthropicRefusesStrict), made at its
// first request and kept: a tool's schema does not change.
func (t *tool) strictFor(anthropic bool) (json.RawMessage, bool) {
	if !t.strict {
		return nil, false
	}
	i, refuses := 0, (func(string, any) bool)(nil)
	if anthropic {
		i, refuses = 1, anthropicRefusesStrict
	}
	t.strictOnce[i].Do(func() {
		schema, ok := strictParameters(t, refuses)
		t.strictMade[i] = strictSchema{schema, ok}
	})
	return t.strictMade[i].schema, t.strictMade[i].ok
}

// strictParameters is t's schema as a host's strict mode takes it, as pi
// makes it (makeStrictJsonSchema): every property of an object required,
// one that was optional made nullable (anyOf with null, unless it takes
// null already), and additionalProperties false; the members in the
// order t gives them (a model held to the schema writes the properties
// in its order). ok is false for a tool that does not ask for strict
// sampling, and for a schema strict mode cannot hold (one of
// strictRefusedKeys, a node without a type, a union of objects or
// arrays, extra properties allowed, a keyword refuses reports): that
// tool goes as it is.
func strictParameters(t *tool, refuses func(key string, v any) bool) (json.RawMessage, bool) {
	if !t.strict || schemaNode(t.schema)["type"] != "object" {
		return nil, false
	}
	return makeStrict(t.schema, refuses)
}

// schemaNode is a schema node decoded, for its keywords' values; nil
// when it is not an object.
func schemaNode(raw json.RawMessage) map[string]any {
	var node map[string]any
	json.Unmarshal(raw, &node)
	return node
}

// makeStrict is one schema node made strict (strictParameters), its
// members in their order; false when it cannot be.
func makeStrict(raw json.RawMessage, refuses func(key string, v any) bool) (json.RawMessage, bool) {
	var o jsonObject
	node := schemaNode(raw)
	if node == nil || o.UnmarshalJSON(raw) != nil {
		return nil, false
	}
	// A number's bounds stay out: rpi checks them as it decodes the call
	// (checkValue), Anthropic refuses them in strict mode, and pi's own
	// tools, which other hosts get strict, have none.
	o.del(numberBounds...)
	for _, k := range numberBounds {
		delete(node, k)
	}
	for _, k := range strictRefusedKeys {
		if _, ok := node[k]; ok {
			return nil, false
		}
	}
	for k, v := range node {
		if refuses != nil && refuses(k, v) {
			return nil, false
		}
	}
	_, typed := node["type"]
	_, hasAnyOf := node["anyOf"]
	_, hasEnum := node["enum"]
	if !typed && !hasAnyOf && !hasEnum {
		return nil, false
	}
	if hasAnyOf {
		var variants []json.RawMessage
		if json.Unmarshal(o.get("anyOf"), &variants) != nil || len(variants) == 0 {
			return nil, false
		}
		for i, v := range variants {
			strict, ok := makeStrict(v, refuses)
			if !ok || structuredSchema(schemaNode(v)) {
				return nil, false
			}
			variants[i] = strict
		}
		o.set("anyOf", schemaJSON(variants))
	}
	if items := o.get("items"); items != nil {
		strict, ok := makeStrict(items, refuses)
		if !ok {
			return nil, false
		}
		o.set("items", strict)
	}
	_, hasProperties := node["properties"]
	if node["type"] != "object" {
		return schemaJSON(&o), !hasProperties
	}
	if extra, ok := node["additionalProperties"]; ok && extra != false {
		return nil, false
	}
	var properties jsonObject
	if hasProperties && properties.UnmarshalJSON(o.get("properties")) != nil {
		return nil, false
	}
	var required []string
	if r := o.get("required"); r != nil && json.Unmarshal(r, &required) != nil {
		return nil, false
	}
	for _, k := range required {
		if properties.get(k) == nil {
			return nil, false
		}
	}
	names := slices.Clone(properties.names)
	for _, k := range names {
		strict, ok := makeStrict(properties.get(k), refuses)
		if !ok {
			return nil, false
		}
		if !slices.Contains(required, k) && !takesNull(schemaNode(strict)) {
			strict = schemaJSON(map[string]any{"anyOf": []json.RawMessage{strict, json.RawMessage(`{"type":"null"}`)}})
		}
		properties.set(k, strict)
	}
	if hasProperties {
		o.set("properties", schemaJSON(&properties))
	}
	o.set("required", schemaJSON(append([]string{}, names...)))
	o.set("additionalProperties", json.RawMessage("false"))
	return schemaJSON(&o), true
}

// schemaJSON is v, of schema pieces that always encode, as JSON.
func schemaJSON(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

// structuredSchema: a node of an object or array, which strict mode
// takes in no union.
func structuredSchema(node map[string]any) bool {
	types := schemaTypes(node)
	_, props := node["properties"]
	_, items := node["items"]
	return slices.Contains(types, "object") || slices.Contains(types, "array") || props || items
}

// takesNull: the node takes null already.
func takesNull(node map[string]any) bool {
	if slices.Contains(schemaTypes(node), "null") {
		return true
	}
	if c, ok := node["const"]; ok && c == nil {
		return true
	}
	if enum, ok := node["enum"].([]any); ok && slices.Contains(enum, nil) {
		return true
	}
	variants, _ := node["anyOf"].([]any)
	for _, v := range variants {
		if v, ok := v.(map[string]any); ok && takesNull(v) {
			return true
		}
	}
	return false
}
