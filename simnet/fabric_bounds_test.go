package simnet

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/internal/input"
)

// TestFabricBounds: finding 5 of the input-bounds issue. Values that made NewCluster panic
// (makeslice), exhaust memory or overflow the picosecond clock are refused by Set, with the
// key, and by ParseFabric at their line; values within the bounds still build.
func TestFabricBounds(t *testing.T) {
	for _, tc := range []struct {
		kv   string
		want string // "" = accepted by Set
	}{
		{"hosts_per_leaf=1000000000000000000", "hosts_per_leaf 1000000000000000000 (want 1..4096)"},
		{"hosts_per_leaf=0", "hosts_per_leaf 0 (want 1..4096)"},
		{"hosts_per_leaf=4096", ""},
		{"leaves_per_pod=100000", "leaves_per_pod 100000 (want 1..4096)"},
		{"uplink_speed=1e-9Gbps", "uplink_speed 1.25e-10 GB/s (want 0.01..100000 GB/s"},
		{"uplink_speed=0.000001Gbps", "uplink_speed 1.25e-07 GB/s"},
		{"uplink_speed=0.01Gbps", "uplink_speed 0.00125 GB/s"},
		{"uplink_speed=0.08Gbps", ""},
		{"nic_speed=1e9GBps", "nic_speed 1e+09 GB/s"},
		{"switch_latency_us=1e13", "switch_latency_us 1e+13 (want 0..1e+06 µs)"},
		{"nic_latency_us=-1", "nic_latency_us -1 (want 0..1e+06 µs)"},
		{"switch_latency_us=1e6", ""},
		{"oversubscription=1e300", "oversubscription 1e+300 (want 1..1024)"},
		{"oversubscription2=0.5", "oversubscription2 0.5 (want 1..1024)"},
		{"tiers=" + strings.Repeat("9", 100), "is not an integer"},
		{"routing=" + strings.Repeat("x", 1000), "routing \"" + strings.Repeat("x", 64) + "…\""},
	} {
		k, v, _ := strings.Cut(tc.kv, "=")
		f := DefaultFabric()
		err := f.Set(k, v)
		if tc.want == "" {
			require.NoError(t, err, tc.kv)
			require.NoError(t, f.Validate(), tc.kv)
			continue
		}
		require.ErrorContains(t, err, tc.want, tc.kv)
		// In a file the error names the file and the line.
		_, err = ParseFabric(strings.NewReader("# fabric\ntiers = 2\n"+k+" = "+v+"\n"), "x.fabric")
		require.ErrorContains(t, err, "x.fabric:3: ", tc.kv)
		require.ErrorContains(t, err, tc.want, tc.kv)
	}
}

// TestClusterSizeBound: speeds and counts each within their range can still multiply into
// billions of links; NewCluster refuses them before allocating.
func TestClusterSizeBound(t *testing.T) {
	node := SwitchedNode("n", 8, 400, 8, 50, 48)
	for _, tc := range []struct {
		sets  []string
		nodes int
		want  string
	}{
		// 32 hosts × 50 GB/s over 0.01 GB/s uplinks: 160,000 uplinks per leaf (6.3 GB before).
		{[]string{"uplink_speed=0.08Gbps"}, 64, "a leaf would need 1.6e+05 uplinks of 0.01 GB/s for its 32 downlinks of 50 GB/s"},
		{[]string{"topology=fattree", "hosts_per_leaf=4096", "uplink_speed=1GBps"}, 8192, "a leaf would need 1.64e+06 uplinks"},
		// 3 tiers: pods × leaf uplinks × aggregation uplinks.
		{[]string{"tiers=3", "hosts_per_leaf=1", "leaves_per_pod=4096", "uplink_speed=0.8GBps"}, 65536, "simulator links, more than the 4194304 this simulator accepts"},
		{[]string{"uplink_speed=400Gbps"}, 64, ""},
	} {
		f := DefaultFabric()
		for _, kv := range tc.sets {
			k, v, _ := strings.Cut(kv, "=")
			require.NoError(t, f.Set(k, v), kv)
		}
		e := NewEngine(nil)
		_, err := NewCluster(e, node, tc.nodes, f)
		if tc.want == "" {
			require.NoError(t, err)
			continue
		}
		require.ErrorContains(t, err, tc.want, tc.sets)
		require.Zero(t, e.NumLinks(), "links added before the check")
	}
}

// TestParseFabricBounded: a fabric file is read with internal/input's bounds; a line too long
// names the file and line (it said "bufio.Scanner: token too long").
func TestParseFabricBounded(t *testing.T) {
	_, err := ParseFabric(strings.NewReader("tiers = 2\n"+strings.Repeat("#", input.MaxLine+1)), "long.fabric")
	require.ErrorIs(t, err, input.ErrTooLarge)
	require.EqualError(t, err, "long.fabric:2: input too large (a line longer than 1 MiB)")
	_, err = ParseFabric(zeros{}, "/dev/zero")
	require.ErrorIs(t, err, input.ErrTooLarge)
	require.ErrorContains(t, err, "/dev/zero:1: ")
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// FuzzParseFabric: any input parses into a fabric that validates, or fails with an error naming
// the input; a fabric that parses builds a small cluster or refuses it, within MaxClusterLinks.
func FuzzParseFabric(f *testing.F) {
	for _, s := range []string{
		"", "tiers = 3\nleaves_per_pod = 2\n", "topology = fattree\nhosts_per_leaf = 1\n",
		"uplink_speed = 1e-9Gbps\n", "hosts_per_leaf = 1000000000000000000\n", "switch_latency_us = 1e13\n",
		"nic_speed = 0.01GB/s\nuplink_speed = 100000GBps\n", "oversubscription = NaN\n", "routing = rail # c\n",
		"tiers = 3\nhosts_per_leaf = 1\nleaves_per_pod = 1\noversubscription2 = 1024\n",
	} {
		f.Add(s)
	}
	node := SwitchedNode("n", 2, 400, 2, 50, 48)
	f.Fuzz(func(t *testing.T, s string) {
		fab, err := ParseFabric(strings.NewReader(s), "fuzz.fabric")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.fabric") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q does not name the input on one line", err)
			}
			return
		}
		if err := fab.Validate(); err != nil {
			t.Fatalf("parsed but invalid: %v", err)
		}
		e := NewEngine(nil)
		if _, err := NewCluster(e, node, 8, fab); err == nil && e.NumLinks() > MaxClusterLinks {
			t.Fatalf("%d links", e.NumLinks())
		}
	})
}
