package ncclxml

import (
	"fmt"
	"strings"

	"github.com/beevik/etree"
)

// canonical renders a tree as text that two equal trees share and two different trees do not:
// every token in document order, elements with their attributes in order, text (CDATA marked),
// comments, directives and processing instructions, all quoted.
func canonical(doc *etree.Document) string {
	var b strings.Builder
	var walk func(t etree.Token, depth int)
	walk = func(t etree.Token, depth int) {
		ind := strings.Repeat(" ", depth)
		switch t := t.(type) {
		case *etree.Element:
			fmt.Fprintf(&b, "%sE %q %q\n", ind, t.Space, t.Tag)
			for _, a := range t.Attr {
				fmt.Fprintf(&b, "%s @%q %q=%q\n", ind, a.Space, a.Key, a.Value)
			}
			for _, c := range t.Child {
				walk(c, depth+1)
			}
		case *etree.CharData:
			fmt.Fprintf(&b, "%sT cdata=%v %q\n", ind, t.IsCData(), t.Data)
		case *etree.Comment:
			fmt.Fprintf(&b, "%sC %q\n", ind, t.Data)
		case *etree.Directive:
			fmt.Fprintf(&b, "%sD %q\n", ind, t.Data)
		case *etree.ProcInst:
			fmt.Fprintf(&b, "%sP %q %q\n", ind, t.Target, t.Inst)
		default:
			fmt.Fprintf(&b, "%s? %T\n", ind, t)
		}
	}
	for _, c := range doc.Child {
		walk(c, 0)
	}
	return b.String()
}
