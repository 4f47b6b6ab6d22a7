package comm

import "unsafe"

// Bytes views a typed slice as the bytes the API takes (no copy).
func Bytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// As views bytes as a typed slice (no copy); the length is rounded down to whole elements.
func As[T any](b []byte) []T { return view[T](b) }
