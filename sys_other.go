//go:build !linux

package main

import (
	"errors"
	"os"
)

// openPTY is only implemented on Linux.
func openPTY() (master, slave *os.File, err error) {
	return nil, nil, errors.New("pty:true needs Linux; this rpi was built for another system")
}

// growPipe does nothing where F_SETPIPE_SZ does not exist.
func growPipe(f *os.File) {}
