package planner

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// The planner reads NCCL's tuning and topology variables (and NCCL_IB_QPS_PER_CONNECTION, for
// the simulation's fabric); a setting it does not model, such as NCCL_IB_TIMEOUT, is reported, and so is nothing NCCL only prints or dumps, nor a
// variable outside NCCL's namespace.
func TestUnreadEnv(t *testing.T) {
	read := EnvRead()
	for _, k := range []string{"NCCL_ALGO", "NCCL_PROTO", "NCCL_BUFFSIZE", "NCCL_TOPO_FILE", "NCCL_MIN_CTAS", "NCCL_NVLS_ENABLE", "NCCL_P2P_NET_CHUNKSIZE"} {
		require.True(t, slices.Contains(read, k), k)
	}
	got := UnreadEnv([]string{
		"NCCL_ALGO=Ring", "NCCL_DEBUG=INFO", "NCCL_TOPO_DUMP_FILE=/tmp/t.xml", "PATH=/bin",
		"NCCL_SOCKET_NTHREADS=4", "NCCL_IB_TIMEOUT=22", "NCCL_IB_TIMEOUT=22", "NCCL_BROKEN", "NCCL_IB_QPS_PER_CONNECTION=2",
	})
	require.Equal(t, []string{"NCCL_IB_TIMEOUT=22", "NCCL_SOCKET_NTHREADS=4"}, got)
	require.Empty(t, UnreadEnv(nil))
}
