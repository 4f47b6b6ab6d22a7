//go:build !cgo

package cuda

import "errors"

// Without cgo the driver cannot be reached; every entry point reports ErrNoDriver.
func loadDriver() (driver, error) {
	return nil, errors.New("built without cgo (CGO_ENABLED=0), libcuda.so.1 cannot be loaded")
}
