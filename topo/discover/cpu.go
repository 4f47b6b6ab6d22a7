package discover

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"

	"github.com/beevik/etree"

	"github.com/simccl/simccl/internal/input"
)

// cpuInfo is what NCCL reads with CPUID, recovered from /proc/cpuinfo.
type cpuInfo struct {
	vendor          string
	family, model   int
	hasFam, hasModl bool
}

// readCPUInfo parses the first processor of /proc/cpuinfo. Linux prints the x86 family with the
// extended family added (family 15 + ext) and the model with the extended model shifted in.
func readCPUInfo(fs sysfs) cpuInfo {
	data, err := input.ReadFile(fs.host("/proc/cpuinfo"))
	if err != nil {
		return cpuInfo{}
	}
	var ci cpuInfo
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			if ci.vendor != "" || ci.hasFam {
				break // end of the first processor
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "vendor_id":
			ci.vendor = v
		case "cpu family":
			if n, err := strconv.Atoi(v); err == nil {
				ci.family, ci.hasFam = n, true
			}
		case "model":
			if n, err := strconv.Atoi(v); err == nil {
				ci.model, ci.hasModl = n, true
			}
		}
	}
	return ci
}

// ncclFamily converts Linux's family to the value NCCL 2.28 computes from CPUID leaf 1
// (ncclTopoGetXmlFromCpu): familyId + (extFamilyId << 4), where Linux adds extFamilyId unshifted
// to a base family of 15. So AMD Zen 2 (Linux 23) is 143 in NCCL's XML, Zen 4 (25) is 175.
func ncclFamily(linux int) int {
	if linux < 15 {
		return linux
	}
	return 15 + (linux-15)<<4
}

// ncclArch is the arch string NCCL 2.28 compiles in (ncclTopoGetXmlFromCpu); "" for others.
func ncclArch(goarch string) string {
	switch goarch {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "arm64"
	case "ppc64", "ppc64le":
		return "ppc64"
	}
	return ""
}

// fillCPU is ncclTopoGetXmlFromCpu (NCCL 2.28): affinity, arch, and on x86_64 vendor, familyid
// and modelid, each only when missing.
func (b *builder) fillCPU(c *etree.Element) {
	if c.SelectAttr("affinity") == nil {
		numa := c.SelectAttrValue("numaid", "")
		setNonEmpty(c, "affinity", b.fs.str("/sys/devices/system/node/node"+numa, "cpumap"))
	}
	if c.SelectAttr("arch") == nil && b.arch != "" {
		c.CreateAttr("arch", b.arch)
	}
	if b.arch != "x86_64" {
		return
	}
	if c.SelectAttr("vendor") == nil && b.cpu.vendor != "" {
		c.CreateAttr("vendor", b.cpu.vendor)
	}
	if c.SelectAttr("familyid") == nil && b.cpu.hasFam && b.cpu.hasModl {
		c.CreateAttr("familyid", strconv.Itoa(ncclFamily(b.cpu.family)))
		c.CreateAttr("modelid", strconv.Itoa(b.cpu.model))
	}
}

// hostHash is NCCL's getHostHash (2.28, utils.cc): the hash of the hostname followed by the
// first word of /proc/sys/kernel/random/boot_id, or of NCCL_HOSTID alone when that is set.
func hostHash(fs sysfs, hostID string) uint64 {
	var s string
	if hostID != "" {
		s = hostID
	} else {
		s = hostname(fs)
		if data, err := input.ReadFile(fs.host("/proc/sys/kernel/random/boot_id")); err == nil {
			if f := strings.Fields(string(data)); len(f) > 0 {
				s += f[0]
			}
		}
	}
	if len(s) > 1023 {
		s = s[:1023]
	}
	return ncclHash([]byte(s))
}

// ncclHash is the string hash of NCCL 2.28 (getHash over eatHash/digestHash, utils.h): a
// two-word accumulator starting at {1, 1}, mixed once per 8-byte little-endian chunk, then
// finalised. Checked on the lent 2xH200 machine against NCCL 2.28.9's own host_hash (see
// TestHostHash); earlier releases used djb2a instead.
func ncclHash(b []byte) uint64 {
	a0, a1 := uint64(1), uint64(1)
	a0 ^= uint64(len(b))
	for len(b) > 0 {
		a0 += a1
		a1 ^= a0
		a0 ^= a0 >> 31
		a0 *= 0x9de62bbc8cef3ce3
		a1 ^= a1 >> 32
		a1 *= 0x485cd6311b599e79
		var chunk [8]byte
		n := copy(chunk[:], b)
		b = b[n:]
		a0 += binary.LittleEndian.Uint64(chunk[:])
	}
	h := a0
	h ^= h >> 31
	h *= 0xbac3bd562846de6b
	h += a1
	h ^= h >> 32
	h *= 0x995a187a14e7b445
	return h
}

// hostname is gethostname(2): the UTS nodename, which /proc/sys/kernel/hostname shows.
func hostname(fs sysfs) string {
	if data, err := input.ReadFile(fs.host("/proc/sys/kernel/hostname")); err == nil {
		return strings.TrimRight(string(data), "\n")
	}
	if fs.root == "/" {
		if h, err := os.Hostname(); err == nil {
			return h
		}
	}
	return ""
}
