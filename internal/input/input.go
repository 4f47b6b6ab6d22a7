// Package input reads the files a user hands to simccl (topologies, graph dumps, fabric files,
// workload traces, NCCL logs, measured timings, tuner files) with one bound on their size, and
// names the file (and the line, for line-oriented formats) in every error it returns. Every
// reader of user input goes through it instead of os.ReadFile, io.ReadAll or a bare
// bufio.Scanner, so that /dev/zero, a 10 GB log or a line without an end fails fast:
//
//	data, err := input.ReadFile(path)  // "big.log: input too large (more than 64 MiB)"
//
//	sc := input.NewScanner(r, name)    // lines of at most MaxLine bytes, MaxBytes in all
//	for sc.Scan() { ... sc.Text() ... sc.Line() ... }
//	if err := sc.Err(); err != nil {}  // "fabric.txt:3: line longer than 1 MiB"
package input

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// The bounds on one input file. MaxBytes is also topo/ncclxml's bound on an XML document: the
// largest real topology or trace in this repository is a few megabytes.
const (
	MaxBytes = 64 << 20 // bytes in one file
	MaxLine  = 1 << 20  // bytes in one line of a line-oriented file
)

// ErrTooLarge is wrapped by the error for a file over MaxBytes or a line over MaxLine.
var ErrTooLarge = errors.New("input too large")

// TooLarge is the error for an input name of more than max bytes.
func TooLarge(name string, max int64) error {
	return fmt.Errorf("%s: %w (more than %s)", name, ErrTooLarge, Size(max))
}

// Size prints a bound in the largest binary unit that divides it ("64 MiB", "1 MiB", "1000 bytes").
func Size(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// ReadFile reads the file at path whole, refusing one of more than MaxBytes: before reading it
// when its size is known (a regular file), after MaxBytes+1 bytes otherwise (a pipe, or a device
// such as /dev/zero). Errors name path; a missing file's error still satisfies
// errors.Is(err, fs.ErrNotExist).
func ReadFile(path string) ([]byte, error) { return ReadFileMax(path, MaxBytes) }

// ReadFileMax is ReadFile with a tighter bound, for a format whose valid files are all smaller
// (topo/ncclxml's XML documents).
func ReadFileMax(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	hint := 0
	if st, err := f.Stat(); err == nil {
		if st.IsDir() {
			return nil, fmt.Errorf("%s: is a directory", path)
		}
		if st.Mode().IsRegular() {
			if st.Size() > max {
				return nil, TooLarge(path, max)
			}
			hint = int(st.Size())
		}
	}
	return read(f, path, max, hint)
}

// Read reads r whole, at most max bytes; name is what errors call the input.
func Read(r io.Reader, name string, max int64) ([]byte, error) {
	return read(r, name, max, 0)
}

// read reads r in chunks of growing size (the first of hint+1 bytes when the size is known),
// joined once at the end: a stream over the bound (/dev/zero) is then written into memory once,
// not copied again and again as one growing buffer would be on its way to max.
func read(r io.Reader, name string, max int64, hint int) ([]byte, error) {
	var chunks [][]byte
	var total int64
	size := int64(64 << 10)
	if hint > 0 {
		size = int64(hint) + 1 // one byte more than the file tells a file that grew
	}
	for {
		buf := make([]byte, min(size, max+1-total))
		n, err := io.ReadFull(r, buf)
		chunks = append(chunks, buf[:n])
		total += int64(n)
		if total > max {
			return nil, TooLarge(name, max)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		size = min(2*size, 8<<20)
	}
	if len(chunks) == 1 {
		return chunks[0], nil
	}
	return bytes.Join(chunks, nil), nil
}

// limited is a reader that fails once more than max bytes have come through it.
type limited struct {
	r    io.Reader
	name string
	max  int64
	n    int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n > l.max {
		return 0, TooLarge(l.name, l.max)
	}
	if int64(len(p)) > l.max+1-l.n {
		p = p[:l.max+1-l.n]
	}
	n, err := l.r.Read(p)
	if l.n+int64(n) > l.max {
		// The byte past the bound is not handed on: the caller sees max bytes, then the error.
		n = int(l.max - l.n)
		l.n = l.max + 1
		return n, TooLarge(l.name, l.max)
	}
	l.n += int64(n)
	return n, err
}

// Limit returns a reader of r that fails with TooLarge(name, max) once more than max bytes have
// been read from it.
func Limit(r io.Reader, name string, max int64) io.Reader {
	return &limited{r: r, name: name, max: max}
}

// Scanner reads the lines of a line-oriented input: at most MaxBytes in all and MaxLine bytes a
// line, with errors that name the input and the line.
type Scanner struct {
	sc   *bufio.Scanner
	name string
	line int
}

// NewScanner returns a Scanner over r; name is what errors call the input.
func NewScanner(r io.Reader, name string) *Scanner {
	sc := bufio.NewScanner(Limit(r, name, MaxBytes))
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	return &Scanner{sc: sc, name: name}
}

// Scan advances to the next line.
func (s *Scanner) Scan() bool {
	if s.sc.Scan() {
		s.line++
		return true
	}
	return false
}

// Text is the current line, without its end.
func (s *Scanner) Text() string { return s.sc.Text() }

// Bytes is the current line, valid until the next Scan.
func (s *Scanner) Bytes() []byte { return s.sc.Bytes() }

// Line is the current line's number (from 1).
func (s *Scanner) Line() int { return s.line }

// Err is the error that stopped Scan, nil at the end of the input. It names the input, and the
// line for a line over MaxLine; it wraps ErrTooLarge for an input or a line over its bound.
func (s *Scanner) Err() error {
	err := s.sc.Err()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bufio.ErrTooLong):
		return fmt.Errorf("%s:%d: %w (a line longer than %s)", s.name, s.line+1, ErrTooLarge, Size(MaxLine))
	case errors.Is(err, ErrTooLarge):
		return err
	}
	return fmt.Errorf("%s:%d: %w", s.name, s.line+1, err)
}
