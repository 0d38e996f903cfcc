//go:build unix

package main

import "syscall"

// mkfifo makes a named pipe, for tests of files that are not regular.
func mkfifo(path string, mode uint32) error { return syscall.Mkfifo(path, mode) }
