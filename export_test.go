package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestExportHTMLIsUTF8: the page says it is UTF-8, and is, whatever the
// conversation holds. The user's bash keeps its output's bytes as they
// came (a binary file cat'ed, a Latin-1 one), and those reached the page
// as they were: each byte that is not part of a character is written as
// U+FFFD, as get_messages and the session file have it, and a character
// cut nowhere else is kept.
func TestExportHTMLIsUTF8(t *testing.T) {
	const bad = "a\xff\xfe<\xc0é\xe2\x82" // two stray bytes, a lone lead, a character, a cut one
	messages := []any{
		bashExecutionMessage{Role: "bashExecution", Command: "cat x" + bad, Output: bad},
		&userMessage{Role: "user", Content: []contentBlock{{Type: "text", Text: bad}, {Type: "image", MimeType: "image/png" + bad, Data: bad}}},
		&assistantMessage{Role: "assistant", Provider: bad, Model: bad, Content: []contentBlock{
			{Type: "thinking", Thinking: bad}, {Type: "toolCall", Name: bad, Arguments: json.RawMessage(`"` + bad + `"`)}},
			StopReason: "error", ErrorMessage: bad},
		&toolResultMessage{Role: "toolResult", ToolName: bad, Content: textBlocks(bad)},
		&summaryMessage{Role: "compactionSummary" + bad, Summary: bad},
		rawMessage(`{"role":"custom","content":"` + bad + `"}`),
	}
	var page bytes.Buffer
	if err := writeHTML(bufio.NewWriter(&page), sessionHeader{ID: bad, Timestamp: bad, Cwd: bad}, bad, messages); err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(page.Bytes()) {
		t.Errorf("the page is not UTF-8:\n%q", page.Bytes())
	}
	const want = "a\uFFFD\uFFFD&lt;\uFFFDé\uFFFD\uFFFD"
	if n := strings.Count(page.String(), want); n != 21 {
		t.Errorf("%q appears %d times, want 21 (every value):\n%s", want, n, page.Bytes())
	}
}
