package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// --gpu-model completes a partial vendor file in every command that plans; without it the file
// is refused with what it lacks, and a bad model is a usage error.
func TestGPUModelFlag(t *testing.T) {
	const ndv5 = "../../testdata/topos/azure-ndv5-h100-partial.xml"
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		rc := mainRun(args, &out, &errb)
		return rc, out.String(), errb.String()
	}

	rc, _, stderr := run("tune", "--topo", ndv5)
	require.Equal(t, 1, rc)
	require.Contains(t, stderr, "8 GPU devices without <gpu> (0001:00:00.0 line 4")
	require.Contains(t, stderr, "name the GPU model to complete it (--gpu-model: a100, b200, h100, h200, h800, l20, l40s, v100)")

	for _, cmd := range [][]string{
		{"tune", "-b", "1M", "-e", "1M"},
		{"search"},
		{"plan", "-c", "allreduce", "-b", "1M", "-e", "1M"},
		{"mem", "-c", "allreduce", "-b", "1M", "-e", "1M"},
		{"run", "-c", "allreduce", "-b", "1M", "-e", "1M"},
		{"topo"}, // topo resolves --topo as the others do (cli.LoadTopology)
	} {
		rc, stdout, stderr := run(append(cmd, "--topo", ndv5, "--gpu-model", "h100")...)
		require.Equal(t, 0, rc, "%v: %s", cmd, stderr)
		require.NotEmpty(t, stdout, cmd)
	}
	rc, stdout, _ := run("tune", "--topo", ndv5, "--gpu-model", "H100", "-b", "1M", "-e", "1M")
	require.Equal(t, 0, rc)
	require.Contains(t, stdout, "azure-ndv5-h100-partial.xml (GPU model h100), 8 ranks on 1 node(s), 24 channels")

	// The completed node searches as the DGX H100 does (both: 8 GPUs on NVSwitch at 18 × 20.6 GB/s).
	_, got, _ := run("search", "--topo", ndv5, "--gpu-model", "h100")
	_, want, _ := run("search", "--topo", "dgx-h100")
	pattern := func(s string) string {
		var l []string
		for _, line := range strings.Split(s, "\n") {
			if strings.HasPrefix(line, "Pattern ") || strings.HasPrefix(line, "===") {
				l = append(l, line)
			}
		}
		return strings.Join(l, "\n")
	}
	require.NotEmpty(t, pattern(want))
	require.Equal(t, pattern(want), pattern(got))

	rc, _, stderr = run("tune", "--topo", ndv5, "--gpu-model", "mi300x")
	require.Equal(t, 2, rc)
	require.Contains(t, stderr, `--gpu-model: partial: unknown GPU model "mi300x" (known: a100, b200`)

	rc, _, stderr = run("tune", "--topo", ndv5, "--gpu-model", "h100", "--nodes", "2")
	require.Equal(t, 1, rc)
	require.Contains(t, stderr, "2 nodes need NICs and the topology has none: 8 NIC devices without <nic><net> (0101:00:00.0 line 5")
	require.Contains(t, stderr, "--nic-speed 400Gbps")

	// --nic-speed completes them as NCCL's network plugin would: the 2-node plan runs, and on
	// the NDv5 file it is the DGX H100's (8 GPUs, a 400 Gb/s NIC beside each).
	rc, stdout, stderr = run("tune", "--topo", ndv5, "--gpu-model", "h100", "--nic-speed", "400Gbps", "--nodes", "2", "-b", "1G", "-e", "1G", "-c", "allreduce")
	require.Equal(t, 0, rc, stderr)
	_, twin, _ := run("tune", "--topo", "dgx-h100", "--nodes", "2", "-b", "1G", "-e", "1G", "-c", "allreduce")
	choice := func(s string) string {
		for _, line := range strings.Split(s, "\n") {
			if strings.HasPrefix(line, "AllReduce:") {
				return line
			}
		}
		return ""
	}
	require.NotEmpty(t, choice(twin))
	require.Equal(t, choice(twin), choice(stdout))
	for _, bad := range [][]string{
		{"--nic-speed", "fast"},                          // no unit
		{"--nic-gdr=false"},                              // nothing to apply it to
		{"--nic-speed", "100000000Gbps"},                 // past the bound
		{"--nic-speed", "400Gbps", "--topo", "dgx-h100"}, // complete NICs: nothing to fill
	} {
		args := append([]string{"tune", "--topo", ndv5, "--gpu-model", "h100", "--nodes", "2"}, bad...)
		rc, _, stderr = run(args...)
		require.NotEqual(t, 0, rc, "%v", bad)
		require.Contains(t, stderr, "nic", "%v", bad)
	}

	rc, _, stderr = run("tune", "--topo", "../../testdata/topos/azure-ndv2-v100-partial.xml", "--gpu-model", "v100")
	require.Equal(t, 1, rc)
	require.Contains(t, stderr, "azure-ndv2-v100-partial.xml:3: GPU 0001:00:00.0: Tesla V100 SXM2 GPUs are joined GPU to GPU")

	rc, _, stderr = run("tune", "--topo", "dgx-h100", "--gpu-model", "a100")
	require.Equal(t, 1, rc)
	require.Contains(t, stderr, `dgx-h100:31: <gpu sm="90">, but GPU model a100 (A100 SXM4 on an HGX A100 board) has sm 80`)

	// A complete file is taken as it is.
	rc, stdout, stderr = run("tune", "--topo", "dgx-h100", "--gpu-model", "h100", "-b", "1M", "-e", "1M")
	require.Equal(t, 0, rc, stderr)
	require.Contains(t, stdout, "dgx-h100 (GPU model h100), 8 ranks")
}

// topo reads $NCCL_TOPO_FILE without --topo, as the commands that plan do; --topo wins.
func TestTopoReadsNCCLTopoFile(t *testing.T) {
	t.Setenv("NCCL_TOPO_FILE", "../../testdata/topos/azure-ndv5-h100-partial.xml")
	for _, args := range [][]string{{"topo"}, {"tune", "-b", "1M", "-e", "1M"}} {
		var out, errb bytes.Buffer
		require.Equal(t, 1, mainRun(args, &out, &errb), "%v", args)
		require.Contains(t, errb.String(), "name the GPU model to complete it", "%v", args)
		errb.Reset()
		require.Equal(t, 0, mainRun(append(args, "--topo", "h200x2-nvlink"), &out, &errb), "%v: %s", args, errb.String())
	}
}
