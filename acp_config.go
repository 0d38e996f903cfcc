package main

import (
	"slices"
	"strings"
)

// The config options and modes of an ACP session (docs/acp.md): the
// model, the thinking level, the approvals and where bash runs, and the
// older model selector.

// configOptions is the session's full list of config options.
func (as *acpSession) configOptions() []acpConfigOption {
	st := as.s.state()
	as.mu.Lock()
	approvals, custom, shell := as.approvals, as.custom, as.shell
	as.mu.Unlock()
	return acpConfigOptions(as.s.availableModels(), st.Model, st.ThinkingLevel, approvals, custom, shell)
}

func (as *acpSession) modes() acpModes {
	as.mu.Lock()
	defer as.mu.Unlock()
	return acpModesOf(as.approvals, as.custom)
}

// acpConfigResult is set_config_option's answer: the full list.
type acpConfigResult struct {
	ConfigOptions []acpConfigOption `json:"configOptions"`
}

// acpSetConfigOption sets the model (<provider>/<id>), the thinking level,
// the approvals or (when offered) where bash runs; an unknown id or value
// is a -32602 naming the ones allowed. Params: sessionId, configId, value.
// Answer: {configOptions}, the full list; then config_option_update with
// it, and over rpi serve the same update to the session's other ACP
// clients (with current_mode_update first, for approvals).
func acpSetConfigOption(a *acpAgent, req *acpRequest) (any, error) {
	as, err := a.session(req.params)
	if err != nil {
		return nil, err
	}
	id, err := req.params.str("configId")
	if err != nil {
		return nil, err
	}
	value, err := req.params.str("value")
	if err != nil {
		return nil, err
	}
	allowed := as.optionValues
	switch id {
	case "model":
		if err := as.setModel("value", value, allowed("model")); err != nil {
			return nil, err
		}
	case "thought_level":
		if !slices.Contains(allowed("thought_level"), value) {
			return nil, invalidParams("Invalid field value: the thinking level must be one of %s", strings.Join(allowed("thought_level"), ", "))
		}
		as.s.setThinkingLevel(value)
	case "approvals":
		if err := as.setApprovals(value); err != nil {
			return nil, err
		}
	case "shell":
		if err := as.setShell(value); err != nil {
			return nil, err
		}
	default:
		return nil, acpUnknownConfigID(as.offersShell())
	}
	return acpAnswerThen{acpConfigResult{as.configOptions()}, func() {
		as.tellSettings(false)
		as.tellOthers(id == "approvals")
	}}, nil
}

// optionValues are the values the config option id offers now.
func (as *acpSession) optionValues(id string) []string {
	var values []string
	for _, o := range as.configOptions() {
		if o.ID == id {
			for _, v := range o.Options {
				values = append(values, v.Value)
			}
		}
	}
	return values
}

// setModel sets the model to value (<provider>/<id>), one of allowed;
// field names it in errors.
func (as *acpSession) setModel(field, value string, allowed []string) error {
	provider, modelID, _ := strings.Cut(value, "/")
	if !slices.Contains(allowed, value) {
		return invalidParams("Invalid field %s: the model must be one of %s", field, strings.Join(allowed, ", "))
	}
	if _, err := as.s.setModel(provider, modelID); err != nil {
		return invalidParams("Invalid field %s: %v", field, err)
	}
	return nil
}

// acpSetModel is the older model selector's (Emacs agent-shell): the
// model config option by another name.
// Params: sessionId, modelId (<provider>/<id>). Answer: {}; then
// config_option_update.
func acpSetModel(a *acpAgent, req *acpRequest) (any, error) {
	as, err := a.session(req.params)
	if err != nil {
		return nil, err
	}
	value, err := req.params.str("modelId")
	if err != nil {
		return nil, err
	}
	if err := as.setModel("modelId", value, as.optionValues("model")); err != nil {
		return nil, err
	}
	return acpAnswerThen{struct{}{}, func() {
		as.tellSettings(false)
		as.tellOthers(false)
	}}, nil
}

// acpUnknownConfigID refuses a configId the session does not have (shell:
// it has the shell option).
func acpUnknownConfigID(shell bool) error {
	ids := "model, thought_level, approvals"
	if shell {
		ids += ", shell"
	}
	return invalidParams("Invalid field configId: must be one of %s", ids)
}

// setApprovals puts the tools of value behind the approval gate; custom
// is taken only while it is in force (it changes nothing then). It
// decides under as.mu and tells the core after letting go of it: as.mu
// is the sink's (asks), never held into the core. Only the ACP loop
// calls it, so two changes reach the core in their order.
func (as *acpSession) setApprovals(value string) error {
	as.mu.Lock()
	tools, ok := acpApprovalTools(value)
	switch {
	case value == "custom" && as.approvals == "custom":
		as.mu.Unlock()
		return nil
	case !ok:
		var values []string
		for _, v := range acpApprovalValues(as.approvals, as.custom) {
			values = append(values, v.ID)
		}
		as.mu.Unlock()
		return invalidParams("Invalid field value: approvals must be one of %s", strings.Join(values, ", "))
	}
	tools = acpConfirmed(value, tools)
	as.approvals, as.custom, as.confirm = value, nil, tools
	as.mu.Unlock()
	as.s.setConfirmTools(tools)
	return nil
}

// acpSetMode sets the approvals as a mode (the same values).
// Params: sessionId, modeId. Answer: {}; then current_mode_update and
// config_option_update.
func acpSetMode(a *acpAgent, req *acpRequest) (any, error) {
	as, err := a.session(req.params)
	if err != nil {
		return nil, err
	}
	mode, err := req.params.str("modeId")
	if err != nil {
		return nil, err
	}
	if err := as.setApprovals(mode); err != nil {
		e := err.(*acpError)
		return nil, invalidParams("%s", strings.Replace(e.Message, "field value: approvals", "field modeId: the mode", 1))
	}
	return acpAnswerThen{nil, func() {
		as.tellSettings(true)
		as.tellOthers(true)
	}}, nil
}

// tellSettings sends the session's config options as they stand now
// (config_option_update), after its mode (current_mode_update) when mode
// is set. They are read and sent under configMu, so that of two sent at
// once — after a change this client made, and as another client of an
// rpi serve session made one — the later says what is newest.
func (as *acpSession) tellSettings(mode bool) {
	as.configMu.Lock()
	defer as.configMu.Unlock()
	if as.detached {
		return // its client closed it (rpi serve): its answer said so last
	}
	if mode {
		as.send(acpCurrentMode{"current_mode_update", as.modes().CurrentModeID})
	}
	as.send(acpConfigOptionUpdate{"config_option_update", as.configOptions()})
}

// tellOthers tells the other ACP clients of an rpi serve session that
// this one changed its model or thinking level, or its approvals (mode):
// each sends its own client the updates tellSettings sends. Over rpi acp
// a session has no other client.
func (as *acpSession) tellOthers(mode bool) {
	if as.agent.served != nil {
		as.agent.served.settingsChanged(as, mode)
	}
}

// settingsChanged is another client's change of the session's model or
// thinking level, or of its approvals (mode: this view takes them from
// the session), told to this view's client (rpi serve).
func (as *acpSession) settingsChanged(mode bool) {
	if mode {
		as.adoptApprovals()
	}
	as.tellSettings(mode)
}

// adoptApprovals makes the approvals this view shows those the session
// has (rpi serve: another client may have set them, or the session may
// have been opened with others than the host's --confirm): the mode of
// the tools behind its approval gate, custom when they are none of the
// modes'.
func (as *acpSession) adoptApprovals() {
	confirm := slices.Clone(as.s.confirmTools())
	tools := slices.DeleteFunc(slices.Clone(confirm), func(t string) bool { return t == confirmMCPUnmarked })
	value := acpApprovalOf(tools)
	as.mu.Lock()
	defer as.mu.Unlock()
	as.approvals, as.confirm, as.custom = value, confirm, nil
	if value == "custom" {
		as.custom = slices.Clone(confirm)
	}
}
