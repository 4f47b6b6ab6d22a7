//go:build !race

package xml

// slowdown scales the time bounds of the tests (see race_test.go).
const slowdown = 1
