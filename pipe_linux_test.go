package main

import (
	"os"
	"syscall"
	"unsafe"
)

// pipeHolds is how many bytes wait in the pipe r reads from (-1: not
// known).
func pipeHolds(r *os.File) int {
	var n int32
	if ioctl(r, syscall.TIOCINQ, unsafe.Pointer(&n)) != nil {
		return -1
	}
	return int(n)
}
