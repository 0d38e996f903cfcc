package main

import "sync"

// lazy is a value made at its first use (a compiled regexp, a table)
// instead of before main. Declare it as a package variable whose build
// is a function literal that captures nothing:
//
//	var shellPlain = lazy[*regexp.Regexp]{build: func() *regexp.Regexp { … }}
//
// The compiler lays such a variable out as data, so package init does
// nothing for it, where sync.OnceValue would allocate its closures
// during init, on the way to the first line. get is safe for concurrent
// use; build runs once, and must not panic: unlike sync.OnceValue, a
// later get would not panic again but give the zero value.
type lazy[T any] struct {
	once  sync.Once
	build func() T
	value T
}

// get is the value, made by build on the first call.
func (l *lazy[T]) get() T {
	l.once.Do(func() { l.value = l.build() })
	return l.value
}
