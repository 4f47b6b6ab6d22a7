// Package report builds `simccl report`: one self-contained HTML page (no network: styles and
// script inline, every graphic an SVG drawn here) that explains a machine's simulation:
//
//  1. the node topology from the graph (CPUs, PCIe switches, GPUs, NVSwitch, NICs), links coloured
//     by type and labelled with bandwidth, hovering a GPU lists its paths; for clusters a summary of
//     the fabric (rails, leaves, spines);
//  2. the tuner map: per collective, the algorithm/protocol/channels chosen against size, with the
//     predicted time of every candidate on hover;
//  3. busbw against size, simulated and (optionally) measured, with the error per size: one
//     colour per collective, measured dashed, the legend right of the plot;
//  4. where time goes for one collective and size: per-link utilisation over time, the busiest
//     links, a timeline of P2P ops per rank and channel (and the full trace for Perfetto); when the
//     schedule is too large to record, a smaller size, said first, and the compact link totals;
//     when even the smallest size is (256 DGX H100 nodes and more), one line saying so and the
//     compact link totals at the size asked;
//  5. transport buffer memory per rank from simnet's model (Machine.Memory: rings, trees, PAT,
//     NVLS and NVLS trees, CollNet, send/recv; P2P, SHM and NET buffers per protocol), lazy
//     (NCCL_RUNTIME_CONNECT=1) against eager.
//
// Options.Sections picks the sections (SectionNames); the others are one line saying so, as is
// section 4 with Options.FocusColl "none". Options.SizeBudget bounds the time of one swept
// size: larger sizes that would pass it are not simulated, and Report.Cut says so. Build checks
// every option before simulating.
//
// Building (Build) and rendering (Report.WriteHTML) are separate, so that tests check the data and
// the generated SVG without a browser:
//
//	r, err := report.Build(report.Options{Funcs: []coll.Func{coll.AllReduce}, Sizes: sizes})
//	err = r.WriteHTML(f)
package report
