// Package topos holds authored NCCL topology files (the <system version="1"> format that
// NCCL_TOPO_DUMP_FILE writes) for machines simccl users commonly ask about, embedded in the
// binary. Each file starts with a comment that says what machine it models and which paths
// NCCL should find in it.
//
//	name, data := topos.Default() // "dgx-h100", the file used when no topology is given
//	data, err := topos.Get("gh200-c2c")
package topos

import (
	"embed"
	"fmt"
	"path"
	"sort"
	"strings"
)

//go:embed *.xml
var files embed.FS

// DefaultName is the topology used when none is given: a DGX H100.
const DefaultName = "dgx-h100"

// Default returns the name and contents of the default topology (dgx-h100).
func Default() (name string, data []byte) {
	data, err := Get(DefaultName)
	if err != nil {
		// The file is embedded at build time; a failure here is a broken build.
		panic(err)
	}
	return DefaultName, data
}

// Get returns the contents of the named example; the name may be given with or without ".xml".
// The returned slice is a fresh copy the caller may modify.
func Get(name string) ([]byte, error) {
	base := strings.TrimSuffix(name, ".xml")
	if base == "" || strings.ContainsAny(base, "/\\") {
		return nil, fmt.Errorf("topos: no example topology %q (have %s)", name, strings.Join(Names(), ", "))
	}
	data, err := files.ReadFile(base + ".xml")
	if err != nil {
		return nil, fmt.Errorf("topos: no example topology %q (have %s)", name, strings.Join(Names(), ", "))
	}
	return data, nil
}

// Names lists the embedded examples, sorted, without the ".xml" suffix.
func Names() []string {
	entries, err := files.ReadDir(".")
	if err != nil {
		panic(err) // embedded directory; cannot fail
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".xml") {
			names = append(names, strings.TrimSuffix(path.Base(e.Name()), ".xml"))
		}
	}
	sort.Strings(names)
	return names
}
