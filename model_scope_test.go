package main

import (
	"cmp"
	"slices"
	"strings"
	"testing"
)

// TestResolveScope: the patterns of --models and enabledModels resolve to
// models as pi 1.6's do, in the cases the fixtures (scope_*.txtar) leave
// out.
func TestResolveScope(t *testing.T) {
	// models are "provider/id" or "provider/id=name"; a provider of
	// several words (with a slash) is marked by "|" before its id.
	cases := []struct {
		name     string
		models   []string
		patterns []string
		scope    []string // "provider/id" or "provider/id:level"
		warnings []string
	}{
		{"glob with a level", []string{"a|x1", "a|x2", "b|y1"}, []string{"A/X*:medium"},
			[]string{"a/x1:medium", "a/x2:medium"}, nil},
		{"a glob over the id alone", []string{"a|x1", "b|X2"}, []string{"x?"}, []string{"a/x1", "b/X2"}, nil},
		{"an invalid level makes no glob level", []string{"a|x1"}, []string{"x*:hgih"}, nil,
			[]string{`No models match pattern "x*:hgih"`}},
		{"a model once, the first pattern's level", []string{"a|x1", "a|x2"}, []string{"a/x1:low", "a/*:high"},
			[]string{"a/x1:low", "a/x2:high"}, nil},
		{"an exact id with brackets, several providers", []string{"a|m[1m]", "b|m[1m]", "a|m1"}, []string{"m[1m]"},
			[]string{"a/m[1m]", "b/m[1m]"}, []string{`Pattern "m[1m]" matches several providers: a, b. Use provider/id to choose one.`}},
		{"the named provider wins", []string{"a|shared", "b|shared"}, []string{"B/Shared:low"}, []string{"b/shared:low"}, nil},
		{"the longest provider, which has a slash", []string{"gw|x/y", "gw/x|y", "gw/x|z"}, []string{"gw/x/y"},
			[]string{"gw/x/y"}, nil},
		{"another provider's id with a slash", []string{"zai|glm-5", "gw|zai/glm-5"}, []string{"zai/glm-5"},
			[]string{"zai/glm-5"}, nil},
		{"the whole text as an id when the named provider lacks it", []string{"zai|glm-4", "gw|zai/glm-5"}, []string{"zai/glm-5"},
			[]string{"gw/zai/glm-5"}, nil},
		{"fuzzy within a named provider", []string{"a|sonnet-4-5-20250929", "a|sonnet-4-5", "b|sonnet-9"}, []string{"a/sonnet:high"},
			[]string{"a/sonnet-4-5:high"}, nil},
		{"dated ids only: the latest", []string{"a|s-4-5-20250101", "a|s-4-5-20250929"}, []string{"s-4"},
			[]string{"a/s-4-5-20250929"}, nil},
		{"-latest is an alias", []string{"a|m-20250101", "a|m-latest"}, []string{"m-"}, []string{"a/m-latest"}, nil},
		{"fuzzy over names", []string{"a|q7=Qwen Coder", "a|q8"}, []string{"coder"}, []string{"a/q7"}, nil},
		{"fuzzy tie across providers", []string{"a|kimi-k2", "b|kimi-k2", "b|kimi-k1"}, []string{"kimi"},
			[]string{"a/kimi-k2", "b/kimi-k2"}, []string{`Pattern "kimi" matches several providers: a, b. Use provider/id to choose one.`}},
		{"an id's own colon", []string{"local|qwen2.5-coder:7b"}, []string{"qwen2.5-coder:7b:low"},
			[]string{"local/qwen2.5-coder:7b:low"}, nil},
		{"an invalid level after a valid one", []string{"a|x1"}, []string{"a/x1:bad:high"}, []string{"a/x1"},
			[]string{`Invalid thinking level "bad" in pattern "a/x1:bad". Using default instead.`}},
		{"spaces around a reference", []string{"a|x1"}, []string{"  a / x1  "}, []string{"a/x1"}, nil},
		{"no match", []string{"a|x1"}, []string{"nope", "x1"}, []string{"a/x1"}, []string{`No models match pattern "nope"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var models []*model
			for _, s := range c.models {
				provider, id, _ := strings.Cut(s, "|")
				id, name, named := strings.Cut(id, "=")
				if !named {
					name = id
				}
				models = append(models, &model{Provider: provider, ID: id, Name: name})
			}
			scope, warnings := resolveScope(c.patterns, models)
			var got, said []string
			for _, s := range scope {
				ref := s.m.Provider + "/" + s.m.ID
				if s.level != "" {
					ref += ":" + s.level
				}
				got = append(got, ref)
			}
			for _, w := range warnings {
				said = append(said, w.message)
			}
			if !slices.Equal(got, c.scope) || !slices.Equal(said, c.warnings) {
				t.Errorf("resolveScope(%q) = %q, warnings %q; want %q, %q", c.patterns, got, said, c.scope, c.warnings)
			}
		})
	}
}

// TestLocaleCompare: ids sort as JavaScript's localeCompare sorts them:
// punctuation before digits before letters, case only between equals.
func TestLocaleCompare(t *testing.T) {
	ordered := []string{"a b", "a_b", "a-b", "a:b", "a.b", "a/b", "a1", "a9", "ab", "aB", "abc", "B", "c"} // as node sorts them
	for i := range ordered {
		for j := range ordered {
			if got, want := localeCompare(ordered[i], ordered[j]), cmp.Compare(i, j); got != want {
				t.Errorf("localeCompare(%q, %q) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}
