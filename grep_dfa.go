package main

// A lazy DFA for the grep tool's patterns that hold no literal: it reads
// a chunk once, a table look-up a byte, and says which lines hold a
// match, exactly as re.Match would say of each line alone. Its states are
// sets of the pattern's program instructions, made the first time a byte
// leads to them; their memory is bounded, and a search that would need
// more goes back to matching each line with the regexp.

import (
	"bytes"
	"encoding/binary"
	"regexp/syntax"
	"slices"
	"unicode/utf8"
)

// lineDFA is one worker's DFA for one search (it is not shared between
// goroutines).
type lineDFA struct {
	prog            *syntax.Prog
	hasWordBoundary bool                 // the pattern has a \b or \B: a state keeps whether a word character came before
	start           *dfaState            // at a line's start
	ids             map[string]*dfaState // by key (see addState)
	size            int                  // the bytes the states take, at most budget
	budget          int                  // maxDFABytes (less in tests)
	work            int                  // instructions visited making transitions, for grepScan's work
	// Away from any match (the state that holds only what a match's
	// start needs, past a line's start), most bytes keep the DFA there:
	// it skips them without a transition while that pays.
	idle           *dfaState
	stays          [256]bool // the bytes that keep idle
	skips, skipped int       // how often it skipped, and how many bytes
	// Scratch for making a transition.
	seen       []uint32 // per instruction, the mark of the last set it went into
	mark       uint32
	here, next []uint32 // instructions: where the rune is read, after it
	stack      []uint32
	key        []byte
}

// dfaState is a set of instructions that wait for a rune: rune
// instructions and empty-width ones (to be followed once the next rune
// says whether they hold).
type dfaState struct {
	next     [128]*dfaState     // after each ASCII byte (after '\n': the next line's start); nil: not known, or in other
	other    map[rune]*dfaState // on runes past ASCII, and to dfaMatch or dfaDead
	insts    []uint32
	atStart  bool // at a line's start
	prevWord bool // a word character came before (kept only when the pattern has a \b or \B)
}

// Transitions that go to no state: the line holds a match, or it cannot
// hold one any more; dfaFull: a new state would pass the budget. None
// has transitions of its own.
var dfaMatch, dfaDead, dfaFull = &dfaState{}, &dfaState{}, &dfaState{}

// maxDFABytes bounds one worker's states: some 1,500 small ones.
const maxDFABytes = 2 << 20

// maxDFAInsts is the largest program the DFA takes: newLineDFA makes 129
// transitions, each visiting at most the whole program, before any look
// at the abort, so that work stays within checkWork.
const maxDFAInsts = checkWork / 256

// dfaStateBytes is roughly what a state takes beside its instructions.
const dfaStateBytes = 128*8 + 128

// newLineDFA makes the DFA for prog, or returns nil when it would not
// help: every line matches at its start, or its first states pass the
// budget, or the program is so big (a pattern of a few KB can make
// millions of instructions) that making its first states, which looks at
// no abort, could pass checkWork.
func newLineDFA(prog *syntax.Prog) *lineDFA {
	if len(prog.Inst) > maxDFAInsts {
		return nil
	}
	d := &lineDFA{prog: prog, ids: map[string]*dfaState{}, seen: make([]uint32, len(prog.Inst)), budget: maxDFABytes}
	for _, inst := range prog.Inst {
		if inst.Op == syntax.InstEmptyWidth && syntax.EmptyOp(inst.Arg)&(syntax.EmptyWordBoundary|syntax.EmptyNoWordBoundary) != 0 {
			d.hasWordBoundary = true
		}
	}
	d.mark++
	if d.follow(uint32(prog.Start), 0, 0) {
		return nil
	}
	d.start = d.addState(true, false)
	d.mark++
	d.next = d.next[:0]
	d.follow(uint32(prog.Start), 0, syntax.EmptyBeginLine|syntax.EmptyBeginText)
	if d.idle = d.addState(false, false); d.start == dfaFull || d.idle == dfaFull {
		return nil
	}
	for c := range rune(utf8.RuneSelf) {
		d.stays[c] = c != '\n' && d.step(d.idle, c) == d.idle
	}
	return d
}

// follow puts pc, and every instruction it leads to without reading a
// rune, into d.next, and says whether that reaches a match. An
// empty-width instruction is followed when all its conditions are in
// holds, dropped when one is in never, and otherwise goes into the set,
// to wait for the next rune to say.
func (d *lineDFA) follow(pc uint32, holds, never syntax.EmptyOp) bool {
	d.stack = append(d.stack[:0], pc)
	for len(d.stack) > 0 {
		pc := d.stack[len(d.stack)-1]
		d.stack = d.stack[:len(d.stack)-1]
		if d.seen[pc] == d.mark {
			continue
		}
		d.seen[pc] = d.mark
		d.work++
		inst := &d.prog.Inst[pc]
		switch inst.Op {
		case syntax.InstMatch:
			return true
		case syntax.InstAlt, syntax.InstAltMatch:
			d.stack = append(d.stack, inst.Arg, inst.Out)
		case syntax.InstCapture, syntax.InstNop:
			d.stack = append(d.stack, inst.Out)
		case syntax.InstEmptyWidth:
			op := syntax.EmptyOp(inst.Arg)
			switch {
			case op&^holds == 0:
				d.stack = append(d.stack, inst.Out)
			case op&never == 0:
				d.next = append(d.next, pc)
			}
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			d.next = append(d.next, pc)
		}
	}
	return false
}

// step is the transition from a state on rune r, or on the line's end
// when r < 0 (to d.start when the line does not match). Transitions are
// made once, and kept in the state (the line's end as '\n').
func (d *lineDFA) step(from *dfaState, r rune) *dfaState {
	c := r
	if r < 0 {
		c = '\n'
	}
	if c < utf8.RuneSelf && from.next[c] != nil {
		return from.next[c]
	}
	if next, ok := from.other[c]; ok {
		return next
	}
	next := d.transition(from, r)
	switch {
	case next == dfaFull:
	case c < utf8.RuneSelf && next != dfaMatch && next != dfaDead:
		from.next[c] = next
	case d.size+32 > d.budget:
		return dfaFull
	default:
		d.size += 32
		if from.other == nil {
			from.other = map[rune]*dfaState{}
		}
		from.other[c] = next
	}
	return next
}

// transition makes the transition from a state on rune r (r < 0: the
// line's end): the empty-width instructions that hold before r are
// followed, the rune instructions that take r are stepped over, and a
// match may start after r, as it may anywhere.
func (d *lineDFA) transition(from *dfaState, r rune) *dfaState {
	var flags syntax.EmptyOp
	if from.atStart {
		flags |= syntax.EmptyBeginLine | syntax.EmptyBeginText
	}
	if r < 0 {
		flags |= syntax.EmptyEndLine | syntax.EmptyEndText
	}
	if from.prevWord != (r >= 0 && syntax.IsWordChar(r)) {
		flags |= syntax.EmptyWordBoundary
	} else {
		flags |= syntax.EmptyNoWordBoundary
	}
	d.mark++
	d.next = d.next[:0]
	for _, pc := range from.insts {
		if d.follow(pc, flags, ^flags) {
			return dfaMatch
		}
	}
	if r < 0 {
		return d.start
	}
	d.here, d.next = d.next, d.here[:0]
	// Past the line's start, ^ and \A cannot hold.
	const never = syntax.EmptyBeginLine | syntax.EmptyBeginText
	d.mark++
	for _, pc := range d.here {
		if inst := &d.prog.Inst[pc]; matchesRune(inst, r) && d.follow(inst.Out, 0, never) {
			return dfaMatch
		}
	}
	if d.follow(uint32(d.prog.Start), 0, never) {
		return dfaMatch
	}
	if len(d.next) == 0 {
		return dfaDead
	}
	return d.addState(false, syntax.IsWordChar(r))
}

// matchesRune says whether a rune instruction takes r, as the regexp
// package's matchers say it.
func matchesRune(inst *syntax.Inst, r rune) bool {
	switch inst.Op {
	case syntax.InstRune1:
		return r == inst.Rune[0]
	case syntax.InstRuneAny:
		return true
	case syntax.InstRuneAnyNotNL:
		return r != '\n'
	case syntax.InstRune:
		return inst.MatchRune(r)
	}
	return false
}

// addState returns the state that holds d.next (sorted here), made if it
// is new; dfaFull if it would pass the budget. Its key is the
// instructions and the flags that tell states of the same ones apart.
func (d *lineDFA) addState(atStart, prevWord bool) *dfaState {
	slices.Sort(d.next)
	prevWord = prevWord && d.hasWordBoundary
	d.key = append(d.key[:0], 0)
	if atStart {
		d.key[0] |= 1
	}
	if prevWord {
		d.key[0] |= 2
	}
	for _, pc := range d.next {
		d.key = binary.LittleEndian.AppendUint32(d.key, pc)
	}
	if st, ok := d.ids[string(d.key)]; ok {
		return st
	}
	if d.size+dfaStateBytes+2*len(d.key) > d.budget {
		return dfaFull
	}
	d.size += dfaStateBytes + 2*len(d.key)
	st := &dfaState{insts: slices.Clone(d.next), atStart: atStart, prevWord: prevWord}
	d.ids[string(d.key)] = st
	return st
}

// linesWithDFA is lines without context lines for a pattern without a
// literal: the DFA reads the chunk, and only the lines it finds a match
// in go to line (which matches them again, and shows them). Once the
// worker's DFA is full, the rest goes to eachLine, as do later chunks.
// Each byte costs a look-up in the state's row, or less: away from any
// match, bytes that keep it there are skipped while that pays (skip).
func (s *grepScan) linesWithDFA(chunk []byte) {
	d := s.w.dfa
	counted := 0  // lineNo counts the lines before chunk[counted:]
	lineFrom := 0 // the current line starts at or after it
	st := d.start
	for i := 0; i < len(chunk) && !s.done; {
		// The known transitions between states on ASCII bytes: the most
		// of the work.
		for i < len(chunk) {
			c := chunk[i]
			if st == d.idle {
				i = d.skip(chunk, i)
				if i == len(chunk) {
					break
				}
				c = chunk[i]
			}
			if c >= utf8.RuneSelf || st.next[c] == nil {
				break
			}
			st = st.next[c]
			i++
		}
		if i == len(chunk) {
			break
		}
		r, width := rune(chunk[i]), 1
		if r == '\n' {
			r = -1
		} else if r >= utf8.RuneSelf {
			r, width = utf8.DecodeRune(chunk[i:])
		}
		before := d.work
		next := d.step(st, r)
		if s.work += d.work - before; s.work >= checkWork {
			s.work = 0
			if s.ctx.Err() != nil {
				s.done = true
				return
			}
		}
		if next != dfaMatch && next != dfaDead && next != dfaFull {
			st, i = next, i+width
			if r < 0 {
				lineFrom = i
			}
			continue
		}
		start := lineFrom + bytes.LastIndexByte(chunk[lineFrom:i], '\n') + 1
		s.lineNo += bytes.Count(chunk[counted:start], []byte("\n"))
		counted = start
		if next == dfaFull {
			s.w.dfa, s.w.noDFA = nil, true
			s.eachLine(chunk[start:])
			return
		}
		end := bytes.IndexByte(chunk[i:], '\n')
		if end < 0 {
			end = len(chunk) - i
		}
		if next == dfaMatch {
			s.line(chunk[start : i+end])
		}
		st, i, lineFrom = d.start, i+end+1, i+end+1
		if i > len(chunk) { // a last line without "\n", done with
			st = nil
		}
	}
	// A last line without "\n" ends where the chunk does.
	if st != nil && len(chunk) > 0 && chunk[len(chunk)-1] != '\n' && !s.done {
		if next := d.step(st, -1); next == dfaMatch || next == dfaFull {
			start := bytes.LastIndexByte(chunk, '\n') + 1
			s.lineNo += bytes.Count(chunk[counted:start], []byte("\n"))
			counted = start
			if next == dfaFull {
				s.w.dfa, s.w.noDFA = nil, true
			}
			s.eachLine(chunk[start:]) // the line, matched again and shown
		}
	}
	s.lineNo += bytes.Count(chunk[counted:], []byte("\n"))
}

// skip returns where, from chunk[i:], a byte leaves d.idle. After 4096
// skips it looks whether they paid (a skip that ends at once costs a
// mispredicted branch), and skips no more if not.
func (d *lineDFA) skip(chunk []byte, i int) int {
	from := i
	for i < len(chunk) && d.stays[chunk[i]] {
		i++
	}
	d.skipped += i - from
	if d.skips++; d.skips == 4096 && d.skipped < 4*d.skips {
		d.idle = nil
	}
	return i
}
