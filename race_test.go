//go:build race

package main

// raceDetector is true when the tests run with -race, whose shadow memory
// makes resident-memory figures meaningless.
const raceDetector = true
