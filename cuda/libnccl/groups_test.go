package main

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simccl/simccl/coll"
	"github.com/simccl/simccl/cuda"
)

// osThread runs functions on one OS thread, as a C program's thread calls the library: fast.c's
// group state is per thread (__thread).
type osThread chan func()

func newOSThread(t *testing.T) osThread {
	th := make(osThread)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		for f := range th {
			f()
		}
	}()
	t.Cleanup(func() { close(th) })
	return th
}

// run runs f on the thread and waits for it.
func (th osThread) run(f func()) {
	done := make(chan struct{})
	th <- func() { f(); close(done) }
	<-done
}

// start runs f on the thread without waiting; the channel closes once f returns.
func (th osThread) start(f func()) <-chan struct{} {
	done := make(chan struct{})
	th <- func() { f(); close(done) }
	return done
}

// TestGroupsPerThread: ncclGroupStart/End are per thread, as NCCL's. Two ranks of one
// communicator driven by two threads (api_check.c's ncclCommInitRank threads), each in its own
// group of a send and a receive, with the groups open at once: each thread's ncclGroupEnd
// launches its own calls, so it returns only once the peer's group has launched too (the launch
// waits for every rank). Go's group was process-wide, so the first thread's end closed an inner
// level and returned at once with nothing launched, and the other thread's end later launched
// both threads' calls: api_check.c then freed its buffers and destroyed its communicator while its
// send and receive were still to run (under load: "index out of range [1] with length 0" in
// peerEvent, "device closed", an LL flag that never came). One thread driving both ranks in one
// group (ncclCommInitAll's way) still launches them together.
func TestGroupsPerThread(t *testing.T) {
	t.Setenv("SIMCCL_CUDA_EMULATE", "1")
	t.Setenv("SIMCCL_TIMEOUT", "20s")
	for _, tc := range []struct {
		name    string
		threads int // 2: one thread per rank; 1: one thread for both ranks
	}{
		{"thread per rank, groups open at once", 2},
		{"one thread, both ranks in one group", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := initAll([]int{0, 0}) // two ranks sharing the emulated GPU (Config.ShareGPUs)
			require.NoError(t, err)
			hs := [2]cComm{newHandle(cs[0]), newHandle(cs[1])}
			const n = 1031
			var send, recv [2]cuda.DevPtr
			for r, c := range cs {
				in := make([]byte, 4*n)
				for i := 0; i < n; i++ {
					coll.Float32.SetValue(in, i, float64(100*r+i%89))
				}
				require.NoError(t, c.dev.Do(func(x *cuda.Ctx) error {
					var err error
					if send[r], err = x.Alloc(4 * n); err != nil {
						return err
					}
					if recv[r], err = x.Alloc(4 * n); err != nil {
						return err
					}
					if err := x.Memset(recv[r], 0, 4*n); err != nil {
						return err
					}
					return x.CopyHtoD(send[r], in)
				}))
			}
			f32 := int(coll.Float32)
			// group opens rank r's group (on the calling thread, not the test's goroutine: assert) with its send to and receive
			// from the other rank.
			group := func(r int) {
				assert.Equal(t, ncclSuccess, cGroupStart())
				assert.Equal(t, ncclSuccess, cSend(send[r], n, f32, 1-r, hs[r]), lastError())
				assert.Equal(t, ncclSuccess, cRecv(recv[r], n, f32, 1-r, hs[r]), lastError())
			}
			var res [2]result
			if tc.threads == 1 {
				th := newOSThread(t)
				th.run(func() {
					assert.Equal(t, ncclSuccess, cGroupStart())
					for r := range hs {
						assert.Equal(t, ncclSuccess, cSend(send[r], n, f32, 1-r, hs[r]), lastError())
						assert.Equal(t, ncclSuccess, cRecv(recv[r], n, f32, 1-r, hs[r]), lastError())
					}
					res[0] = cGroupEnd()
					res[1] = res[0]
				})
			} else {
				th := [2]osThread{newOSThread(t), newOSThread(t)}
				th[0].run(func() { group(0) })
				th[1].run(func() { group(1) })
				ended0 := th[0].start(func() { res[0] = cGroupEnd() })
				select {
				case <-ended0:
					t.Errorf("rank 0's ncclGroupEnd returned (result %d) before rank 1's group ended: its send and receive were not launched by it", res[0])
				case <-time.After(200 * time.Millisecond):
				}
				th[1].run(func() { res[1] = cGroupEnd() })
				<-ended0
			}
			for r := range res {
				require.Equal(t, ncclSuccess, res[r], "rank %d's ncclGroupEnd: %s", r, lastError())
			}
			for r, c := range cs {
				got := make([]byte, 4*n)
				require.NoError(t, c.dev.Do(func(x *cuda.Ctx) error {
					if err := x.Synchronize(); err != nil {
						return err
					}
					return x.CopyDtoH(got, recv[r])
				}))
				for i := 0; i < n; i++ {
					require.Equal(t, float64(100*(1-r)+i%89), coll.Float32.Value(got, i), "rank %d element %d", r, i)
				}
				require.NoError(t, c.dev.Do(func(x *cuda.Ctx) error { return x.Free(send[r]) }))
				require.NoError(t, c.dev.Do(func(x *cuda.Ctx) error { return x.Free(recv[r]) }))
				require.NoError(t, c.destroy())
				drop(hs[r])
			}
		})
	}
}
