package planner

import (
	"slices"
	"strings"
	"sync"
)

// diagnosticEnv are NCCL variables that change what NCCL prints or dumps, not what it runs: a
// simulation has nothing to say about them.
var diagnosticEnv = map[string]bool{
	"NCCL_DEBUG": true, "NCCL_DEBUG_SUBSYS": true, "NCCL_DEBUG_FILE": true,
	"NCCL_DEBUG_TIMESTAMP_FORMAT": true, "NCCL_DEBUG_TIMESTAMP_LEVELS": true,
	"NCCL_TOPO_DUMP_FILE": true, "NCCL_TOPO_DUMP_FILE_RANK": true, "NCCL_GRAPH_DUMP_FILE": true,
	"NCCL_GRAPH_DUMP_FILE_RANK": true, "NCCL_WARN_ENABLE_DEBUG_INFO": true,
}

var (
	envReadOnce sync.Once
	envRead     map[string]bool
)

// EnvRead returns the NCCL variables SettingsFromEnv reads, sorted: the names it asks a getenv
// for over an empty environment (every read is unconditional).
func EnvRead() []string {
	envReadOnce.Do(func() {
		envRead = map[string]bool{}
		_, _ = SettingsFromEnv(func(k string) string {
			envRead[k] = true
			return ""
		})
	})
	out := make([]string, 0, len(envRead))
	for k := range envRead {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// UnreadEnv returns, sorted as NAME=VALUE, the NCCL_* variables of environ (os.Environ()'s
// KEY=VALUE entries) that no setting reads and that are not diagnostics: settings of NCCL's the
// plans and the simulation run without (NCCL_IB_QPS_PER_CONNECTION, NCCL_SOCKET_NTHREADS, …).
func UnreadEnv(environ []string) []string {
	EnvRead()
	var out []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "NCCL_") || envRead[k] || diagnosticEnv[k] {
			continue
		}
		out = append(out, kv)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
