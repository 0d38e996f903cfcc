//go:build !race

package main

// raceDetector is true when the tests run with -race (see race_test.go).
const raceDetector = false
