package main

// Keys matched exactly. pi reads its files with JavaScript's JSON.parse,
// whose objects name their members exactly: {"Id":"a"} has no id. The
// decoders of encoding/json match a key to a struct field when the two
// are equal once case is folded ("Id", "ID", "iD"; "ſ" for "s", the
// Kelvin sign for "k"), and of a field given both ways take the last.
// unmarshalExact decodes as JSON.parse and pi read: a key names a field
// only when it is the field's name.

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// unmarshalExact is json.Unmarshal(data, v) with each key that would
// name one of the fields of v's structs only once case is folded left
// unknown, as JSON.parse leaves it. A struct's field that is a map, an
// interface or a json.RawMessage keeps its keys as they are; a type with
// its own UnmarshalJSON matches its keys itself (contentBlock's, usage's
// call unmarshalExact). Data with no such key is decoded as it is.
func unmarshalExact(data []byte, v any) error {
	return json.Unmarshal(exactData(data, v), v)
}

// exactKeys is a copy of data in which the first byte of each key that
// names a field of t only once case is folded is DEL (0x7f), which no
// field's name holds: the key, of the same length (an error's offset
// still points where it pointed in data), names no field. nil when data
// has no such key, or is not valid JSON (json.Unmarshal says why).
func exactKeys(data []byte, t reflect.Type) []byte {
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' && data[i] != '[' {
		return nil // no key
	}
	w := exactWalk{b: data}
	if end := w.value(i, t, 0); end < 0 || len(w.folded) == 0 {
		return nil
	}
	fixed := append([]byte(nil), data...)
	for _, at := range w.folded {
		fixed[at] = 0x7f
	}
	return fixed
}

// exactWalk walks JSON beside the Go type it is decoded into, noting
// where each key that matches a field only once folded starts.
type exactWalk struct {
	b      []byte
	folded []int
}

// exactMaxDepth is encoding/json's limit of nesting: deeper data is an
// error there.
const exactMaxDepth = 10000

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// value walks the value at b[i] as decoded into t (nil: skipped), and
// returns the index past it, or -1 when it is not valid JSON.
func (w *exactWalk) value(i int, t reflect.Type, depth int) int {
	b := w.b
	if i >= len(b) {
		return -1
	}
	if c := b[i]; c != '{' && c != '[' {
		return skipValue(b, i, 0)
	}
	if depth >= exactMaxDepth {
		return -1
	}
	var fields *exactFieldSet
	var elem reflect.Type
	if t != nil {
		switch n := exactNodeOf(t); {
		case b[i] == '{' && n.kind == reflect.Struct:
			fields = n.fields
		case b[i] == '{' && n.kind == reflect.Map, b[i] == '[' && (n.kind == reflect.Slice || n.kind == reflect.Array):
			elem = n.elem
		} // otherwise encoding/json skips the value, or hands it to an UnmarshalJSON
	}
	open := b[i]
	end := byte('}')
	if open == '[' {
		end = ']'
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == end {
		return i + 1
	}
	for {
		next := elem
		if open == '{' {
			keyAt := i
			if i = skipString(b, i); i < 0 {
				return -1
			}
			if fields != nil {
				next = w.key(b[keyAt:i], keyAt+1, fields)
			}
			if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
				return -1
			}
			i = skipSpace(b, i+1)
		}
		if i = w.value(i, next, depth+1); i < 0 {
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
}

// key looks the quoted key up in fields: the type of the field it names
// exactly, or nil, noting at (its first byte) when it names one only
// once folded.
func (w *exactWalk) key(quoted []byte, at int, fields *exactFieldSet) reflect.Type {
	name := quoted[1 : len(quoted)-1]
	for _, c := range name {
		if c == '\\' {
			var s string
			if json.Unmarshal(quoted, &s) != nil {
				return nil
			}
			name = []byte(s)
			break
		}
	}
	if t, ok := fields.exact[string(name)]; ok {
		return t
	}
	var buf [64]byte
	if _, ok := fields.folded[string(foldKey(buf[:0], name))]; ok {
		w.folded = append(w.folded, at)
	}
	return nil
}

// foldKey appends name folded as encoding/json folds a key to match it
// to a field (its fold.go): ASCII letters upper case, any other rune the
// least of its simple fold orbit ("ſ" and "s" are "S").
func foldKey(out, name []byte) []byte {
	for i := 0; i < len(name); {
		if c := name[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(name[i:])
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		out = utf8.AppendRune(out, r)
		i += n
	}
	return out
}

// exactNode is what encoding/json decodes an object or array into for a
// type: its kind (reflect.Invalid: nothing exactKeys walks into), a
// struct's fields, a map's or slice's element type.
type exactNode struct {
	kind   reflect.Kind
	fields *exactFieldSet
	elem   reflect.Type
}

var exactNodes sync.Map // reflect.Type → *exactNode

func exactNodeOf(t reflect.Type) *exactNode {
	if n, ok := exactNodes.Load(t); ok {
		return n.(*exactNode)
	}
	n := &exactNode{}
	if target := exactTarget(t); target != nil {
		switch n.kind = target.Kind(); n.kind {
		case reflect.Struct:
			n.fields = exactFieldsOf(target)
		case reflect.Map, reflect.Slice, reflect.Array:
			n.elem = target.Elem()
		default:
			n.kind = reflect.Invalid
		}
	}
	got, _ := exactNodes.LoadOrStore(t, n)
	return got.(*exactNode)
}

// exactTarget is what encoding/json decodes an object or array into for
// t: t without its pointers, or nil when it is an interface, or it or a
// pointer to it has its own UnmarshalJSON (json.RawMessage's too), which
// gets the value as it is.
func exactTarget(t reflect.Type) reflect.Type {
	for t != nil {
		if t.Implements(unmarshalerType) || t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(unmarshalerType) {
			return nil
		}
		switch t.Kind() {
		case reflect.Pointer:
			t = t.Elem()
		case reflect.Interface:
			return nil
		default:
			return t
		}
	}
	return nil
}

// exactFieldSet is a struct's fields as encoding/json names them:
// exact, each name's type; folded, each name folded.
type exactFieldSet struct {
	exact  map[string]reflect.Type
	folded map[string]struct{}
}

var exactFieldSets sync.Map // reflect.Type → *exactFieldSet

// exactFieldsOf is t's fields as encoding/json decodes into them: by
// their json tag's name, or their Go name; those of embedded structs
// without a name beside them (the shallower of a name given twice).
func exactFieldsOf(t reflect.Type) *exactFieldSet {
	if set, ok := exactFieldSets.Load(t); ok {
		return set.(*exactFieldSet)
	}
	set := &exactFieldSet{exact: map[string]reflect.Type{}, folded: map[string]struct{}{}}
	level, seen := []reflect.Type{t}, map[reflect.Type]bool{}
	for len(level) > 0 {
		var next []reflect.Type
		found := map[string]reflect.Type{}
		for _, st := range level {
			if seen[st] {
				continue
			}
			seen[st] = true
			for f := range st.Fields() {
				tag := f.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				ft := f.Type
				if f.Anonymous {
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if name == "" && ft.Kind() == reflect.Struct {
						next = append(next, ft)
						continue
					}
					if !f.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !f.IsExported() {
					continue
				}
				if name == "" {
					name = f.Name
				}
				if _, taken := set.exact[name]; !taken {
					if _, twice := found[name]; !twice {
						found[name] = f.Type
					}
				}
			}
		}
		for name, ft := range found {
			set.exact[name] = ft
			set.folded[string(foldKey(nil, []byte(name)))] = struct{}{}
		}
		level = next
	}
	got, _ := exactFieldSets.LoadOrStore(t, set)
	return got.(*exactFieldSet)
}

// exactData is data with each key that would name one of the fields of
// v's structs only once case is folded made to name none (exactKeys),
// for a json.Decoder to read as unmarshalExact reads.
func exactData(data []byte, v any) []byte {
	if fixed := exactKeys(data, reflect.TypeOf(v)); fixed != nil {
		return fixed
	}
	return data
}

// textMember is obj's member named key exactly (the last, when it is
// given twice) when it is a string; "" otherwise.
func textMember(obj []byte, key string) string {
	var s string
	if v, ok := exactMember(obj, key); ok && json.Unmarshal(v, &s) == nil {
		return s
	}
	return ""
}
