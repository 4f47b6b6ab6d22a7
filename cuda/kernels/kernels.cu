// simccl copy and reduction kernels: our own CUDA C, compiled to PTX by gen.sh (nvcc -ptx
// -arch=sm_90 -O3) and loaded at run time with cuModuleLoadDataEx (package cuda, kernels.go).
//
// Every kernel is extern "C" so that its PTX name is predictable:
//   simccl_copy(dst, src, nbytes)
//   simccl_reduce_<op>_<type>(out, a, b, n, scalar, flags)   out[i] = op(a[i], b[i])
//   simccl_divide_<type>(out, in, n, divisor)                out[i] = in[i] / divisor (integers)
// op: sum, prod, min, max, premulsum; type: i8 u8 i32 u32 i64 u64 f16 f32 f64 bf16 e4m3 e5m2.
//
// Semantics (the CPU reference in kernels_test.go states the same rules):
//  - integers wrap (two's complement; arithmetic done in the unsigned type);
//  - float and double round once per operation (explicit _rn intrinsics, so no FMA contraction);
//  - half, bfloat16 and fp8 widen to float, combine, and round back to nearest even; fp8 narrowing
//    saturates to the largest finite value (NaN stays NaN), half and bfloat16 overflow to infinity;
//  - min/max: min(a,b) = b < a ? b : a, max(a,b) = a < b ? b : a (compared as widened values);
//  - premulsum: each input whose flag bit is set (bit 0: a, bit 1: b) is first multiplied by the
//    scalar and rounded to the element type, then the two are summed (NCCL's PreMulSum, with the
//    scalar converted to the element type first; NCCL's Avg for float types is PreMulSum by
//    1/nRanks, for integer types Sum then simccl_divide; NCCL 2.28 ncclAvg).
// The scalar argument holds the element type's bit pattern in its low bytes.
//
// Access: 16-byte vector loads and stores when out, a and b are all 16-byte aligned, then an
// element loop for the tail (and for unaligned buffers); grid-stride loops, so any grid size is
// correct. Inputs may live on a peer GPU (peer access enabled): the loads then go over NVLink.

#include <stdint.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#define THREADS 512

template <class T, class UT>
struct IntTr {
	typedef T Elt;
	__device__ static T add(T a, T b) { return (T)(UT)((UT)a + (UT)b); }
	__device__ static T mul(T a, T b) { return (T)(UT)((UT)a * (UT)b); }
	__device__ static bool lt(T a, T b) { return a < b; }
	__device__ static T bits(unsigned long long s) { return (T)s; }
};

struct F32Tr {
	typedef float Elt;
	__device__ static float add(float a, float b) { return __fadd_rn(a, b); }
	__device__ static float mul(float a, float b) { return __fmul_rn(a, b); }
	__device__ static bool lt(float a, float b) { return a < b; }
	__device__ static float bits(unsigned long long s) { return __uint_as_float((unsigned int)s); }
};

struct F64Tr {
	typedef double Elt;
	__device__ static double add(double a, double b) { return __dadd_rn(a, b); }
	__device__ static double mul(double a, double b) { return __dmul_rn(a, b); }
	__device__ static bool lt(double a, double b) { return a < b; }
	__device__ static double bits(unsigned long long s) { return __longlong_as_double((long long)s); }
};

struct HalfConv {
	typedef uint16_t Elt;
	__device__ static float wide(uint16_t h) { return __half2float(__ushort_as_half(h)); }
	__device__ static uint16_t narrow(float f) { return __half_as_ushort(__float2half_rn(f)); }
};

struct Bf16Conv {
	typedef uint16_t Elt;
	__device__ static float wide(uint16_t h) { return __bfloat162float(__ushort_as_bfloat16(h)); }
	__device__ static uint16_t narrow(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
};

template <__nv_fp8_interpretation_t K>
struct Fp8Conv {
	typedef uint8_t Elt;
	__device__ static float wide(uint8_t c) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(c, K))); }
	__device__ static uint8_t narrow(float f) { return (uint8_t)__nv_cvt_float_to_fp8(f, __NV_SATFINITE, K); }
};

template <class C>
struct NarrowTr {
	typedef typename C::Elt Elt;
	__device__ static Elt add(Elt a, Elt b) { return C::narrow(__fadd_rn(C::wide(a), C::wide(b))); }
	__device__ static Elt mul(Elt a, Elt b) { return C::narrow(__fmul_rn(C::wide(a), C::wide(b))); }
	__device__ static bool lt(Elt a, Elt b) { return C::wide(a) < C::wide(b); }
	__device__ static Elt bits(unsigned long long s) { return (Elt)s; }
};

template <class Tr>
struct OpSum {
	typedef typename Tr::Elt T;
	__device__ OpSum(unsigned long long, unsigned) {}
	__device__ T operator()(T a, T b) const { return Tr::add(a, b); }
};

template <class Tr>
struct OpProd {
	typedef typename Tr::Elt T;
	__device__ OpProd(unsigned long long, unsigned) {}
	__device__ T operator()(T a, T b) const { return Tr::mul(a, b); }
};

template <class Tr>
struct OpMin {
	typedef typename Tr::Elt T;
	__device__ OpMin(unsigned long long, unsigned) {}
	__device__ T operator()(T a, T b) const { return Tr::lt(b, a) ? b : a; }
};

template <class Tr>
struct OpMax {
	typedef typename Tr::Elt T;
	__device__ OpMax(unsigned long long, unsigned) {}
	__device__ T operator()(T a, T b) const { return Tr::lt(a, b) ? b : a; }
};

template <class Tr>
struct OpPreMulSum {
	typedef typename Tr::Elt T;
	T s;
	unsigned flags;
	__device__ OpPreMulSum(unsigned long long scalar, unsigned f) : s(Tr::bits(scalar)), flags(f) {}
	__device__ T operator()(T a, T b) const {
		T x = (flags & 1) ? Tr::mul(a, s) : a;
		T y = (flags & 2) ? Tr::mul(b, s) : b;
		return Tr::add(x, y);
	}
};

template <class T, class Op>
__device__ __forceinline__ void reduce_body(T *out, const T *a, const T *b, unsigned long long n, const Op &op) {
	constexpr int V = 16 / sizeof(T);
	unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long nth = (unsigned long long)gridDim.x * blockDim.x;
	unsigned long long head = 0;
	if ((((uintptr_t)out | (uintptr_t)a | (uintptr_t)b) & 15) == 0) {
		unsigned long long nv = n / V;
		const uint4 *av = (const uint4 *)a;
		const uint4 *bv = (const uint4 *)b;
		uint4 *ov = (uint4 *)out;
		for (unsigned long long i = tid; i < nv; i += nth) {
			union { uint4 v; T e[V]; } x, y, r;
			x.v = av[i];
			y.v = bv[i];
#pragma unroll
			for (int k = 0; k < V; k++) r.e[k] = op(x.e[k], y.e[k]);
			ov[i] = r.v;
		}
		head = nv * V;
	}
	for (unsigned long long i = head + tid; i < n; i += nth) out[i] = op(a[i], b[i]);
}

extern "C" __global__ void __launch_bounds__(THREADS) simccl_copy(uint8_t *dst, const uint8_t *src, unsigned long long nbytes) {
	unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long nth = (unsigned long long)gridDim.x * blockDim.x;
	unsigned long long head = 0;
	if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
		unsigned long long nv = nbytes / 16;
		const uint4 *sv = (const uint4 *)src;
		uint4 *dv = (uint4 *)dst;
		for (unsigned long long i = tid; i < nv; i += nth) dv[i] = sv[i];
		head = nv * 16;
	}
	for (unsigned long long i = head + tid; i < nbytes; i += nth) dst[i] = src[i];
}

#define REDUCE_OP(OPNAME, OPTYPE, TY, TR)                                                                 \
	extern "C" __global__ void __launch_bounds__(THREADS) simccl_reduce_##OPNAME##_##TY(                \
		TR::Elt *out, const TR::Elt *a, const TR::Elt *b, unsigned long long n, unsigned long long scalar, \
		unsigned int flags) {                                                                         \
		OPTYPE<TR> op(scalar, flags);                                                                 \
		reduce_body<TR::Elt>(out, a, b, n, op);                                                       \
	}

#define REDUCE_ALL(TY, TR)                   \
	REDUCE_OP(sum, OpSum, TY, TR)             \
	REDUCE_OP(prod, OpProd, TY, TR)           \
	REDUCE_OP(min, OpMin, TY, TR)             \
	REDUCE_OP(max, OpMax, TY, TR)             \
	REDUCE_OP(premulsum, OpPreMulSum, TY, TR)

typedef IntTr<int8_t, uint8_t> TrI8;
typedef IntTr<uint8_t, uint8_t> TrU8;
typedef IntTr<int32_t, uint32_t> TrI32;
typedef IntTr<uint32_t, uint32_t> TrU32;
typedef IntTr<int64_t, uint64_t> TrI64;
typedef IntTr<uint64_t, uint64_t> TrU64;
typedef NarrowTr<HalfConv> TrF16;
typedef NarrowTr<Bf16Conv> TrBF16;
typedef NarrowTr<Fp8Conv<__NV_E4M3> > TrE4M3;
typedef NarrowTr<Fp8Conv<__NV_E5M2> > TrE5M2;

REDUCE_ALL(i8, TrI8)
REDUCE_ALL(u8, TrU8)
REDUCE_ALL(i32, TrI32)
REDUCE_ALL(u32, TrU32)
REDUCE_ALL(i64, TrI64)
REDUCE_ALL(u64, TrU64)
REDUCE_ALL(f16, TrF16)
REDUCE_ALL(f32, F32Tr)
REDUCE_ALL(f64, F64Tr)
REDUCE_ALL(bf16, TrBF16)
REDUCE_ALL(e4m3, TrE4M3)
REDUCE_ALL(e5m2, TrE5M2)

#define DIVIDE(TY, T)                                                                                              \
	extern "C" __global__ void __launch_bounds__(THREADS) simccl_divide_##TY(T *out, const T *in, unsigned long long n, \
		unsigned long long divisor) {                                                                              \
		T d = (T)divisor;                                                                                          \
		unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;                        \
		unsigned long long nth = (unsigned long long)gridDim.x * blockDim.x;                                       \
		for (unsigned long long i = tid; i < n; i += nth) out[i] = in[i] / d;                                      \
	}

DIVIDE(i8, int8_t)
DIVIDE(u8, uint8_t)
DIVIDE(i32, int32_t)
DIVIDE(u32, uint32_t)
DIVIDE(i64, int64_t)
DIVIDE(u64, uint64_t)
