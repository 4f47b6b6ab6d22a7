package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/simccl/simccl/internal/units"
	"github.com/simccl/simccl/simnet"
)

// WriteJSON writes the report's data (everything but the layout and the embedded trace).
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(r)
}

// WriteHTML writes the page: one file, no external resource.
func (r *Report) WriteHTML(w io.Writer) error {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n<style>%s</style>\n<script>%s</script>\n</head><body>\n", esc(r.Title), css, errorHook)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", esc(r.Title))
	ms := r.Machine
	fmt.Fprintf(&b, `<p class="sum">%d rank(s) (%d node(s) × %d GPUs), %d channels, NCCL %s rules. Hover any element for details.</p>`+"\n",
		ms.Ranks, ms.Nodes, ms.GPUsNode, ms.NChannels, esc(ms.Release))
	b.WriteString(`<nav><a href="#s-topo">1 Topology</a> <a href="#s-tuner">2 Tuner map</a> <a href="#s-busbw">3 busbw</a> <a href="#s-time">4 Where time goes</a> <a href="#s-mem">5 Memory</a></nav>` + "\n")
	if len(r.Notes) > 0 {
		b.WriteString(`<ul class="notes">`)
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "<li>%s</li>", esc(n))
		}
		b.WriteString("</ul>\n")
	}

	// 1. Topology.
	b.WriteString(`<section id="s-topo"><h2>1. Topology</h2>` + "\n")
	if why := r.skipped("topology"); why != "" {
		skipLine(&b, "topology", why)
	} else {
		fmt.Fprintf(&b, `<p>One node as the graph sees it: %d nodes, %d links. Hover a GPU for its paths to the other GPUs.</p>`+"\n", len(r.Topology.Nodes), len(r.Topology.Links))
		legend(&b, [][2]string{{"NVLink", linkColour("NVL")}, {"PCIe", linkColour("PCI")}, {"SYS (inter-CPU)", linkColour("SYS")}, {"NET", linkColour("NET")}, {"C2C", linkColour("C2C")}, {"LOC", linkColour("LOC")}})
		b.WriteString(`<div class="scroll">`)
		topologySVG(&b, &r.Topology)
		b.WriteString("</div>\n")
		if f := r.Fabric; f != nil {
			routing := simnet.RoutingName(f.Routing, f.ECMPSeed)
			if f.QPs > 1 {
				routing += fmt.Sprintf(", %d queue pairs a connection", f.QPs)
			}
			fmt.Fprintf(&b, `<h3>Fabric</h3><table class="kv"><tr><th>topology</th><td>%s, %d tiers, routing %s</td></tr><tr><th>nodes</th><td>%d × %d NICs at %s GB/s</td></tr><tr><th>rails</th><td>%d</td></tr><tr><th>leaves</th><td>%d (%d hosts per leaf)</td></tr><tr><th>spine / aggregation ports</th><td>%d</td></tr><tr><th>core ports</th><td>%d</td></tr><tr><th>links</th><td>%d NIC→leaf, %d switch uplinks (oversubscription %g)</td></tr></table>`+"\n",
				esc(f.Topology), f.Tiers, esc(routing), f.Nodes, f.NICsPerNode, bw(f.NICGBps), f.Rails, f.Leaves, f.HostsPerLeaf, f.Upper, f.Cores, f.NICLinks, f.UpLinks, f.Oversub)
			fabricSVG(&b, f)
		}
	}
	b.WriteString("</section>\n")

	// 2. Tuner map.
	if why := r.skipped("tuner"); why != "" {
		b.WriteString(`<section id="s-tuner"><h2>2. Tuner map</h2>` + "\n")
		skipLine(&b, "tuner", why)
		b.WriteString("</section>\n")
	} else {
		b.WriteString(`<section id="s-tuner"><h2>2. Tuner map</h2><p>Per collective and size: the algorithm/protocol simulated (colour) and the channel count (number). Hover a cell for the predicted time of every candidate.`)
		if r.hasAlternatives() {
			b.WriteString(` A star marks a size where another algorithm/protocol was simulated faster on the GPUs than NCCL's pick (--alternatives; the tip lists them).`)
		}
		b.WriteString("</p>\n")
		seen := map[string]bool{}
		var items [][2]string
		for _, t := range r.Tuner {
			for _, p := range t.Points {
				k := p.SimAlgo + "/" + p.SimProto
				if !seen[k] {
					seen[k] = true
					items = append(items, [2]string{k, choiceColour(p.SimAlgo, p.SimProto)})
				}
			}
		}
		legend(&b, items)
		cutLines(&b, "tuner", r.Cut)
		b.WriteString(`<div class="scroll">`)
		tunerSVG(&b, r.Tuner)
		b.WriteString("</div></section>\n")
	}

	// 3. busbw.
	b.WriteString(`<section id="s-busbw"><h2>3. Bus bandwidth against size</h2>` + "\n")
	if why := r.skipped("busbw"); why != "" {
		skipLine(&b, "busbw", why)
	} else {
		if r.Measured != "" {
			fmt.Fprintf(&b, "<p>Measured: %s (dashed).</p>\n", esc(r.Measured))
		}
		cutLines(&b, "busbw", r.Cut)
		busbwSVG(&b, r.BusBW)
		if len(r.Compare) > 0 {
			b.WriteString(`<table id="compare"><thead><tr><th>coll</th><th>size</th><th>measured µs</th><th>simulated µs</th><th>measured busbw</th><th>simulated busbw</th><th>error</th><th>simulated as</th></tr></thead><tbody>` + "\n")
			for _, c := range r.Compare {
				cls := ""
				if c.ErrPct > 25 || c.ErrPct < -25 {
					cls = ` class="bad"`
				}
				fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td%s>%+.1f%%</td><td>%s</td></tr>\n",
					esc(c.Coll), units.FormatSize(c.Bytes), c.MeasUs, c.SimUs, c.MeasBus, c.SimBus, cls, c.ErrPct, esc(c.Sim))
			}
			b.WriteString("</tbody></table>\n")
		}
	}
	b.WriteString("</section>\n")

	// 4. Where time goes.
	b.WriteString(`<section id="s-time"><h2>4. Where time goes</h2>` + "\n")
	if why := r.skipped("time"); why != "" {
		skipLine(&b, "time", why)
	} else if f := r.Focus; f != nil && f.Unrecorded != "" {
		fmt.Fprintf(&b, `<p class="skipped" id="focus-summary">%s.</p>`+"\n", esc(capitalise(f.Unrecorded)))
		compactTables(&b, f)
	} else if f != nil {
		if f.Asked != 0 {
			// Say it before any figure: the profile below is of a smaller size than asked.
			fmt.Fprintf(&b, `<p class="note" id="focus-downsized"><b>Downsized:</b> %s of %s has a schedule of more than %d steps, too many to record op by op, so the time profile, the link tables and the timeline below are of %s.`,
				esc(f.Coll), units.FormatSize(f.Asked), f.MaxSteps, units.FormatSize(f.Size))
			if f.Compact != nil {
				fmt.Fprintf(&b, ` Link totals at %s itself (no time profile) follow under “At %s”.`, units.FormatSize(f.Asked), units.FormatSize(f.Asked))
			} else {
				fmt.Fprintf(&b, ` No link totals at %s (no compact executor for this algorithm).`, units.FormatSize(f.Asked))
			}
			b.WriteString("</p>\n")
		}
		fmt.Fprintf(&b, `<p>%s of %s as %s: %.2f µs, %d messages, %d of %d links carry bytes. Utilisation per link over time (the %d busiest; right: mean over the run).</p>`+"\n",
			esc(f.Coll), units.FormatSize(f.Size), esc(f.Plan), f.TimeUs, f.Messages, f.Used, f.LinkCount, len(f.Links))
		maxU, maxBusy := 0.0, 0.0
		for _, l := range f.Links {
			maxU, maxBusy = max(maxU, l.Util), max(maxBusy, l.BusyUs)
		}
		if len(f.Links) > 0 && maxU < 0.01 {
			fmt.Fprintf(&b, `<p class="note" id="focus-idle">Every link is under 1%% busy over the recorded %.2f µs: at %s the run is bound by latency, not bandwidth (the busiest link carries bytes for %.2f µs of it).</p>`+"\n",
				f.TimeUs, units.FormatSize(f.Size), maxBusy)
		}
		b.WriteString(`<div class="scroll">`)
		heatSVG(&b, f)
		b.WriteString("</div>\n")
		classTable(&b, "classes", f.Classes)
		b.WriteString(`<table id="busiest"><thead><tr><th>link</th><th>GB/s</th><th>bytes</th><th>busy µs</th><th>utilisation</th></tr></thead><tbody>`)
		for i, l := range f.Links {
			if i == 10 {
				break
			}
			fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%.2f</td><td>%s</td></tr>", esc(l.Name), bw(l.GBps), units.FormatSize(int64(l.Bytes)), l.BusyUs, pct(l.Util))
		}
		b.WriteString("</tbody></table>\n")
		compactTables(&b, f)
		fmt.Fprintf(&b, `<h3>P2P ops per rank and channel</h3><p>%d ops drawn (ranks &lt; %d, channels &lt; %d, at most the first of the run); colour = peer. `, f.OpsShown, timelineRanks, timelineChans)
		fmt.Fprintf(&b, `Full trace (%d of %d ops): <button id="perfetto" type="button">open in Perfetto</button> (opens ui.perfetto.dev and hands it the trace) or <a id="trace-dl" href="#" download="simccl-trace.json">download the trace JSON</a> to drop into Perfetto.</p>`+"\n", len(f.Trace), f.TraceTotal)
		b.WriteString(`<div class="scroll">`)
		timelineSVG(&b, f)
		b.WriteString("</div>\n")
	} else {
		b.WriteString("<p>No focus run.</p>\n")
	}
	b.WriteString("</section>\n")

	// 5. Memory.
	if why := r.skipped("memory"); why != "" {
		b.WriteString(`<section id="s-mem"><h2>5. Memory: transport buffers per rank</h2>` + "\n")
		skipLine(&b, "memory", why)
		b.WriteString("</section>\n")
	} else {
		memorySection(&b, &r.Memory)
	}

	b.WriteString(`<div id="tip" role="tooltip"></div>` + "\n")
	pm := r.Topology.Paths
	if pm == nil {
		pm = map[string][]GPUPath{}
	}
	paths, err := json.Marshal(pm)
	if err != nil {
		return err
	}
	fmt.Fprintf(&b, "<script type=\"application/json\" id=\"paths-data\">%s</script>\n", paths)
	var trace []byte
	if r.Focus != nil && r.Focus.Unrecorded == "" {
		if trace, err = json.Marshal(map[string]any{"label": r.Focus.Coll + " " + units.FormatSize(r.Focus.Size), "ops": r.Focus.Trace}); err != nil {
			return err
		}
	} else {
		trace = []byte("null")
	}
	fmt.Fprintf(&b, "<script type=\"application/json\" id=\"trace-data\">%s</script>\n", trace)
	fmt.Fprintf(&b, "<script>%s</script>\n</body></html>\n", script)
	_, err = io.WriteString(w, b.String())
	return err
}

// cutLines says which sizes of the sweep were not simulated (Report.Cut).
func cutLines(b *strings.Builder, section string, cut []string) {
	for i, c := range cut {
		fmt.Fprintf(b, `<p class="skipped" id="cut-%s-%d">%s.</p>`+"\n", section, i, esc(c)) // it starts with the collective's name
	}
}

// skipLine is the one line of a section left out.
func skipLine(b *strings.Builder, section, why string) {
	fmt.Fprintf(b, `<p class="skipped" id="skip-%s">%s.</p>`+"\n", section, esc(capitalise(why)))
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// compactTables writes the compact executor's link totals at the size asked (Focus.Compact).
func compactTables(b *strings.Builder, f *Focus) {
	if c := f.Compact; c != nil {
		fmt.Fprintf(b, `<h3>At %s (compact executor, no time profile)</h3><p>%s of %s as %s: %.2f µs; %d of %d links carry bytes. The busiest:</p>`+"\n",
			units.FormatSize(c.Size), esc(f.Coll), units.FormatSize(c.Size), esc(c.Plan), c.TimeUs, c.Used, c.LinkCount)
		classTable(b, "classes-compact", c.Classes)
		b.WriteString(`<table id="busiest-compact"><thead><tr><th>link</th><th>GB/s</th><th>bytes</th><th>busy µs</th><th>utilisation</th></tr></thead><tbody>`)
		for i, l := range c.Links {
			if i == 10 {
				break
			}
			fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%.2f</td><td>%s</td></tr>", esc(l.Name), bw(l.GBps), units.FormatSize(int64(l.Bytes)), l.BusyUs, pct(l.Util))
		}
		b.WriteString("</tbody></table>\n")
	}
}

// pct writes a utilisation as a percentage: whole percents from 1%, two significant digits
// below (0.21%), so that a lightly loaded link does not read 0%.
func pct(u float64) string {
	switch {
	case u <= 0:
		return "0%"
	case u < 0.01:
		return fmt.Sprintf("%.2g%%", 100*u)
	}
	return fmt.Sprintf("%.0f%%", 100*u)
}

func classTable(b *strings.Builder, id string, cs []ClassUse) {
	fmt.Fprintf(b, `<table id="%s"><thead><tr><th>link class</th><th>links</th><th>carrying bytes</th><th>bytes</th><th>busiest link's utilisation</th></tr></thead><tbody>`, id)
	for _, c := range cs {
		fmt.Fprintf(b, "<tr><td>%s</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td></tr>", esc(c.Class), c.Links, c.Used, units.FormatSize(int64(c.Bytes)), pct(c.MaxUtil))
	}
	b.WriteString("</tbody></table>\n")
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

const css = `body{font:14px/1.4 system-ui,sans-serif;margin:20px 28px;color:#222;background:#fff}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:3px;margin-top:28px}h3{font-size:15px}
nav a{margin-right:14px}.notes{color:#7a4b00;font-size:13px}.scroll{overflow-x:auto;max-width:100%}
svg text{font:11px system-ui,sans-serif;fill:#222}svg .bw{font-size:9px;fill:#555}svg .tick{font-size:10px;fill:#555}
svg .node text{text-anchor:middle;font-size:10px;pointer-events:none}svg .node{cursor:default}svg .node.gpu{cursor:pointer}
svg .node.gpu.sel rect{stroke:#000;stroke-width:2.5}svg .link.hl{stroke:#000 !important;stroke-opacity:1}
svg .link{stroke-opacity:.75}svg .grid{stroke:#eee}svg .cell text{text-anchor:middle;font-size:10px;pointer-events:none}
svg .cell:hover rect,svg .pt:hover{stroke:#000;stroke-width:1.5}
table{border-collapse:collapse;margin:8px 0;font-size:13px}td,th{border:1px solid #ddd;padding:2px 8px;text-align:right}
th{background:#f6f6f6}.kv th{text-align:left}td.bad{color:#b00020;font-weight:600}
.legend span{margin-right:14px;font-size:12px;white-space:nowrap}.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-2px}
#tip{position:fixed;display:none;background:#fffffe;border:1px solid #888;padding:6px 8px;font:12px/1.35 ui-monospace,monospace;white-space:pre;pointer-events:none;box-shadow:2px 2px 6px rgba(0,0,0,.2);z-index:9;max-width:640px}
.note{font-size:12px;color:#555}.skipped{color:#7a4b00}`

// errorHook records uncaught errors and console.error calls (read by the self-check).
const errorHook = `window.simcclErrors=[];window.addEventListener("error",function(e){window.simcclErrors.push(String(e.message||e));});
(function(){var ce=console.error;console.error=function(){window.simcclErrors.push(Array.prototype.join.call(arguments," "));return ce.apply(console,arguments);};})();`

// script is the page's whole behaviour: tooltips, the GPU path hover, the trace hand-off to
// Perfetto, and a self-check run when the URL ends in #selfcheck (for the browser test).
const script = `(function(){
"use strict";
var tip=document.getElementById("tip");
var paths=JSON.parse(document.getElementById("paths-data").textContent);
function show(text,ev){tip.textContent=text;tip.style.display="block";
 var x=(ev&&ev.clientX)||10,y=(ev&&ev.clientY)||10;tip.style.left=Math.min(x+14,window.innerWidth-360)+"px";tip.style.top=(y+14)+"px";}
function hide(){tip.style.display="none";}
function gpuText(id){var ps=paths[id]||[];var out=[id+": paths to the other GPUs (type, GB/s, hops)"];
 ps.forEach(function(p){out.push("  \u2192 "+p.to+"  "+p.type+"  "+p.bw.toFixed(1)+" GB/s  "+p.hops+" hop(s)");});return out.join("\n");}
function clearHL(){document.querySelectorAll("#topo .hl,#topo .sel").forEach(function(e){e.classList.remove("hl");e.classList.remove("sel");});}
document.addEventListener("mouseover",function(ev){
 var g=ev.target.closest&&ev.target.closest("[data-gpu]");
 if(g){var id=g.getAttribute("data-gpu");clearHL();g.classList.add("sel");
  document.querySelectorAll('#topo .link[data-a="'+id+'"],#topo .link[data-b="'+id+'"]').forEach(function(l){l.classList.add("hl");});
  show(gpuText(id),ev);return;}
 var t=ev.target.closest&&ev.target.closest("[data-tip]");
 if(t){show(t.getAttribute("data-tip"),ev);return;}
});
document.addEventListener("mouseout",function(ev){var t=ev.target.closest&&ev.target.closest("[data-tip],[data-gpu]");if(t){hide();clearHL();}});
var trace=JSON.parse(document.getElementById("trace-data").textContent);
function chromeTrace(){var ev=[];if(!trace)return ev;var seen={};
 trace.ops.forEach(function(o){var r=o[0],c=o[1],p=o[2],t=o[6];
  if(!seen[r]){seen[r]=1;ev.push({name:"process_name",ph:"M",pid:r,args:{name:"rank "+r}});}
  if(!seen[r+"/"+t]){seen[r+"/"+t]=1;ev.push({name:"thread_name",ph:"M",pid:r,tid:t,args:{name:"ch "+c+" \u2192 "+p+(o[7]>0?" ("+(o[7]+1)+")":"")}});
   ev.push({name:"thread_sort_index",ph:"M",pid:r,tid:t,args:{sort_index:t}});}
  ev.push({name:"send "+r+"->"+p,cat:trace.label,ph:"X",pid:r,tid:t,ts:o[3]/1000,dur:o[4]/1000,args:{peer:p,channel:c,bytes:o[5]}});});
 return {displayTimeUnit:"ns",traceEvents:ev};}
var dl=document.getElementById("trace-dl");
if(dl){dl.addEventListener("click",function(){dl.href=URL.createObjectURL(new Blob([JSON.stringify(chromeTrace())],{type:"application/json"}));});}
var pb=document.getElementById("perfetto");
if(pb){pb.addEventListener("click",function(){
 var url="https://ui.perfetto.dev";var win=window.open(url);if(!win){return;}
 var buf=new TextEncoder().encode(JSON.stringify(chromeTrace())).buffer;var n=0;
 var timer=setInterval(function(){win.postMessage("PING",url);if(++n>50)clearInterval(timer);},200);
 window.addEventListener("message",function onMsg(e){if(e.data!=="PONG")return;clearInterval(timer);window.removeEventListener("message",onMsg);
  win.postMessage({perfetto:{buffer:buf,title:"simccl "+trace.label,fileName:"simccl-trace.json"}},url);});
});}
window.simcclSelfCheck=function(){
 var r={};
 r.gpus=document.querySelectorAll("#topo [data-gpu]").length;
 r.links=document.querySelectorAll("#topo .link").length;
 r.series={};document.querySelectorAll("#busbw .series").forEach(function(s){r.series[s.getAttribute("data-series")]=s.querySelectorAll("circle.pt").length;});
 var g=document.querySelector("#topo [data-gpu]");
 if(g){var box=g.getBoundingClientRect();g.dispatchEvent(new MouseEvent("mouseover",{bubbles:true,clientX:box.left+5,clientY:box.top+5}));
  r.hoverGPU=g.getAttribute("data-gpu");r.tip=tip.textContent;r.tipVisible=tip.style.display==="block";r.highlighted=document.querySelectorAll("#topo .link.hl").length;
  g.dispatchEvent(new MouseEvent("mouseout",{bubbles:true}));}
 var c=document.querySelector("#tuner .cell");
 if(c){c.dispatchEvent(new MouseEvent("mouseover",{bubbles:true}));r.tunerTip=tip.textContent;hide();}
 var nav=performance.getEntriesByType("navigation")[0];
 r.domContentLoadedMs=nav?nav.domContentLoadedEventEnd:-1;r.loadMs=nav?nav.loadEventEnd:-1;r.nowMs=performance.now();
 r.traceEvents=trace?chromeTrace().traceEvents.length:0;r.traceOps=trace?trace.ops.length:0;
 r.errors=window.simcclErrors||[];
 return r;};
if(location.hash==="#selfcheck"){window.addEventListener("load",function(){
 void document.documentElement.scrollHeight; var rendered=performance.now();
 var res=window.simcclSelfCheck();res.renderMs=rendered;
 var pre=document.createElement("pre");pre.id="selfcheck";pre.textContent=JSON.stringify(res);document.body.appendChild(pre);});}
})();`
