"""Prints the sysfs/proc facts NCCL reads to build its topology (for discovery tests): PCI devices with
their parent chain, class, ids, link speed/width, NUMA node, CPU lists; InfiniBand and net devices; cpuinfo."""
import os, glob, json
def rd(p):
    try:
        with open(p) as f: return f.read().strip()
    except Exception as e: return None
out = {"pci": {}, "infiniband": {}, "net": {}, "cpuinfo": None, "numa": {}}
for d in sorted(glob.glob("/sys/bus/pci/devices/*")):
    bdf = os.path.basename(d)
    e = {"realpath": os.path.realpath(d)}
    for k in ["class", "vendor", "device", "subsystem_vendor", "subsystem_device", "max_link_speed", "max_link_width",
              "current_link_speed", "current_link_width", "numa_node", "local_cpulist", "local_cpus"]:
        e[k] = rd(os.path.join(d, k))
    out["pci"][bdf] = e
for d in sorted(glob.glob("/sys/class/infiniband/*")):
    e = {"realpath": os.path.realpath(d), "node_guid": rd(d + "/node_guid"), "ports": {}}
    for p in sorted(glob.glob(d + "/ports/*")):
        e["ports"][os.path.basename(p)] = {"rate": rd(p + "/rate"), "state": rd(p + "/state"), "link_layer": rd(p + "/link_layer")}
    out["infiniband"][os.path.basename(d)] = e
for d in sorted(glob.glob("/sys/class/net/*")):
    out["net"][os.path.basename(d)] = {"realpath": os.path.realpath(d), "speed": rd(d + "/speed"), "device": os.path.realpath(d + "/device") if os.path.exists(d + "/device") else None}
for d in sorted(glob.glob("/sys/devices/system/node/node*")):
    out["numa"][os.path.basename(d)] = {"cpumap": rd(d + "/cpumap"), "cpulist": rd(d + "/cpulist")}
ci = rd("/proc/cpuinfo") or ""
out["cpuinfo"] = ci.split("\n\n")[0]
print(json.dumps(out, indent=1))
