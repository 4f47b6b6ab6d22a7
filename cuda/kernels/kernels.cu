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
// LL protocol kernels (flags travel with the data; see the LL section below):
//   simccl_ll_copy(dst, src, in, inflag, out, outflag, nbytes)
//   simccl_ll_reduce_<op>_<type>(dst, a, in, inflag, out, outflag, n, scalar, flags)
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

// ---------------------------------------------------------------------------------------------
// LL (NCCL's low-latency protocol, reproduced): a message travels in the sender's staging buffer
// as 16-byte lines, each carrying 8 bytes of payload as two 4-byte halves, each half beside a
// copy of the message's 4-byte flag:
//     line i = { payload[8i .. 8i+3], flag, payload[8i+4 .. 8i+7], flag }
// written with one 16-byte volatile store. The receiver polls a line with a 16-byte volatile load
// until both flags equal the flag it expects. An aligned 8-byte half (4 bytes of data, 4 of flag)
// becomes visible as a unit, so a half whose flag is right carries its data: no memory fence and
// no separate ready counter or event between sender and receiver. The flag is the connection
// message's number on its connection plus one (never 0). The receiver zeroes every line it has
// read (in the sender's memory), so a buffer holds no line of a consumed message: the next
// message in the slot (after the schedule's credit), the same message of the next launch, or of
// the next replay of a captured CUDA graph (whose flags are the same kernel arguments) waits for
// its own data. Buffers start zeroed. The payload's tail past nbytes is padded with zeros. Both
// kernels take LL_UNROLL lines per thread per round, grid-stride. A receiver that sees no flag for LL_TIMEOUT_NS
// traps (the launch fails with an error instead of spinning forever).

#define LL_TIMEOUT_NS 10000000000ull

__device__ __forceinline__ unsigned long long ll_clock() {
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

// LL_UNROLL: lines a thread takes per round (grid-stride by nth between them) when it has more
// than 2. Their loads are issued together before any flag is checked, so a thread waits for
// LL_UNROLL lines at once instead of one after the other (-DLL_UNROLL=1: one line per round,
// the first LL kernels).
#ifndef LL_UNROLL
#define LL_UNROLL 4
#endif

__device__ __forceinline__ uint4 ll_ld(const uint4 *p) {
	uint4 v;
	asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
	return v;
}

// ll_spin reloads line p into v until both its flags are flag (trapping after LL_TIMEOUT_NS).
__device__ __forceinline__ void ll_spin(const uint4 *p, uint4 &v, unsigned flag) {
	unsigned spins = 0;
	unsigned long long t0 = 0;
	while (v.y != flag || v.w != flag) {
		if (++spins == 256) {
			unsigned long long t = ll_clock();
			if (t0 == 0) t0 = t;
			else if (t - t0 > LL_TIMEOUT_NS) __trap();
			spins = 0;
		}
		v = ll_ld(p);
	}
}

// ll_wait_n waits for the lines i + u*nth (u < U, those below lines) to carry flag, zeroes them
// and returns their payloads in out[u].
template <int U>
__device__ __forceinline__ void ll_wait_n(uint4 *in, unsigned long long i, unsigned long long nth, unsigned long long lines,
	unsigned flag, uint2 *out) {
	uint4 v[U];
#pragma unroll
	for (int u = 0; u < U; u++)
		if (i + u * nth < lines) v[u] = ll_ld(in + i + u * nth);
#pragma unroll
	for (int u = 0; u < U; u++)
		if (i + u * nth < lines) {
			ll_spin(in + i + u * nth, v[u], flag);
			asm volatile("st.volatile.global.v4.u32 [%0], {%1,%1,%1,%1};" ::"l"(in + i + u * nth), "r"(0u) : "memory");
			out[u] = make_uint2(v[u].x, v[u].z);
		}
}

__device__ __forceinline__ void ll_store(uint4 *p, uint2 v, unsigned flag) {
	asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(flag), "r"(v.y), "r"(flag) : "memory");
}

// ll_load8 reads the 8 bytes of line i of a raw buffer (zeros past nbytes).
__device__ __forceinline__ uint2 ll_load8(const uint8_t *src, unsigned long long i, unsigned long long nbytes) {
	unsigned long long off = i * 8;
	if (((uintptr_t)src & 7) == 0 && off + 8 <= nbytes) return *(const uint2 *)(src + off);
	union { uint2 v; uint8_t b[8]; } u;
	u.v = make_uint2(0, 0);
	for (int k = 0; k < 8 && off + k < nbytes; k++) u.b[k] = src[off + k];
	return u.v;
}

__device__ __forceinline__ void ll_store8(uint8_t *dst, unsigned long long i, unsigned long long nbytes, uint2 v) {
	unsigned long long off = i * 8;
	if (((uintptr_t)dst & 7) == 0 && off + 8 <= nbytes) {
		*(uint2 *)(dst + off) = v;
		return;
	}
	union { uint2 v; uint8_t b[8]; } u;
	u.v = v;
	for (int k = 0; k < 8 && off + k < nbytes; k++) dst[off + k] = u.b[k];
}

// ll_copy_loop is simccl_ll_copy's loop, U lines per thread at once: the payload comes from the
// LL lines in (waiting for inflag, then zeroing them) or, when in is null, from the raw buffer
// src; it goes to the raw buffer dst (if not null) and as LL lines with outflag to out (if not
// null).
template <int U>
__device__ __forceinline__ void ll_copy_loop(uint8_t *dst, const uint8_t *src, uint4 *in, unsigned inflag, uint4 *out,
	unsigned outflag, unsigned long long nbytes, unsigned long long lines, unsigned long long tid, unsigned long long nth) {
	for (unsigned long long i = tid; i < lines; i += nth * U) {
		uint2 v[U];
		if (in) ll_wait_n<U>(in, i, nth, lines, inflag, v);
		else {
#pragma unroll
			for (int u = 0; u < U; u++)
				if (i + u * nth < lines) v[u] = ll_load8(src, i + u * nth, nbytes);
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			unsigned long long l = i + u * nth;
			if (l < lines) {
				if (dst) ll_store8(dst, l, nbytes, v[u]);
				if (out) ll_store(out + l, v[u], outflag);
			}
		}
	}
}

// simccl_ll_copy: a thread with at most 2 lines takes them one at a time, one with more
// LL_UNROLL at once (the unrolled loop is slower for the smallest messages: measured on one
// H200, testdata/device/h200x1-2026-11-28-ll128).
extern "C" __global__ void __launch_bounds__(THREADS) simccl_ll_copy(uint8_t *dst, const uint8_t *src, uint4 *in,
	unsigned inflag, uint4 *out, unsigned outflag, unsigned long long nbytes) {
	unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long nth = (unsigned long long)gridDim.x * blockDim.x;
	unsigned long long lines = (nbytes + 7) / 8;
	if (lines <= 2 * nth) ll_copy_loop<1>(dst, src, in, inflag, out, outflag, nbytes, lines, tid, nth);
	else ll_copy_loop<LL_UNROLL>(dst, src, in, inflag, out, outflag, nbytes, lines, tid, nth);
}

// ll_reduce_loop: dst[j] = op(a[j], m[j]) for the n elements of the message m (LL lines in),
// written to dst (if not null) and as LL lines with outflag to out (if not null).
template <int U, class T, class Op>
__device__ __forceinline__ void ll_reduce_loop(T *dst, const T *a, uint4 *in, unsigned inflag, uint4 *out, unsigned outflag,
	unsigned long long n, const Op &op) {
	constexpr int E = 8 / sizeof(T);
	unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long nth = (unsigned long long)gridDim.x * blockDim.x;
	unsigned long long lines = (n + E - 1) / E;
	unsigned long long nbytes = n * sizeof(T);
	for (unsigned long long i = tid; i < lines; i += nth * U) {
		uint2 mv[U], xv[U];
#pragma unroll
		for (int u = 0; u < U; u++)
			if (i + u * nth < lines) xv[u] = ll_load8((const uint8_t *)a, i + u * nth, nbytes);
		ll_wait_n<U>(in, i, nth, lines, inflag, mv);
#pragma unroll
		for (int u = 0; u < U; u++) {
			unsigned long long l = i + u * nth;
			if (l < lines) {
				union { uint2 v; T e[E]; } m, x, r;
				m.v = mv[u];
				x.v = xv[u];
				r.v = make_uint2(0, 0);
#pragma unroll
				for (int k = 0; k < E; k++)
					if (l * E + k < n) r.e[k] = op(x.e[k], m.e[k]);
				if (dst) ll_store8((uint8_t *)dst, l, nbytes, r.v);
				if (out) ll_store(out + l, r.v, outflag);
			}
		}
	}
}

template <class T, class Op>
__device__ __forceinline__ void ll_reduce_body(T *dst, const T *a, uint4 *in, unsigned inflag, uint4 *out, unsigned outflag,
	unsigned long long n, const Op &op) {
	constexpr int E = 8 / sizeof(T);
	unsigned long long nth = (unsigned long long)gridDim.x * blockDim.x;
	if ((n + E - 1) / E <= 2 * nth) ll_reduce_loop<1, T>(dst, a, in, inflag, out, outflag, n, op);
	else ll_reduce_loop<LL_UNROLL, T>(dst, a, in, inflag, out, outflag, n, op);
}

#define LL_REDUCE_OP(OPNAME, OPTYPE, TY, TR)                                                                   \
	extern "C" __global__ void __launch_bounds__(THREADS) simccl_ll_reduce_##OPNAME##_##TY(TR::Elt *dst,       \
		const TR::Elt *a, uint4 *in, unsigned inflag, uint4 *out, unsigned outflag, unsigned long long n, \
		unsigned long long scalar, unsigned int flags) {                                                       \
		OPTYPE<TR> op(scalar, flags);                                                                          \
		ll_reduce_body<TR::Elt>(dst, a, in, inflag, out, outflag, n, op);                                      \
	}

#define LL_REDUCE_ALL(TY, TR)                   \
	LL_REDUCE_OP(sum, OpSum, TY, TR)             \
	LL_REDUCE_OP(prod, OpProd, TY, TR)           \
	LL_REDUCE_OP(min, OpMin, TY, TR)             \
	LL_REDUCE_OP(max, OpMax, TY, TR)             \
	LL_REDUCE_OP(premulsum, OpPreMulSum, TY, TR)

LL_REDUCE_ALL(i8, TrI8)
LL_REDUCE_ALL(u8, TrU8)
LL_REDUCE_ALL(i32, TrI32)
LL_REDUCE_ALL(u32, TrU32)
LL_REDUCE_ALL(i64, TrI64)
LL_REDUCE_ALL(u64, TrU64)
LL_REDUCE_ALL(f16, TrF16)
LL_REDUCE_ALL(f32, F32Tr)
LL_REDUCE_ALL(f64, F64Tr)
LL_REDUCE_ALL(bf16, TrBF16)
LL_REDUCE_ALL(e4m3, TrE4M3)
LL_REDUCE_ALL(e5m2, TrE5M2)

// ---------------------------------------------------------------------------------------------
// LL128 (NCCL's LL128 protocol, reproduced): a message travels as 128-byte lines, each carrying
// 120 bytes of payload and an 8-byte flag in its last 8 bytes:
//     line i = { payload[120i .. 120i+119], flag (u64) }
// Eight consecutive threads of a warp carry a line, thread j its 16-byte chunk j (chunk 7: the
// last 8 payload bytes and the flag), stored with one warp-wide instruction and read back the
// same way. Like NCCL, this relies on the 128-byte line being written and read as a unit (a
// 128-byte aligned line from one warp instruction is one transaction on NVLink and in the GPU's
// memory): a line whose flag is right carries its data, with no fence. NCCL enables LL128 only
// where that holds (NVLink paths); the engine runs it where the planner, following NCCL, picks it.
// The flag is the message's number on its connection plus one. The receiver polls until every
// line of the warp's group carries its flag, then zeroes each flag word it read (the payload can
// stay: a later line is written as a unit, flag included), so a stale line never passes for the
// next message in the slot, the next launch or graph replay. Lines must be 128-byte aligned.
// Payload past nbytes is padded with zeros. Grid-stride by warp: a warp takes 4 lines per round,
// LL128_UNROLL rounds at once.

#define LL128_LINE_BYTES 128
#define LL128_PAYLOAD 120

// LL128_UNROLL: rounds of 4 lines a warp takes at once (their loads issued together) when it has
// more than 2 rounds.
#ifndef LL128_UNROLL
#define LL128_UNROLL 4
#endif

// ll128_wait_n waits until the lines base + u*stride + lane/8 (u < U; act[u]: the line
// exists) carry flag, zeroes their flag words and returns this thread's 16-byte chunks in v[u].
template <int U>
__device__ __forceinline__ void ll128_wait_n(ulonglong2 *in, unsigned long long base, unsigned long long stride, int lane,
	unsigned long long flag, const bool *act, ulonglong2 *v) {
	int j = lane & 7;
	unsigned spins = 0;
	unsigned long long t0 = 0;
	for (;;) {
		bool bad = false;
#pragma unroll
		for (int u = 0; u < U; u++) {
			v[u] = make_ulonglong2(0, 0);
			if (act[u]) {
				ulonglong2 *p = in + (base + u * stride + (lane >> 3)) * 8 + j;
				asm volatile("ld.volatile.global.v2.u64 {%0,%1}, [%2];" : "=l"(v[u].x), "=l"(v[u].y) : "l"(p) : "memory");
			}
		}
#pragma unroll
		for (int u = 0; u < U; u++) bad |= act[u] && j == 7 && v[u].y != flag;
		if (!__any_sync(0xffffffffu, bad)) break;
		if (++spins == 256) {
			unsigned long long t = ll_clock();
			if (t0 == 0) t0 = t;
			else if (t - t0 > LL_TIMEOUT_NS) __trap();
			spins = 0;
		}
	}
	if (j == 7) {
#pragma unroll
		for (int u = 0; u < U; u++)
			if (act[u]) {
				unsigned long long *f = (unsigned long long *)(in + (base + u * stride + (lane >> 3)) * 8 + j) + 1;
				asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(f), "l"(0ull) : "memory");
			}
	}
}

// ll128_put stores this thread's chunk of a line with flag (chunk 7 carries it in its high half).
__device__ __forceinline__ void ll128_put(ulonglong2 *out, unsigned long long line, int j, ulonglong2 v, unsigned long long flag, bool act) {
	if (j == 7) v.y = flag;
	__syncwarp();
	if (act) asm volatile("st.volatile.global.v2.u64 [%0], {%1,%2};" ::"l"(out + line * 8 + j), "l"(v.x), "l"(v.y) : "memory");
}

// ll128_raw_off is the payload byte offset of chunk j of a line and its length (16, or 8 for chunk 7).
__device__ __forceinline__ unsigned long long ll128_raw_off(unsigned long long line, int j) { return line * LL128_PAYLOAD + 16ull * j; }

// ll128_load reads chunk j's payload bytes of a raw buffer (zeros past nbytes; chunk 7's high half 0).
__device__ __forceinline__ ulonglong2 ll128_load(const uint8_t *src, unsigned long long line, int j, unsigned long long nbytes) {
	unsigned long long off = ll128_raw_off(line, j);
	int len = j == 7 ? 8 : 16;
	ulonglong2 v = make_ulonglong2(0, 0);
	if (((uintptr_t)src & 7) == 0 && off + len <= nbytes) {
		const unsigned long long *s = (const unsigned long long *)(src + off);
		v.x = s[0];
		if (len == 16) v.y = s[1];
		return v;
	}
	union { ulonglong2 v; uint8_t b[16]; } u;
	u.v = v;
	for (int k = 0; k < len && off + k < nbytes; k++) u.b[k] = src[off + k];
	return u.v;
}

// ll128_store writes chunk j's payload bytes to a raw buffer (up to nbytes).
__device__ __forceinline__ void ll128_store(uint8_t *dst, unsigned long long line, int j, unsigned long long nbytes, ulonglong2 v) {
	unsigned long long off = ll128_raw_off(line, j);
	int len = j == 7 ? 8 : 16;
	if (((uintptr_t)dst & 7) == 0 && off + len <= nbytes) {
		unsigned long long *d = (unsigned long long *)(dst + off);
		d[0] = v.x;
		if (len == 16) d[1] = v.y;
		return;
	}
	union { ulonglong2 v; uint8_t b[16]; } u;
	u.v = v;
	for (int k = 0; k < len && off + k < nbytes; k++) dst[off + k] = u.b[k];
}

// ll128_copy_loop is simccl_ll128_copy's loop, U rounds of 4 lines per warp at once.
template <int U>
__device__ __forceinline__ void ll128_copy_loop(uint8_t *dst, const uint8_t *src, ulonglong2 *in, unsigned inflag, ulonglong2 *out,
	unsigned outflag, unsigned long long nbytes) {
	int lane = threadIdx.x & 31, j = lane & 7;
	unsigned long long warp = ((unsigned long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	unsigned long long nwarps = ((unsigned long long)gridDim.x * blockDim.x) >> 5;
	unsigned long long lines = (nbytes + LL128_PAYLOAD - 1) / LL128_PAYLOAD;
	unsigned long long stride = nwarps * 4; // lines between a warp's rounds
	for (unsigned long long base = warp * 4; base < lines; base += stride * U) {
		bool act[U];
		ulonglong2 v[U];
#pragma unroll
		for (int u = 0; u < U; u++) act[u] = base + u * stride + (lane >> 3) < lines;
		if (in) ll128_wait_n<U>(in, base, stride, lane, inflag, act, v);
		else {
#pragma unroll
			for (int u = 0; u < U; u++) v[u] = act[u] ? ll128_load(src, base + u * stride + (lane >> 3), j, nbytes) : make_ulonglong2(0, 0);
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			unsigned long long line = base + u * stride + (lane >> 3);
			if (act[u] && dst) ll128_store(dst, line, j, nbytes, v[u]);
			if (out) ll128_put(out, line, j, v[u], outflag, act[u]);
		}
	}
}

// simccl_ll128_copy: as simccl_ll_copy, with LL128 lines (in, out: 128-byte aligned); a warp with
// at most 2 rounds of lines takes them one round at a time, one with more LL128_UNROLL at once.
extern "C" __global__ void __launch_bounds__(THREADS) simccl_ll128_copy(uint8_t *dst, const uint8_t *src, ulonglong2 *in,
	unsigned inflag, ulonglong2 *out, unsigned outflag, unsigned long long nbytes) {
	unsigned long long nwarps = ((unsigned long long)gridDim.x * blockDim.x) >> 5;
	if ((nbytes + LL128_PAYLOAD - 1) / LL128_PAYLOAD <= 2 * 4 * nwarps) ll128_copy_loop<1>(dst, src, in, inflag, out, outflag, nbytes);
	else ll128_copy_loop<LL128_UNROLL>(dst, src, in, inflag, out, outflag, nbytes);
}

// ll128_reduce_loop: dst[i] = op(a[i], m[i]) for the n elements of the message m (LL128 lines in),
// written to dst (if not null) and as LL128 lines with outflag to out (if not null). A line holds
// whole elements (120 is a multiple of every element size).
template <int U, class T, class Op>
__device__ __forceinline__ void ll128_reduce_loop(T *dst, const T *a, ulonglong2 *in, unsigned inflag, ulonglong2 *out,
	unsigned outflag, unsigned long long n, const Op &op) {
	constexpr int E = 16 / sizeof(T);
	int lane = threadIdx.x & 31, j = lane & 7;
	unsigned long long warp = ((unsigned long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	unsigned long long nwarps = ((unsigned long long)gridDim.x * blockDim.x) >> 5;
	unsigned long long nbytes = n * sizeof(T);
	unsigned long long lines = (nbytes + LL128_PAYLOAD - 1) / LL128_PAYLOAD;
	unsigned long long stride = nwarps * 4;
	int ne = j == 7 ? E / 2 : E;
	for (unsigned long long base = warp * 4; base < lines; base += stride * U) {
		bool act[U];
		ulonglong2 mv[U], xv[U];
#pragma unroll
		for (int u = 0; u < U; u++) {
			unsigned long long line = base + u * stride + (lane >> 3);
			act[u] = line < lines;
			xv[u] = act[u] ? ll128_load((const uint8_t *)a, line, j, nbytes) : make_ulonglong2(0, 0);
		}
		ll128_wait_n<U>(in, base, stride, lane, inflag, act, mv);
#pragma unroll
		for (int u = 0; u < U; u++) {
			unsigned long long line = base + u * stride + (lane >> 3);
			union { ulonglong2 v; T e[E]; } m, x, r;
			m.v = mv[u];
			x.v = xv[u];
			r.v = make_ulonglong2(0, 0);
			if (act[u]) {
				unsigned long long e0 = ll128_raw_off(line, j) / sizeof(T);
#pragma unroll
				for (int k = 0; k < E; k++)
					if (k < ne && e0 + k < n) r.e[k] = op(x.e[k], m.e[k]);
				if (dst) ll128_store((uint8_t *)dst, line, j, nbytes, r.v);
			}
			if (out) ll128_put(out, line, j, r.v, outflag, act[u]);
		}
	}
}

template <class T, class Op>
__device__ __forceinline__ void ll128_reduce_body(T *dst, const T *a, ulonglong2 *in, unsigned inflag, ulonglong2 *out,
	unsigned outflag, unsigned long long n, const Op &op) {
	unsigned long long nwarps = ((unsigned long long)gridDim.x * blockDim.x) >> 5;
	if ((n * sizeof(T) + LL128_PAYLOAD - 1) / LL128_PAYLOAD <= 2 * 4 * nwarps) ll128_reduce_loop<1, T>(dst, a, in, inflag, out, outflag, n, op);
	else ll128_reduce_loop<LL128_UNROLL, T>(dst, a, in, inflag, out, outflag, n, op);
}

#define LL128_REDUCE_OP(OPNAME, OPTYPE, TY, TR)                                                                   \
	extern "C" __global__ void __launch_bounds__(THREADS) simccl_ll128_reduce_##OPNAME##_##TY(TR::Elt *dst,       \
		const TR::Elt *a, ulonglong2 *in, unsigned inflag, ulonglong2 *out, unsigned outflag, unsigned long long n, \
		unsigned long long scalar, unsigned int flags) {                                                          \
		OPTYPE<TR> op(scalar, flags);                                                                             \
		ll128_reduce_body<TR::Elt>(dst, a, in, inflag, out, outflag, n, op);                                      \
	}

#define LL128_REDUCE_ALL(TY, TR)                   \
	LL128_REDUCE_OP(sum, OpSum, TY, TR)             \
	LL128_REDUCE_OP(prod, OpProd, TY, TR)           \
	LL128_REDUCE_OP(min, OpMin, TY, TR)             \
	LL128_REDUCE_OP(max, OpMax, TY, TR)             \
	LL128_REDUCE_OP(premulsum, OpPreMulSum, TY, TR)

LL128_REDUCE_ALL(i8, TrI8)
LL128_REDUCE_ALL(u8, TrU8)
LL128_REDUCE_ALL(i32, TrI32)
LL128_REDUCE_ALL(u32, TrU32)
LL128_REDUCE_ALL(i64, TrI64)
LL128_REDUCE_ALL(u64, TrU64)
LL128_REDUCE_ALL(f16, TrF16)
LL128_REDUCE_ALL(f32, F32Tr)
LL128_REDUCE_ALL(f64, F64Tr)
LL128_REDUCE_ALL(bf16, TrBF16)
LL128_REDUCE_ALL(e4m3, TrE4M3)
LL128_REDUCE_ALL(e5m2, TrE5M2)
