package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestEditDetailsRedactKeys: an edit's diff and patch, which go to the
// client and the session file, have the keys rpi holds taken out as its
// text does: a context line of .env that holds one shows [redacted].
func TestEditDetailsRedactKeys(t *testing.T) {
	const key = "sk-secret-key-0123456789"
	s := toolServer(t, map[string]string{".env": "OPENAI_API_KEY=" + key + "\nDEBUG=0\n"})
	s.set.secrets.add(key)
	res, isError := s.runTool(context.Background(), contentBlock{Type: "toolCall", ID: "c", Name: "edit",
		Arguments: json.RawMessage(`{"path":".env","edits":[{"oldText":"DEBUG=0","newText":"DEBUG=1"}]}`)})
	details, _ := json.Marshal(res.Details)
	if isError || strings.Contains(string(details), key) || !strings.Contains(string(details), "OPENAI_API_KEY=[redacted]") {
		t.Errorf("edit's details (isError %v): %s", isError, details)
	}
}
