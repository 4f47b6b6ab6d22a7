// Package stats holds the summary statistics the benchmarks and the simulator's comparison with
// measurements share.
package stats

import (
	"math"
	"slices"
)

// Median is the median of xs (the mean of the two middle values for an even count), NaN for none.
// xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
