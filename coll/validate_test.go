package coll

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestValidateCases reads testdata/validate.txt: each case takes a compiled schedule (a 2-rank
// ring all-reduce on one channel, or the schedule its "schedule:" line names), changes it with
// "set PATH JSON" lines (PATH into the schedule's JSON, dot-separated, numbers index arrays), and
// expects what Validate says after the "----" line. `go test ./coll -run TestValidateCases
// -update` rewrites the expectations.
func TestValidateCases(t *testing.T) {
	runDataDriven(t, "testdata/validate.txt", func(t *testing.T, directives []string) string {
		p := Plan{Func: AllReduce, Algo: Ring, Proto: Simple, NRanks: 2, NChannels: 1, Count: 64, DataType: Float32}
		var sets []string
		for _, d := range directives {
			switch {
			case strings.HasPrefix(d, "schedule: "):
				require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(d, "schedule: ")), &p), "schedule line")
			case strings.HasPrefix(d, "set "):
				sets = append(sets, strings.TrimPrefix(d, "set "))
			default:
				t.Fatalf("unknown directive %q", d)
			}
		}
		s, err := Compile(p)
		require.NoError(t, err)
		require.NoError(t, Validate(s), "the compiled schedule is valid before the change")
		var doc any
		b, err := json.Marshal(s)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &doc))
		for _, set := range sets {
			path, val, ok := strings.Cut(set, " ")
			require.True(t, ok, "set %q: want PATH JSON", set)
			var v any
			require.NoError(t, json.Unmarshal([]byte(val), &v), "set %q", set)
			require.NoError(t, setPath(doc, strings.Split(path, "."), v), "set %q", set)
		}
		b, err = json.Marshal(doc)
		require.NoError(t, err)
		var changed Schedule
		require.NoError(t, json.Unmarshal(b, &changed))
		ix, err := NewIndex(&changed)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("ok: %d steps, %d messages", ix.Steps(), ix.Msgs())
	})
}

// setPath sets doc's element at path (object keys, array indices) to v.
func setPath(doc any, path []string, v any) error {
	for i, k := range path {
		last := i == len(path)-1
		switch d := doc.(type) {
		case map[string]any:
			if _, ok := d[k]; !ok {
				return fmt.Errorf("no key %q", k)
			}
			if last {
				d[k] = v
				return nil
			}
			doc = d[k]
		case []any:
			n, err := strconv.Atoi(k)
			if err != nil || n < 0 || n >= len(d) {
				return fmt.Errorf("index %q of %d elements", k, len(d))
			}
			if last {
				d[n] = v
				return nil
			}
			doc = d[n]
		default:
			return fmt.Errorf("%q: not an object or array", k)
		}
	}
	return nil
}

// runDataDriven runs the cases of a data-driven file: a case is "case: NAME", directive lines,
// "----", and the expected output up to a blank line; "#" lines are comments. With -update it
// writes the file back with the outputs run produced.
func runDataDriven(t *testing.T, file string, run func(t *testing.T, directives []string) string) {
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var out bytes.Buffer
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	for i := 0; i < len(lines); {
		l := lines[i]
		if !strings.HasPrefix(l, "case: ") {
			out.WriteString(l + "\n")
			i++
			continue
		}
		name := strings.TrimPrefix(l, "case: ")
		start := i + 1
		var directives []string
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			directives = append(directives, lines[i])
		}
		require.Less(t, i, len(lines), "%s:%d: case %q has no ---- line", file, start, name)
		var want []string
		for i++; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		var got string
		t.Run(name, func(t *testing.T) {
			got = run(t, directives)
			if !*update {
				require.Equal(t, strings.Join(want, "\n"), got, "%s:%d", file, start)
			}
		})
		fmt.Fprintf(&out, "case: %s\n", name)
		for _, d := range directives {
			out.WriteString(d + "\n")
		}
		out.WriteString("----\n" + got + "\n")
	}
	if *update {
		require.NoError(t, os.WriteFile(file, out.Bytes(), 0o644))
	}
}
