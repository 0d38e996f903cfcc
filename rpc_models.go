package main

// The rpc front end's model and thinking commands: set_model,
// cycle_model, get_available_models, set_thinking_level,
// cycle_thinking_level, get_available_thinking_levels (docs/models.md).

// setModelCommand switches the model for the next call.
// Fields: provider, modelId. Answer: the Model object. An unknown model
// fails with "Model not found: p/id", one without a key with "No API key
// for p/id: …", one whose API rpi does not speak with a message naming it.
func (s *rpcServer) setModelCommand(r *rpcRequest) (any, error) {
	provider, err := r.str("provider")
	if err != nil {
		return nil, err
	}
	id, err := r.str("modelId")
	if err != nil {
		return nil, err
	}
	m, err := s.setModel(provider, id)
	if err == nil {
		s.settingsChanged()
	}
	return m, err
}

// settingsChanged tells the ACP clients of an rpi serve session that
// this client changed its model or thinking level (config_option_update).
func (s *rpcServer) settingsChanged() {
	if s.served == nil {
		return
	}
	if st := s.served.sh.stageFor(s.session); st != nil {
		st.settingsChanged(nil, false)
	}
}

// cycleModelCommand moves to the next usable model, and to the thinking
// level its pattern's ":level" gives it, if any.
// Fields: none. Answer: {model, thinkingLevel, isScoped (true with
// --models or settings.json's enabledModels)}, or null when fewer than two models are in scope (also with pi's shapes, as
// pi writes it). Events:
// thinking_level_changed when the level in force changes.
func (s *rpcServer) cycleModelCommand(r *rpcRequest) (any, error) {
	if next, ok := s.cycleModel(); ok {
		s.settingsChanged()
		return next, nil
	}
	return jsonNull{}, nil
}

// getAvailableModelsCommand lists the models whose provider has credentials (or
// needs none). Keys are never included.
// Fields: none. Answer: {"models":[Model]}.
func (s *rpcServer) getAvailableModelsCommand(r *rpcRequest) (any, error) {
	return struct {
		Models []*model `json:"models"`
	}{s.availableModels()}, nil
}

// setThinkingLevelCommand sets the reasoning effort used for the next model call.
// A level the model does not take is clamped (the next one up it takes,
// else the next one down); an unchanged effective level writes nothing.
// Fields: level (off|minimal|low|medium|high|xhigh|max). Answer:
// {requested, level (the level in force)}. Events: thinking_level_changed
// before the answer, when the level in force changed.
func (s *rpcServer) setThinkingLevelCommand(r *rpcRequest) (any, error) {
	level, err := r.enum("level", thinkingLevels)
	if err != nil {
		return nil, err
	}
	now := s.setThinkingLevel(level)
	s.settingsChanged()
	return thinkingAnswer{level, now}, nil
}

// cycleThinkingLevelCommand moves to the next level the model takes, wrapping
// around; with a model that does not reason it answers null.
// Fields: none. Answer: {"level":…} or null (also with pi's shapes).
// Events: thinking_level_changed.
func (s *rpcServer) cycleThinkingLevelCommand(r *rpcRequest) (any, error) {
	now, ok := s.cycleThinkingLevel()
	if !ok {
		return jsonNull{}, nil
	}
	s.settingsChanged()
	return struct {
		Level string `json:"level"`
	}{now}, nil
}

// getAvailableThinkingLevelsCommand lists the levels the current model takes.
// Fields: none. Answer: {"levels":[…]} (["off"] without reasoning; every
// level without a model).
func (s *rpcServer) getAvailableThinkingLevelsCommand(r *rpcRequest) (any, error) {
	return struct {
		Levels []string `json:"levels"`
	}{s.thinkingLevelsAvailable()}, nil
}
