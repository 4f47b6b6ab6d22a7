package ncclxml

import (
	"bytes"
	stdxml "encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/beevik/etree"

	"github.com/simccl/simccl/internal/input"
)

// Limits bound what the reader accepts, so that hostile input fails fast with a clear error
// instead of exhausting memory. NCCL itself caps nodes per type at 576 (2.28); these limits are
// far above anything a real machine produces.
const (
	// MaxInputBytes bounds a whole document, tighter than simccl's 64 MiB on other inputs: the
	// largest valid NCCL XML (a full graph dump, below) is about 5 MB, and encoding/xml reads
	// 30-40 MB/s, so that 64 MiB of text in one element took 3.5 s to refuse.
	MaxInputBytes = 16 << 20
	MaxDepth      = 512 // element nesting
	// MaxElements bounds the elements of one document. The largest valid NCCL files are far below
	// it: a graph dump of 5 graphs × 64 channels (MAXCHANNELS) × 640 GPUs and 2 NETs
	// (NCCL_TOPO_MAX_NODES: 576 in 2.28, 640 in 2.30) has about 206,000; real ones a few hundred (a fused
	// 2-tray NVL72 graph dump, the largest in testdata, 310). A 200,000-GPU file (400,000
	// elements, 18 MB) took 0.7 to 2.3 s to parse before the topology refused it; such files
	// are now refused before the tree is built.
	MaxElements = 1 << 18
	// MaxAttrs bounds the attributes of one element. NCCL's own reader keeps at most 16
	// (MAX_ATTR_COUNT in NCCL 2.28's xml.h); without a bound, one element of 200,000 attributes
	// (3 MB) took 87 s, the tree's attribute insertion being quadratic.
	MaxAttrs = 64
	// MaxAttrsTotal bounds the attributes of one document, counted before parsing as the '='
	// characters of the input (each attribute has one outside its value; text may add some, and
	// NCCL's files have no text). The largest valid files have about 250,000 (a 640-GPU topology
	// with its NVLinks and PCI devices, a full graph dump's dev ids). Within 64 MiB and
	// MaxElements, 9 million short attributes took 20 s and 1 GB to read.
	MaxAttrsTotal = 1 << 19
	// MaxMarkup bounds the elements, comments, CDATA sections, processing instructions and
	// declarations of one document together: 64 MiB of "<!---->" would otherwise be 9 million
	// comment nodes in the tree.
	MaxMarkup = 2 * MaxElements
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
	// Err, when set, is a cause callers may test for besides ErrSyntax (input.ErrTooLarge).
	Err error
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

// Unwrap lets callers test errors.Is(err, ErrSyntax) (and the cause in Err, if any).
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrSyntax, e.Err}
	}
	return []error{ErrSyntax}
}

// Document is a parsed NCCL XML file. The tree is kept whole (unknown elements and attributes,
// attribute order, comments) so that writing it back is lossless.
type Document struct {
	Name string          // file name used in errors
	Doc  *etree.Document // the tree
	// NamelessAttrs counts the `=""` attributes NCCL's dumps can carry (see blankNamelessAttrs);
	// they are dropped on reading.
	NamelessAttrs int
	lines         map[*etree.Element]int
}

// ReadFile parses the file at path, read with internal/input's bound (a file over MaxInputBytes
// is refused before it is read when its size is known). A missing file's error satisfies
// errors.Is(err, fs.ErrNotExist).
func ReadFile(path string) (*Document, error) {
	data, err := input.ReadFileMax(path, MaxInputBytes)
	if errors.Is(err, input.ErrTooLarge) {
		return nil, tooLarge(path)
	}
	if err != nil {
		return nil, err
	}
	return ParseBytes(data, path)
}

func tooLarge(name string) *Error {
	return &Error{File: name, Msg: fmt.Sprintf("%v (more than %s)", input.ErrTooLarge, input.Size(MaxInputBytes)), Err: input.ErrTooLarge}
}

// Parse reads one document from r; name is used in error messages.
func Parse(r io.Reader, name string) (*Document, error) {
	data, err := input.Read(r, name, MaxInputBytes)
	if errors.Is(err, input.ErrTooLarge) {
		return nil, tooLarge(name)
	}
	if err != nil {
		return nil, &Error{File: name, Msg: err.Error()}
	}
	return ParseBytes(data, name)
}

// ParseBytes parses one document held in memory.
func ParseBytes(data []byte, name string) (*Document, error) {
	if len(data) > MaxInputBytes {
		return nil, tooLarge(name)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &Error{File: name, Msg: "empty file"}
	}
	data, dropped := blankNamelessAttrs(data)
	d, err := build(data, name)
	if err != nil {
		return nil, err
	}
	d.NamelessAttrs = dropped
	doc := d.Doc
	root := doc.Root()
	if root == nil { // build already rejects this; kept so a future change cannot panic below
		return nil, &Error{File: name, Msg: "not XML: no root element"}
	}
	switch root.Tag {
	case "system", "graphs":
		if root.Space == "" {
			break
		}
		fallthrough
	default:
		return nil, d.Errorf(root, "root element is <%s>, want <system> (topology) or <graphs> (graph dump)", root.FullTag())
	}
	if v := root.SelectAttrValue("version", ""); v != "1" {
		return nil, d.Errorf(root, "<%s version=%s>: only version 1 is understood", root.Tag, Quote(v))
	}
	return d, nil
}

// blankNamelessAttrs blanks out the nameless attributes (` =""`) that NCCL writes into its
// topology dumps: NCCL's own XML reader (2.28.9, seen on the 2xH200 machine, see
// testdata/nccl/h200x2/README.md) takes the blank before a self-closing "/>" for an attribute with
// an empty name and empty value, and NCCL_TOPO_DUMP_FILE then writes it back as `=""`. Such a dump
// is not well-formed XML, yet it is what NCCL produces, so we accept it: the attribute carries
// nothing and is dropped (the bytes become blanks, keeping offsets and line numbers). It returns
// the input itself when there is nothing to blank, and how many were blanked.
func blankNamelessAttrs(data []byte) ([]byte, int) {
	if !bytes.Contains(data, []byte(`=""`)) && !bytes.Contains(data, []byte(`=''`)) {
		return data, 0
	}
	out := data
	copied := false
	n := 0
	inTag := false
	var quote byte
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case !inTag:
			if c == '<' && i+1 < len(data) && data[i+1] != '!' && data[i+1] != '?' {
				inTag = true
			}
		case c == '>':
			inTag = false
		case c == '"' || c == '\'':
			quote = c
		case c == '=' && i > 0 && isSpace(data[i-1]) && i+2 < len(data) &&
			(data[i+1] == '"' || data[i+1] == '\'') && data[i+2] == data[i+1]:
			if !copied {
				out = append([]byte(nil), data...)
				copied = true
			}
			out[i], out[i+1], out[i+2] = ' ', ' ', ' '
			n++
			i += 2
		}
	}
	return out, n
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// build runs the standard decoder over the input once and builds the etree tree from its
// tokens, so that it can enforce the limits as it goes, record the line of every element, and
// report with a line number what etree alone would only call "malformed": mismatched and
// unclosed tags, text or a second element outside the root, duplicate attributes, entity
// declarations. One pass of encoding/xml costs about as much as etree's own reader, which uses
// the same decoder.
func build(data []byte, name string) (*Document, error) {
	// Refuse documents with too many elements before building anything, so that the time and
	// memory spent on them stay bounded by MaxElements rather than by MaxInputBytes.
	n, off := countStartTags(data, MaxElements+1)
	if off >= 0 {
		line := 1 + bytes.Count(data[:off], []byte("\n"))
		return nil, &Error{File: name, Line: line, Msg: fmt.Sprintf("more than %d elements", MaxElements)}
	}
	if bytes.Count(data, []byte("=")) > MaxAttrsTotal {
		off, k := 0, 0
		for ; k <= MaxAttrsTotal; k++ {
			off += bytes.IndexByte(data[off:], '=') + 1
		}
		line := 1 + bytes.Count(data[:off], []byte("\n"))
		return nil, &Error{File: name, Line: line, Msg: fmt.Sprintf("more than %d attributes", MaxAttrsTotal)}
	}
	dec := stdxml.NewDecoder(bytes.NewReader(data))
	dec.Strict = true
	doc := etree.NewDocument()
	// The count sizes the line map once: growing it step by step cost a third of the time of a
	// 200,000-GPU file (when MaxElements allowed one).
	d := &Document{Name: name, Doc: doc, lines: make(map[*etree.Element]int, n)}
	type open struct {
		e    *etree.Element
		name stdxml.Name
	}
	var stack []open
	parent := &doc.Element
	roots, elements, markup := 0, 0, 0
	tooMuch := func(line int) error {
		return &Error{File: name, Line: line, Msg: fmt.Sprintf("more than %d elements, comments, CDATA sections and processing instructions", MaxMarkup)}
	}
	for {
		// Character data (whitespace included) is a token of its own, so the position before a
		// token is the position of its first byte: the '<' of a tag, or a CDATA section.
		line, _ := dec.InputPos()
		off := dec.InputOffset()
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
		if _, text := tok.(stdxml.CharData); !text || (off >= 0 && off < int64(len(data)) && bytes.HasPrefix(data[off:], []byte("<![CDATA["))) {
			if _, end := tok.(stdxml.EndElement); !end {
				if markup++; markup > MaxMarkup {
					return nil, tooMuch(line)
				}
			}
		}
		switch t := tok.(type) {
		case stdxml.StartElement:
			if len(stack) >= MaxDepth {
				return nil, &Error{File: name, Line: line, Msg: fmt.Sprintf("elements nested deeper than %d", MaxDepth)}
			}
			if elements++; elements > MaxElements {
				return nil, &Error{File: name, Line: line, Msg: fmt.Sprintf("more than %d elements", MaxElements)}
			}
			if len(stack) == 0 {
				if roots++; roots > 1 {
					return nil, &Error{File: name, Line: line, Msg: fmt.Sprintf("second root element <%s> after the first one closed", qname(t.Name))}
				}
			}
			if len(t.Attr) > MaxAttrs {
				return nil, &Error{File: name, Line: line, Msg: fmt.Sprintf("<%s> has %d attributes, more than %d", qname(t.Name), len(t.Attr), MaxAttrs)}
			}
			e := parent.CreateElement(qname(t.Name))
			if len(t.Attr) > 0 {
				e.Attr = make([]etree.Attr, 0, len(t.Attr))
			}
			if a, dup := duplicateAttr(t.Attr); dup {
				// Not well-formed XML (XML 1.0 section 3.1, "Unique Att Spec").
				return nil, &Error{File: name, Line: line, Msg: fmt.Sprintf("<%s> has attribute %s twice", qname(t.Name), qname(a))}
			}
			for _, a := range t.Attr {
				e.CreateAttr(qname(a.Name), a.Value)
			}
			d.lines[e] = line
			stack = append(stack, open{e, t.Name})
			parent = e
		case stdxml.EndElement:
			if len(stack) == 0 {
				return nil, &Error{File: name, Line: line, Msg: fmt.Sprintf("</%s> closes nothing", qname(t.Name))}
			}
			top := stack[len(stack)-1]
			if top.name != t.Name {
				return nil, &Error{File: name, Line: line, Msg: fmt.Sprintf("</%s> closes <%s> opened at line %d", qname(t.Name), qname(top.name), d.lines[top.e])}
			}
			stack = stack[:len(stack)-1]
			parent = &doc.Element
			if len(stack) > 0 {
				parent = stack[len(stack)-1].e
			}
		case stdxml.CharData:
			if len(stack) == 0 && len(bytes.TrimSpace(t)) > 0 && !(roots == 0 && isBOM(t)) {
				where := "before the root element"
				if roots > 0 {
					where = "after the root element"
				}
				lead := len(t) - len(bytes.TrimLeft(t, " \t\r\n"))
				line += bytes.Count(t[:lead], []byte("\n"))
				return nil, &Error{File: name, Line: line, Msg: fmt.Sprintf("not XML: text %s (%s)", where, snippet(t))}
			}
			if off >= 0 && off < int64(len(data)) && bytes.HasPrefix(data[off:], []byte("<![CDATA[")) {
				parent.CreateCData(string(t))
			} else {
				parent.CreateText("").SetData(string(t)) // SetData marks whitespace as etree's reader does
			}
		case stdxml.Comment:
			parent.CreateComment(string(t))
		case stdxml.ProcInst:
			parent.CreateProcInst(t.Target, string(t.Inst))
		case stdxml.Directive:
			if bytes.Contains(t, []byte("ENTITY")) {
				return nil, &Error{File: name, Line: line, Msg: "DTD entity declarations are not accepted"}
			}
			parent.CreateDirective(string(t))
		}
	}
	if len(stack) != 0 {
		top := stack[len(stack)-1]
		return nil, &Error{File: name, Line: d.lines[top.e], Msg: fmt.Sprintf("unexpected end of file: <%s> is not closed", qname(top.name))}
	}
	if roots == 0 {
		return nil, &Error{File: name, Msg: "not XML: no root element"}
	}
	return d, nil
}

// duplicateAttr reports an attribute name given twice.
func duplicateAttr(attrs []stdxml.Attr) (stdxml.Name, bool) {
	if len(attrs) <= 16 {
		for i, a := range attrs {
			for _, b := range attrs[:i] {
				if a.Name == b.Name {
					return a.Name, true
				}
			}
		}
		return stdxml.Name{}, false
	}
	seen := make(map[stdxml.Name]struct{}, len(attrs))
	for _, a := range attrs {
		if _, ok := seen[a.Name]; ok {
			return a.Name, true
		}
		seen[a.Name] = struct{}{}
	}
	return stdxml.Name{}, false
}

// countStartTags counts the start tags in data up to limit and returns the count and the offset
// of the limit-th one, or -1 if there are fewer. It skips comments, CDATA sections, processing
// instructions and declarations, so on well-formed input it counts exactly the elements; on
// malformed input the decoder reports the real error.
func countStartTags(data []byte, limit int) (int, int) {
	count := 0
	for i := 0; i < len(data); {
		j := bytes.IndexByte(data[i:], '<')
		if j < 0 {
			return count, -1
		}
		i += j
		rest := data[i:]
		skip := func(end string) int {
			k := bytes.Index(rest, []byte(end))
			if k < 0 {
				return len(data)
			}
			return i + k + len(end)
		}
		switch {
		case bytes.HasPrefix(rest, []byte("<!--")):
			i = skip("-->")
		case bytes.HasPrefix(rest, []byte("<![CDATA[")):
			i = skip("]]>")
		case bytes.HasPrefix(rest, []byte("<?")):
			i = skip("?>")
		case bytes.HasPrefix(rest, []byte("<!")), bytes.HasPrefix(rest, []byte("</")):
			i = skip(">")
		default:
			if count++; count == limit {
				return count, i
			}
			i++
		}
	}
	return count, -1
}

func qname(n stdxml.Name) string {
	if n.Space != "" {
		return n.Space + ":" + n.Local
	}
	return n.Local
}

// isBOM reports whether t is a byte-order mark, possibly surrounded by whitespace.
func isBOM(t []byte) bool {
	return string(bytes.TrimSpace(t)) == "\ufeff"
}

// snippet quotes the start of t for an error message.
func snippet(t []byte) string {
	t = bytes.TrimSpace(t)
	const max = 24
	if len(t) > max {
		return strconv.Quote(string(t[:max])) + "..."
	}
	return strconv.Quote(string(t))
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

// writeSettings escape what a reader would otherwise normalise away: carriage returns in text,
// and tabs, newlines and carriage returns in attribute values. Topology files hold none of
// these, so their output is unchanged; odd input still reads back as the same tree.
var writeSettings = etree.WriteSettings{CanonicalText: true, CanonicalAttrVal: true}

// WriteTo writes the document back out, unchanged apart from what the caller edited. The bytes
// may differ from the input (quotes, character references, <a></a> written as <a/>), the tree
// they read back as does not.
func (d *Document) WriteTo(w io.Writer) (int64, error) {
	d.Doc.WriteSettings = writeSettings
	return d.Doc.WriteTo(w)
}

// Bytes returns the serialized document (see WriteTo).
func (d *Document) Bytes() ([]byte, error) {
	d.Doc.WriteSettings = writeSettings
	return d.Doc.WriteToBytes()
}
