#!/usr/bin/env python3
"""Zero every GPU code image of a CUDA shared library except the cubins of one SM architecture.

    python3 fatbin_keep.py IN.so ARCH OUT.so     (e.g. libnccl.so.2.22.3 90 out.so)
    python3 fatbin_keep.py IN.so ARCH            (list the images, change nothing)

Debian's libnccl2 packages (contrib; 2.22.3 in trixie, 2.29.7 in sid) hold cubins for six
architectures, 225-241 MB, more than one device call carries (64 MiB). The CUDA runtime loads only
the image of the GPU's architecture, so the others can be zeroed in place: every offset and size of
the ELF file stays as it was, and the zeros compress away (xz: 20-24 MB). A fat binary is a header
(magic 0xBA55ED50, version, header size, payload size) followed by entries, each a header (kind 1
PTX or 2 cubin at offset 0, header size at 4, payload size at 8, SM architecture at 28) and its
payload; both `.nv_fatbin` (what the runtime registers) and `__nv_relfatbin` (device-link input,
not loaded) are walked. Written for this project from the layout that cuobjdump reports.
"""
import collections
import struct
import sys

MAGIC = 0xBA55ED50


def sections(b):
    """Map of ELF64 section name -> (file offset, size)."""
    shoff, = struct.unpack_from('<Q', b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', b, 0x3A)
    secs = []
    for i in range(shnum):
        name, _typ, _flags, _addr, off, size = struct.unpack_from('<IIQQQQ', b, shoff + i * shentsize)
        secs.append((name, off, size))
    stro = secs[shstrndx][1]
    out = {}
    for name, off, size in secs:
        end = b.index(b'\0', stro + name)
        out[bytes(b[stro + name:end]).decode()] = (off, size)
    return out


def entries(b, off, size):
    """Yield (kind, arch, entry offset, entry header size, payload size) of every fat binary in a section."""
    p, end = off, off + size
    while p + 16 <= end:
        magic, _ver, hs, fs = struct.unpack_from('<IHHQ', b, p)
        if magic != MAGIC:
            p += 8  # fat binaries are 8-byte aligned in the section
            continue
        q = p + hs
        while q < p + hs + fs:
            kind, _, ehs, esz = struct.unpack_from('<HHIQ', b, q)
            arch, = struct.unpack_from('<I', b, q + 28)
            yield kind, arch, q, ehs, esz
            q += ehs + esz
        p += hs + fs


def main(argv):
    if len(argv) not in (3, 4):
        sys.exit(__doc__)
    b = bytearray(open(argv[1], 'rb').read())
    keep = int(argv[2])
    secs = sections(b)
    for sec in ('.nv_fatbin', '__nv_relfatbin'):
        if sec not in secs:
            continue
        tot = collections.Counter()
        for kind, arch, q, ehs, esz in entries(b, *secs[sec]):
            tot[(kind, arch)] += esz
            if len(argv) == 4 and not (kind == 2 and arch == keep):
                b[q + ehs:q + ehs + esz] = bytes(esz)
        for (kind, arch), n in sorted(tot.items()):
            print('%s %s sm_%d %.1f MiB%s' % (sec, 'cubin' if kind == 2 else 'ptx', arch, n / 2**20,
                                              '' if kind == 2 and arch == keep else ' (zeroed)' if len(argv) == 4 else ''))
    if len(argv) == 4:
        open(argv[3], 'wb').write(b)


if __name__ == '__main__':
    main(sys.argv)
