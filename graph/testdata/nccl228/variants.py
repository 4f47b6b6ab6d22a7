"""Writes NCCL_TOPO_FILE variants of the 2xH200 machine (testdata/nccl/h200x2/real_topo.xml) that
put the machine's one network device (eth0, found by name) behind PCIe switches, so that NCCL
2.28.9's own log shows its PIX/PXB/PXN/SYS path types and its GDR rewrites for GPU->NET paths.

usage: python3 variants.py OUTDIR
The GPUs keep their real bus ids (NCCL finds them in the file and keeps the file's parents); the
switches and the NIC's PCI function are invented bus ids that do not exist on the machine.
"""
import os, sys

CPU = '<cpu host_hash="0x4541f2b18090f0e4" numaid="{numa}" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="207">'
SW = '<pci busid="{bus}" class="0x060400" vendor="0x1000" device="0xc030" subsystem_vendor="0x1000" subsystem_device="{sub}" link_speed="32.0 GT/s PCIe" link_width="16">'
GPU = ('<pci busid="0000:00:0{d}.0" class="0x030200" vendor="0x10de" device="0x2335" subsystem_vendor="0x10de" '
       'subsystem_device="0x18bf" link_speed="32.0 GT/s PCIe" link_width="16"><gpu dev="{g}" sm="90" rank="{g}" gdr="1">'
       '<nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/></gpu></pci>')
NIC = ('<pci busid="0000:00:11.0" class="0x020700" vendor="0x15b3" device="0x1021" subsystem_vendor="0x15b3" '
       'subsystem_device="0x0023" link_speed="32.0 GT/s PCIe" link_width="16"><nic>'
       '<net name="eth0" dev="0" latency="0" speed="400000" port="1" guid="0xa1" maxconn="65536" gdr="{gdr}"/></nic></pci>')

def gpu(g): return GPU.format(d=6 + g, g=g)

def system(*cpus): return '<system version="1">\n' + "\n".join(cpus) + "\n</system>\n"

variants = {
    # GPU0 and the NIC share one switch; GPU1 hangs off the CPU: GPU0->NET PIX, GPU1->NET PXN.
    "pxn": system(CPU.format(numa=-1) + SW.format(bus="0000:00:10.0", sub="0x100b") + gpu(0) + NIC.format(gdr=1) + "</pci>" + gpu(1) + "</cpu>"),
    # Same without GPUDirect RDMA on the NIC: both GPUs reach the NIC through the CPU.
    "pxn_nogdr": system(CPU.format(numa=-1) + SW.format(bus="0000:00:10.0", sub="0x100b") + gpu(0) + NIC.format(gdr=0) + "</pci>" + gpu(1) + "</cpu>"),
    # GPU0 behind two switch levels, the NIC under the upper one: GPU0->NET PXB.
    "pxb": system(CPU.format(numa=-1) + SW.format(bus="0000:00:10.0", sub="0x100b") + SW.format(bus="0000:00:12.0", sub="0x100b") + gpu(0) + "</pci>"
                  + NIC.format(gdr=1) + "</pci>" + gpu(1) + "</cpu>"),
    # As pxb, but the two switches are the two levels of one Broadcom Gen5 PEX switch (subsystem
    # device 0x0xxx above 0x1xxx): NCCL flattens them into one, so GPU0->NET is PIX again.
    "bcm": system(CPU.format(numa=-1) + SW.format(bus="0000:00:10.0", sub="0x0000") + SW.format(bus="0000:00:12.0", sub="0x1000") + gpu(0) + "</pci>"
                  + NIC.format(gdr=1) + "</pci>" + gpu(1) + "</cpu>"),
    # The NIC on a second NUMA node of the same host: GPU->NET SYS (Emerald Rapids inter-socket 40).
    "sys": system(CPU.format(numa=-1) + gpu(0) + gpu(1) + "</cpu>", CPU.format(numa=1) + NIC.format(gdr=1) + "</cpu>"),
}

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for name, text in variants.items():
    with open(os.path.join(out, name + ".xml"), "w") as f:
        f.write(text)
