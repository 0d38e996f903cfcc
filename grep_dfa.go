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
// goroutines). State 0 is no state, so that 0 in trans means "not known
// yet"; state 1 is a line's start.
type lineDFA struct {
	prog   *syntax.Prog
	states []dfaState
	trans  []uint32         // 128 per state: the transition on each ASCII byte (on '\n': the line's end), as dfaCode says
	ids    map[string]int32 // a state's key (dfaKey) → its number
	size   int              // the bytes the states take, at most budget
	budget int              // maxDFABytes (less in tests)
	work   int              // instructions visited making transitions, for grepScan's work
	// Away from a match (the state with only what a match's start needs,
	// past a line's start), most bytes keep it there: they are skipped
	// without a transition.
	idle  uint32    // that state's code in trans
	stays [256]bool // the bytes that keep it
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
	insts    []uint32
	atStart  bool           // at a line's start (state 1 only)
	prevWord bool           // a word character came before (kept only when a \b or \B waits)
	runes    map[rune]int32 // transitions on runes that are not ASCII
}

// Transitions that go to no state: the line holds a match, or it cannot
// hold one any more; dfaFull: the state would pass the budget.
const (
	dfaMatch int32 = -1
	dfaDead  int32 = -2
	dfaFull  int32 = -3
)

// dfaCode is how trans holds a transition: a state's number times 128
// (where its row starts), 1 for dfaMatch and 2 for dfaDead; 0 when not
// known yet.
func dfaCode(next int32) uint32 {
	switch next {
	case dfaMatch:
		return 1
	case dfaDead:
		return 2
	}
	return uint32(next) << 7
}

// maxDFABytes bounds one worker's states: a few thousand small ones.
const maxDFABytes = 2 << 20

// dfaStateBytes is roughly what a state takes beside its instructions
// (its row of trans, the slice, the map entry).
const dfaStateBytes = 128*4 + 96

// newLineDFA makes the DFA for prog, or returns nil when every line
// matches at its start (the DFA would have nothing to do).
func newLineDFA(prog *syntax.Prog) *lineDFA {
	d := &lineDFA{prog: prog, ids: map[string]int32{}, seen: make([]uint32, len(prog.Inst)), budget: maxDFABytes}
	d.states = append(d.states, dfaState{})
	d.trans = make([]uint32, 128)
	d.mark++
	d.next = d.next[:0]
	if d.follow(uint32(prog.Start), 0, 0) {
		return nil
	}
	if d.addState(true, false) != 1 {
		return nil
	}
	d.mark++
	d.next = d.next[:0]
	d.follow(uint32(prog.Start), 0, syntax.EmptyBeginLine|syntax.EmptyBeginText)
	idle := d.addState(false, false)
	if idle < 0 {
		return d
	}
	d.idle = dfaCode(idle)
	for c := range rune(utf8.RuneSelf) {
		if c != '\n' {
			d.stays[c] = d.step(idle, c) == idle
		}
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

// step is the transition from state on rune r, or on the line's end when
// r < 0 (then state 1 when the line does not match). Known transitions
// come from trans and runes; new ones are kept there.
func (d *lineDFA) step(from int32, r rune) int32 {
	st := &d.states[from]
	if r < utf8.RuneSelf {
		c := byte('\n')
		if r >= 0 {
			c = byte(r)
		}
		switch code := d.trans[int(from)<<7|int(c)]; code {
		case 0:
		case 1:
			return dfaMatch
		case 2:
			return dfaDead
		default:
			return int32(code >> 7)
		}
	} else if next, ok := st.runes[r]; ok {
		return next
	}
	next := d.transition(from, r)
	if next == dfaFull {
		return next
	}
	st = &d.states[from] // transition may have moved the states
	switch {
	case r < 0:
		d.trans[int(from)<<7|'\n'] = dfaCode(next)
	case r < utf8.RuneSelf:
		d.trans[int(from)<<7|int(r)] = dfaCode(next)
	default:
		if d.size += 32; d.size > d.budget {
			return dfaFull
		}
		if st.runes == nil {
			st.runes = map[rune]int32{}
		}
		st.runes[r] = next
	}
	return next
}

// transition makes the transition from state on rune r (r < 0: the
// line's end): the empty-width instructions that hold before r are
// followed, the rune instructions that take r are stepped over, and a
// match may start after r, as it may anywhere.
func (d *lineDFA) transition(from int32, r rune) int32 {
	st := &d.states[from]
	var flags syntax.EmptyOp
	if st.atStart {
		flags |= syntax.EmptyBeginLine | syntax.EmptyBeginText
	}
	if r < 0 {
		flags |= syntax.EmptyEndLine | syntax.EmptyEndText
	}
	if st.prevWord != (r >= 0 && syntax.IsWordChar(r)) {
		flags |= syntax.EmptyWordBoundary
	} else {
		flags |= syntax.EmptyNoWordBoundary
	}
	d.mark++
	d.next = d.next[:0]
	for _, pc := range st.insts {
		if d.follow(pc, flags, ^flags) {
			return dfaMatch
		}
	}
	if r < 0 {
		return 1
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

// addState returns the number of the state that holds d.next (sorted
// here), made if it is new; dfaFull if it would pass the budget.
func (d *lineDFA) addState(atStart, prevWord bool) int32 {
	slices.Sort(d.next)
	waitsForWord := false
	for _, pc := range d.next {
		if inst := &d.prog.Inst[pc]; inst.Op == syntax.InstEmptyWidth &&
			syntax.EmptyOp(inst.Arg)&(syntax.EmptyWordBoundary|syntax.EmptyNoWordBoundary) != 0 {
			waitsForWord = true
		}
	}
	prevWord = prevWord && waitsForWord
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
	if id, ok := d.ids[string(d.key)]; ok {
		return id
	}
	if d.size += dfaStateBytes + 2*len(d.key); d.size > d.budget {
		return dfaFull
	}
	id := int32(len(d.states))
	d.ids[string(d.key)] = id
	d.states = append(d.states, dfaState{insts: slices.Clone(d.next), atStart: atStart, prevWord: prevWord})
	d.trans = append(d.trans, make([]uint32, 128)...)
	return id
}

// linesWithDFA is lines without context lines for a pattern without a
// literal: the DFA reads the chunk, and only the lines it finds a match
// in go to line (which matches them again, and shows them). Once the
// worker's DFA is full, the rest goes to eachLine, as do later chunks.
func (s *grepScan) linesWithDFA(chunk []byte) {
	d := s.w.dfa
	counted := 0  // lineNo counts the lines before chunk[counted:]
	lineFrom := 0 // the current line starts at or after it
	state := int32(1)
	for i := 0; i < len(chunk) && !s.done; {
		// The known transitions between states on ASCII bytes, the most
		// of the work.
		trans, at, idle, stays := d.trans, uint32(state)<<7, d.idle, &d.stays
		for i < len(chunk) && chunk[i] < utf8.RuneSelf {
			if at == idle {
				for i < len(chunk) && stays[chunk[i]] {
					i++
				}
				if i == len(chunk) {
					break
				}
			}
			code := trans[at|uint32(chunk[i])]
			if code < 128 {
				break
			}
			at = code
			i++
		}
		state = int32(at >> 7)
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
		next := d.step(state, r)
		if s.work += d.work - before; s.work >= checkWork {
			s.work = 0
			if s.ctx.Err() != nil {
				s.done = true
				return
			}
		}
		if next > 0 {
			state, i = next, i+width
			if r < 0 {
				lineFrom = i
			}
			continue
		}
		start := lineFrom + bytes.LastIndexByte(chunk[lineFrom:i], '\n') + 1
		s.lineNo += bytes.Count(chunk[counted:start], []byte("\n"))
		counted = start
		if next == dfaFull {
			s.w.dfa, s.w.dfaFull = nil, true
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
		state, i, lineFrom = 1, i+end+1, i+end+1
		if i > len(chunk) { // a last line without "\n", done with
			state = 0
		}
	}
	// A last line without "\n" ends where the chunk does.
	if state > 0 && len(chunk) > 0 && chunk[len(chunk)-1] != '\n' && !s.done {
		switch d.step(state, -1) {
		case dfaMatch:
			start := bytes.LastIndexByte(chunk, '\n') + 1
			s.lineNo += bytes.Count(chunk[counted:start], []byte("\n"))
			counted = start
			s.line(chunk[start:])
		case dfaFull:
			start := bytes.LastIndexByte(chunk, '\n') + 1
			s.lineNo += bytes.Count(chunk[counted:start], []byte("\n"))
			counted = start
			s.w.dfa, s.w.dfaFull = nil, true
			s.eachLine(chunk[start:])
			return
		}
	}
	s.lineNo += bytes.Count(chunk[counted:], []byte("\n"))
}
