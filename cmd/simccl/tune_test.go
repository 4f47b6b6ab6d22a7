package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// simccl tune on the 2×H200 topology prints what NCCL 2.28.9 printed there
// (testdata/nccl/h200x2/real.677.log, NVLS off): the TUNING table row for row and one choice line
// per collective and size, every one of them among NCCL's.
func TestTuneCommand(t *testing.T) {
	t.Setenv("NCCL_NVLS_ENABLE", "0")
	dir := filepath.Join("..", "..", "testdata", "nccl", "h200x2")
	logData, err := os.ReadFile(filepath.Join(dir, "real.677.log"))
	if err != nil {
		t.Fatal(err)
	}
	var ncclTable []string
	var ncclP2P string
	ncclChoice := map[string]bool{}
	for _, l := range strings.Split(string(logData), "\n") {
		_, msg, ok := strings.Cut(l, "NCCL INFO ")
		if !ok {
			continue
		}
		if _, p2p, ok := strings.Cut(msg, "nvls channels, "); ok && ncclP2P == "" {
			ncclP2P = p2p // "32 p2p channels, 32 p2p channels per peer"
		}
		switch {
		case strings.Contains(msg, " Bytes -> Algo "):
			ncclChoice[msg] = true
		case strings.Contains(msg, " | ") && strings.Count(msg, "|") >= 3:
			ncclTable = append(ncclTable, msg)
		}
	}
	if len(ncclTable) != 24 || len(ncclChoice) < 100 {
		t.Fatalf("log holds %d table rows and %d choice lines", len(ncclTable), len(ncclChoice))
	}

	var out, errb bytes.Buffer
	if rc := mainRun([]string{"tune", "--topo", filepath.Join(dir, "real_topo.xml"), "-b", "8", "-e", "1G", "-f", "2"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var table []string
	choices := 0
	for _, l := range strings.Split(out.String(), "\n") {
		switch {
		case strings.Contains(l, " Bytes -> Algo "):
			choices++
			if !ncclChoice[l] {
				t.Errorf("choice not in NCCL's log: %q", l)
			}
		case strings.Contains(l, " | ") && strings.Count(l, "|") >= 3:
			table = append(table, l)
		}
	}
	// AllGather and ReduceScatter of 8 and 16 bytes over 2 ranks have no element per rank once
	// nccl-tests rounds the per-rank count down to 16 bytes: no call, no line.
	if choices != 5*28-4 || strings.Count(out.String(), "no element per rank, no call") != 4 {
		t.Errorf("%d choice lines, want 5 collectives × 28 sizes less 4 empty calls", choices)
	}
	if strings.Join(table, "\n") != strings.Join(ncclTable, "\n") {
		t.Errorf("table differs from NCCL's:\n%s\nwant\n%s", strings.Join(table, "\n"), strings.Join(ncclTable, "\n"))
	}
	if !strings.Contains(out.String(), "AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}") {
		t.Errorf("no 1 MiB all-reduce line:\n%s", out.String())
	}
	if ncclP2P == "" || !strings.Contains(out.String(), "# "+ncclP2P+" (as NCCL's init log says them)") {
		t.Errorf("no p2p channel line %q:\n%s", ncclP2P, out.String())
	}
	// Across nodes NCCL 2.28 gives a network peer 2 channels, halved while 2 × ranks passes 4 ×
	// p2pnChannels (testdata/nccl/h200x2/netpeerscan-2026-11-30): 2 DGX H100 nodes keep 2, 16
	// (128 ranks on 16 p2p channels) one, for every peer; NCCL_NCHANNELS_PER_NET_PEER sets it.
	for _, c := range []struct {
		nodes, env int
		want       string
	}{{2, 0, "16 p2p channels, 2 p2p channels per peer"}, {16, 0, "16 p2p channels, 1 p2p channels per peer"},
		{16, 4, "16 p2p channels, 4 p2p channels per peer"}} {
		if c.env > 0 {
			t.Setenv("NCCL_NCHANNELS_PER_NET_PEER", strconv.Itoa(c.env))
		}
		out.Reset()
		if rc := mainRun([]string{"tune", "--nodes", strconv.Itoa(c.nodes), "-b", "8", "-e", "8", "--no-table"}, &out, &errb); rc != 0 {
			t.Fatalf("rc %d: %s", rc, errb.String())
		}
		if !strings.Contains(out.String(), "# "+c.want+" ") {
			t.Errorf("%d nodes, NCCL_NCHANNELS_PER_NET_PEER %d: want %q in\n%s", c.nodes, c.env, c.want, out.String())
		}
	}

	// --json: the keys with NCCL's names; sizes in K/M/G.
	out.Reset()
	if rc := mainRun([]string{"tune", "--topo", filepath.Join(dir, "real_topo.xml"), "-c", "allreduce", "-b", "1M", "-e", "4M", "-f", "2", "--json"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var v struct {
		Table   []map[string]any `json:"table"`
		Choices []struct {
			Coll      string   `json:"coll"`
			Bytes     int64    `json:"bytes"`
			Algo      string   `json:"algo"`
			Proto     string   `json:"proto"`
			NChannels int      `json:"nchannels"`
			TimeUs    *float64 `json:"time_us"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	if len(v.Table) == 0 {
		t.Fatal("no table rows")
	}
	for _, k := range []string{"coll", "algo", "proto", "lat_us", "bw_gbs", "max_nthreads"} {
		if _, ok := v.Table[0][k]; !ok {
			t.Errorf("table row lacks %q: %v", k, v.Table[0])
		}
	}
	want := []struct {
		bytes       int64
		algo, proto string
	}{{1 << 20, "Ring", "LL"}, {2 << 20, "Ring", "Simple"}, {4 << 20, "Ring", "Simple"}}
	if len(v.Choices) != len(want) {
		t.Fatalf("%d choices, want %d: %+v", len(v.Choices), len(want), v.Choices)
	}
	for i, w := range want {
		c := v.Choices[i]
		if c.Coll != "AllReduce" || c.Bytes != w.bytes || c.Algo != w.algo || c.Proto != w.proto || c.NChannels != 24 || c.TimeUs == nil || *c.TimeUs <= 0 {
			t.Errorf("choice %d: %+v, want AllReduce %d %s/%s on 24 channels with a time", i, c, w.bytes, w.algo, w.proto)
		}
	}

	for _, bad := range [][]string{
		{"tune", "-b", "3X"},
		{"tune", "-c", "allrduce"},         // (alltoall and sendrecv print their p2p plans: TestTuneP2P)
		{"tune", "--nccl-version", "2.18"}, // a release only the search has
		{"tune", "--nodes", "0"},
		{"tune", "extra"},
	} {
		errb.Reset()
		if rc := mainRun(bad, &out, &errb); rc != 2 || errb.Len() == 0 {
			t.Errorf("%v: rc %d, want 2 with a message (%q)", bad, rc, errb.String())
		}
	}
}

// A one-rank communicator: NCCL prints no tuning table and no choice (its collectives are device
// memcpys), and tune says so beside its model's output; a communicator of more ranks has no note.
func TestTuneOneRankNote(t *testing.T) {
	var one, eight struct {
		Note string `json:"note"`
	}
	require.NoError(t, json.Unmarshal(mustRun(t, "tune", "--gpus", "1", "-b", "1M", "-e", "1M", "--json"), &one))
	require.Contains(t, one.Note, "NCCL prints no tuning table")
	require.NoError(t, json.Unmarshal(mustRun(t, "tune", "-b", "1M", "-e", "1M", "--json"), &eight))
	require.Empty(t, eight.Note)
	require.Contains(t, string(mustRun(t, "tune", "--gpus", "1", "-b", "1M", "-e", "1M")), "# note: one rank: NCCL prints no tuning table")
}

// TestTuneNetPeerFromNCCLDumps: simccl tune on NCCL's own topology of a rank whose peers are on
// other hosts (testdata/nccl/h200x2/netpeerscan-2026-11-30c: rank 0's dump with one NIC, and with a
// second on loopback), the NICs' speed replaced as the scan replaced it, gives the channels per
// peer NCCL printed there (NCCL_MIN_P2P_NCHANNELS=32, 2 ranks): 2.28.9 2 at every speed; 2.29.7 1,
// 2, 4 and 4 at 100, 200, 400 and 800 Gb/s (⌈path bandwidth / 14⌉, the path capped at PCIe's 48),
// and with two NICs 2 at 100 Gb/s (both counted, 25 GB/s) and 4 at 400.
func TestTuneNetPeerFromNCCLDumps(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "nccl", "h200x2", "netpeerscan-2026-11-30c")
	re := regexp.MustCompile(`(<net [^>]*)speed="[0-9]+"`)
	t.Setenv("NCCL_MIN_P2P_NCHANNELS", "32")
	for _, c := range []struct {
		dump    string
		speed   int
		release string
		want    int
	}{
		{"dump.xml", 100000, "2.28", 2}, {"dump.xml", 200000, "2.28", 2}, {"dump.xml", 400000, "2.28", 2}, {"dump.xml", 800000, "2.28", 2},
		{"dump.xml", 100000, "2.29", 1}, {"dump.xml", 200000, "2.29", 2}, {"dump.xml", 400000, "2.29", 4}, {"dump.xml", 800000, "2.29", 4},
		{"dump2.xml", 100000, "2.28", 2}, {"dump2.xml", 400000, "2.28", 2},
		{"dump2.xml", 100000, "2.29", 2}, {"dump2.xml", 400000, "2.29", 4},
	} {
		data, err := os.ReadFile(filepath.Join(dir, c.dump))
		require.NoError(t, err)
		topo := filepath.Join(t.TempDir(), "topo.xml")
		require.NoError(t, os.WriteFile(topo, re.ReplaceAll(data, []byte(`${1}speed="`+strconv.Itoa(c.speed)+`"`)), 0o644))
		var out, errb bytes.Buffer
		if rc := mainRun([]string{"tune", "--topo", topo, "--nodes", "2", "--nccl-version", c.release, "--no-table", "-b", "8", "-e", "8"}, &out, &errb); rc != 0 {
			t.Fatalf("rc %d: %s", rc, errb.String())
		}
		want := fmt.Sprintf("# 32 p2p channels, %d p2p channels per peer ", c.want)
		if !strings.Contains(out.String(), want) {
			t.Errorf("%s at %d Mb/s, NCCL %s: want %q in\n%s", c.dump, c.speed, c.release, want, out.String())
		}
	}
}
