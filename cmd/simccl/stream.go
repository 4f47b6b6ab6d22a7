package main

import (
	"bufio"
	"bytes"
	"io"
	"strings"

	"github.com/simccl/simccl/simnet"
)

// tableStream writes simccl run's table as nccl-tests writes its own: the header first, then each
// row as soon as its call (and every call before it) has been simulated, then the footer, so a
// run that is stopped keeps the rows it finished. The lines are simnet.WriteTable's, cut into
// those three parts, so the table is the same as written at once, except that the notes that only
// a simulation tells (the mode a call ran in) come after the rows, before the footer.
type tableStream struct {
	w    io.Writer
	h    simnet.RunHeader
	rows []simnet.Row
}

// begin writes the header lines: the run's, the notes known before simulating, and the column
// heads, with the "nccl runs" column where a call is simulated otherwise than NCCL runs it (subst:
// what simnet.Machine.Plan says before simulating, as Row.NCCL says after).
func (t *tableStream) begin(notes []string, subst bool) error {
	var probe []simnet.Row
	if subst {
		probe = []simnet.Row{{NCCL: "x"}}
	}
	var b bytes.Buffer
	if err := simnet.WriteTable(&b, t.h, probe, notes); err != nil {
		return err
	}
	var head []string
	for _, l := range tableLines(b.Bytes()) {
		if !strings.HasPrefix(l, "#") {
			break
		}
		head = append(head, l)
	}
	return t.write(head)
}

// row writes one row.
func (t *tableStream) row(r simnet.Row) error {
	t.rows = append(t.rows, r)
	var b bytes.Buffer
	if err := simnet.WriteTable(&b, t.h, []simnet.Row{r}, nil); err != nil {
		return err
	}
	var body []string
	for _, l := range tableLines(b.Bytes()) {
		if !strings.HasPrefix(l, "#") {
			body = append(body, l)
		}
	}
	return t.write(body)
}

// end writes the notes learnt while simulating and the footer of the rows written.
func (t *tableStream) end(notes []string) error {
	var b bytes.Buffer
	if err := simnet.WriteTable(&b, t.h, t.rows, nil); err != nil {
		return err
	}
	lines := tableLines(b.Bytes())
	last := len(lines)
	for i, l := range lines {
		if !strings.HasPrefix(l, "#") {
			last = i
		}
	}
	var tail []string
	for _, n := range notes {
		tail = append(tail, "# note: "+n)
	}
	if last < len(lines) {
		tail = append(tail, lines[last+1:]...)
	}
	return t.write(tail)
}

// write writes lines at once (one Write, so that a row is never cut by a kill).
func (t *tableStream) write(lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	_, err := io.WriteString(t.w, strings.Join(lines, "\n")+"\n")
	return err
}

// tableLines splits the table into its lines, without their newlines.
func tableLines(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
