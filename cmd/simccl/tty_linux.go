package main

import (
	"os"
	"syscall"
	"unsafe"
)

// isTTY asks the terminal driver for f's settings (TCGETS, what isatty(3) does): only a terminal
// answers.
func isTTY(f *os.File) bool {
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(syscall.TCGETS), uintptr(unsafe.Pointer(&t)))
	return errno == 0
}
