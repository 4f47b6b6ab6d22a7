// Package topogen writes synthetic NCCL topology files of any size: the oversized inputs that
// topo/ncclxml's, topo's and graph's tests and bench/badinput feed to the loaders. It exists so that the
// tests and the benchmark load the same bytes.
package topogen

import (
	"bytes"
	"fmt"
)

// CPUOpen opens a one-CPU x86 system (two lines); the caller closes it with "</cpu></system>".
const CPUOpen = `<system version="1">
<cpu host_hash="0x1" numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
`

// GPUsBySwitch returns a topology of n GPUs with distinct bus ids and ranks 0..n-1, 64 to a PCI
// switch (a CPU or switch has at most NCCL_TOPO_MAX_LINKS links), one GPU per line: GPU i is on
// line 2 + (i/64)×66 + i%64 + 2. It is valid up to NCCL_TOPO_MAX_NODES GPUs.
func GPUsBySwitch(n int) []byte {
	var b bytes.Buffer
	b.WriteString(CPUOpen)
	for i := 0; i < n; i++ {
		if i%64 == 0 {
			if i > 0 {
				b.WriteString("</pci>\n")
			}
			fmt.Fprintf(&b, "<pci busid=\"%04x:00:00.0\" class=\"0x060400\">\n", 0x8000+i/64)
		}
		fmt.Fprintf(&b, "<pci busid=\"%04x:%02x:00.0\" class=\"0x030200\"><gpu dev=\"%d\" sm=\"90\" rank=\"%d\"/></pci>\n", i>>8, i&0xff, i, i)
	}
	if n > 0 {
		b.WriteString("</pci>\n")
	}
	b.WriteString("</cpu></system>")
	return b.Bytes()
}

// GPUsOneSwitch returns n identical GPUs (same bus id, rank 0) under one PCI switch: 2n+3
// elements, well-formed XML that no NCCL release can build (400,003 elements and 19 MB for
// n = 200,000). Line k+4 holds GPU k.
func GPUsOneSwitch(n int) []byte {
	var b bytes.Buffer
	b.WriteString("<system version=\"1\">\n <cpu numaid=\"0\">\n  <pci busid=\"0000:01:00.0\" class=\"0x060400\">\n")
	for i := 0; i < n; i++ {
		b.WriteString(`   <pci busid="0000:02:00.0" class="0x030200"><gpu dev="0" sm="90" rank="0" gdr="1"/></pci>` + "\n")
	}
	b.WriteString("  </pci>\n </cpu>\n</system>\n")
	return b.Bytes()
}

// GPUPCI returns a GPU (sm 90, dev and rank the same) on its own Gen5 x16 PCI device, three
// lines: the <pci>, the <gpu> holding inner, and </pci>.
func GPUPCI(bus string, rank int, inner string) string {
	return fmt.Sprintf(`<pci busid="%s" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
<gpu dev="%d" sm="90" rank="%d" gdr="1">%s</gpu>
</pci>
`, bus, rank, rank, inner)
}

// NICs returns a one-CPU system with one GPU (lines 3-5) and n NICs, each on its own PCI device
// directly under the CPU, NIC i on line 6+i: the CPU gets one PCI link per NIC, more than
// NCCL_TOPO_MAX_LINKS (576 in NCCL 2.28) from n = 576 on.
func NICs(n int) []byte {
	var b bytes.Buffer
	b.WriteString(CPUOpen)
	b.WriteString(GPUPCI("0000:01:00.0", 0, ""))
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "<pci busid=\"%04x:%02x:00.0\" class=\"0x020000\"><nic><net name=\"mlx5_%d\" dev=\"%d\" speed=\"400000\" port=\"1\" guid=\"0x%x\" maxconn=\"131072\" gdr=\"1\"/></nic></pci>\n",
			1+i>>8, i&0xff, i, i, i)
	}
	b.WriteString("</cpu></system>\n")
	return b.Bytes()
}
