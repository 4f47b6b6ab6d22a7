#!/usr/bin/env python3
"""A bare TCP ping-pong and one bulk stream between two processes on this machine, over ADDR (the
address NCCL's socket transport uses in socketscan.sh): the kernel's part of what NCCL's NET/Socket
pays. Prints CSV rows kind,bytes,us,gbps: pingpong rows are half a round trip (TCP_NODELAY), stream
rows one sender's bytes over the receiver's wall time."""
import os, socket, sys, time

addr = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1"


def server(ls, mode, n, reps):
    c, _ = ls.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(max(n, 1 << 20))
    if mode == "pingpong":
        for _ in range(reps):
            got = 0
            while got < n:
                got += c.recv_into(memoryview(buf)[got:n])
            c.sendall(memoryview(buf)[:n])
    else:
        total, t0 = 0, None
        while total < n * reps:
            k = c.recv_into(buf)
            if k == 0:
                break
            if t0 is None:
                t0 = time.perf_counter()
            total += k
        c.sendall(b"x")
        os.write(wfd, ("%.3f" % ((time.perf_counter() - t0) * 1e6)).encode())
    c.close()


print("kind,bytes,us,gbps")
for mode, sizes, reps in (("pingpong", [8, 1024, 65536], 2000), ("stream", [1 << 20, 1 << 24], 64)):
    for n in sizes:
        ls = socket.socket()
        ls.bind((addr, 0))
        ls.listen(1)
        port = ls.getsockname()[1]
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            server(ls, mode, n, reps)
            os._exit(0)
        os.close(wfd)
        ls.close()
        s = socket.create_connection((addr, port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = bytearray(n)
        if mode == "pingpong":
            t0 = time.perf_counter()
            for _ in range(reps):
                s.sendall(data)
                got = 0
                while got < n:
                    got += s.recv_into(memoryview(data)[got:])
            us = (time.perf_counter() - t0) * 1e6 / reps / 2
        else:
            for _ in range(reps):
                s.sendall(data)
            s.recv(1)
            us = float(os.read(rfd, 64).decode()) / reps
        os.waitpid(pid, 0)
        os.close(rfd)
        s.close()
        print("%s,%d,%.3f,%.3f" % (mode, n, us, n / us / 1e3))
        sys.stdout.flush()
