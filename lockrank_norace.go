//go:build !race

package main

// Outside race builds a mutex is a plain sync.Mutex, and nothing is
// checked (lockrank_race.go checks the order).

// checkCallout checks, in race builds, that no core lock is held where
// the core calls a front end.
func checkCallout(what string) {}
