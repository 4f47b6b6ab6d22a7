//go:build !cgo

package cuda

import "fmt"

// NVMLDevices needs cgo (go-nvml loads libnvidia-ml.so.1 through it).
func NVMLDevices() ([]GPUInfo, error) {
	return nil, fmt.Errorf("%w: built without cgo (CGO_ENABLED=0)", ErrNoNVML)
}
