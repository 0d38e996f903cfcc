package main

import "testing"

// TestTemplateArguments fills templates as pi 1.6 does — $1…$n, ${@:N},
// ${@:N:L}, $ARGUMENTS and $@ — and never expands again what an argument
// brought in.
func TestTemplateArguments(t *testing.T) {
	for _, c := range []struct{ body, args, want string }{
		{"Review $1 for $2.", `main.go "error handling"`, "Review main.go for error handling."},
		{"[$3]", "a b", "[]"},
		{"$0 $01", "a b", " a"},
		{"$99999999999999999999 x", "a", " x"},
		{"${@:2}", "a b c", "b c"},
		{"${@:2:1}", "a b c", "b"},
		{"${@:0}", "a b c", "a b c"},
		{"${@:1:0}.", "a b c", "."},
		{"${@:5}.", "a b c", "."},
		{"${@:2:99999999999999999999}", "a b c", "b c"},
		{"${@:99999999999999999999:1}.", "a b c", "."},
		{"${@:x}", "a", "${@:x}"},
		{"$ARGUMENTS|$@", "a 'b c'", "a b c|a b c"},
		// Text an argument brings in stays as it came.
		{"$ARGUMENTS", "cost $@", "cost $@"},
		{"$1 $2", "$2 two", "$2 two"},
		{"$1 ${@:2}", "$ARGUMENTS x", "$ARGUMENTS x"},
		{"$$1", "@", "$@"},
	} {
		if got := substituteArgs(c.body, splitArgs(c.args)); got != c.want {
			t.Errorf("%q with %q: got %q, want %q", c.body, c.args, got, c.want)
		}
	}
}
