package input

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.txt")
	require.NoError(t, os.WriteFile(small, []byte("hello\n"), 0o644))
	exact := filepath.Join(dir, "exact.bin")
	require.NoError(t, os.WriteFile(exact, make([]byte, 1000), 0o644))
	// A sparse file over the bound: refused from its size, without reading it.
	big := filepath.Join(dir, "big.bin")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(MaxBytes+1))
	require.NoError(t, f.Close())

	b, err := ReadFile(small)
	require.NoError(t, err)
	require.Equal(t, "hello\n", string(b))
	b, err = ReadFile(exact)
	require.NoError(t, err)
	require.Len(t, b, 1000)

	_, err = ReadFile(big)
	require.ErrorIs(t, err, ErrTooLarge)
	require.EqualError(t, err, big+": input too large (more than 64 MiB)")

	_, err = ReadFile(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = ReadFile(dir)
	require.ErrorContains(t, err, dir+": is a directory")
}

// TestReadDevZero: a device has no size; reading stops one byte past the bound.
func TestReadDevZero(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	_, err := ReadFile("/dev/zero")
	require.ErrorIs(t, err, ErrTooLarge)
	require.EqualError(t, err, "/dev/zero: input too large (more than 64 MiB)")
}

func TestRead(t *testing.T) {
	for _, tc := range []struct {
		in  string
		max int64
		err string
	}{
		{"", 4, ""},
		{"abcd", 4, ""},
		{"abcde", 4, "x: input too large (more than 4 bytes)"},
		{strings.Repeat("z", 5000), 2048, "x: input too large (more than 2 KiB)"},
	} {
		b, err := Read(strings.NewReader(tc.in), "x", tc.max)
		if tc.err != "" {
			require.EqualError(t, err, tc.err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.in, string(b))
	}
	_, err := Read(iotest{}, "x", 10)
	require.EqualError(t, err, "x: boom")
}

type iotest struct{}

func (iotest) Read([]byte) (int, error) { return 0, errors.New("boom") }

func TestLimit(t *testing.T) {
	b, err := io.ReadAll(Limit(strings.NewReader("abc"), "in", 3))
	require.NoError(t, err)
	require.Equal(t, "abc", string(b))
	_, err = io.ReadAll(Limit(strings.NewReader("abcd"), "in", 3))
	require.ErrorIs(t, err, ErrTooLarge)
	require.EqualError(t, err, "in: input too large (more than 3 bytes)")
}

func TestScanner(t *testing.T) {
	sc := NewScanner(strings.NewReader("a\nb\n\nc"), "f.txt")
	var lines []string
	var nums []int
	for sc.Scan() {
		lines = append(lines, sc.Text())
		nums = append(nums, sc.Line())
	}
	require.NoError(t, sc.Err())
	require.Equal(t, []string{"a", "b", "", "c"}, lines)
	require.Equal(t, []int{1, 2, 3, 4}, nums)

	// A line over MaxLine: the error names the file and the line (not "token too long").
	sc = NewScanner(strings.NewReader("ok\n"+strings.Repeat("x", MaxLine+1)+"\n"), "f.txt")
	for sc.Scan() {
	}
	require.ErrorIs(t, sc.Err(), ErrTooLarge)
	require.EqualError(t, sc.Err(), "f.txt:2: input too large (a line longer than 1 MiB)")

	// More than MaxBytes in all, in short lines.
	sc = NewScanner(io.LimitReader(repeat('\n'), MaxBytes+10), "z")
	n := 0
	for sc.Scan() {
		n++
	}
	require.ErrorIs(t, sc.Err(), ErrTooLarge)
	require.EqualError(t, sc.Err(), "z: input too large (more than 64 MiB)")
	require.LessOrEqual(t, n, MaxBytes)
}

// repeat is an endless reader of one byte.
type repeat byte

func (r repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

func TestSize(t *testing.T) {
	require.Equal(t, "64 MiB", Size(64<<20))
	require.Equal(t, "1 GiB", Size(1<<30))
	require.Equal(t, "3 KiB", Size(3<<10))
	require.Equal(t, "1000 bytes", Size(1000))
}
