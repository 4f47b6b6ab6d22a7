package perf

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/comm"
)

const deviceRecord = 256 // bytes per rank in Devices' all-gather: pid, host name length, host name

// Devices returns the "# Using devices" lines of a CPU-engine run: every rank's pid and host,
// gathered over the communicators (an all-gather of 256 bytes per rank, so that rank 0 of a
// launcher job knows the other processes), and its index among the ranks of its host. Every
// process of the communicator must call it; name is the device description ("CPU (goroutine
// rank)").
func Devices(cs []*comm.Comm, name string) ([]Device, error) {
	if len(cs) == 0 {
		return nil, fmt.Errorf("perf: no communicators")
	}
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	if len(host) > deviceRecord-10 {
		host = host[:deviceRecord-10]
	}
	n := cs[0].Count()
	var rec [deviceRecord]byte
	binary.LittleEndian.PutUint64(rec[0:], uint64(os.Getpid()))
	binary.LittleEndian.PutUint16(rec[8:], uint16(len(host)))
	copy(rec[10:], host)
	outs := make([][]byte, len(cs))
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		outs[i] = make([]byte, n*deviceRecord)
		wg.Add(1)
		go func() {
			defer wg.Done()
			send := append([]byte(nil), rec[:]...)
			if errs[i] = c.AllGather(send, outs[i], deviceRecord, coll.Uint8, nil); errs[i] == nil {
				errs[i] = c.Synchronize()
			}
		}()
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return nil, fmt.Errorf("perf: gathering the ranks' hosts: %w", err)
	}
	all := outs[0]
	devs := make([]Device, n)
	perHost := map[string]int{}
	for r := range devs {
		b := all[r*deviceRecord : (r+1)*deviceRecord]
		l := min(int(binary.LittleEndian.Uint16(b[8:])), deviceRecord-10)
		h := string(b[10 : 10+l])
		devs[r] = Device{Rank: r, Pid: int(binary.LittleEndian.Uint64(b)), Host: h, Device: perHost[h], Bus: "cpu", Name: name}
		perHost[h]++
	}
	return devs, nil
}
