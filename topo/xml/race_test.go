//go:build race

package xml

// slowdown scales the time bounds of the tests: the race detector makes the decoder about ten
// times slower.
const slowdown = 10
