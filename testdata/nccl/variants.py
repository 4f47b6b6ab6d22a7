"""Writes NCCL_TOPO_FILE variants of a topology NCCL dumped (NCCL_TOPO_DUMP_FILE) on the 2xH200 machine.

usage: python3 variants.py real_topo.xml OUTDIR
  nvl4.xml      every <nvlink> count set to 4 (fewer NVLinks between the two GPUs)
  nvl0.xml      every <nvlink> count set to 0 (no usable NVLink: GPUs talk over PCIe/CPU)
  nvswitch.xml  the GPU-GPU NVLinks replaced by 18 links to an (invisible) NVSwitch
The files keep <nvlink> elements so that NCCL uses them instead of re-detecting the real links.
"""
import sys, copy, os
import xml.etree.ElementTree as ET

src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
base = ET.parse(src)

def write(tree, name):
    tree.write(os.path.join(out, name))

t = copy.deepcopy(base)
for l in t.iter("nvlink"): l.set("count", "4")
write(t, "nvl4.xml")

t = copy.deepcopy(base)
for l in t.iter("nvlink"): l.set("count", "0")
write(t, "nvl0.xml")

t = copy.deepcopy(base)
for g in t.iter("gpu"):
    links = list(g.findall("nvlink"))
    for l in links: g.remove(l)
    ET.SubElement(g, "nvlink", {"target": "fffffff:ff:ff.0", "count": "18", "tclass": "0x068000"})
write(t, "nvswitch.xml")
