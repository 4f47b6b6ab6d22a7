//go:build cgo && linux

package discover

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

// CUDA driver entry points, reached with dlopen so that no CUDA SDK is needed to build.
typedef int (*simcclCuInit)(unsigned int);
typedef int (*simcclCuDeviceGetByPCIBusId)(int*, const char*);
typedef int (*simcclCuDeviceGetAttribute)(int*, int, int);

static void* simcclCuda;

// simccl_cuda_open loads libcuda.so.1 and calls cuInit(0); 0 on success, -1 when the library is
// missing, -2 when a symbol is, else the CUresult.
static int simccl_cuda_open(void) {
	if (simcclCuda == 0) {
		simcclCuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
		if (simcclCuda == 0) return -1;
	}
	simcclCuInit init = (simcclCuInit)dlsym(simcclCuda, "cuInit");
	if (init == 0) return -2;
	return init(0);
}

// simccl_cuda_attr reads one device attribute of the device at a PCI bus id.
static int simccl_cuda_attr(const char* busid, int attr, int* value) {
	simcclCuDeviceGetByPCIBusId byBus = (simcclCuDeviceGetByPCIBusId)dlsym(simcclCuda, "cuDeviceGetByPCIBusId");
	simcclCuDeviceGetAttribute get = (simcclCuDeviceGetAttribute)dlsym(simcclCuda, "cuDeviceGetAttribute");
	if (byBus == 0 || get == 0) return -2;
	int dev = 0;
	int r = byBus(&dev, busid);
	if (r != 0) return r;
	return get(value, attr, dev);
}
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// cuDeviceAttributeGPUDirectRDMASupported is CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED (cuda.h,
// CUDA 11.3+), the attribute behind NCCL 2.28's <gpu gdr>.
const cuDeviceAttributeGPUDirectRDMASupported = 116

// OpenNVML loads libnvidia-ml.so.1 and initialises NVML. Without a driver it returns an error
// wrapping ErrNoNVML.
func OpenNVML() (NVML, error) {
	lib := nvml.New()
	ret := lib.Init()
	switch ret {
	case nvml.SUCCESS:
		return &realNVML{lib: lib}, nil
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, fmt.Errorf("%w: libnvidia-ml.so.1 not found (no NVIDIA driver on this machine?)", ErrNoNVML)
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return nil, fmt.Errorf("%w: nvmlInit: the NVIDIA kernel driver is not loaded", ErrNoNVML)
	}
	return nil, fmt.Errorf("%w: nvmlInit: %v", ErrNoNVML, ret)
}

type realNVML struct {
	lib nvml.Interface
}

func (r *realNVML) DeviceCount() (int, error) {
	n, ret := r.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	return n, nil
}

func (r *realNVML) Device(i int) (GPU, error) {
	d, ret := r.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	return realGPU{d: d}, nil
}

func (r *realNVML) Close() error {
	if ret := r.lib.Shutdown(); ret != nvml.SUCCESS {
		return ret
	}
	return nil
}

type realGPU struct {
	d nvml.Device
}

func cstr(b []uint8) string {
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	return string(b[:n])
}

func (g realGPU) BusID() (string, error) {
	p, ret := g.d.GetPciInfo()
	if ret != nvml.SUCCESS {
		return "", ret
	}
	if s := cstr(p.BusId[:]); s != "" {
		return s, nil
	}
	return cstr(p.BusIdLegacy[:]), nil
}

func (g realGPU) ComputeCapability() (int, int, error) {
	major, minor, ret := g.d.GetCudaComputeCapability()
	if ret != nvml.SUCCESS {
		return 0, 0, ret
	}
	return major, minor, nil
}

func (g realGPU) NvLinkP2P(link int) (bool, error) {
	v, ret := g.d.GetNvLinkCapability(link, nvml.NVLINK_CAP_P2P_SUPPORTED)
	if ret != nvml.SUCCESS {
		return false, ret
	}
	return v != 0, nil
}

// field asks one NVML field value and returns its unsigned-int member.
func (g realGPU) field(id, scope uint32) (uint32, error) {
	v := []nvml.FieldValue{{FieldId: id, ScopeId: scope}}
	if ret := g.d.GetFieldValues(v); ret != nvml.SUCCESS {
		return 0, ret
	}
	if r := nvml.Return(v[0].NvmlReturn); r != nvml.SUCCESS {
		return 0, r
	}
	return binary.LittleEndian.Uint32(v[0].Value[:4]), nil
}

func (g realGPU) NvLinkActive(link int, field bool) (bool, error) {
	if field {
		v, err := g.field(nvml.FI_DEV_NVLINK_GET_STATE, uint32(link))
		if err != nil {
			return false, err
		}
		return v == uint32(nvml.FEATURE_ENABLED), nil
	}
	st, ret := g.d.GetNvLinkState(link)
	if ret != nvml.SUCCESS {
		return false, ret
	}
	return st == nvml.FEATURE_ENABLED, nil
}

func (g realGPU) NvLinkRemoteBusID(link int) (string, error) {
	p, ret := g.d.GetNvLinkRemotePciInfo(link)
	if ret != nvml.SUCCESS {
		return "", ret
	}
	// NCCL 2.28 reads the legacy 16-byte bus id ("0000:04:00.0").
	return cstr(p.BusIdLegacy[:]), nil
}

func (g realGPU) C2CLinkCount() (int, error) {
	v, err := g.field(nvml.FI_DEV_C2C_LINK_COUNT, 0)
	return int(v), err
}

func (g realGPU) C2CLink(link int) (bool, int, error) {
	st, err := g.field(nvml.FI_DEV_C2C_LINK_GET_STATUS, uint32(link))
	if err != nil {
		return false, 0, err
	}
	bw, err := g.field(nvml.FI_DEV_C2C_LINK_GET_MAX_BW, uint32(link))
	if err != nil {
		return false, 0, err
	}
	return st == 1, int(bw), nil
}

func (g realGPU) PCIeLink() (int, int, error) {
	gen, ret := g.d.GetCurrPcieLinkGeneration()
	if ret != nvml.SUCCESS {
		return 0, 0, ret
	}
	w, ret := g.d.GetCurrPcieLinkWidth()
	if ret != nvml.SUCCESS {
		return 0, 0, ret
	}
	return gen, w, nil
}

var (
	cudaOnce sync.Once
	cudaErr  error
)

func (g realGPU) GDRSupported() (bool, error) {
	cudaOnce.Do(func() {
		switch r := C.simccl_cuda_open(); r {
		case 0:
		case -1:
			cudaErr = fmt.Errorf("libcuda.so.1 not found")
		case -2:
			cudaErr = fmt.Errorf("libcuda.so.1 lacks cuInit")
		default:
			cudaErr = fmt.Errorf("cuInit: CUresult %d", int(r))
		}
	})
	if cudaErr != nil {
		return false, cudaErr
	}
	busID, err := g.BusID()
	if err != nil {
		return false, err
	}
	cs := C.CString(busID)
	defer C.free(unsafe.Pointer(cs))
	var v C.int
	if r := C.simccl_cuda_attr(cs, cuDeviceAttributeGPUDirectRDMASupported, &v); r != 0 {
		return false, fmt.Errorf("cuDeviceGetAttribute(GPU_DIRECT_RDMA_SUPPORTED) for %s: CUresult %d", busID, int(r))
	}
	return v != 0, nil
}
