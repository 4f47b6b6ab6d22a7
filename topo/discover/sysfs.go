package discover

import (
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// sysfs reads the files NCCL reads, below a root directory ("/" on the live machine, a fake tree
// in tests). Paths handed to and returned by its methods are absolute as seen from the root
// ("/sys/devices/…"), never host paths.
type sysfs struct {
	root     string // host path of the root, cleaned
	rootReal string // root with its own symlinks resolved
}

func newSysfs(root string) sysfs {
	if root == "" {
		root = "/"
	}
	root = filepath.Clean(root)
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		real = root
	}
	return sysfs{root: root, rootReal: real}
}

// host maps a root-relative absolute path to the host path.
func (s sysfs) host(p string) string {
	if s.root == "/" {
		return p
	}
	return s.root + p
}

// realpath resolves p (root-relative) like realpath(3): symlinks followed, ".." applied after
// each symlink, and reports whether it exists. The result is root-relative.
func (s sysfs) realpath(p string) (string, bool) {
	r, err := filepath.EvalSymlinks(s.host(p))
	if err != nil {
		return "", false
	}
	if s.rootReal == "/" {
		return r, true
	}
	if r == s.rootReal {
		return "/", true
	}
	if strings.HasPrefix(r, s.rootReal+"/") {
		return r[len(s.rootReal):], true
	}
	// A symlink that leaves the fake root: keep the host path (reads still work).
	return r, true
}

// maxStrLen is NCCL's MAX_STR_LEN (xml.h, 2.28): sysfs strings are read into 255 bytes.
const maxStrLen = 255

// str reads dir/file the way NCCL's ncclTopoGetStrFromSys does (2.28): at most maxStrLen bytes,
// the last byte read (the newline) dropped; "" when the file is missing or unreadable. file may
// start with "../" (NCCL reads "<path>/../max_link_speed"); dir is already a resolved path, so
// the ".." is applied lexically, as the kernel does on a real directory.
func (s sysfs) str(dir, file string) string {
	f, err := os.Open(s.host(path.Join(dir, file)))
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, maxStrLen)
	n, _ := io.ReadFull(f, buf)
	if n <= 0 {
		return ""
	}
	return string(buf[:n-1])
}

// exists reports whether a root-relative path exists.
func (s sysfs) exists(p string) bool {
	_, err := os.Stat(s.host(p))
	return err == nil
}

// readDir lists the names in a root-relative directory (nil if missing).
func (s sysfs) readDir(p string) []string {
	ents, err := os.ReadDir(s.host(p))
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// pciPath is the resolved sysfs directory of a PCI device, NCCL's getPciPath (2.28), which
// resolves /sys/class/pci_bus/<dddd:bb>/../../<busid>; /sys/bus/pci/devices/<busid> is the same
// directory. NCCL uses the first 12 characters of the bus id, lower-cased.
func (s sysfs) pciPath(busID string) (string, bool) {
	if len(busID) < 12 {
		return "", false
	}
	return s.realpath("/sys/bus/pci/devices/" + strings.ToLower(busID[:12]))
}

// isBDF is NCCL's checkBDFFormat: exactly "BBBB:BB:DD.F" in hex.
func isBDF(s string) bool {
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	for i, c := range []byte(s) {
		if i == 4 || i == 7 || i == 10 {
			continue
		}
		if !isHex(c) {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}
