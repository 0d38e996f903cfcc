package main

// Reflection-free decoding of session lines. Opening a session of
// hundreds of MB is mostly decoding its lines, so decodeEntry reads each
// line in one pass, straight into the entry and its message, and gives
// exactly what unmarshalExact of the line and decodeMessage of its
// message would give (sessionline_test.go checks it against them, and
// FuzzDecodeEntry fuzzes it). Keys name fields exactly, as for pi's
// JSON.parse: one that differs from a field's name only in case ("Id",
// "ſtopReason") is a member rpi does not know, on both paths. What the
// fast path does not take — a key with escapes, a field given twice, a
// whole number written otherwise than plainly, a value of an unexpected
// type, deep nesting, a message of a role rpi does not model — goes to
// encoding/json with keys matched exactly (unmarshalExact), whose answer
// stands: the fast path declines rather than guesses.

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// ---- Decoding a line ----

// decodeEntry decodes one session line (d's scratch space is reused from
// line to line). The entry's message is decoded into msg, as
// decodeMessage decodes it.
func decodeEntry(line []byte, d *jsonIn) (*sessionEntry, error) {
	e := &sessionEntry{}
	if d.entry(line, e) {
		return e, nil
	}
	e, d.lossy = &sessionEntry{}, true // keepLine keeps the line as it is
	withMessage := struct {
		*sessionEntry
		entryMore
		Message json.RawMessage `json:"message"`
	}{sessionEntry: e}
	plain, stamp, retimed := timestampNotText(plainWholeNumbers(line, entryInts, false))
	if err := unmarshalExact(plain, &withMessage); err != nil {
		return nil, err
	}
	if retimed {
		e.Timestamp = stamp
	}
	if more := withMessage.entryMore; !more.zero() {
		more.Content, _ = validRaw(more.Content) // as the fast path reads it
		e.more = &more
	}
	e.msg, e.msgSize = decodeMessage(withMessage.Message), len(withMessage.Message)
	return e, nil
}

// timestampNotText takes an entry's timestamp that is no string out of
// line (null in its place, a copy), as pi 1.6 keeps the entry whatever
// its timestamp is: stamp is the time pi's new Date() makes of it, as rpi
// writes one, for a number (milliseconds since 1970, cut to a whole
// number) or a boolean (1 or 0), "" for anything else or a time past the
// years 1 to 9999 (no time: pi's NaN); retimed is false when the
// timestamp is a string, null or missing, and line comes back as it is.
func timestampNotText(line []byte) (_ []byte, stamp string, retimed bool) {
	at, end, ok := memberValue(line, "timestamp")
	if !ok || line[at] == '"' || line[at] == 'n' {
		return line, "", false
	}
	const earliest, latest = -62135596800000, 253402300799999 // 0001-01-01 and 9999-12-31T23:59:59.999Z, in ms
	var ms float64
	switch value := string(line[at:end]); {
	case value == "true":
		ms = 1
	case value == "false":
		ms = 0
	case json.Unmarshal(line[at:end], &ms) != nil:
		ms = math.NaN()
	}
	if ms = math.Trunc(ms); ms >= earliest && ms <= latest {
		stamp = timestamp(time.UnixMilli(int64(ms)))
	}
	return slices.Concat(line[:at], []byte("null"), line[end:]), stamp, true
}

// decodeMessage reads a stored message into its type; one of a role rpi
// does not know is kept as it is, and one that is missing or not an
// object gives nil (the entry is skipped).
func decodeMessage(raw json.RawMessage) any {
	var d jsonIn
	d.reset(raw)
	if m := d.message(); !d.fail && skipSpace(raw, d.i) == len(raw) {
		return m
	}
	return decodeMessageSlow(raw)
}

// jsonIn reads JSON from b, at i. A method that meets what it does not
// take sets fail; once set, the others do nothing.
type jsonIn struct {
	b       []byte
	i       int
	fail    bool
	scratch []byte // strings with escapes are unescaped here
	// lossy: something read would not be written again as the same JSON
	// value (a null read as "", invalid UTF-8 as U+FFFD, a member the
	// writer leaves out or adds, a float that does not round-trip): the
	// entry keeps its line (keepLine).
	lossy     bool
	keyAt     int // where the key of the member being read starts
	messageAt int // where the message being read starts (for blocks' bound)
	// extra, msgExtra: the members of the entry's object and of its
	// message's that rpi does not know, each with a leading ",", kept
	// to be written again beside what rpi writes.
	extra, msgExtra []byte
	// Kept from line to line, so that a file of many small entries holds
	// each string once where it can: names, the strings name has read
	// (at most maxNames); prevID, when set, the id of the entry read
	// before (a parentId that is the same string points at it).
	names  map[string]string
	prevID *string
}

func (d *jsonIn) reset(b []byte) {
	d.b, d.i, d.fail, d.lossy, d.extra, d.msgExtra = b, 0, false, false, d.extra[:0], d.msgExtra[:0]
}

// object reads the object at i, calling member with each key while i
// stands at that key's value, which member must read. A key with escapes
// fails (it could name a field once unescaped).
func (d *jsonIn) object(member func(key []byte)) {
	b := d.b
	i := skipSpace(b, d.i)
	if d.fail || i >= len(b) || b[i] != '{' {
		d.fail = true
		return
	}
	if i = skipSpace(b, i+1); i < len(b) && b[i] == '}' {
		d.i = i + 1
		return
	}
	for {
		end := skipString(b, i)
		if end < 0 || bytes.IndexByte(b[i:end], '\\') >= 0 {
			d.fail = true
			return
		}
		key := b[i+1 : end-1]
		d.keyAt = i
		if i = skipSpace(b, end); i >= len(b) || b[i] != ':' {
			d.fail = true
			return
		}
		d.i = skipSpace(b, i+1)
		member(key)
		if i = skipSpace(b, d.i); d.fail || i >= len(b) {
			d.fail = true
			return
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			d.i = i + 1
			return
		default:
			d.fail = true
			return
		}
	}
}

// array reads the array at i, calling elem while i stands at each
// element, which elem must read.
func (d *jsonIn) array(elem func()) {
	b := d.b
	i := skipSpace(b, d.i)
	if d.fail || i >= len(b) || b[i] != '[' {
		d.fail = true
		return
	}
	if i = skipSpace(b, i+1); i < len(b) && b[i] == ']' {
		d.i = i + 1
		return
	}
	for {
		d.i = i
		elem()
		if i = skipSpace(b, d.i); d.fail || i >= len(b) {
			d.fail = true
			return
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			d.i = i + 1
			return
		default:
			d.fail = true
			return
		}
	}
}

// null reads a null at i, if there is one there.
func (d *jsonIn) null() bool {
	if !d.fail && bytes.HasPrefix(d.b[d.i:], []byte("null")) {
		d.i += 4
		return true
	}
	return false
}

// nullLost reads a null at i, if there is one there, for a field that
// is not written again as null (lossy).
func (d *jsonIn) nullLost() bool {
	if d.null() {
		d.lossy = true
		return true
	}
	return false
}

// at reports whether the value at i starts with c.
func (d *jsonIn) at(c byte) bool { return !d.fail && d.i < len(d.b) && d.b[d.i] == c }

// once fails when the field numbered bit was seen already: the last of
// repeated keys would win, and a repeated object or array would be
// merged into the first, which the fast path does not follow.
func (d *jsonIn) once(seen *uint32, bit uint) {
	if *seen&(1<<bit) != 0 {
		d.fail = true
	}
	*seen |= 1 << bit
}

// skip reads any valid value.
func (d *jsonIn) skip() {
	if d.fail {
		return
	}
	if end := skipValue(d.b, d.i, 1); end < 0 {
		d.fail = true
	} else {
		d.i = end
	}
}

// number reads a number's text.
func (d *jsonIn) number() []byte {
	if d.fail || d.i >= len(d.b) {
		d.fail = true
		return nil
	}
	end := skipNumber(d.b, d.i)
	if end < 0 {
		d.fail = true
		return nil
	}
	n := d.b[d.i:end]
	d.i = end
	return n
}

// integer reads a whole number that fits in bits bits, written plainly
// or not (1.0, 1e3: wholeNumber); null leaves dst as it was.
func (d *jsonIn) integer(dst *int64, bits int) {
	if d.nullLost() {
		return
	}
	n := d.number()
	if d.fail {
		return
	}
	v, ok := wholeNumber(n)
	if !ok || bits < 64 && (v >= 1<<(bits-1) || v < -1<<(bits-1)) {
		d.fail = true
		return
	}
	*dst = v
}

func (d *jsonIn) intField(dst *int) {
	v := int64(*dst)
	d.integer(&v, strconv.IntSize)
	*dst = int(v)
}

// tokensField reads a token count into dst, held at the ends of int: a
// 32-bit build takes a count past 2^31 that a 64-bit one wrote (the line
// is then lossy, and kept as it was written).
func (d *jsonIn) tokensField(dst *int) {
	v := int64(*dst)
	d.integer(&v, 64)
	if held := max(min(v, math.MaxInt), math.MinInt); held != v {
		v, d.lossy = held, true
	}
	*dst = int(v)
}

// float reads a number into dst; null leaves dst as it was.
func (d *jsonIn) float(dst *float64) {
	if d.nullLost() {
		return
	}
	n := d.number()
	if d.fail {
		return
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		d.fail = true
		return
	}
	*dst = f
	// Written again as appendJSONFloat writes f: the same number only
	// when f holds n exactly (0.1, 1e3 do; 0.10000000000000000001 not).
	var buf [32]byte
	if !sameNumber(n, appendJSONFloat(buf[:0], f)) {
		d.lossy = true
	}
}

// boolean reads true or false into dst; null leaves dst as it was.
func (d *jsonIn) boolean(dst *bool) {
	switch {
	case d.nullLost():
	case bytes.HasPrefix(d.b[d.i:], []byte("true")):
		*dst = true
		d.i += 4
	case bytes.HasPrefix(d.b[d.i:], []byte("false")):
		*dst = false
		d.i += 5
	default:
		d.fail = true
	}
}

// raw reads any value as a json.RawMessage of its own bytes (null too,
// as encoding/json keeps it), each byte that is not UTF-8 made U+FFFD
// (validRaw; the line is then kept as it was: lossy).
func (d *jsonIn) raw(dst *json.RawMessage) {
	start := d.i
	d.skip()
	if !d.fail {
		var replaced bool
		if *dst, replaced = validRaw(d.b[start:d.i]); replaced {
			d.lossy = true
		}
	}
}

// validRaw is a copy of raw, JSON text, with each byte that is not part
// of a valid UTF-8 sequence made U+FFFD (replaced: there was one). Such a
// byte can stand only inside a string, so the copy is the same JSON with
// that string as encoding/json reads it, and a session file's stray byte
// reaches no client and no model.
func validRaw(raw []byte) (_ json.RawMessage, replaced bool) {
	if utf8.Valid(raw) {
		return bytes.Clone(raw), false
	}
	return appendValidUTF8(make([]byte, 0, len(raw)+8), raw), true
}

// details reads a tool result's details (null: nil) as their JSON,
// written again as pi writes what it reads (canonical), a
// json.RawMessage: rpi passes details on and never looks inside, so they
// cost no more than their bytes, where a hostile [{},{},…] decoded into
// maps and slices would cost 30 to 50 times as much.
func (d *jsonIn) details() any {
	if d.null() {
		return nil
	}
	end := skipValue(d.b, d.i, 1) // the JSON is mostly as long as written: one allocation
	out := d.canonical(make([]byte, 0, max(end-d.i, 0)), 1)
	if d.fail {
		return nil
	}
	return json.RawMessage(out)
}

// canonical appends the value at i as JSON.parse and JSON.stringify
// write it again, as pi does: compact, members in their order, strings as
// appendJSONString writes them (a byte that is not UTF-8 as U+FFFD,
// lossy), numbers as appendJSONFloat writes a float64 (lossy when that
// is another number). A key given twice is kept twice (a reader takes
// the last, as JSON.parse does). It fails where encoding/json fails to
// decode a value (a number past float64) and past maxScanDepth.
func (d *jsonIn) canonical(out []byte, depth int) []byte {
	if d.fail || d.i >= len(d.b) || depth > maxScanDepth {
		d.fail = true
		return out
	}
	switch c := d.b[d.i]; {
	case c == '{':
		out = append(out, '{')
		b, first := d.b, true
		for i := skipSpace(b, d.i+1); ; {
			if first && i < len(b) && b[i] == '}' {
				d.i = i + 1
				return append(out, '}')
			}
			if !first {
				out = append(out, ',')
			}
			first = false
			d.i = i
			key, ok := d.stringValue()
			if i = skipSpace(b, d.i); !ok || i >= len(b) || b[i] != ':' {
				d.fail = true
				return out
			}
			out = append(appendJSONString(out, key), ':')
			d.i = skipSpace(b, i+1)
			out = d.canonical(out, depth+1)
			if i = skipSpace(b, d.i); d.fail || i >= len(b) {
				d.fail = true
				return out
			}
			if b[i] == '}' {
				d.i = i + 1
				return append(out, '}')
			}
			if b[i] != ',' {
				d.fail = true
				return out
			}
			i = skipSpace(b, i+1)
		}
	case c == '[':
		out = append(out, '[')
		first := true
		d.array(func() {
			if !first {
				out = append(out, ',')
			}
			first = false
			out = d.canonical(out, depth+1)
		})
		return append(out, ']')
	case c == '"':
		s, _ := d.stringValue()
		return appendJSONString(out, s)
	case c == 't' || c == 'f':
		var v bool
		d.boolean(&v)
		return appendJSONBool(out, v)
	case c == 'n':
		if !d.null() {
			d.fail = true
		}
		return append(out, "null"...)
	}
	var f float64
	if d.float(&f); !finite(f) {
		d.fail = true
	}
	return appendJSONFloat(out, f)
}

// The JSON names of each struct's fields, for fields.
var (
	entryFields = []string{"type", "id", "parentId", "message", "provider", "modelId", "thinkingLevel", "summary", "firstKeptEntryId", "tokensBefore", "name", "fromId", "customType", "content", "timestamp"}
	blockFields = []string{"type", "text", "textSignature", "thinking", "thinkingSignature", "data", "mimeType", "id", "name", "arguments", "thoughtSignature", "redacted"}
	usageFields = []string{"input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost"}
	costFields  = []string{"input", "output", "cacheRead", "cacheWrite", "total"}
)

// fields reads the object at i as the struct whose JSON names are
// names: read is called with each name the object has, while i stands at
// its value, which read must read. A name given twice fails (once), and
// other keys are skipped (a key that differs from a name only in case
// names no field, as for JSON.parse and unmarshalExact), their members appended to *keep (each
// after a ","), or, when keep is nil, lost (lossy). seen has bit i set
// for each names[i] the object has.
func (d *jsonIn) fields(names []string, keep *[]byte, read func(name string)) (seen uint32) {
	d.object(func(key []byte) {
		for i, name := range names {
			if string(key) == name {
				d.once(&seen, uint(i))
				read(name)
				return
			}
		}
		start := d.keyAt
		if d.skip(); keep != nil && !d.fail && utf8.Valid(d.b[start:d.i]) {
			*keep = append(append(*keep, ','), d.b[start:d.i]...)
		} else {
			d.lossy = true // lost, or not UTF-8: the line is kept, and written out as valid UTF-8 (appendEntryJSON)
		}
	})
	return seen
}

// entry decodes a whole line into e, its message into e.msg; false when
// the fast path declines.
func (d *jsonIn) entry(line []byte, e *sessionEntry) bool {
	d.reset(line)
	var message []byte // the message's bytes when the fast path left it
	seen := d.fields(entryFields, &d.extra, func(name string) {
		switch name {
		case "type":
			d.name(&e.Type)
		case "id":
			d.str(&e.ID)
		case "parentId":
			if d.null() {
				break
			}
			if p := d.prevID; p != nil && d.plainString(*p) {
				e.ParentID = p // the entry before's own id: one string for both
			} else if s, ok := d.stringValue(); ok {
				e.ParentID = &s
			}
		case "message":
			start, lossy := d.i, d.lossy
			e.msg = d.message()
			if d.fail {
				d.i, d.fail, d.lossy, d.msgExtra = start, false, lossy, d.msgExtra[:0]
				d.skip()
				message = d.b[start:d.i]
			}
			e.msgSize = d.i - start
		case "provider":
			d.str(&e.setInfo().Provider)
		case "modelId":
			d.str(&e.setInfo().ModelID)
		case "thinkingLevel":
			d.str(&e.setInfo().ThinkingLevel)
		case "summary":
			d.str(&e.setInfo().Summary)
		case "firstKeptEntryId":
			d.str(&e.setInfo().FirstKeptEntryID)
		case "tokensBefore":
			d.intField(&e.setInfo().TokensBefore)
		case "name":
			d.str(&e.setInfo().Name)
		case "fromId":
			d.str(&e.setInfo().FromID)
		case "customType":
			d.str(&e.setInfo().CustomType)
		case "content":
			d.raw(&e.setInfo().Content)
		case "timestamp":
			d.str(&e.Timestamp)
		}
	})
	if d.fail || skipSpace(line, d.i) != len(line) {
		return false
	}
	if message != nil {
		e.msg = decodeMessageSlow(message)
		if _, kept := e.msg.(rawMessage); !kept {
			d.lossy = true // encoding/json's view of it is not its text
		}
	}
	if seen != messageEntrySeen {
		d.lossy = true // a message entry's line has these members, and only these
	}
	return true
}

// messageEntrySeen is what fields sees of a message entry's line as
// appendMessageLine writes it: type, id, parentId, message, timestamp.
const messageEntrySeen = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<14

// messageFields are the JSON names of every role's fields, in one list:
// a message's keys may come in any order, its role among them, so the
// fast path reads them all into a messageUnion and makes the role's
// message at the end. No two of them are alike when case is ignored.
var messageFields = []string{"role", "content", "timestamp", "api", "provider", "model", "usage", "stopReason", "errorMessage",
	"toolCallId", "toolName", "details", "isError", "command", "output", "exitCode", "cancelled", "truncated",
	"fullOutputPath", "excludeFromContext", "summary", "tokensBefore", "fromId",
	"responseId", "responseModel", "rawStopReason", "durationMs", "thinkingLevel"}

// The bits of messageFields, in its order, for what fields sees.
const (
	mRole uint32 = 1 << iota
	mContent
	mTimestamp
	mAPI
	mProvider
	mModel
	mUsage
	mStopReason
	mErrorMessage
	mToolCallID
	mToolName
	mDetails
	mIsError
	mCommand
	mOutput
	mExitCode
	mCancelled
	mTruncated
	mFullOutputPath
	mExcludeFromContext
	mSummary
	mTokensBefore
	mFromID
	mResponseID
	mResponseModel
	mRawStopReason
	mDurationMs
	mThinkingLevel
)

// bitIf is bit when cond holds, else 0.
func bitIf(cond bool, bit uint32) uint32 {
	if cond {
		return bit
	}
	return 0
}

// messageUnion is what a message's fields held, whatever its role.
type messageUnion struct {
	role, text                                   string
	isText, hasContent                           bool // content was a string; content was given
	content                                      []contentBlock
	timestamp                                    int64
	api, provider, model, stopReason, errorMsg   string
	usage                                        usage
	toolCallID, toolName                         string
	details                                      any
	isError, cancelled, truncated, excludeFrom   bool
	command, output, fullOutputPath, summary, id string
	exitCode                                     *int
	tokensBefore                                 int
	meta                                         answerMeta // an answer's; durationMs a tool result's too
}

// message decodes the message object at i, its keys in any order, when
// rpi models its role and each of its fields has the type that role's
// message gives it.
func (d *jsonIn) message() any {
	start := skipSpace(d.b, d.i)
	d.messageAt = start
	var u messageUnion
	seen := d.fields(messageFields, &d.msgExtra, func(name string) {
		switch name {
		case "role":
			d.name(&u.role)
		case "content":
			u.hasContent = true
			if d.at('"') {
				u.isText = true
				d.str(&u.text)
			} else {
				u.isText = false
				d.blocks(&u.content)
			}
		case "timestamp":
			d.integer(&u.timestamp, 64)
		case "api":
			d.name(&u.api)
		case "provider":
			d.name(&u.provider)
		case "model":
			d.name(&u.model)
		case "usage":
			d.usage(&u.usage)
		case "stopReason":
			d.name(&u.stopReason)
		case "errorMessage":
			d.str(&u.errorMsg)
		case "toolCallId":
			d.str(&u.toolCallID)
		case "toolName":
			d.name(&u.toolName)
		case "details":
			u.details = d.details()
		case "isError":
			d.boolean(&u.isError)
		case "command":
			d.str(&u.command)
		case "output":
			d.str(&u.output)
		case "exitCode":
			u.exitCode = nil
			if !d.null() {
				var code int
				d.intField(&code)
				u.exitCode = &code
			}
		case "cancelled":
			d.boolean(&u.cancelled)
		case "truncated":
			d.boolean(&u.truncated)
		case "fullOutputPath":
			d.str(&u.fullOutputPath)
		case "excludeFromContext":
			d.boolean(&u.excludeFrom)
		case "summary":
			d.str(&u.summary)
		case "tokensBefore":
			d.intField(&u.tokensBefore)
		case "fromId":
			d.str(&u.id)
		case "responseId":
			d.str(&u.meta.ResponseID)
		case "responseModel":
			d.str(&u.meta.ResponseModel)
		case "rawStopReason":
			d.str(&u.meta.RawStopReason)
		case "durationMs":
			u.meta.DurationMs = nil
			if !d.null() {
				var ms int64
				d.integer(&ms, 64)
				u.meta.DurationMs = &ms
			}
		case "thinkingLevel":
			d.str(&u.meta.ThinkingLevel)
		}
	})
	if d.fail || len(u.content) > (d.i-start)/bytesPerBlock {
		d.fail = true // too many blocks: decodeMessageSlow keeps it as it is
		return nil
	}
	m := d.roleMessage(&u)
	if !d.fail && seen != u.written() {
		d.lossy = true
	}
	return m
}

// written is what fields would see of the message appendMessageJSON
// writes for u's role: its fields, those left out when empty left out.
func (u *messageUnion) written() uint32 {
	switch u.role {
	case "user":
		return mRole | mContent | mTimestamp
	case "assistant":
		a := &u.meta
		return mRole | mContent | mAPI | mProvider | mModel | mUsage | mStopReason | bitIf(u.errorMsg != "", mErrorMessage) | mTimestamp |
			bitIf(a.ResponseID != "", mResponseID) | bitIf(a.ResponseModel != "", mResponseModel) |
			bitIf(a.RawStopReason != "", mRawStopReason) | bitIf(a.DurationMs != nil, mDurationMs) | bitIf(a.ThinkingLevel != "", mThinkingLevel)
	case "toolResult":
		return mRole | mToolCallID | mToolName | mContent | bitIf(u.details != nil, mDetails) | mIsError |
			bitIf(u.meta.DurationMs != nil, mDurationMs) | mTimestamp
	case "bashExecution":
		return mRole | mCommand | mOutput | bitIf(u.exitCode != nil, mExitCode) | mCancelled | mTruncated |
			bitIf(u.fullOutputPath != "", mFullOutputPath) | bitIf(u.excludeFrom, mExcludeFromContext) | mTimestamp
	}
	return mRole | mSummary | bitIf(u.tokensBefore != 0, mTokensBefore) | bitIf(u.id != "", mFromID) | mTimestamp
}

// roleMessage is the message of u's role, as encoding/json decodes it
// into that role's type; it fails (nil) for a role rpi does not model,
// and for content that role does not take.
func (d *jsonIn) roleMessage(u *messageUnion) any {
	if u.isText && u.role != "user" {
		d.fail = true // a string is no content blocks: encoding/json fails, the message is kept raw
		return nil
	}
	switch u.role {
	case "user":
		if u.isText {
			d.lossy = true // written again as a text block
			return &userMessage{Role: u.role, Content: textBlocks(u.text), Timestamp: u.timestamp}
		}
		return &userMessage{Role: u.role, Content: u.content, Timestamp: u.timestamp}
	case "assistant":
		a := &assistantMessage{Role: u.role, Content: u.content, API: u.api, Provider: u.provider, Model: u.model,
			Usage: u.usage, StopReason: u.stopReason, ErrorMessage: u.errorMsg, Timestamp: u.timestamp}
		if u.meta != (answerMeta{}) {
			meta := u.meta
			a.answerMeta = &meta
		}
		return a
	case "toolResult":
		return &toolResultMessage{Role: u.role, ToolCallID: u.toolCallID, ToolName: u.toolName, Content: u.content,
			Details: u.details, IsError: u.isError, DurationMs: u.meta.DurationMs, Timestamp: u.timestamp}
	}
	if u.hasContent {
		d.fail = true // content blocks read for a role without them: encoding/json reads none
		return nil
	}
	switch u.role {
	case "bashExecution": // decodeMessage's bash message is a value
		return bashExecutionMessage{Role: u.role, Command: u.command, Output: u.output, ExitCode: u.exitCode,
			Cancelled: u.cancelled, Truncated: u.truncated, FullOutputPath: u.fullOutputPath,
			ExcludeFromContext: u.excludeFrom, Timestamp: u.timestamp}
	case "compactionSummary", "branchSummary":
		return &summaryMessage{Role: u.role, Summary: u.summary, TokensBefore: u.tokensBefore, FromID: u.id, Timestamp: u.timestamp}
	}
	d.fail = true // a role rpi keeps as it is: encoding/json's view
	return nil
}

// blocks reads an array of content blocks into dst (null: nil). Past
// the first few blocks it counts the rest (elements) and fails at once
// when the message cannot hold that many (bytesPerBlock; message checks
// it exactly), so a hostile [{},{},…] is never decoded, and an array of
// many blocks is decoded into a slice of its size, not copied as it grows.
func (d *jsonIn) blocks(dst *[]contentBlock) {
	if d.null() {
		*dst = nil
		return
	}
	blocks := []contentBlock{}
	d.array(func() {
		if len(blocks) == 8 {
			n := len(blocks) + elements(d.b, d.i)
			if n*bytesPerBlock > len(d.b)-d.messageAt {
				d.fail = true // more than the message can hold
				return
			}
			blocks = slices.Grow(blocks, n-len(blocks))
		}
		var b contentBlock
		d.block(&b)
		blocks = append(blocks, b)
	})
	*dst = blocks
}

// elements counts the elements of an array from b[i], the start of one
// of them, to its end (of what is not JSON, some count: the fast path
// fails on it anyway). It follows nesting of any depth, as encoding/json
// does: stopping where skipValue does (maxScanDepth), it would leave the
// [{},{},…] after one deep block uncounted, and decoded.
func elements(b []byte, i int) (n int) {
	if i < len(b) && b[i] != ']' {
		n = 1
	}
	for depth := 0; i >= 0 && i < len(b); i++ {
		switch b[i] {
		case '"':
			i = skipString(b, i) - 1 // at its closing quote; -2, ending the count, when it has none
		case '[', '{':
			depth++
		case ']', '}':
			if depth--; depth < 0 {
				return n
			}
		case ',':
			if depth == 0 {
				n++
			}
		}
	}
	return n
}

// block reads one content block, keeping the signature of its type
// (signatureOf; another is lost: lossy).
func (d *jsonIn) block(b *contentBlock) {
	var text, thinking, thought string // the three signatures
	var redacted bool
	seen := d.fields(blockFields, nil, func(name string) {
		switch name {
		case "type":
			d.name(&b.Type)
		case "text":
			d.str(&b.Text)
		case "textSignature":
			d.str(&text)
		case "thinking":
			d.str(&b.Thinking)
		case "thinkingSignature":
			d.str(&thinking)
		case "data":
			d.str(&b.Data)
		case "mimeType":
			d.name(&b.MimeType)
		case "id":
			d.str(&b.ID)
		case "name":
			d.name(&b.Name)
		case "arguments":
			d.raw(&b.Arguments)
		case "thoughtSignature":
			d.str(&thought)
		case "redacted":
			d.boolean(&redacted)
		}
	})
	b.Signature = signatureOf(b.Type, text, thinking, thought)
	b.Redacted = redacted && b.Type == "thinking"
	// What fields would see of the block appendJSON writes: type, and
	// the fields of its type (blockFields' bits).
	want := uint32(1 << 0)
	signed := b.Signature != ""
	switch b.Type {
	case "thinking":
		want |= 1<<3 | bitIf(signed, 1<<4) | bitIf(b.Redacted, 1<<11)
	case "image":
		want |= 1<<5 | 1<<6
	case "toolCall":
		want |= 1<<7 | 1<<8 | 1<<9 | bitIf(signed, 1<<10)
	default:
		want |= 1<<1 | bitIf(signed, 1<<2)
	}
	if seen != want {
		d.lossy = true
	}
}

// usage reads an answer's usage (null leaves it as it was).
func (d *jsonIn) usage(u *usage) {
	if d.nullLost() {
		return
	}
	seen := d.fields(usageFields, nil, func(name string) {
		switch name {
		case "input":
			d.tokensField(&u.Input)
		case "output":
			d.tokensField(&u.Output)
		case "cacheRead":
			d.tokensField(&u.CacheRead)
		case "cacheWrite":
			d.tokensField(&u.CacheWrite)
		case "totalTokens":
			d.tokensField(&u.TotalTokens)
		case "cost":
			if !d.nullLost() {
				c := &u.Cost
				if d.fields(costFields, nil, func(name string) {
					switch name {
					case "input":
						d.float(&c.Input)
					case "output":
						d.float(&c.Output)
					case "cacheRead":
						d.float(&c.CacheRead)
					case "cacheWrite":
						d.float(&c.CacheWrite)
					case "total":
						d.float(&c.Total)
					}
				}) != 1<<len(costFields)-1 {
					d.lossy = true // appendJSON writes every one
				}
			}
		}
	})
	if seen != 1<<len(usageFields)-1 {
		d.lossy = true
	}
}
