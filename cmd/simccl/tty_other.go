//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd

package main

import "os"

// isTTY, where simccl does not ask the terminal driver: a character device other than the null
// device.
func isTTY(f *os.File) bool {
	st, err := f.Stat()
	if err != nil {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(st, null)
}
