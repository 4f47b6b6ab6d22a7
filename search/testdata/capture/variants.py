"""Writes NCCL_TOPO_FILE variants of the 2xH200 machine's own topology dump, for search goldens.

usage: python3 variants.py real_topo.xml OUTDIR
  pix.xml      both GPUs behind one PCIe Gen5 switch, no NVLink (GPU-GPU path PIX)
  sys.xml      two Intel sockets (Emerald Rapids), one GPU on each, no NVLink (path SYS, no P2P)
  amd_phb.xml  one AMD socket (Milan), both GPUs on it, no NVLink (path PHB; P2P allowed: AMD, 2 GPUs)
  amd_sys.xml  two AMD sockets, one GPU on each, no NVLink (path SYS)
Elements are written with "/>" (no blank before it), which NCCL's reader takes as it should.
"""
import sys, os, re

src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
text = open(src).read()
m = re.search(r'<cpu ([^>]*)>', text)
cpu_attrs = m.group(1)
host = re.search(r'host_hash="([^"]*)"', cpu_attrs).group(1)
gpus = re.findall(r'(<pci busid="0000:00:0[67].0"[^>]*>\s*<gpu [^>]*>)', text)
net = re.search(r'(<nic>.*?</nic>)', text, re.S).group(1)
assert len(gpus) == 2, gpus

def gpu(i):
    return gpus[i] + '\n        <nvlink target="fffffff:ff:ff.0" count="0" tclass="0x068000"/>\n      </gpu>\n    </pci>\n'

def cpu(numa, vendor, fam, model, body):
    return (f'  <cpu host_hash="{host}" numaid="{numa}" arch="x86_64" vendor="{vendor}" familyid="{fam}" modelid="{model}">\n'
            + body + '  </cpu>\n')

def write(name, body):
    open(os.path.join(out, name), 'w').write('<system version="1">\n' + body + '</system>\n')

sw = '    <pci busid="0000:00:05.0" class="0x060400" vendor="0x10b5" device="0xc030" subsystem_vendor="0x10b5" subsystem_device="0x0000" link_speed="32.0 GT/s PCIe" link_width="16">\n'
write("pix.xml", cpu(0, "GenuineIntel", 6, 207, sw + gpu(0) + gpu(1) + '    </pci>\n    ' + net + '\n'))
write("sys.xml", cpu(0, "GenuineIntel", 6, 207, gpu(0) + '    ' + net + '\n') + cpu(1, "GenuineIntel", 6, 207, gpu(1)))
write("amd_phb.xml", cpu(0, "AuthenticAMD", 25, 1, gpu(0) + gpu(1) + '    ' + net + '\n'))
write("amd_sys.xml", cpu(0, "AuthenticAMD", 25, 1, gpu(0) + '    ' + net + '\n') + cpu(1, "AuthenticAMD", 25, 1, gpu(1)))
