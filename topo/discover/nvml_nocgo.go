//go:build !cgo || !linux

package discover

import "fmt"

// OpenNVML reports ErrNoNVML: NVML is reached through cgo (github.com/NVIDIA/go-nvml), and this
// binary was built without it.
func OpenNVML() (NVML, error) {
	return nil, fmt.Errorf("%w: built without cgo (rebuild with CGO_ENABLED=1 on Linux)", ErrNoNVML)
}
