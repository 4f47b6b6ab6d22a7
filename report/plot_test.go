package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// WriteBusbwPlot draws the page's chart as a file: a collective's simulated and measured series
// in its colour, the measured one dashed; svg and png; another format is an error.
func TestWriteBusbwPlot(t *testing.T) {
	series := []Series{
		{Name: "sim all_reduce", Coll: "all_reduce", Points: []BWPoint{{Bytes: 1 << 10, BusBw: 1}, {Bytes: 1 << 20, BusBw: 100}}},
		{Name: "measured all_reduce", Coll: "all_reduce", Measured: true, Points: []BWPoint{{Bytes: 1 << 10, BusBw: 2}, {Bytes: 1 << 20, BusBw: 90}}},
		{Name: "sim all_gather", Coll: "all_gather", Points: []BWPoint{{Bytes: 1 << 10, BusBw: 3}, {Bytes: 1 << 20, BusBw: 80}}},
	}
	var svg bytes.Buffer
	require.NoError(t, WriteBusbwPlot(&svg, "t", series, "svg"))
	s := svg.String()
	require.Equal(t, 2, strings.Count(s, "stroke:#1F77B4;stroke-width:2\""), "all_reduce's line and legend sample, solid")
	require.Equal(t, 2, strings.Count(s, "stroke:#1F77B4;stroke-width:2;stroke-dasharray:6,4"), "measured all_reduce, dashed")
	require.Equal(t, 2, strings.Count(s, "stroke:#D62728;stroke-width:2\""), "all_gather in the second colour")
	var png bytes.Buffer
	require.NoError(t, WriteBusbwPlot(&png, "t", series, "PNG"))
	require.True(t, bytes.HasPrefix(png.Bytes(), []byte("\x89PNG")))
	require.Error(t, WriteBusbwPlot(&bytes.Buffer{}, "t", series, "gif"))
}
