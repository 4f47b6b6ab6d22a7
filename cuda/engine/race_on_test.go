//go:build race

package engine_test

const raceOn = true
