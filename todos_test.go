package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// todoServer is a server for driving the plan directly.
func todoServer(t *testing.T) *rpcServer { return toolServer(t, nil) }

// setPlan replaces the plan from JSON phases and fails the test on error.
func setPlan(t *testing.T, s *rpcServer, phases string) todoResult {
	t.Helper()
	var plan []todoPhase
	if err := json.Unmarshal([]byte(phases), &plan); err != nil {
		t.Fatal(err)
	}
	res, err := s.changeTodos(func([]todoPhase) ([]todoPhase, todoError) { return plan, prepareTodos(plan) })
	if err != nil {
		t.Fatalf("set %s: %v", phases, err)
	}
	return res
}

// opErr applies an op given as JSON and returns its error text ("" for none).
func opErr(t *testing.T, s *rpcServer, op string) string {
	t.Helper()
	var o todoOp
	if err := json.Unmarshal([]byte(op), &o); err != nil {
		t.Fatal(err)
	}
	if _, err := s.applyTodoOp(o); err != nil {
		return err.Error()
	}
	return ""
}

// states lists "id:status:ready" for every task, phases joined by "|".
func states(s *rpcServer) string {
	var out []string
	for _, p := range s.todoPlan() {
		var tasks []string
		for _, t := range p.Tasks {
			r := ""
			if t.Ready {
				r = "+"
			}
			tasks = append(tasks, t.ID+":"+t.Status+r)
		}
		out = append(out, strings.Join(tasks, " "))
	}
	return strings.Join(out, "|")
}

const diamond = `[{"name":"Roots","tasks":[{"id":"a","content":"root a","status":"pending"},{"id":"b","content":"root b","status":"pending"}]},
	{"name":"Join","tasks":[{"id":"c","content":"join","status":"in_progress","dependsOn":["a","b"]},{"id":"d","content":"leaf","status":"pending","dependsOn":["c"]}]}]`

func TestTodoReadiness(t *testing.T) {
	s := todoServer(t)
	res := setPlan(t, s, diamond)
	// c is in progress but blocked: it goes back to pending, and the first
	// pending ready task (a) starts.
	if got := states(s); got != "a:in_progress+ b:pending+|c:pending d:pending" {
		t.Errorf("after set: %s", got)
	}
	join := res.Phases[1].Tasks[0]
	if len(join.BlockedBy) != 2 || join.BlockedBy[0] != (todoBlocker{"a", "root a", "in_progress"}) || join.DependsOn[1] != "b" {
		t.Errorf("join: %+v", join)
	}
	if got := opErr(t, s, `{"op":"start","task":"join"}`); got != `Errors: Task "join" (c) is blocked by root a (a), root b (b)` {
		t.Errorf("start blocked: %s", got)
	}
	// Completing one root and dropping the other unblocks c; b is not
	// started meanwhile because a is still in progress.
	if got := opErr(t, s, `{"op":"drop","task":"b"}`); got != "" {
		t.Fatal(got)
	}
	if got := states(s); got != "a:in_progress+ b:abandoned|c:pending d:pending" {
		t.Errorf("after drop b: %s", got)
	}
	res, err := s.applyTodoOp(todoOp{Op: "done", Task: "root a"})
	if err != nil {
		t.Fatal(err)
	}
	if got := states(s); got != "a:completed b:abandoned|c:in_progress+ d:pending" {
		t.Errorf("after done a: %s", got)
	}
	if len(res.CompletedTasks) != 1 || res.CompletedTasks[0] != (todoCompletion{"Roots", "root a"}) {
		t.Errorf("completed: %+v", res.CompletedTasks)
	}
	// done with no task or phase completes everything; only what was
	// open is reported.
	res, _ = s.applyTodoOp(todoOp{Op: "done"})
	if len(res.CompletedTasks) != 3 || res.CompletedTasks[0].Content != "root b" {
		t.Errorf("completed: %+v", res.CompletedTasks)
	}
	// Several ready tasks may be in progress at once (start does not stop others).
	setPlan(t, s, `[{"name":"P","tasks":[{"content":"x","status":"in_progress"},{"content":"y","status":"pending"}]}]`)
	if got := opErr(t, s, `{"op":"start","task":"y"}`); got != "" {
		t.Fatal(got)
	}
	if p := s.todoPlan(); p[0].Tasks[0].Status != "in_progress" || p[0].Tasks[1].Status != "in_progress" {
		t.Errorf("two started: %+v", p)
	}
}

func TestTodoValidation(t *testing.T) {
	s := todoServer(t)
	setPlan(t, s, diamond)
	before := states(s)
	for _, tt := range []struct{ op, want string }{
		{`{"op":"add_dependency","task":"a","dependsOn":["d"]}`, "Errors: Todo dependencies contain a cycle"},
		{`{"op":"add_dependency","task":"a","dependsOn":["a","zz"]}`, `Errors: Task "a" cannot depend on itself; Dependency task ID "zz" not found`},
		{`{"op":"add_dependency","task":"root a","dependsOn":["b"]}`, `Errors: Task ID "root a" not found`},
		{`{"op":"add_dependency","task":"a","dependsOn":[]}`, "Errors: dependsOn must contain at least one task ID"},
		{`{"op":"remove_dependency","task":"d","dependsOn":["a"]}`, `Errors: Task "d" does not depend on "a"`},
		{`{"op":"rm","task":"c"}`, `Errors: Cannot remove dependency target(s) c: task "leaf" (d) depends on them; retry rm with cascade=true to remove those dependency edges`},
		{`{"op":"append","phase":" X ","items":["", "root a", " pad"]}`, `Errors: Phase name must not have leading or trailing whitespace; Task content must not be empty; Task " pad" must not have leading or trailing whitespace`},
		{`{"op":"append","phase":"Roots","items":["root a","new","new"]}`, `Errors: Task "root a" already exists; Task "new" already exists`},
		{`{"op":"done","phase":"Nope"}`, `Errors: Phase "Nope" not found`},
		{`{"op":"start"}`, "Errors: Missing task ID or content"},
		{`{"op":"init"}`, "Errors: Missing list for init operation"},
		{`{"op":"init","list":[{"phase":"A","items":["x"]},{"phase":"A","items":["x"],"agents":[]}]}`,
			`Errors: Agents for phase "A" must match its items one for one (1 items, 0 agents); Duplicate phase "A" in init list; Duplicate task "x" in init list`},
	} {
		if got := opErr(t, s, tt.op); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.op, got, tt.want)
		}
		if got := states(s); got != before {
			t.Errorf("%s changed the plan: %s", tt.op, got)
		}
	}
	var plan []todoPhase
	json.Unmarshal([]byte(`[{"name":"P","tasks":[{"id":"a","content":"x","status":"pending","dependsOn":["b","b","a"]},{"id":"a","content":"x","status":"pending"}]}]`), &plan)
	want := `Errors: Duplicate task "x"; Task "a" has duplicate dependency task ID "b"; Duplicate task ID "a"; ` +
		`Task "a" depends on missing task ID "b"; Task "a" depends on missing task ID "b"; Task "a" cannot depend on itself`
	if errs := prepareTodos(plan); errs.Error() != want {
		t.Errorf("got  %s\nwant %s", errs, want)
	}
}

func TestTodoIDs(t *testing.T) {
	s := todoServer(t)
	first := setPlan(t, s, `[{"name":"P","tasks":[{"content":"x","status":"pending"},{"content":"y","status":"pending"}]}]`)
	again := setPlan(t, s, `[{"name":"P","tasks":[{"content":"x","status":"pending"},{"content":"y","status":"pending"}]}]`)
	x, y := first.Phases[0].Tasks[0].ID, first.Phases[0].Tasks[1].ID
	if !strings.HasPrefix(x, "task-") || len(x) != 25 || x == y || again.Phases[0].Tasks[0].ID != x {
		t.Errorf("hashed ids: %s %s, again %s", x, y, again.Phases[0].Tasks[0].ID)
	}
	// An id already taken gets a suffix.
	clash := setPlan(t, s, `[{"name":"P","tasks":[{"id":"`+x+`","content":"other","status":"pending"},{"content":"x","status":"pending"}]}]`)
	if got := clash.Phases[0].Tasks[1].ID; got != x+"-2" {
		t.Errorf("clash: %s", got)
	}
	// init makes new ids; an identical re-init keeps them, another does not.
	init := `{"op":"init","list":[{"phase":"Build","items":["compile","test"],"agents":["a1","a2"]}]}`
	opErr(t, s, init)
	ids := states(s)
	if p := s.todoPlan(); !strings.HasPrefix(p[0].Tasks[0].ID, "task-") || p[0].Tasks[1].Agent != "a2" {
		t.Errorf("init: %+v", p)
	}
	opErr(t, s, `{"op":"done","task":"compile"}`)
	opErr(t, s, init)
	if got := states(s); got != ids {
		t.Errorf("identical re-init: %s, want %s", got, ids)
	}
	opErr(t, s, `{"op":"init","items":["compile","test"],"phase":"Build"}`)
	if got := states(s); got == ids {
		t.Errorf("re-init without the agents kept the ids")
	}
}

func TestTodoRemoveAndAppend(t *testing.T) {
	s := todoServer(t)
	setPlan(t, s, diamond)
	if got := opErr(t, s, `{"op":"rm","task":"c","cascade":true}`); got != "" {
		t.Fatal(got)
	}
	if p := s.todoPlan(); len(p[1].Tasks) != 1 || len(p[1].Tasks[0].DependsOn) != 0 || !p[1].Tasks[0].Ready {
		t.Errorf("after rm cascade: %+v", p[1])
	}
	opErr(t, s, `{"op":"append","phase":"Later","items":["one","two"]}`)
	opErr(t, s, `{"op":"update_dependencies","task":"d","dependsOn":["a","b"]}`)
	if got := states(s); !strings.HasPrefix(got, "a:in_progress+ b:pending+|d:pending|task-") {
		t.Errorf("after append: %s", got)
	}
	opErr(t, s, `{"op":"rm","phase":"Roots","cascade":true}`)
	opErr(t, s, `{"op":"rm"}`)
	if got := states(s); got != "||" {
		t.Errorf("after rm all: %q", got)
	}
	if res, _ := s.applyTodoOp(todoOp{Op: "view"}); res.Summary != "Todo list is empty." || len(res.Phases) != 3 {
		t.Errorf("view: %+v", res)
	}
}

// TestTodoPlanNeverChangedInPlace: get_state shares the plan it answers
// with (session.state) and knows it unchanged by its identity
// (stateData.sameJSON), so no operation may change a plan once it is the
// session's: each one, failing or not, leaves the plan get_state last saw
// as it was, to its JSON.
func TestTodoPlanNeverChangedInPlace(t *testing.T) {
	s := todoServer(t)
	setPlan(t, s, diamond)
	ops := []string{
		`{"op":"view"}`,
		`{"op":"start","task":"a"}`,
		`{"op":"done","task":"a"}`,
		`{"op":"drop","task":"b"}`,
		`{"op":"add_dependency","task":"d","dependsOn":["a"]}`,
		`{"op":"remove_dependency","task":"d","dependsOn":["a"]}`,
		`{"op":"update_dependencies","task":"d","dependsOn":["c","a"]}`,
		`{"op":"append","phase":"Join","items":["more"]}`,
		`{"op":"append","phase":"New","items":["new one"]}`,
		`{"op":"rm","task":"c"}`,
		`{"op":"rm","task":"c","cascade":true}`,
		`{"op":"rm","phase":"Roots"}`,
		`{"op":"start","task":"nothing"}`,
		`{"op":"init","items":["x","y"]}`,
		`{"op":"init","items":["x","y"]}`,
		`{"op":"done","phase":"Tasks"}`,
		`{"op":"rm"}`,
	}
	for _, op := range ops {
		seen := s.state()
		before := seen.appendJSON(nil)
		opErr(t, s, op)
		if after := seen.appendJSON(nil); !bytes.Equal(before, after) {
			t.Errorf("%s changed the plan get_state last saw:\nwas %s\nnow %s", op, before, after)
		}
	}
}

// TestTodoPlanSizeBounded: a plan whose tasks each depend on many others
// with long contents is refused, not shown: blockedBy repeats each open
// dependency's content, so a line of under 1 MB made records of tens of
// MB each (and one of 64 MiB, gigabytes).
func TestTodoPlanSizeBounded(t *testing.T) {
	ps := startSession(t)
	var tasks []string
	for i := range 120 {
		var deps []string
		for j := range i {
			deps = append(deps, fmt.Sprintf("%q", fmt.Sprint(j)))
		}
		tasks = append(tasks, fmt.Sprintf(`{"id":"%d","content":"%d %s","status":"pending","dependsOn":[%s]}`,
			i, i, strings.Repeat("x", 3000), strings.Join(deps, ",")))
	}
	line := `{"id":"big","type":"set_todos","phases":[{"name":"P","tasks":[` + strings.Join(tasks, ",") + `]}]}`
	ps.send(line)
	ps.waitFor(`"id":"big"`)
	ps.send(`{"id":"ok","type":"set_todos","phases":[{"name":"P","tasks":[{"content":"Small","status":"pending"}]}]}`)
	ps.waitFor(`"id":"ok"`)
	recs := ps.close()
	if out := len(ps.out.bytes()); out > 4*len(line) {
		t.Errorf("a %d-byte line made %d bytes of records", len(line), out)
	}
	for _, rec := range recs {
		if rec["id"] == "big" && (rec["success"] != false || !strings.Contains(fmt.Sprint(rec["error"]), "The plan is too large")) {
			t.Errorf("the big plan: %.300v", rec)
		}
		if rec["id"] == "ok" && rec["success"] != true {
			t.Errorf("a small plan after it: %v", rec)
		}
	}
}

// TestTodoErrorsBounded: a plan's errors name what is wrong, and a bad
// plan cannot make them many times its own size. One task with a long id
// and a thousand dependencies on a task that is not there made a message
// naming that id for each dependency, twice: a 20 KB line made 32 MB of
// error (a 5 MB line, terabytes).
func TestTodoErrorsBounded(t *testing.T) {
	ps := startSession(t)
	id := strings.Repeat("x", 16<<10)
	deps := strings.TrimSuffix(strings.Repeat(`"a",`, 1000), ",")
	line := `{"id":"bad","type":"set_todos","phases":[{"name":"P","tasks":[{"id":"` + id +
		`","content":"C","status":"pending","dependsOn":[` + deps + `]}]}]}`
	ps.send(line)
	ps.waitFor(`"id":"bad"`)
	// An op's errors likewise: 50,000 missing dependencies, 50,000 items
	// that are there already.
	ops := []string{
		`{"id":"deps","type":"todo_op","op":"add_dependency","task":"` + id + `","dependsOn":[` + strings.TrimSuffix(strings.Repeat(`"b",`, 50_000), ",") + `]}`,
		`{"id":"items","type":"todo_op","op":"append","phase":"P","items":[` + strings.TrimSuffix(strings.Repeat(`"C",`, 50_000), ",") + `]}`,
	}
	ps.send(`{"id":"set","type":"set_todos","phases":[{"name":"P","tasks":[{"id":"` + id + `","content":"C","status":"pending"}]}]}`)
	for _, op := range ops {
		ps.send(op)
		line += op
	}
	ps.waitFor(`"id":"items"`)
	before := len(ps.out.bytes())
	recs := ps.close()
	if out := before - 3*len(id); out > 2*len(line) { // the plan set shows its task's id thrice (event, answer, summary)
		t.Errorf("%d bytes of lines made %d bytes of records", len(line), out)
	}
	for _, rec := range recs {
		if (rec["id"] == "deps" || rec["id"] == "items") && (rec["success"] != false || !strings.HasSuffix(fmt.Sprint(rec["error"]), "; (more errors not shown)")) {
			t.Errorf("%.300v", rec)
		}
	}
	for _, rec := range recs {
		if rec["id"] == "bad" {
			msg := fmt.Sprint(rec["error"])
			if rec["success"] != false || !strings.Contains(msg, `…(16384 bytes in all) has duplicate dependency task ID "a"`) ||
				!strings.HasSuffix(msg, "; (more errors not shown)") {
				t.Errorf("the bad plan: %.500v", rec)
			}
		}
	}
}

// TestTodoDependencyOpsAreLinear: add_dependency and remove_dependency
// with a task's every dependency are done in one pass each, in the order
// given. Each looked every dependency up in a list: over rpc, lines of
// 3 MB (60,000 tasks, then one depending on them all) held the session
// lock 8 s to add them and 12 s to remove them; here 60,000 took 23 s,
// and 400,000 would take some 17 minutes, past go test's timeout.
func TestTodoDependencyOpsAreLinear(t *testing.T) {
	const n = 400_000
	tasks := make([]todoItem, n)
	var ids []string
	for i := range tasks {
		tasks[i] = todoItem{ID: strconv.Itoa(i), Content: strconv.Itoa(i), Status: "completed"}
		if i > 0 {
			ids = append(ids, tasks[i].ID)
		}
	}
	plan := []todoPhase{{Name: "P", Tasks: tasks}}
	plan, errs := todoOp{Op: "add_dependency", Task: "0", DependsOn: ids}.dependencies(plan)
	if len(errs) > 0 || !slices.Equal(plan[0].Tasks[0].DependsOn, ids) {
		t.Fatalf("add_dependency: %v, %d dependencies", errs, len(plan[0].Tasks[0].DependsOn))
	}
	plan, errs = todoOp{Op: "add_dependency", Task: "0", DependsOn: ids[:2]}.dependencies(plan)
	if len(errs) > 0 || len(plan[0].Tasks[0].DependsOn) != n-1 {
		t.Fatalf("add_dependency again: %v, %d dependencies", errs, len(plan[0].Tasks[0].DependsOn))
	}
	plan, errs = todoOp{Op: "remove_dependency", Task: "0", DependsOn: ids[1:]}.dependencies(plan)
	if len(errs) > 0 || !slices.Equal(plan[0].Tasks[0].DependsOn, ids[:1]) {
		t.Fatalf("remove_dependency: %v, %v", errs, plan[0].Tasks[0].DependsOn)
	}
	_, errs = todoOp{Op: "remove_dependency", Task: "0", DependsOn: ids[:2]}.dependencies(plan)
	if want := fmt.Sprintf(`Task "0" does not depend on %q`, ids[1]); len(errs) != 1 || errs[0] != want {
		t.Errorf("remove_dependency of one it does not have: %v, want %s", errs, want)
	}
}
