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

// envRead is the set of NCCL variables SettingsFromEnv reads: the names it asks a getenv for over
// an empty environment (every read is unconditional), recorded once.
var envRead = sync.OnceValue(func() map[string]bool {
	names := map[string]bool{}
	_, _ = SettingsFromEnv(func(k string) string {
		names[k] = true
		return ""
	})
	return names
})

// EnvRead returns the NCCL variables SettingsFromEnv reads, sorted.
func EnvRead() []string {
	out := make([]string, 0, len(envRead()))
	for k := range envRead() {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// UnreadEnv returns, sorted as NAME=VALUE, the NCCL_* variables of environ (os.Environ()'s
// KEY=VALUE entries) that no setting reads and that are not diagnostics: settings of NCCL's the
// plans and the simulation run without (NCCL_IB_TIMEOUT, NCCL_SOCKET_NTHREADS, …).
func UnreadEnv(environ []string) []string {
	read := envRead()
	var out []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "NCCL_") || read[k] || diagnosticEnv[k] {
			continue
		}
		out = append(out, kv)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
