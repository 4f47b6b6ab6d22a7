package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's command table names every simccl command and no other: the documentation and the
// CLI do not drift apart.
func TestREADMEListsEveryCommand(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `simccl ([a-z]+)").FindAllStringSubmatch(string(readme), -1) {
		documented = append(documented, m[1])
	}
	documented = uniq(documented)
	var registered []string
	for name := range commands {
		registered = append(registered, name)
	}
	sort.Strings(registered)
	require.Equal(t, registered, documented, "README.md's command table against `simccl help`")
}

func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// A walk through the README's commands, as a new user would type them (small sizes so that it
// stays quick): each exits 0 and prints what its README row promises.
func TestREADMEWalk(t *testing.T) {
	dir := t.TempDir()
	trace := "../../testdata/intercept/h200x2/trace/"
	steps := []struct {
		args []string
		want []string // substrings of stdout
		json bool     // stdout is one JSON value
		file string   // a file the command writes
	}{
		{args: []string{"topo"}, want: []string{"=== System : maxBw"}},
		{args: []string{"topo", "--json"}, json: true},
		{args: []string{"search"}, want: []string{"Pattern 4, crossNic"}},
		{args: []string{"tune", "-b", "8", "-e", "1M", "-f", "32"}, want: []string{"AllReduce: 8 Bytes -> Algo"}},
		{args: []string{"plan", "-c", "allreduce", "--nodes", "1", "-b", "1K"}, want: []string{"rank 0 channel 0"}},
		{args: []string{"run", "-b", "8", "-e", "1M", "-f", "32", "--progress", "off"}, want: []string{"# Avg bus bandwidth", "all_reduce"}},
		{args: []string{"run", "-c", "allgather,alltoall", "-b", "1K", "-e", "64K", "-f", "8", "--json"}, json: true},
		{args: []string{"run", "-b", "1M", "-e", "1M", "--trace", filepath.Join(dir, "t.json")}, file: filepath.Join(dir, "t.json")},
		{args: []string{"run", "-b", "1M", "-e", "1M", "--ops", filepath.Join(dir, "ops.csv")}, file: filepath.Join(dir, "ops.csv")},
		{args: []string{"run", "-b", "8", "-e", "1M", "-f", "64", "--plot", filepath.Join(dir, "p.svg")}, file: filepath.Join(dir, "p.svg")},
		{args: []string{"run", "--nodes", "2", "--fabric", "../../examples/fabrics/rail-2tier.fabric", "-b", "1M", "-e", "1M"}, want: []string{"# fabric:"}},
		{args: []string{"report", "-b", "8", "-e", "1M", "-f", "64", "--progress", "off", "-o", filepath.Join(dir, "r.html")}, file: filepath.Join(dir, "r.html")},
		{args: []string{"mem", "-c", "allreduce,sendrecv", "-b", "8", "-e", "1M", "-f", "64"}, want: []string{"MiB"}},
		{args: []string{"replay", "--topo", "h200x2-nvlink", trace + "simccl-trace.rank0.jsonl", trace + "simccl-trace.rank1.jsonl"}, want: []string{"launches", "total"}},
	}
	for _, s := range steps {
		var out, errb bytes.Buffer
		rc := mainRun(s.args, &out, &errb)
		require.Equal(t, 0, rc, "simccl %s: stderr %q", strings.Join(s.args, " "), errb.String())
		for _, w := range s.want {
			require.Contains(t, out.String(), w, "simccl %s", strings.Join(s.args, " "))
		}
		if s.json {
			var v any
			require.NoError(t, json.Unmarshal(out.Bytes(), &v), "simccl %s: not JSON", strings.Join(s.args, " "))
		}
		if s.file != "" {
			fi, err := os.Stat(s.file)
			require.NoError(t, err, "simccl %s", strings.Join(s.args, " "))
			require.Positive(t, fi.Size(), "simccl %s wrote an empty %s", strings.Join(s.args, " "), s.file)
		}
	}
}

// tune takes sendrecv and alltoall: it prints their point-to-point plans (NCCL prints no TUNING
// line for them), a send/recv across nodes with its in-node and its network peers apart, and the
// JSON lists them under "p2p".
func TestTuneP2P(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 0, mainRun([]string{"tune", "-c", "sendrecv,alltoall", "--nodes", "2", "-b", "1K", "-e", "1K", "--no-table"}, &out, &errb), errb.String())
	require.Contains(t, out.String(), "# SendRecv: 1024 Bytes -> P2P proto LL nchannels 1 (14 transfers, intra)")
	require.Contains(t, out.String(), "(2 transfers, net)")
	require.Contains(t, out.String(), "# AllToAll: 1024 Bytes -> P2P")
	out.Reset()
	require.Equal(t, 0, mainRun([]string{"tune", "-c", "sendrecv", "-b", "1M", "-e", "1M", "--json"}, &out, &errb), errb.String())
	var v struct {
		P2P []struct {
			Coll      string `json:"coll"`
			Transfers int    `json:"transfers"`
			NChannels int    `json:"nchannels"`
		} `json:"p2p"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &v))
	require.Len(t, v.P2P, 1)
	require.Equal(t, "SendRecv", v.P2P[0].Coll)
	require.Equal(t, 8, v.P2P[0].Transfers)
	require.Positive(t, v.P2P[0].NChannels)
}

// The README's "four jobs" block: every bin/simccl line runs as written (paths from the
// repository root, -o and > into a temporary directory, NCCL_* assignments in the environment)
// and exits 0; a line redirected to a .json file prints JSON.
func TestREADMEJobs(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(data)
	start := strings.Index(text, "<!-- jobs:")
	require.GreaterOrEqual(t, start, 0, "README has no jobs block")
	block := text[start:]
	block = block[strings.Index(block, "```sh")+5:]
	block = block[:strings.Index(block, "```")]
	dir := t.TempDir()
	ran := 0
	for _, line := range strings.Split(block, "\n") {
		fields := strings.Fields(line)
		var env []string
		for len(fields) > 0 && strings.HasPrefix(fields[0], "NCCL_") && strings.Contains(fields[0], "=") {
			env, fields = append(env, fields[0]), fields[1:]
		}
		if len(fields) == 0 || fields[0] != "bin/simccl" {
			continue
		}
		var args []string
		redirect := ""
		for i := 1; i < len(fields); i++ {
			switch f := fields[i]; {
			case f == ">" && i+1 < len(fields):
				redirect = fields[i+1]
				i++
			case f == "-o" && i+1 < len(fields):
				args = append(args, "-o", filepath.Join(dir, fields[i+1]))
				i++
			case strings.HasPrefix(f, "testdata/"):
				args = append(args, "../../"+f)
			default:
				args = append(args, f)
			}
		}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		var out, errb bytes.Buffer
		rc := mainRun(args, &out, &errb)
		require.Equal(t, 0, rc, "%s: stderr %q", line, errb.String())
		if strings.HasSuffix(redirect, ".json") {
			var v any
			require.NoError(t, json.Unmarshal(out.Bytes(), &v), "%s: not JSON", line)
		}
		for _, kv := range env {
			k, _, _ := strings.Cut(kv, "=")
			os.Unsetenv(k)
		}
		ran++
	}
	require.GreaterOrEqual(t, ran, 7, "bin/simccl lines run from the jobs block")
}

// simccl run --plot (issue 17: "three y labels, crowded x labels, legend over the data"; one
// plotting stack for the CLI and the report): the report's busbw chart (report.WriteBusbwPlot, the
// layout of the page's section 3) with a title: one y label, sizes with their units every other
// power of two and at least 30 points apart, the legend right of every data point, in SVG and PNG.
func TestRunPlotLabels(t *testing.T) {
	dir := t.TempDir()
	plot := func(name string) []byte {
		p := filepath.Join(dir, name)
		var out, errb bytes.Buffer
		require.Equal(t, 0, mainRun([]string{"run", "-c", "allreduce,allgather", "-b", "8", "-e", "1G", "--progress", "off", "--plot", p}, &out, &errb), errb.String())
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		return data
	}
	svg := string(plot("p.svg"))
	type text struct {
		s    string
		x, y float64
	}
	var texts []text
	for _, m := range regexp.MustCompile(`(?s)<text x="([-0-9.]+)" y="([-0-9.]+)"[^>]*>(.*?)</text>`).FindAllStringSubmatch(svg, -1) {
		x, _ := strconv.ParseFloat(m[1], 64)
		y, _ := strconv.ParseFloat(m[2], 64)
		texts = append(texts, text{strings.TrimSpace(m[3]), x, y})
	}
	count := func(re string) (n int, xs []float64) {
		for _, t := range texts {
			if regexp.MustCompile(re).MatchString(t.s) {
				n++
				xs = append(xs, t.x)
			}
		}
		return n, xs
	}
	n, _ := count(`^busbw \(GB/s\)$`)
	require.Equal(t, 1, n, "y labels in %v", texts)
	n, _ = count(`^size \(bytes\)$`)
	require.Equal(t, 1, n, "x labels in %v", texts)
	// The size labels: the row of numbers under the plot area (the busbw "0" sits higher).
	var sizes []string
	var sizeXs []float64
	for _, t := range texts {
		if regexp.MustCompile(`^[0-9]+[KMG]?$`).MatchString(t.s) && t.y > -35 && t.y < -20 {
			sizes = append(sizes, t.s)
			sizeXs = append(sizeXs, t.x)
		}
	}
	require.Equal(t, []string{"8", "32", "128", "512", "2K", "8K", "32K", "128K", "512K", "2M", "8M", "32M", "128M", "512M"}, sizes)
	for i := 1; i < len(sizeXs); i++ {
		require.GreaterOrEqual(t, sizeXs[i]-sizeXs[i-1], 30.0, "size labels %v at %v", sizes, sizeXs)
	}
	right := 0.0 // the right edge of the data points (circles of radius 3.5)
	for _, m := range regexp.MustCompile(`<path d="M([0-9.]+),[0-9.]+A3\.5`).FindAllStringSubmatch(svg, -1) {
		x, _ := strconv.ParseFloat(m[1], 64)
		right = max(right, x)
	}
	require.Positive(t, right)
	for _, name := range []string{"sim all_reduce", "sim all_gather"} {
		n, xs := count("^" + name + "$")
		require.Equal(t, 1, n, name)
		require.Greater(t, xs[0], right, "%s: the legend overlaps the data", name)
	}

	img, err := png.Decode(bytes.NewReader(plot("p.png")))
	require.NoError(t, err)
	require.Greater(t, img.Bounds().Dx(), img.Bounds().Dy())
}
