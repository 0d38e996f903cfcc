package main

// Todos as phases (docs/todos-and-loops.md): the agent's plan, phases of tasks with
// dependencies between them. set_todos replaces it whole; todo_op and the
// model's todo tool change it with the same ten operations (one
// implementation); every change is validated as a whole, then readiness
// and the one-in-progress rule are applied, and todo_updated, the todos
// widget, get_todos and get_state.todoPhases report the result.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// todoStatuses are a task's states; completed and abandoned tasks are
// closed and no longer block the tasks that depend on them.
var todoStatuses = []string{"pending", "in_progress", "completed", "abandoned"}

// todoOps are todo_op's operations.
var todoOps = []string{"init", "start", "done", "drop", "rm", "append",
	"add_dependency", "remove_dependency", "update_dependencies", "view"}

// todoPhase is a named group of tasks; the order of phases is the order the
// plan is shown in, nothing more (any ready task may proceed).
type todoPhase struct {
	Name  string     `json:"name"`
	Tasks []todoItem `json:"tasks"`
}

// todoItem is one task. ready and blockedBy are recomputed on every change;
// on input they, id and dependsOn may be left out.
type todoItem struct {
	ID        string        `json:"id"`
	Content   string        `json:"content"`
	Status    string        `json:"status"`
	DependsOn []string      `json:"dependsOn"`
	Ready     bool          `json:"ready"`
	BlockedBy []todoBlocker `json:"blockedBy"`
	Agent     string        `json:"agent,omitempty"`
}

// todoBlocker is a dependency that is still open.
type todoBlocker struct {
	TaskID  string `json:"taskId"`
	Content string `json:"content"`
	Status  string `json:"status"`
}

// todoCompletion names a task a change completed.
type todoCompletion struct {
	Phase   string `json:"phase"`
	Content string `json:"content"`
}

// todoResult answers set_todos and todo_op.
type todoResult struct {
	Phases         []todoPhase      `json:"phases"`
	CompletedTasks []todoCompletion `json:"completedTasks"`
	Summary        string           `json:"summary"`
}

// todoUpdated is todo_updated's payload, with the original's snake_case
// field name.
type todoUpdated struct {
	Phases         []todoPhase      `json:"phases"`
	CompletedTasks []todoCompletion `json:"completed_tasks"`
}

// todoInitPhase is one phase of an init list; agents, when given, name
// the agent of each item.
type todoInitPhase struct {
	Phase  string   `json:"phase"`
	Items  []string `json:"items"`
	Agents []string `json:"agents,omitempty"`
}

// todoOp is one operation of todo_op or the todo tool. Absent lists are
// nil; task and phase are "" when absent (an empty name means absent, as
// in the original).
type todoOp struct {
	Op        string          `json:"op"`
	List      []todoInitPhase `json:"list,omitempty"`
	Items     []string        `json:"items,omitempty"`
	Phase     string          `json:"phase,omitempty"`
	Task      string          `json:"task,omitempty"`
	Cascade   bool            `json:"cascade,omitempty"`
	DependsOn []string        `json:"dependsOn,omitempty"`

	now time.Time // for the ids of new tasks
}

// todoError is a rejected change: every problem found, joined.
type todoError []string

func (e todoError) Error() string { return "Errors: " + strings.Join(e, "; ") }

// maxTodoErrors bounds the problems one check of a whole plan reports:
// a plan of many bad tasks or dependencies would otherwise get a message
// for each, and each names its task (a long id named for each of a
// million dependencies made terabytes).
const maxTodoErrors = 100

// addf adds a problem, formatted, unless maxTodoErrors are there already:
// then one more says that the rest are not shown, and nothing is
// formatted. A value that may be long is given as shownValue, not %q.
func (e *todoError) addf(format string, args ...any) {
	switch {
	case len(*e) < maxTodoErrors:
		*e = append(*e, fmt.Sprintf(format, args...))
	case len(*e) == maxTodoErrors:
		*e = append(*e, "(more errors not shown)")
	}
}

// ---- The state ----

// changeTodos applies change to a copy of the plan and, when it finds no
// error, makes the result the plan; either way (a view too) it writes
// todo_updated and the widget, posted under s.mu so that reports of
// concurrent changes keep their order.
func (s *session) changeTodos(change func(plan []todoPhase) ([]todoPhase, todoError)) (todoResult, error) {
	s.mu.Lock()
	defer s.unlock()
	before := s.todos
	after, errs := change(cloneTodos(before))
	if len(errs) > 0 {
		return todoResult{}, errs
	}
	if after == nil {
		after = []todoPhase{}
	}
	s.todos = after
	done := completedSince(before, after)
	s.postEvent("todo_updated", todoUpdated{after, done})
	s.postTell(uiRequest{Method: "setWidget", WidgetKey: "todos", WidgetLines: todoWidget(after)})
	return todoResult{after, done, todoSummary(after)}, nil
}

// todoPlan is a copy of the plan, never nil.
func (s *session) todoPlan() []todoPhase {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.todoPlanLocked()
}

func (s *session) todoPlanLocked() []todoPhase { return cloneTodos(s.todos) }

// cloneTodos is a deep copy of plan, never nil.
func cloneTodos(plan []todoPhase) []todoPhase {
	out := make([]todoPhase, len(plan))
	for i, p := range plan {
		out[i] = todoPhase{Name: p.Name, Tasks: make([]todoItem, len(p.Tasks))}
		for j, t := range p.Tasks {
			t.DependsOn = slices.Clone(t.DependsOn)
			t.BlockedBy = slices.Clone(t.BlockedBy)
			out[i].Tasks[j] = t
		}
	}
	return out
}

// ---- Commands ----

// applyTodoOp is todo_op and the todo tool: the operation, then the
// whole plan checked and its readiness recomputed. A view changes nothing
// (and recomputes nothing) but is still reported.
func (s *session) applyTodoOp(op todoOp) (todoResult, error) {
	op.now = s.env.clock.Now()
	return s.changeTodos(func(plan []todoPhase) ([]todoPhase, todoError) {
		if op.Op == "view" {
			return plan, nil
		}
		plan, errs := op.apply(plan)
		if len(errs) > 0 {
			return nil, errs
		}
		return plan, prepareTodos(plan)
	})
}

// ---- Operations ----

// apply does the operation on plan (a copy the caller owns) and returns
// the new plan, or what is wrong with the operation.
func (op todoOp) apply(plan []todoPhase) ([]todoPhase, todoError) {
	var errs todoError
	switch op.Op {
	case "init":
		return op.init(plan)
	case "start":
		p, t, ok := findTask(plan, op.Task, &errs)
		if !ok {
			return nil, errs
		}
		task := &plan[p].Tasks[t]
		if len(task.BlockedBy) > 0 {
			var by []string
			for _, b := range task.BlockedBy {
				by = append(by, fmt.Sprintf("%s (%s)", b.Content, b.TaskID))
			}
			return nil, todoError{fmt.Sprintf("Task %q (%s) is blocked by %s", task.Content, task.ID, strings.Join(by, ", "))}
		}
		task.Status = "in_progress"
	case "done", "drop":
		status := map[string]string{"done": "completed", "drop": "abandoned"}[op.Op]
		for _, at := range targets(plan, op.Task, op.Phase, &errs) {
			plan[at[0]].Tasks[at[1]].Status = status
		}
	case "rm":
		return op.remove(plan)
	case "append":
		return op.append(plan)
	case "add_dependency", "remove_dependency", "update_dependencies":
		return op.dependencies(plan)
	}
	return plan, errs
}

// init replaces the plan with new tasks, all pending, with new ids; a
// plan identical to the current one (phases, contents and agents) keeps
// its ids.
func (op todoOp) init(plan []todoPhase) ([]todoPhase, todoError) {
	list := op.List
	if list == nil && len(op.Items) > 0 {
		phase := op.Phase
		if phase == "" {
			phase = "Tasks"
		}
		list = []todoInitPhase{{Phase: phase, Items: op.Items}}
	}
	if list == nil {
		return nil, todoError{"Missing list for init operation"}
	}
	var errs todoError
	next := make([]todoPhase, 0, len(list))
	for _, entry := range list {
		if len(entry.Items) == 0 {
			errs.addf("Missing items for phase %s in init list", shownValue(entry.Phase))
		}
		if entry.Agents != nil && len(entry.Agents) != len(entry.Items) {
			errs.addf("Agents for phase %s must match its items one for one (%d items, %d agents)",
				shownValue(entry.Phase), len(entry.Items), len(entry.Agents))
		}
		phase := todoPhase{Name: entry.Phase, Tasks: []todoItem{}}
		for i, content := range entry.Items {
			t := todoItem{Content: content, Status: "pending"}
			if i < len(entry.Agents) {
				t.Agent = entry.Agents[i]
			}
			phase.Tasks = append(phase.Tasks, t)
		}
		next = append(next, phase)
	}
	errs = append(errs, checkNames(next, " in init list")...)
	if len(errs) > 0 {
		return nil, errs
	}
	same := sameOutline(plan, next)
	for i := range next {
		for j := range next[i].Tasks {
			if same {
				next[i].Tasks[j].ID = plan[i].Tasks[j].ID
			} else {
				next[i].Tasks[j].ID = newTaskID(op.now)
			}
		}
	}
	return next, nil
}

// sameOutline reports whether two plans have the same phases, contents
// and agents, in the same order.
func sameOutline(a, b []todoPhase) bool {
	return slices.EqualFunc(a, b, func(p, q todoPhase) bool {
		return p.Name == q.Name && slices.EqualFunc(p.Tasks, q.Tasks, func(t, u todoItem) bool {
			return t.Content == u.Content && t.Agent == u.Agent
		})
	})
}

// remove takes out one task (by id or content), a phase's tasks, or every
// task. Without cascade, a task others depend on stays and the operation
// fails; with it, those dependencies go too.
func (op todoOp) remove(plan []todoPhase) ([]todoPhase, todoError) {
	var errs todoError
	at := targets(plan, op.Task, op.Phase, &errs)
	if len(errs) > 0 {
		return nil, errs
	}
	gone := map[string]bool{}
	for _, a := range at {
		gone[plan[a[0]].Tasks[a[1]].ID] = true
	}
	for _, p := range plan {
		for _, t := range p.Tasks {
			var removed []string
			for _, d := range t.DependsOn {
				if gone[d] && !gone[t.ID] {
					removed = append(removed, d)
				}
			}
			if len(removed) > 0 && !op.Cascade {
				errs = append(errs, fmt.Sprintf("Cannot remove dependency target(s) %s: task %q (%s) depends on them; "+
					"retry rm with cascade=true to remove those dependency edges", strings.Join(removed, ", "), t.Content, t.ID))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	for i := range plan {
		plan[i].Tasks = slices.DeleteFunc(plan[i].Tasks, func(t todoItem) bool { return gone[t.ID] })
		for j := range plan[i].Tasks {
			t := &plan[i].Tasks[j]
			t.DependsOn = slices.DeleteFunc(t.DependsOn, func(d string) bool { return gone[d] })
		}
	}
	return plan, nil
}

// append adds pending tasks with new ids to a phase, created when needed.
func (op todoOp) append(plan []todoPhase) ([]todoPhase, todoError) {
	var errs todoError
	switch {
	case strings.TrimSpace(op.Phase) == "":
		errs = append(errs, "Missing phase name for append operation")
	case strings.TrimSpace(op.Phase) != op.Phase:
		errs = append(errs, "Phase name must not have leading or trailing whitespace")
	}
	if len(op.Items) == 0 {
		errs = append(errs, "Missing items for append operation")
	}
	for _, content := range op.Items {
		if bad := checkContent(content, ""); bad != nil {
			errs.addf("%s", bad[0])
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	existing := map[string]bool{}
	for _, p := range plan {
		for _, t := range p.Tasks {
			existing[t.Content] = true
		}
	}
	for _, content := range op.Items {
		if existing[content] {
			errs.addf("Task %s already exists", shownValue(content))
		}
		existing[content] = true
	}
	if len(errs) > 0 {
		return nil, errs
	}
	i := slices.IndexFunc(plan, func(p todoPhase) bool { return p.Name == op.Phase })
	if i < 0 {
		plan = append(plan, todoPhase{Name: op.Phase, Tasks: []todoItem{}})
		i = len(plan) - 1
	}
	for _, content := range op.Items {
		plan[i].Tasks = append(plan[i].Tasks, todoItem{ID: newTaskID(op.now), Content: content, Status: "pending"})
	}
	return plan, nil
}

// dependencies adds to, removes from or replaces the dependencies of the
// task with id op.Task.
func (op todoOp) dependencies(plan []todoPhase) ([]todoPhase, todoError) {
	var errs todoError
	p, t, ok := findTaskID(plan, op.Task, &errs)
	if !ok {
		return nil, errs
	}
	if op.Op != "update_dependencies" && len(op.DependsOn) == 0 {
		return nil, todoError{"dependsOn must contain at least one task ID"}
	}
	known := map[string]bool{}
	for _, ph := range plan {
		for _, task := range ph.Tasks {
			known[task.ID] = true
		}
	}
	seen := map[string]bool{}
	for _, d := range op.DependsOn {
		switch {
		case d == "":
			errs.addf("Dependency task ID must not be empty")
		case !known[d]:
			errs.addf("Dependency task ID %s not found", shownValue(d))
		case d == op.Task:
			errs.addf("Task %s cannot depend on itself", shownValue(d))
		case seen[d]:
			errs.addf("Duplicate dependency task ID %s", shownValue(d))
		}
		seen[d] = true
	}
	if len(errs) > 0 {
		return nil, errs
	}
	deps := &plan[p].Tasks[t].DependsOn
	has := map[string]bool{} // the task's dependencies: a list looked up for each would take n² steps
	for _, d := range *deps {
		has[d] = true
	}
	switch op.Op {
	case "add_dependency":
		for _, d := range op.DependsOn {
			if !has[d] {
				*deps = append(*deps, d)
			}
		}
	case "remove_dependency":
		for _, d := range op.DependsOn {
			if !has[d] {
				errs.addf("Task %s does not depend on %s", shownValue(op.Task), shownValue(d))
			}
		}
		*deps = slices.DeleteFunc(*deps, func(d string) bool { return seen[d] })
	default:
		*deps = slices.Clone(op.DependsOn)
	}
	return plan, errs
}

// targets are the tasks an operation names: one task (by id or content),
// every task of a phase, or, with neither, every task.
func targets(plan []todoPhase, task, phase string, errs *todoError) [][2]int {
	var at [][2]int
	switch {
	case task != "":
		if p, t, ok := findTask(plan, task, errs); ok {
			at = append(at, [2]int{p, t})
		}
	case phase != "":
		p := slices.IndexFunc(plan, func(ph todoPhase) bool { return ph.Name == phase })
		if p < 0 {
			*errs = append(*errs, fmt.Sprintf("Phase %q not found", phase))
		} else {
			for t := range plan[p].Tasks {
				at = append(at, [2]int{p, t})
			}
		}
	default:
		for p := range plan {
			for t := range plan[p].Tasks {
				at = append(at, [2]int{p, t})
			}
		}
	}
	return at
}

// findTask finds a task by id or content.
func findTask(plan []todoPhase, ref string, errs *todoError) (p, t int, ok bool) {
	if ref == "" {
		*errs = append(*errs, "Missing task ID or content")
		return 0, 0, false
	}
	for p := range plan {
		for t, task := range plan[p].Tasks {
			if task.ID == ref || task.Content == ref {
				return p, t, true
			}
		}
	}
	hint := ""
	if !slices.ContainsFunc(plan, func(ph todoPhase) bool { return len(ph.Tasks) > 0 }) {
		hint = " (todo list is empty — was it replaced or not yet created?)"
	}
	*errs = append(*errs, fmt.Sprintf("Task %q not found by ID or content%s", ref, hint))
	return 0, 0, false
}

// findTaskID finds a task by id only (the dependency operations).
func findTaskID(plan []todoPhase, id string, errs *todoError) (p, t int, ok bool) {
	if id == "" {
		*errs = append(*errs, "Missing task ID")
		return 0, 0, false
	}
	for p := range plan {
		for t, task := range plan[p].Tasks {
			if task.ID == id {
				return p, t, true
			}
		}
	}
	*errs = append(*errs, fmt.Sprintf("Task ID %q not found", id))
	return 0, 0, false
}

// ---- Rules ----

// prepareTodos completes and checks a whole plan, in place: ids for tasks
// without one, then validation, then readiness and the one-in-progress
// rule. It returns what is wrong, if anything.
func prepareTodos(plan []todoPhase) todoError {
	assignTaskIDs(plan)
	if errs := checkPlan(plan); len(errs) > 0 {
		return errs
	}
	if size := todoPlanSize(plan); size > maxTodoPlanBytes {
		return todoError{fmt.Sprintf("The plan is too large to show: %s of tasks and dependencies, at most %s",
			formatSize(size), formatSize(maxTodoPlanBytes))}
	}
	projectPlan(plan)
	// One in progress: an in-progress task that is not ready goes back to
	// pending; when no ready task is in progress, the first pending ready
	// one starts.
	active := false
	for i := range plan {
		for j := range plan[i].Tasks {
			t := &plan[i].Tasks[j]
			if t.Status == "in_progress" {
				if t.Ready {
					active = true
				} else {
					t.Status = "pending"
				}
			}
		}
	}
	for i := range plan {
		for j := range plan[i].Tasks {
			if t := &plan[i].Tasks[j]; !active && t.Status == "pending" && t.Ready {
				t.Status, active = "in_progress", true
			}
		}
	}
	projectPlan(plan)
	return nil
}

// maxTodoPlanBytes bounds a plan as every todo_updated, answer and
// get_state shows it (todoPlanSize).
const maxTodoPlanBytes = 4 << 20

// todoPlanSize is about what showing a plan takes: its names, ids and
// contents, and for each dependency its id and, in blockedBy, the id and
// content of the task it names again.
func todoPlanSize(plan []todoPhase) int {
	contentSize := map[string]int{}
	size := 0
	for _, p := range plan {
		size += len(p.Name)
		for _, t := range p.Tasks {
			contentSize[t.ID] = len(t.Content)
			size += len(t.ID) + len(t.Content) + len(t.Agent)
		}
	}
	for _, p := range plan {
		for _, t := range p.Tasks {
			for _, d := range t.DependsOn {
				size += 2*len(d) + contentSize[d]
			}
		}
	}
	return size
}

// projectPlan recomputes blockedBy (the dependencies neither completed nor
// abandoned) and ready (pending or in progress, and blocked by nothing).
func projectPlan(plan []todoPhase) {
	byID := map[string]todoItem{}
	for _, p := range plan {
		for _, t := range p.Tasks {
			byID[t.ID] = t
		}
	}
	for i := range plan {
		if plan[i].Tasks == nil {
			plan[i].Tasks = []todoItem{}
		}
		for j := range plan[i].Tasks {
			t := &plan[i].Tasks[j]
			if t.DependsOn == nil {
				t.DependsOn = []string{}
			}
			t.BlockedBy = []todoBlocker{}
			for _, d := range t.DependsOn {
				if dep := byID[d]; dep.Status != "completed" && dep.Status != "abandoned" {
					t.BlockedBy = append(t.BlockedBy, todoBlocker{d, dep.Content, dep.Status})
				}
			}
			t.Ready = (t.Status == "pending" || t.Status == "in_progress") && len(t.BlockedBy) == 0
		}
	}
}

// assignTaskIDs gives each task without an id task-<hex>, a hash of its
// phase and content (so the same plan sent again gets the same ids), made
// unique with a -2, -3… suffix.
func assignTaskIDs(plan []todoPhase) {
	used := map[string]bool{}
	for _, p := range plan {
		for _, t := range p.Tasks {
			used[t.ID] = true
		}
	}
	for i := range plan {
		for j := range plan[i].Tasks {
			t := &plan[i].Tasks[j]
			if t.ID != "" {
				continue
			}
			sum := sha256.Sum256([]byte(plan[i].Name + "\x00" + t.Content))
			base := "task-" + hex.EncodeToString(sum[:10])
			id := base
			for n := 2; used[id]; n++ {
				id = fmt.Sprintf("%s-%d", base, n)
			}
			t.ID, used[id] = id, true
		}
	}
}

// newTaskID is a fresh id for a task that init or append creates.
func newTaskID(now time.Time) string { return "task-" + newUUIDv7(now) }

// checkPlan validates a whole plan: names and contents (checkNames), ids
// non-blank, unpadded and unique; dependencies existing, not on the task
// itself, not twice; and, when all that holds, no cycle.
func checkPlan(plan []todoPhase) todoError {
	errs := checkNames(plan, "")
	ids := map[string]bool{}
	for _, p := range plan {
		for _, t := range p.Tasks {
			switch {
			case strings.TrimSpace(t.ID) == "":
				errs.addf("Task ID must not be empty")
			case strings.TrimSpace(t.ID) != t.ID:
				errs.addf("Task ID %s must not have leading or trailing whitespace", shownValue(t.ID))
			}
			if ids[t.ID] {
				errs.addf("Duplicate task ID %s", shownValue(t.ID))
			}
			ids[t.ID] = true
			seen := map[string]bool{}
			for _, d := range t.DependsOn {
				if seen[d] {
					errs.addf("Task %s has duplicate dependency task ID %s", shownValue(t.ID), shownValue(d))
				}
				seen[d] = true
			}
		}
	}
	for _, p := range plan {
		for _, t := range p.Tasks {
			for _, d := range t.DependsOn {
				if !ids[d] {
					errs.addf("Task %s depends on missing task ID %s", shownValue(t.ID), shownValue(d))
				}
				if d == t.ID {
					errs.addf("Task %s cannot depend on itself", shownValue(t.ID))
				}
			}
		}
	}
	if len(errs) == 0 && hasCycle(plan) {
		errs = append(errs, "Todo dependencies contain a cycle")
	}
	return errs
}

// checkNames validates phase names (non-blank, unpadded, unique) and task
// contents (non-blank, unpadded, unique across all phases); suffix ends
// each message (" in init list").
func checkNames(plan []todoPhase, suffix string) todoError {
	var errs todoError
	names, contents := map[string]bool{}, map[string]bool{}
	for _, p := range plan {
		switch {
		case strings.TrimSpace(p.Name) == "":
			errs.addf("Phase name must not be empty%s", suffix)
		case strings.TrimSpace(p.Name) != p.Name:
			errs.addf("Phase %s must not have leading or trailing whitespace%s", shownValue(p.Name), suffix)
		}
		if names[p.Name] {
			errs.addf("Duplicate phase %s%s", shownValue(p.Name), suffix)
		}
		names[p.Name] = true
		for _, t := range p.Tasks {
			if bad := checkContent(t.Content, suffix); bad != nil {
				errs.addf("%s", bad[0])
			}
			if contents[t.Content] {
				errs.addf("Duplicate task %s%s", shownValue(t.Content), suffix)
			}
			contents[t.Content] = true
		}
	}
	return errs
}

func checkContent(content, suffix string) todoError {
	switch {
	case strings.TrimSpace(content) == "":
		return todoError{"Task content must not be empty" + suffix}
	case strings.TrimSpace(content) != content:
		return todoError{fmt.Sprintf("Task %s must not have leading or trailing whitespace%s", shownValue(content), suffix)}
	}
	return nil
}

// hasCycle reports whether the dependencies loop: tasks are taken off in
// dependency order until none is left (no cycle) or none can be.
func hasCycle(plan []todoPhase) bool {
	waiting := map[string]int{}
	dependents := map[string][]string{}
	for _, p := range plan {
		for _, t := range p.Tasks {
			waiting[t.ID] = len(t.DependsOn)
			for _, d := range t.DependsOn {
				dependents[d] = append(dependents[d], t.ID)
			}
		}
	}
	var free []string
	for id, n := range waiting {
		if n == 0 {
			free = append(free, id)
		}
	}
	done := 0
	for len(free) > 0 {
		id := free[len(free)-1]
		free = free[:len(free)-1]
		done++
		for _, next := range dependents[id] {
			if waiting[next]--; waiting[next] == 0 {
				free = append(free, next)
			}
		}
	}
	return done != len(waiting)
}

// completedSince returns the tasks that were in the plan before, not completed,
// and are completed now.
func completedSince(before, after []todoPhase) []todoCompletion {
	was := map[string]string{}
	for _, p := range before {
		for _, t := range p.Tasks {
			was[t.ID] = t.Status
		}
	}
	out := []todoCompletion{}
	for _, p := range after {
		for _, t := range p.Tasks {
			if prior, ok := was[t.ID]; ok && prior != "completed" && t.Status == "completed" {
				out = append(out, todoCompletion{p.Name, t.Content})
			}
		}
	}
	return out
}

// ---- Presentation ----

// todoMark is the mark of a task's status: [ ] to do, [~] doing, [x]
// done, [-] dropped.
func todoMark(status string) string {
	switch status {
	case "pending":
		return "[ ]"
	case "in_progress":
		return "[~]"
	case "completed":
		return "[x]"
	case "abandoned":
		return "[-]"
	}
	return ""
}

// todoWidget is the plan as the todos widget shows it: each phase, then
// its tasks with a mark ([x] done, [~] doing, [ ] to do, [-] dropped).
func todoWidget(plan []todoPhase) []string {
	var lines []string
	for _, p := range plan {
		lines = append(lines, p.Name+":")
		for _, t := range p.Tasks {
			lines = append(lines, "  "+todoMark(t.Status)+" "+t.Content)
		}
	}
	return lines
}

// todoSummary is the plan as text for the model: counts, then every task
// with its id and whether it is ready or what blocks it.
func todoSummary(plan []todoPhase) string {
	counts := map[string]int{}
	total := 0
	for _, p := range plan {
		for _, t := range p.Tasks {
			counts[t.Status]++
			total++
		}
	}
	if total == 0 {
		return "Todo list is empty."
	}
	var b strings.Builder
	noun := "tasks"
	if total == 1 {
		noun = "task"
	}
	fmt.Fprintf(&b, "%d %s: %d completed, %d abandoned, %d in progress, %d pending.",
		total, noun, counts["completed"], counts["abandoned"], counts["in_progress"], counts["pending"])
	for _, p := range plan {
		fmt.Fprintf(&b, "\n%s:", p.Name)
		for _, t := range p.Tasks {
			fmt.Fprintf(&b, "\n  %s %s (%s)", todoMark(t.Status), t.Content, t.ID)
			switch {
			case t.Ready:
				b.WriteString(" ready")
			case len(t.BlockedBy) > 0:
				var by []string
				for _, d := range t.BlockedBy {
					by = append(by, d.TaskID)
				}
				b.WriteString(" blocked by " + strings.Join(by, ", "))
			}
		}
	}
	return b.String()
}

// ---- The model's tool ----

// todoOpFields are the fields each operation takes, besides op.
var todoOpFields = []fieldsTaken{
	{"init", []string{"list", "items", "phase"}}, {"start", []string{"task"}}, {"done", []string{"task", "phase"}},
	{"drop", []string{"task", "phase"}}, {"rm", []string{"task", "phase", "cascade"}}, {"append", []string{"phase", "items"}},
	{"add_dependency", []string{"task", "dependsOn"}}, {"remove_dependency", []string{"task", "dependsOn"}},
	{"update_dependencies", []string{"task", "dependsOn"}}, {"view", nil},
}

type todoCall struct{ op todoOp }

var todoTool = &tool{
	name:    "todo",
	summary: "Keep your plan: phases of tasks with dependencies, one in progress",
	description: "Track your plan as phases of tasks. op init replaces the plan (list:[{phase, items}] or items + phase); " +
		"start, done and drop take a task (its id or content; done and drop without one take a phase, or everything); " +
		"rm removes (cascade=true also removes the dependencies on it); append adds items to a phase; add_dependency, " +
		"remove_dependency and update_dependencies set which task ids a task (by id) waits for; view shows the plan. " +
		"A task is ready once its dependencies are completed or dropped; one ready task is kept in progress.",
	schema: schema(`{
		"type": "object",
		"properties": {
			"op": {
				"type": "string",
				"enum": ["init", "start", "done", "drop", "rm", "append", "add_dependency", "remove_dependency", "update_dependencies", "view"]
			},
			"list": {
				"type": "array",
				"items": {
					"type": "object",
					"properties": {
						"phase": {"type": "string"},
						"items": {"type": "array", "items": {"type": "string"}},
						"agents": {"type": "array", "items": {"type": "string"}}
					},
					"required": ["phase", "items"]
				}
			},
			"items": {"type": "array", "items": {"type": "string"}},
			"phase": {"type": "string"},
			"task": {"type": "string"},
			"cascade": {"type": "boolean"},
			"dependsOn": {"type": "array", "items": {"type": "string"}}
		},
		"required": ["op"]
	}`),
	decode: func(s *session, raw json.RawMessage) (toolCall, error) {
		var fields map[string]json.RawMessage
		json.Unmarshal(raw, &fields)
		var c todoCall
		if err := decodeChecked(raw, &c.op); err != nil {
			return nil, err
		}
		allowed := fieldsTakenBy(todoOpFields, c.op.Op)
		takes := "it takes: " + strings.Join(allowed, ", ")
		if len(allowed) == 0 {
			takes = "it takes no other field"
		}
		for _, name := range slices.Sorted(maps.Keys(fields)) {
			if name != "op" && string(fields[name]) != "null" && !slices.Contains(allowed, name) {
				return nil, fmt.Errorf("field %q does not go with op %s (%s)", name, c.op.Op, takes)
			}
		}
		return &c, nil
	},
}

func (c *todoCall) describe() (string, string) {
	args, _ := marshalJSON(c.op)
	return "Allow todo " + c.op.Op + "?", "Change the plan: " + escapeInJSON(string(args))
}

func (c *todoCall) run(ctx context.Context, s *session, _ toolRun) (toolResult, error) {
	res, err := s.applyTodoOp(c.op)
	if err != nil {
		return toolResult{}, err
	}
	return toolResult{Content: textBlocks(res.Summary), Details: struct {
		Phases         []todoPhase      `json:"phases"`
		CompletedTasks []todoCompletion `json:"completedTasks"`
	}{res.Phases, res.CompletedTasks}}, nil
}
