package xml

import (
	"bytes"
	stdxml "encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/beevik/etree"
)

// Limits bound what the reader accepts, so that hostile input fails fast with a clear error
// instead of exhausting memory. NCCL itself caps nodes per type at 576 (2.28); these limits are
// far above anything a real machine produces.
const (
	MaxInputBytes = 64 << 20 // whole document
	MaxDepth      = 512      // element nesting
	MaxElements   = 4 << 20  // elements in one document
)

// Kind says which NCCL document a file holds.
type Kind int

const (
	// KindSystem is a topology file: <system version="1">.
	KindSystem Kind = iota + 1
	// KindGraphs is a graph dump: <graphs version="1">.
	KindGraphs
)

func (k Kind) String() string {
	switch k {
	case KindSystem:
		return "system"
	case KindGraphs:
		return "graphs"
	}
	return "unknown"
}

// ErrSyntax is wrapped by every error this package returns for malformed input.
var ErrSyntax = errors.New("xml: malformed topology")

// Error is a problem with the input, located by file and line.
type Error struct {
	File string
	Line int // 1-based; 0 when unknown
	Msg  string
}

func (e *Error) Error() string {
	name := e.File
	if name == "" {
		name = "<input>"
	}
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", name, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", name, e.Msg)
}

// Unwrap lets callers test errors.Is(err, ErrSyntax).
func (e *Error) Unwrap() error { return ErrSyntax }

// Document is a parsed NCCL XML file. The tree is kept whole (unknown elements and attributes,
// attribute order, comments) so that writing it back is lossless.
type Document struct {
	Name  string          // file name used in errors
	Doc   *etree.Document // the tree
	lines map[*etree.Element]int
}

// ReadFile parses the file at path.
func ReadFile(path string) (*Document, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads one document from r; name is used in error messages.
func Parse(r io.Reader, name string) (*Document, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxInputBytes+1))
	if err != nil {
		return nil, &Error{File: name, Msg: err.Error()}
	}
	return ParseBytes(data, name)
}

// ParseBytes parses one document held in memory.
func ParseBytes(data []byte, name string) (*Document, error) {
	if len(data) > MaxInputBytes {
		return nil, &Error{File: name, Msg: fmt.Sprintf("input larger than %d bytes", MaxInputBytes)}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &Error{File: name, Msg: "empty file"}
	}
	lines, err := scan(data, name)
	if err != nil {
		return nil, err
	}
	doc := etree.NewDocument()
	doc.ReadSettings.PreserveCData = true
	doc.ReadSettings.PreserveDuplicateAttrs = true
	if err := doc.ReadFromBytes(data); err != nil {
		return nil, &Error{File: name, Msg: err.Error()}
	}
	d := &Document{Name: name, Doc: doc, lines: make(map[*etree.Element]int, len(lines))}
	i := 0
	var walk func(e *etree.Element)
	walk = func(e *etree.Element) {
		if i < len(lines) {
			d.lines[e] = lines[i]
		}
		i++
		for _, c := range e.ChildElements() {
			walk(c)
		}
	}
	for _, c := range doc.ChildElements() {
		walk(c)
	}
	root := doc.Root()
	if root == nil {
		return nil, &Error{File: name, Msg: "no root element"}
	}
	switch root.Tag {
	case "system", "graphs":
	default:
		return nil, d.Errorf(root, "root element is <%s>, want <system> (topology) or <graphs> (graph dump)", root.Tag)
	}
	if v := root.SelectAttrValue("version", ""); v != "1" {
		return nil, d.Errorf(root, "<%s version=%q>: only version 1 is understood", root.Tag, v)
	}
	return d, nil
}

// scan runs the standard decoder over the input once, to check it is well formed, to enforce
// the limits, and to record the line of every start element in document order.
func scan(data []byte, name string) ([]int, error) {
	dec := stdxml.NewDecoder(bytes.NewReader(data))
	dec.Strict = true
	var lines []int
	depth := 0
	for {
		line, _ := dec.InputPos()
		tok, err := dec.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			var se *stdxml.SyntaxError
			if errors.As(err, &se) {
				return nil, &Error{File: name, Line: se.Line, Msg: se.Msg}
			}
			return nil, &Error{File: name, Line: line, Msg: err.Error()}
		}
		switch t := tok.(type) {
		case stdxml.StartElement:
			depth++
			if depth > MaxDepth {
				return nil, &Error{File: name, Line: line, Msg: fmt.Sprintf("elements nested deeper than %d", MaxDepth)}
			}
			if len(lines) >= MaxElements {
				return nil, &Error{File: name, Line: line, Msg: fmt.Sprintf("more than %d elements", MaxElements)}
			}
			// InputPos before the token is where the previous token ended; the element's own line
			// is that plus the newlines of the whitespace in between, which RawToken already
			// consumed as CharData. Record the position after the '<' instead.
			l, _ := dec.InputPos()
			lines = append(lines, l-countNewlinesInTag(t))
		case stdxml.EndElement:
			depth--
		case stdxml.Directive:
			if bytes.Contains(t, []byte("ENTITY")) {
				return nil, &Error{File: name, Line: line, Msg: "DTD entity declarations are not accepted"}
			}
		}
	}
	if depth != 0 {
		return nil, &Error{File: name, Msg: "unexpected end of file"}
	}
	return lines, nil
}

// countNewlinesInTag is an approximation of how many lines a start tag spans; attribute values
// in topology files never contain newlines, so it is almost always zero.
func countNewlinesInTag(t stdxml.StartElement) int {
	n := 0
	for _, a := range t.Attr {
		n += bytes.Count([]byte(a.Value), []byte("\n"))
	}
	return n
}

// Root returns the root element (<system> or <graphs>).
func (d *Document) Root() *etree.Element { return d.Doc.Root() }

// Kind tells whether the document is a topology or a graph dump.
func (d *Document) Kind() Kind {
	switch d.Root().Tag {
	case "system":
		return KindSystem
	case "graphs":
		return KindGraphs
	}
	return 0
}

// Line returns the 1-based line where e starts in the input, or 0 for elements that were added
// after parsing.
func (d *Document) Line(e *etree.Element) int { return d.lines[e] }

// Errorf makes an *Error located at e.
func (d *Document) Errorf(e *etree.Element, format string, args ...any) error {
	return &Error{File: d.Name, Line: d.Line(e), Msg: fmt.Sprintf(format, args...)}
}

// WriteTo writes the document back out, unchanged apart from what the caller edited.
func (d *Document) WriteTo(w io.Writer) (int64, error) { return d.Doc.WriteTo(w) }

// Bytes returns the serialized document.
func (d *Document) Bytes() ([]byte, error) { return d.Doc.WriteToBytes() }
