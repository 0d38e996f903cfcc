package main

// reasoning_details: the structured reasoning OpenRouter (and hosts like
// it) stream in Chat Completions beside or instead of a reasoning field —
// readable text, summaries, and encrypted or signed pieces (a Gemini 3
// thought signature, a Claude thinking signature, an OpenAI encrypted
// reasoning item) that the model wants back unchanged with its tool calls.
// Kept as pi 1.6 keeps them: the JSON of the entries, as JSON.stringify
// writes them, is the thinking block's thinkingSignature, so a session
// file means the same to pi and to rpi.

import (
	"strings"
	"unicode/utf8"
)

// A reasoningDetail is one entry of reasoning_details: its members in the
// order JSON.parse makes them (a key given twice stands where it first
// came, with the last value), each value as JSON.stringify writes it
// again (jsonIn.canonical). A text or summary that streams in pieces is
// joined in joined, the value of the member called joinedKey.
type reasoningDetail struct {
	typ       string
	members   []detailMember
	joinedKey string // "text" or "summary"; "" for an encrypted entry
	joined    strings.Builder
}

// A detailMember is a member of a reasoningDetail; a nil value is
// JavaScript's undefined, which JSON.stringify leaves out (a member pi's
// merging sets from an entry that lacks it).
type detailMember struct {
	key   string
	value []byte
}

// reasoningDetails are the entries of reasoning_details in order.
type reasoningDetails []*reasoningDetail

// find is the index of key's member, -1 when there is none.
func (d *reasoningDetail) find(key string) int {
	for i := range d.members {
		if d.members[i].key == key {
			return i
		}
	}
	return -1
}

// get is the value of key, nil when it is missing or undefined.
func (d *reasoningDetail) get(key string) []byte {
	if i := d.find(key); i >= 0 {
		return d.members[i].value
	}
	return nil
}

// set gives key value, where key stands, or as a new last member.
func (d *reasoningDetail) set(key string, value []byte) {
	if i := d.find(key); i >= 0 {
		d.members[i].value = value
		return
	}
	d.members = append(d.members, detailMember{key, value})
}

// nullish and falsy say what JavaScript's ?? and || see in a value (of
// the types parseReasoningDetail lets through).
func nullish(v []byte) bool { return v == nil || string(v) == "null" }
func falsy(v []byte) bool {
	return nullish(v) || string(v) == `""` || string(v) == "0" || string(v) == "false"
}

// maxDetailMembers bounds an entry's members (a key given twice counts
// each time): an entry is looked up key by key, so one of n members costs
// n² steps, minutes for the few hundred thousand one event or a session
// file's line can hold. No server sends more than a handful (type, its
// text, summary or data, signature, id, format, index); an entry of more
// is left out.
const maxDetailMembers = 64

// parseReasoningDetail reads one entry of reasoning_details as pi 1.6 takes
// one (isOpenAIReasoningDetail): an object whose id is a string or null,
// whose format is a string and whose index is a number, where they are
// given, of type reasoning.summary (with a string summary),
// reasoning.encrypted (a string data) or reasoning.text (a string text, a
// signature that is a string or null). Anything else is no entry (false),
// and is left out, as pi leaves it out; and so is an entry of more than
// maxDetailMembers members, which pi would take. One thing more than pi:
// OpenRouter sends a Claude thinking signature as a reasoning.text of its
// own with a signature and no text at all; pi drops it, and the signature
// with it, which the model needs back; rpi takes it as an empty text. Its
// size is the bytes of its JSON.
func parseReasoningDetail(raw []byte) (d *reasoningDetail, size int, ok bool) {
	members, ok := scanObject(raw, nil)
	if !ok || len(members) > maxDetailMembers {
		return nil, 0, false
	}
	d = &reasoningDetail{members: make([]detailMember, 0, len(members))}
	var in jsonIn
	for _, m := range members {
		in.reset(m.value)
		value := in.canonical(nil, 1)
		if in.fail {
			return nil, 0, false
		}
		// A key that is not UTF-8 is read as pi reads it, each stray
		// byte U+FFFD, before it is compared: two such keys may be one.
		key := m.key
		if !utf8.Valid(key) {
			key = appendValidUTF8(nil, key)
		}
		d.set(string(key), value)
	}
	str := func(v []byte) bool { return len(v) > 0 && v[0] == '"' }
	num := func(v []byte) bool { return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9') }
	if id := d.get("id"); !nullish(id) && !str(id) {
		return nil, 0, false
	}
	if f := d.get("format"); f != nil && !str(f) {
		return nil, 0, false
	}
	if i := d.get("index"); i != nil && !num(i) {
		return nil, 0, false
	}
	typ := d.get("type")
	if !str(typ) || !unquote(typ, &d.typ) {
		return nil, 0, false
	}
	switch d.typ {
	case "reasoning.summary":
		d.joinedKey = "summary"
	case "reasoning.encrypted":
		if !str(d.get("data")) {
			return nil, 0, false
		}
	case "reasoning.text":
		d.joinedKey = "text"
		sig := d.get("signature")
		if !nullish(sig) && !str(sig) {
			return nil, 0, false
		}
		if d.get("text") == nil && str(sig) && string(sig) != `""` {
			d.set("text", []byte(`""`))
		}
	default:
		return nil, 0, false
	}
	if d.joinedKey != "" {
		var s string
		if v := d.get(d.joinedKey); !str(v) || !unquote(v, &s) {
			return nil, 0, false
		}
		d.joined.WriteString(s)
	}
	return d, len(d.appendJSON(nil)), true
}

// joins reports whether add joins d to the last entry.
func (ds reasoningDetails) joins(d *reasoningDetail) bool {
	return len(ds) > 0 && d.joinedKey != "" && ds[len(ds)-1].typ == d.typ
}

// copied are the members of d that add copies to the last entry when it
// joins d to it: its signature where the one before has none (a text),
// its id, format and index where the one before lacks them.
func (ds reasoningDetails) copied(d *reasoningDetail) []string {
	last := ds[len(ds)-1]
	var keys []string
	if d.typ == "reasoning.text" && falsy(last.get("signature")) {
		keys = append(keys, "signature")
	}
	if nullish(last.get("id")) {
		keys = append(keys, "id")
	}
	if falsy(last.get("format")) {
		keys = append(keys, "format")
	}
	if nullish(last.get("index")) {
		keys = append(keys, "index")
	}
	return keys
}

// detailMemberBytes is what holding a member costs besides its JSON: its
// struct, and its key and value each an allocation of their own.
const detailMemberBytes = 64

// cost is what add(d) adds to what ds hold, d's JSON being size bytes:
// an entry of its own is its JSON, a block's cost and its members'
// besides; a piece joined to the last entry is its text, and the values
// it copies there (and the members, where the entry had none), not its
// whole JSON again (OpenRouter repeats type, format and index in every
// piece of a long reasoning).
func (ds reasoningDetails) cost(d *reasoningDetail, size int) int {
	if !ds.joins(d) {
		return size + blockBytes + len(d.members)*detailMemberBytes
	}
	last := ds[len(ds)-1]
	n := len(appendJSONString(nil, d.joined.String())) - 2
	for _, key := range ds.copied(d) {
		if last.find(key) < 0 {
			n += detailMemberBytes + len(key) + 4
		}
		n += len(d.get(key))
	}
	return n
}

// add appends d to ds as pi 1.6 does with each entry streamed
// (appendOpenAIReasoningDetail): a text after a text, or a summary after
// a summary, is joined to it (its text, and the members copied), and any
// other entry is one more.
func (ds *reasoningDetails) add(d *reasoningDetail) {
	if ds.joins(d) {
		last := (*ds)[len(*ds)-1]
		last.joined.WriteString(d.joined.String())
		for _, key := range ds.copied(d) {
			last.set(key, d.get(key))
		}
		return
	}
	*ds = append(*ds, d)
}

// appendJSON appends the entry's JSON, as JSON.stringify writes it.
func (d *reasoningDetail) appendJSON(buf []byte) []byte {
	buf = append(buf, '{')
	first := true
	for _, m := range d.members {
		value := m.value
		if m.key == d.joinedKey {
			value = appendJSONString(nil, d.joined.String())
		}
		if value == nil {
			continue
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(appendJSONString(buf, m.key), ':')
		buf = append(buf, value...)
	}
	return append(buf, '}')
}

// appendJSON appends the entries' JSON array.
func (ds reasoningDetails) appendJSON(buf []byte) []byte {
	buf = append(buf, '[')
	for i, d := range ds {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = d.appendJSON(buf)
	}
	return append(buf, ']')
}

// eachElement calls f with each element of the JSON array raw, and
// reports false when raw is not one (f is then not called).
func eachElement(raw []byte, f func(elem []byte)) bool {
	i := skipSpace(raw, 0)
	if end := skipValue(raw, i, 0); i >= len(raw) || raw[i] != '[' || end < 0 || skipSpace(raw, end) != len(raw) {
		return false
	}
	for i = skipSpace(raw, i+1); i < len(raw) && raw[i] != ']'; {
		end := skipValue(raw, i, 1)
		f(raw[i:end])
		if i = skipSpace(raw, end); i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return true
}

// storedReasoningDetails are the reasoning_details a thinking block's
// signature holds, as pi 1.6 reads them back (parseOpenAIReasoningDetails):
// a JSON array of one entry or more, every one an entry
// parseReasoningDetail takes, written again as they were stored; nil for
// any other signature (a reasoning field's name, another API's).
func storedReasoningDetails(signature string) []byte {
	if !strings.HasPrefix(strings.TrimLeft(signature, " \t\r\n"), "[") {
		return nil
	}
	var ds reasoningDetails
	bad := false // one element that is no entry spoils the lot
	ok := eachElement([]byte(signature), func(elem []byte) {
		d, _, valid := parseReasoningDetail(elem)
		bad = bad || !valid
		ds = append(ds, d)
	})
	if !ok || bad || len(ds) == 0 {
		return nil
	}
	return ds.appendJSON(nil)
}

// legacyReasoningDetail is the encrypted entry an older pi kept as a tool
// call's thoughtSignature (parseLegacyEncryptedReasoningDetail): one
// reasoning.encrypted with an id and data, neither empty; nil for any
// other signature.
func legacyReasoningDetail(signature string) *reasoningDetail {
	if !strings.HasPrefix(strings.TrimLeft(signature, " \t\r\n"), "{") {
		return nil
	}
	d, _, ok := parseReasoningDetail([]byte(signature))
	if !ok || d.typ != "reasoning.encrypted" {
		return nil
	}
	var id string
	if v := d.get("id"); len(v) == 0 || v[0] != '"' || !unquote(v, &id) || id == "" || string(d.get("data")) == `""` {
		return nil
	}
	return d
}
