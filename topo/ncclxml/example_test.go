package ncclxml_test

import (
	"fmt"
	"os"

	"github.com/simccl/simccl/topo/ncclxml"
)

func ExampleParseBytes() {
	in := `<system version="1">
  <cpu numaid="0" arch="x86_64">
    <pci busid="0000:1B:00.0" class="0x030200">
      <gpu dev="0" sm="90" rank="0" gdr="1"/>
    </pci>
  </cpu>
</system>`
	doc, err := ncclxml.ParseBytes([]byte(in), "topo.xml")
	if err != nil {
		fmt.Println(err)
		return
	}
	pci := doc.Root().FindElement("//pci")
	id, _ := doc.RequireBusID(pci, "busid")
	fmt.Printf("<pci> at line %d, id %#x\n", doc.Line(pci), id)
	_, err = doc.RequireInt(pci, "link_width")
	fmt.Println(err)
	// Output:
	// <pci> at line 3, id 0x1b000
	// topo.xml:3: <pci> without link_width
}

func ExampleParseBytes_error() {
	_, err := ncclxml.ParseBytes([]byte("<system version=\"1\">\n  <cpu>\n</system>"), "topo.xml")
	fmt.Println(err)
	// Output:
	// topo.xml:3: </system> closes <cpu> opened at line 2
}

func ExampleReadGraphs() {
	in := `<graphs version="1">
  <graph id="0" pattern="4" crossnic="0" nchannels="1" speedintra="20" speedinter="20" latencyinter="0" typeintra="NVL" typeinter="PIX" samechannels="1">
    <channel>
      <net dev="0"/>
      <gpu dev="0"/>
      <gpu dev="0x1"/>
      <net dev="0x1"/>
    </channel>
  </graph>
</graphs>
`
	doc, err := ncclxml.ParseBytes([]byte(in), "graph.xml")
	if err != nil {
		fmt.Println(err)
		return
	}
	gs, err := ncclxml.ReadGraphs(doc)
	if err != nil {
		fmt.Println(err)
		return
	}
	g := gs.Graphs[0]
	fmt.Println(g.ID, g.Pattern, g.TypeIntra, g.Channels[0].Nets, g.Channels[0].GPUs)
	gs.WriteTo(os.Stdout) // NCCL's layout: the same bytes as the input
	// Output:
	// 0 4 NVL [0 1] [0 1]
	// <graphs version="1">
	//   <graph id="0" pattern="4" crossnic="0" nchannels="1" speedintra="20" speedinter="20" latencyinter="0" typeintra="NVL" typeinter="PIX" samechannels="1">
	//     <channel>
	//       <net dev="0"/>
	//       <gpu dev="0"/>
	//       <gpu dev="0x1"/>
	//       <net dev="0x1"/>
	//     </channel>
	//   </graph>
	// </graphs>
}
