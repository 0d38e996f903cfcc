package main

// What the client offers of ACP's newer shapes, and the model's free-text
// questions in an editor that offers forms
// (docs/acp.md#questions-the-user-types): ask_user without options, one
// line or several, asked with elicitation/create as a form of one string
// field, tied to the session and the ask_user call's card. Choices stay a
// permission request (acpSession.ask).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// acpDeclined is what the model is told when the user declines the form,
// or dismisses it.
const acpDeclined = "The user declined to answer"

// acpAnswerField is the one field of the form: the user's answer.
const acpAnswerField = "answer"

// acpElicitation is elicitation/create's params: a form, in the session
// and (when one runs) the tool call that asks.
type acpElicitation struct {
	SessionID       string        `json:"sessionId"`
	ToolCallID      string        `json:"toolCallId,omitempty"`
	Mode            string        `json:"mode"` // form: rpi never sends the user to a URL
	Message         string        `json:"message"`
	RequestedSchema acpFormSchema `json:"requestedSchema"`
}

// acpFormSchema is the form: one string field, required.
type acpFormSchema struct {
	Type       string `json:"type"` // object
	Properties struct {
		Answer acpFormField `json:"answer"`
	} `json:"properties"`
	Required []string `json:"required"`
}

type acpFormField struct {
	Type        string `json:"type"` // string
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
}

// acpOffered reads what the client offers of the shapes newer than the
// first ACP v1 (docs/acp.md#initialize): forms (elicitation.form), notices
// and compaction updates (session.notices, session.compaction), each
// offered by an object ({} will do). As the schema has it, a value of
// another type (null, true) offers nothing, and fails nothing.
func acpOffered(caps acpParams) (elicitationForm, notices, compaction bool) {
	offered := func(p acpParams, field string) bool {
		raw := p.raw(field)
		return len(raw) > 0 && raw[0] == '{'
	}
	if elicitation, ok, _ := caps.object("elicitation"); ok {
		elicitationForm = offered(elicitation, "form")
	}
	if session, ok, _ := caps.object("session"); ok {
		notices, compaction = offered(session, "notices"), offered(session, "compaction")
	}
	return elicitationForm, notices, compaction
}

// askInForm asks a free-text question (req: input, or editor for several
// lines) as a form, and waits for it with no timeout, until ctx ends (the
// turn is cancelled: the request is withdrawn). The question is shown as
// rpc's dialogs show text (control and format characters escaped, lines
// kept, a long one cut in its middle); a placeholder is the field's
// description. Accepted, the answer is the field's text; declined or
// dismissed, acpDeclined. An answer that does not fit the form, or an
// error, is told to the model as no answer, and why.
func (as *acpSession) askInForm(ctx context.Context, req uiRequest) uiAnswer {
	params := acpElicitation{SessionID: as.id, ToolCallID: as.updates.permissionCall(as.updates.current()).ToolCallID,
		Mode: "form", Message: showText("", req.Title)}
	params.RequestedSchema.Type = "object"
	params.RequestedSchema.Properties.Answer = acpFormField{Type: "string", Title: "Answer", Description: acpShownTitle(req.Placeholder)}
	params.RequestedSchema.Required = []string{acpAnswerField}
	raw, err := as.agent.conn.request(ctx, "elicitation/create", params)
	var text string
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, errConnectionClosed) || ctx.Err() != nil:
		return uiAnswer{cancelled: true}
	case err != nil:
		fmt.Fprintf(as.agent.h.stderr, "rpi: elicitation/create: %v\n", err)
		text = "No answer: the editor could not ask the question (" + err.Error() + "). Ask again with options to choose from, or go on without an answer."
	default:
		answer, why := acpFormAnswer(raw)
		text = answer
		if why != "" {
			fmt.Fprintf(as.agent.h.stderr, "rpi: elicitation/create: the client's answer does not fit the form asked: %s\n", why)
			text = "No answer: the editor's answer does not fit the question's form (" + why + "). Ask again, or go on without an answer."
		}
	}
	return uiAnswer{value: &text}
}

// acpFormAnswer reads the client's answer to the form: {action: accept,
// content: {answer: string}} is the text, decline and cancel are
// acpDeclined; anything else (another action, no content, a field that
// is not a string, missing, or besides it) says why it does not fit.
func acpFormAnswer(raw json.RawMessage) (text, why string) {
	p, err := paramsOf(raw, "")
	if err != nil {
		return "", "it is not an object"
	}
	action, err := p.str("action")
	if err != nil {
		return "", "its action is missing or not a string"
	}
	switch action {
	case "decline", "cancel":
		return acpDeclined, ""
	case "accept":
	default:
		return "", fmt.Sprintf("the action %q is none of accept, decline and cancel", action)
	}
	content, ok, err := p.object("content")
	switch {
	case err != nil || !ok:
		return "", "it accepts the form without its content"
	case !content.has(acpAnswerField):
		return "", "its content has no answer"
	}
	keys := content.r.keys()
	if extra := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k == acpAnswerField }); len(extra) > 0 {
		return "", fmt.Sprintf("its content has fields the form does not: %s", jsonStrings(extra))
	}
	if len(keys) > 1 {
		return "", "its content gives the answer more than once"
	}
	answer, err := content.str(acpAnswerField)
	if err != nil {
		return "", "its answer is not a string"
	}
	return answer, ""
}
