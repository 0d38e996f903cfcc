package main

// pi 1.6's context_edit entries: an edit of an earlier entry's part of the
// model's context (docs/sessions.md), which rpi writes to take an answer
// out that auto-compaction runs again (conversation.omit).

import "slices"

// contextEdits is the latest context_edit among entries of each entry
// one names: its replacement as written ("null" takes the entry out of
// the context; pi 1.6 writes it for a failed attempt that was compacted
// away and run again, and an extension can replace the content).
func contextEdits(entries []*sessionEntry) map[string][]byte {
	var out map[string][]byte
	for _, e := range entries {
		if e.Type != "context_edit" {
			continue
		}
		at, end, ok := memberValue(e.raw, "replacement")
		if target, named := stringMember(e.raw, "targetId"); named && ok {
			if out == nil {
				out = map[string][]byte{}
			}
			out[target] = e.raw[at:end]
		}
	}
	return out
}

func isNull(value []byte) bool { return string(value) == "null" }

// editedMessage is m with the content a context_edit's replacement gives
// it, as pi's projectContextEntry makes it: a user, assistant, tool
// result or custom message only; a string for an answer or a tool result
// becomes one text block. A replacement without content leaves m as it is.
func editedMessage(m any, replacement []byte) any {
	at, end, ok := memberValue(replacement, "content")
	if !ok {
		return m
	}
	content := replacement[at:end]
	var js []byte
	if raw, isRaw := m.(rawMessage); isRaw {
		js = raw
	} else {
		js, _ = marshalJSON(m)
	}
	role := messageRole(js)
	switch role {
	case "user", "assistant", "toolResult", "custom":
	default:
		return m
	}
	var text string
	if (role == "assistant" || role == "toolResult") && len(content) > 0 && content[0] == '"' && unquote(content, &text) {
		content, _ = marshalJSON(textBlocks(text))
	}
	cAt, cEnd, ok := memberValue(js, "content")
	if !ok {
		return m
	}
	if edited := decodeMessage(slices.Concat(js[:cAt], content, js[cEnd:])); edited != nil {
		return edited
	}
	return m
}
