package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPlanCommand(t *testing.T) {
	var out, errb bytes.Buffer
	// 4 MiB all-reduce over the 8 GPUs of a DGX H100, forced to Ring: the ranks send 8 × 2·7/8 ×
	// 4 MiB in all.
	rc := mainRun([]string{"plan", "-c", "allreduce", "--count", "1M", "--algo", "ring", "--summary"}, &out, &errb)
	require.Equal(t, 0, rc, errb.String())
	require.Regexp(t, `(?m)^total .* 58720256 +58720256 `, out.String(), "summary lacks the 2(n−1)/n byte count")
	require.Contains(t, out.String(), "NCCL runs Ring/")

	out.Reset()
	rc = mainRun([]string{"plan", "--topo", "h200x2-nvlink", "--nodes", "2", "-c", "reducescatter", "--count", "1000", "--proto", "LL", "--json"}, &out, &errb)
	require.Equal(t, 0, rc, errb.String())
	var vs struct {
		Plans []struct {
			Note     string `json:"note"`
			Schedule struct {
				NRanks int `json:"nranks"`
			} `json:"schedule"`
			Summary struct {
				Total struct {
					SentBytes int64 `json:"sent_bytes"`
				} `json:"total"`
			} `json:"summary"`
		} `json:"plans"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &vs))
	require.Len(t, vs.Plans, 1)
	v := vs.Plans[0]
	require.Equal(t, 4, v.Schedule.NRanks)
	require.Contains(t, v.Note, "/LL on")
	// A ring reduce-scatter: every rank sends (n−1)/n of the n × 1000 floats.
	require.Equal(t, int64(4*3*1000*4), v.Summary.Total.SentBytes)

	for _, bad := range [][]string{
		{"plan", "--algo", "Bogus"},
		{"plan", "--count", "x"},
		{"plan", "--ranks", "9"},
		{"plan", "--ranks", "x"},
		{"plan", "-b", "1M", "--count", "1"},
		{"plan", "-c", "broadcast", "--root", "8"},
	} {
		errb.Reset()
		require.Equal(t, 2, mainRun(bad, &out, &errb), "%v: %s", bad, errb.String())
	}

	out.Reset()
	topo := "../../testdata/topos/azure-ncv4-a100pcie.xml"
	rc = mainRun([]string{"plan", "--topo", topo, "-c", "allreduce", "-b", "16M", "--summary"}, &out, &errb)
	require.Equal(t, 0, rc, errb.String())
	require.Contains(t, out.String(), "op 0: AllReduce")
	require.Contains(t, out.String(), "AllReduce: 16777216 Bytes -> Algo ")

	// CollNetDirect is NCCL's choice only with a CollNet plugin and NVSwitches; forcing it where
	// it is not available is NCCL's error.
	errb.Reset()
	rc = mainRun([]string{"plan", "--algo", "CollNetDirect"}, &out, &errb)
	require.Equal(t, 1, rc)
	require.True(t, strings.Contains(errb.String(), "no algorithm") || strings.Contains(errb.String(), "unsupported"), errb.String())
}
