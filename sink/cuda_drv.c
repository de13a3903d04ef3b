/*
 * cuda_drv.c - the CUDA driver, loaded with dlopen at first use (see
 * cuda_drv.h). Where the toolkit's cuda.h is installed (the Makefile
 * defines RL_HAVE_CUDA_H), this file is compiled against it too and
 * checks that cuda_drv.h declares the same layouts, values and
 * prototypes, so a driver ABI the declarations miss fails the build.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_drv.h"

#ifdef RL_HAVE_CUDA_H
#include <cuda.h>

#define SAME_TYPE(a, b) __builtin_types_compatible_p(a, b)
#define SAME_FIELD(f) \
	_Static_assert(offsetof(CUDA_MEMCPY2D, f) == offsetof(struct rlcu_memcpy2d, f) && \
		       sizeof(((CUDA_MEMCPY2D *)0)->f) == sizeof(((struct rlcu_memcpy2d *)0)->f), \
		       "CUDA_MEMCPY2D." #f)
_Static_assert(sizeof(CUresult) == sizeof(rlcu_result), "CUresult");
_Static_assert(SAME_TYPE(CUdevice, rlcu_device), "CUdevice");
_Static_assert(SAME_TYPE(CUdeviceptr, rlcu_dptr), "CUdeviceptr");
_Static_assert(SAME_TYPE(CUcontext, rlcu_ctx), "CUcontext");
_Static_assert(SAME_TYPE(CUstream, rlcu_stream), "CUstream");
_Static_assert(SAME_TYPE(CUevent, rlcu_event), "CUevent");
_Static_assert(CUDA_SUCCESS == RLCU_SUCCESS && CUDA_ERROR_INVALID_VALUE == RLCU_ERROR_INVALID_VALUE &&
	       CUDA_ERROR_OUT_OF_MEMORY == RLCU_ERROR_OUT_OF_MEMORY &&
	       CUDA_ERROR_NO_DEVICE == RLCU_ERROR_NO_DEVICE &&
	       CUDA_ERROR_INVALID_DEVICE == RLCU_ERROR_INVALID_DEVICE &&
	       CUDA_ERROR_NOT_READY == RLCU_ERROR_NOT_READY &&
	       CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED == RLCU_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
	       "CUresult values");
_Static_assert(CU_MEMORYTYPE_HOST == RLCU_MEMORYTYPE_HOST &&
	       CU_MEMORYTYPE_DEVICE == RLCU_MEMORYTYPE_DEVICE &&
	       CU_STREAM_NON_BLOCKING == RLCU_STREAM_NON_BLOCKING &&
	       CU_EVENT_DISABLE_TIMING == RLCU_EVENT_DISABLE_TIMING &&
	       CU_MEMHOSTREGISTER_PORTABLE == RLCU_MEMHOSTREGISTER_PORTABLE &&
	       CU_MEMHOSTALLOC_PORTABLE == RLCU_MEMHOSTALLOC_PORTABLE &&
	       CU_DEVICE_ATTRIBUTE_MAX_PITCH == RLCU_DEVICE_ATTRIBUTE_MAX_PITCH, "flag values");
_Static_assert(sizeof(CUDA_MEMCPY2D) == sizeof(struct rlcu_memcpy2d), "CUDA_MEMCPY2D");
SAME_FIELD(srcXInBytes); SAME_FIELD(srcY); SAME_FIELD(srcMemoryType); SAME_FIELD(srcHost);
SAME_FIELD(srcDevice); SAME_FIELD(srcArray); SAME_FIELD(srcPitch); SAME_FIELD(dstXInBytes);
SAME_FIELD(dstY); SAME_FIELD(dstMemoryType); SAME_FIELD(dstHost); SAME_FIELD(dstDevice);
SAME_FIELD(dstArray); SAME_FIELD(dstPitch); SAME_FIELD(WidthInBytes); SAME_FIELD(Height);
/* A prototype matches when cuda.h's and ours both have the parameters
 * listed here (whose types are checked above) and results of CUresult's
 * size (an enum in cuda.h, an int here). */
#define SAME_PROTO(ours, cuda_fn) \
	_Static_assert(SAME_TYPE(__typeof__(((struct rlcu_api *)0)->ours), \
				 rlcu_result (*)(RLCU_PARAMS_##ours)) && \
		       SAME_TYPE(__typeof__(&cuda_fn), CUresult (*)(RLCU_PARAMS_##ours)), \
		       "prototype of " #cuda_fn)
#define RLCU_PARAMS_Init unsigned int
#define RLCU_PARAMS_DeviceGetCount int *
#define RLCU_PARAMS_DeviceGet CUdevice *, int
#define RLCU_PARAMS_DevicePrimaryCtxRetain CUcontext *, CUdevice
#define RLCU_PARAMS_DevicePrimaryCtxRelease CUdevice
#define RLCU_PARAMS_CtxPushCurrent CUcontext
#define RLCU_PARAMS_CtxPopCurrent CUcontext *
#define RLCU_PARAMS_StreamCreate CUstream *, unsigned int
#define RLCU_PARAMS_StreamDestroy CUstream
#define RLCU_PARAMS_StreamSynchronize CUstream
#define RLCU_PARAMS_EventCreate CUevent *, unsigned int
#define RLCU_PARAMS_EventDestroy CUevent
#define RLCU_PARAMS_EventRecord CUevent, CUstream
#define RLCU_PARAMS_EventQuery CUevent
#define RLCU_PARAMS_EventSynchronize CUevent
#define RLCU_PARAMS_MemAlloc CUdeviceptr *, size_t
#define RLCU_PARAMS_MemFree CUdeviceptr
#define RLCU_PARAMS_MemHostRegister void *, size_t, unsigned int
#define RLCU_PARAMS_MemHostUnregister void *
#define RLCU_PARAMS_MemcpyHtoDAsync CUdeviceptr, const void *, size_t, CUstream
#define RLCU_PARAMS_MemcpyDtoH void *, CUdeviceptr, size_t
#define RLCU_PARAMS_StreamWaitEvent CUstream, CUevent, unsigned int
#define RLCU_PARAMS_CtxSynchronize void
#define RLCU_PARAMS_MemHostAlloc void **, size_t, unsigned int
#define RLCU_PARAMS_MemFreeHost void *
#define RLCU_PARAMS_MemGetInfo size_t *, size_t *
SAME_PROTO(Init, cuInit);
SAME_PROTO(DeviceGetCount, cuDeviceGetCount);
SAME_PROTO(DeviceGet, cuDeviceGet);
SAME_PROTO(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain);
SAME_PROTO(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2);
SAME_PROTO(CtxPushCurrent, cuCtxPushCurrent_v2);
SAME_PROTO(CtxPopCurrent, cuCtxPopCurrent_v2);
SAME_PROTO(StreamCreate, cuStreamCreate);
SAME_PROTO(StreamDestroy, cuStreamDestroy_v2);
SAME_PROTO(StreamSynchronize, cuStreamSynchronize);
SAME_PROTO(EventCreate, cuEventCreate);
SAME_PROTO(EventDestroy, cuEventDestroy_v2);
SAME_PROTO(EventRecord, cuEventRecord);
SAME_PROTO(EventQuery, cuEventQuery);
SAME_PROTO(EventSynchronize, cuEventSynchronize);
SAME_PROTO(MemAlloc, cuMemAlloc_v2);
SAME_PROTO(MemFree, cuMemFree_v2);
SAME_PROTO(MemHostRegister, cuMemHostRegister_v2);
SAME_PROTO(MemHostUnregister, cuMemHostUnregister);
SAME_PROTO(MemcpyHtoDAsync, cuMemcpyHtoDAsync_v2);
/* Its struct is checked field by field above. */
_Static_assert(SAME_TYPE(__typeof__(&cuMemcpy2DAsync_v2), CUresult (*)(const CUDA_MEMCPY2D *, CUstream)) &&
	       SAME_TYPE(__typeof__(((struct rlcu_api *)0)->Memcpy2DAsync),
			 rlcu_result (*)(const struct rlcu_memcpy2d *, rlcu_stream)),
	       "prototype of cuMemcpy2DAsync_v2");
SAME_PROTO(MemcpyDtoH, cuMemcpyDtoH_v2);
SAME_PROTO(StreamWaitEvent, cuStreamWaitEvent);
SAME_PROTO(CtxSynchronize, cuCtxSynchronize);
SAME_PROTO(MemHostAlloc, cuMemHostAlloc);
SAME_PROTO(MemFreeHost, cuMemFreeHost);
SAME_PROTO(MemGetInfo, cuMemGetInfo_v2);
/* CUdevice_attribute is an enum in cuda.h, an int here (same size). */
_Static_assert(sizeof(CUdevice_attribute) == sizeof(int) &&
	       SAME_TYPE(__typeof__(((struct rlcu_api *)0)->DeviceGetAttribute),
			 rlcu_result (*)(int *, int, rlcu_device)) &&
	       SAME_TYPE(__typeof__(&cuDeviceGetAttribute),
			 CUresult (*)(int *, CUdevice_attribute, CUdevice)),
	       "prototype of cuDeviceGetAttribute");
_Static_assert(SAME_TYPE(__typeof__(&cuGetErrorName), CUresult (*)(CUresult, const char **)) &&
	       SAME_TYPE(__typeof__(((struct rlcu_api *)0)->GetErrorName),
			 rlcu_result (*)(rlcu_result, const char **)),
	       "prototype of cuGetErrorName");
#endif /* RL_HAVE_CUDA_H */

/* The exported symbol of each entry point: the _v2 one where cuda.h maps
 * the name to it (the driver keeps the old one for old binaries). */
#define ENTRY(f, sym) { offsetof(struct rlcu_api, f), sym }
static const struct { size_t off; const char *sym; } entries[] = {
	ENTRY(Init, "cuInit"),
	ENTRY(DeviceGetCount, "cuDeviceGetCount"),
	ENTRY(DeviceGet, "cuDeviceGet"),
	ENTRY(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
	ENTRY(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
	ENTRY(CtxPushCurrent, "cuCtxPushCurrent_v2"),
	ENTRY(CtxPopCurrent, "cuCtxPopCurrent_v2"),
	ENTRY(StreamCreate, "cuStreamCreate"),
	ENTRY(StreamDestroy, "cuStreamDestroy_v2"),
	ENTRY(StreamSynchronize, "cuStreamSynchronize"),
	ENTRY(EventCreate, "cuEventCreate"),
	ENTRY(EventDestroy, "cuEventDestroy_v2"),
	ENTRY(EventRecord, "cuEventRecord"),
	ENTRY(EventQuery, "cuEventQuery"),
	ENTRY(EventSynchronize, "cuEventSynchronize"),
	ENTRY(MemAlloc, "cuMemAlloc_v2"),
	ENTRY(MemFree, "cuMemFree_v2"),
	ENTRY(MemHostRegister, "cuMemHostRegister_v2"),
	ENTRY(MemHostUnregister, "cuMemHostUnregister"),
	ENTRY(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
	ENTRY(Memcpy2DAsync, "cuMemcpy2DAsync_v2"),
	ENTRY(MemcpyDtoH, "cuMemcpyDtoH_v2"),
	ENTRY(GetErrorName, "cuGetErrorName"),
	ENTRY(StreamWaitEvent, "cuStreamWaitEvent"),
	ENTRY(CtxSynchronize, "cuCtxSynchronize"),
	ENTRY(MemHostAlloc, "cuMemHostAlloc"),
	ENTRY(MemFreeHost, "cuMemFreeHost"),
	ENTRY(MemGetInfo, "cuMemGetInfo_v2"),
	ENTRY(DeviceGetAttribute, "cuDeviceGetAttribute"),
};

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER; /* api, loaded */
static struct rlcu_api api;
static int loaded;
static pid_t loaded_by;         /* the process that ran cuInit */

int rlcu_forked(struct cm_err *e)
{
	pid_t me = getpid(), by;

	pthread_mutex_lock(&load_lock);
	by = loaded ? loaded_by : me;
	pthread_mutex_unlock(&load_lock);
	if (by == me)
		return 0;
	return cm_err_set(e, RL_E_CUDA_DRIVER, "CUDA in a forked child (pid %d): the driver was "
			  "initialized by process %d before fork(), and a child cannot use it; "
			  "start CUDA work in a spawned process", (int)me, (int)by);
}

/* Resolves every entry point of h into a; 0, or -1 naming the missing one. */
static int resolve(void *h, struct rlcu_api *a, const char *file, struct cm_err *e)
{
	for (size_t i = 0; i < CM_ARRAY_SIZE(entries); i++) {
		void *f = dlsym(h, entries[i].sym);

		if (!f)
			return cm_err_set(e, RL_E_CUDA_DRIVER,
					  "CUDA driver %s lacks %s (a driver older than CUDA 4.0?)",
					  file, entries[i].sym);
		memcpy((char *)a + entries[i].off, &f, sizeof(f));
	}
	return 0;
}

const struct rlcu_api *rlcu_load(struct cm_err *e)
{
	const char *file = getenv("RL_LIBCUDA");
	struct rlcu_api a;
	char name[96];
	void *h;
	int r;

	if (!file || !*file)
		file = "libcuda.so.1";
	if (rlcu_forked(e) < 0)
		return NULL;
	pthread_mutex_lock(&load_lock);
	if (loaded) {
		pthread_mutex_unlock(&load_lock);
		return &api;
	}
	h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *why = dlerror();

		cm_err_set(e, RL_E_CUDA_DRIVER, "no CUDA driver: cannot load %s: %s", file,
			   why ? why : "?");
		pthread_mutex_unlock(&load_lock);
		return NULL;
	}
	if (resolve(h, &a, file, e) < 0) {
		dlclose(h);
		pthread_mutex_unlock(&load_lock);
		return NULL;
	}
	r = a.Init(0);
	if (r != RLCU_SUCCESS) {
		cm_err_set(e, RL_E_CUDA_DRIVER, "CUDA driver %s: cuInit failed: %s", file,
			   rlcu_name(&a, r, name, sizeof(name)));
		pthread_mutex_unlock(&load_lock);
		return NULL; /* kept loaded: the driver may hold state from cuInit */
	}
	api = a;
	loaded = 1;
	loaded_by = getpid();
	pthread_mutex_unlock(&load_lock);
	return &api;
}

/* cuda.h's names of CUresult values (CUDA 13), for drivers whose
 * cuGetErrorName does not know a code (older than the code, or a stub):
 * "CUDA_ERROR_NOT_SUPPORTED (801)" rather than "CUDA error (801)". */
#define E(name, v) { v, "CUDA_ERROR_" #name }
static const struct { int r; const char *name; } cu_errors[] = {
	{ 0, "CUDA_SUCCESS" },
	E(INVALID_VALUE, 1),
	E(OUT_OF_MEMORY, 2),
	E(NOT_INITIALIZED, 3),
	E(DEINITIALIZED, 4),
	E(PROFILER_DISABLED, 5),
	E(PROFILER_NOT_INITIALIZED, 6),
	E(PROFILER_ALREADY_STARTED, 7),
	E(PROFILER_ALREADY_STOPPED, 8),
	E(STUB_LIBRARY, 34),
	E(CALL_REQUIRES_NEWER_DRIVER, 36),
	E(DEVICE_UNAVAILABLE, 46),
	E(NO_DEVICE, 100),
	E(INVALID_DEVICE, 101),
	E(DEVICE_NOT_LICENSED, 102),
	E(INVALID_IMAGE, 200),
	E(INVALID_CONTEXT, 201),
	E(CONTEXT_ALREADY_CURRENT, 202),
	E(MAP_FAILED, 205),
	E(UNMAP_FAILED, 206),
	E(ARRAY_IS_MAPPED, 207),
	E(ALREADY_MAPPED, 208),
	E(NO_BINARY_FOR_GPU, 209),
	E(ALREADY_ACQUIRED, 210),
	E(NOT_MAPPED, 211),
	E(NOT_MAPPED_AS_ARRAY, 212),
	E(NOT_MAPPED_AS_POINTER, 213),
	E(ECC_UNCORRECTABLE, 214),
	E(UNSUPPORTED_LIMIT, 215),
	E(CONTEXT_ALREADY_IN_USE, 216),
	E(PEER_ACCESS_UNSUPPORTED, 217),
	E(INVALID_PTX, 218),
	E(INVALID_GRAPHICS_CONTEXT, 219),
	E(NVLINK_UNCORRECTABLE, 220),
	E(JIT_COMPILER_NOT_FOUND, 221),
	E(UNSUPPORTED_PTX_VERSION, 222),
	E(JIT_COMPILATION_DISABLED, 223),
	E(UNSUPPORTED_EXEC_AFFINITY, 224),
	E(UNSUPPORTED_DEVSIDE_SYNC, 225),
	E(CONTAINED, 226),
	E(INVALID_SOURCE, 300),
	E(FILE_NOT_FOUND, 301),
	E(SHARED_OBJECT_SYMBOL_NOT_FOUND, 302),
	E(SHARED_OBJECT_INIT_FAILED, 303),
	E(OPERATING_SYSTEM, 304),
	E(INVALID_HANDLE, 400),
	E(ILLEGAL_STATE, 401),
	E(LOSSY_QUERY, 402),
	E(NOT_FOUND, 500),
	E(NOT_READY, 600),
	E(ILLEGAL_ADDRESS, 700),
	E(LAUNCH_OUT_OF_RESOURCES, 701),
	E(LAUNCH_TIMEOUT, 702),
	E(LAUNCH_INCOMPATIBLE_TEXTURING, 703),
	E(PEER_ACCESS_ALREADY_ENABLED, 704),
	E(PEER_ACCESS_NOT_ENABLED, 705),
	E(PRIMARY_CONTEXT_ACTIVE, 708),
	E(CONTEXT_IS_DESTROYED, 709),
	E(ASSERT, 710),
	E(TOO_MANY_PEERS, 711),
	E(HOST_MEMORY_ALREADY_REGISTERED, 712),
	E(HOST_MEMORY_NOT_REGISTERED, 713),
	E(HARDWARE_STACK_ERROR, 714),
	E(ILLEGAL_INSTRUCTION, 715),
	E(MISALIGNED_ADDRESS, 716),
	E(INVALID_ADDRESS_SPACE, 717),
	E(INVALID_PC, 718),
	E(LAUNCH_FAILED, 719),
	E(COOPERATIVE_LAUNCH_TOO_LARGE, 720),
	E(TENSOR_MEMORY_LEAK, 721),
	E(NOT_PERMITTED, 800),
	E(NOT_SUPPORTED, 801),
	E(SYSTEM_NOT_READY, 802),
	E(SYSTEM_DRIVER_MISMATCH, 803),
	E(COMPAT_NOT_SUPPORTED_ON_DEVICE, 804),
	E(MPS_CONNECTION_FAILED, 805),
	E(MPS_RPC_FAILURE, 806),
	E(MPS_SERVER_NOT_READY, 807),
	E(MPS_MAX_CLIENTS_REACHED, 808),
	E(MPS_MAX_CONNECTIONS_REACHED, 809),
	E(MPS_CLIENT_TERMINATED, 810),
	E(CDP_NOT_SUPPORTED, 811),
	E(CDP_VERSION_MISMATCH, 812),
	E(STREAM_CAPTURE_UNSUPPORTED, 900),
	E(STREAM_CAPTURE_INVALIDATED, 901),
	E(STREAM_CAPTURE_MERGE, 902),
	E(STREAM_CAPTURE_UNMATCHED, 903),
	E(STREAM_CAPTURE_UNJOINED, 904),
	E(STREAM_CAPTURE_ISOLATION, 905),
	E(STREAM_CAPTURE_IMPLICIT, 906),
	E(CAPTURED_EVENT, 907),
	E(STREAM_CAPTURE_WRONG_THREAD, 908),
	E(TIMEOUT, 909),
	E(GRAPH_EXEC_UPDATE_FAILURE, 910),
	E(EXTERNAL_DEVICE, 911),
	E(INVALID_CLUSTER_SIZE, 912),
	E(FUNCTION_NOT_LOADED, 913),
	E(INVALID_RESOURCE_TYPE, 914),
	E(INVALID_RESOURCE_CONFIGURATION, 915),
	E(KEY_ROTATION, 916),
	E(UNKNOWN, 999),
};
#undef E

#ifdef RL_HAVE_CUDA_H /* each value as cuda.h has it */
#define CHK(name, v) _Static_assert(CUDA_ERROR_##name == v, "CUDA_ERROR_" #name)
CHK(INVALID_VALUE, 1); CHK(OUT_OF_MEMORY, 2); CHK(NOT_INITIALIZED, 3); CHK(DEINITIALIZED, 4);
CHK(PROFILER_DISABLED, 5); CHK(PROFILER_NOT_INITIALIZED, 6); CHK(PROFILER_ALREADY_STARTED, 7);
CHK(PROFILER_ALREADY_STOPPED, 8); CHK(STUB_LIBRARY, 34); CHK(CALL_REQUIRES_NEWER_DRIVER, 36);
CHK(DEVICE_UNAVAILABLE, 46); CHK(NO_DEVICE, 100); CHK(INVALID_DEVICE, 101);
CHK(DEVICE_NOT_LICENSED, 102); CHK(INVALID_IMAGE, 200); CHK(INVALID_CONTEXT, 201);
CHK(CONTEXT_ALREADY_CURRENT, 202); CHK(MAP_FAILED, 205); CHK(UNMAP_FAILED, 206);
CHK(ARRAY_IS_MAPPED, 207); CHK(ALREADY_MAPPED, 208); CHK(NO_BINARY_FOR_GPU, 209);
CHK(ALREADY_ACQUIRED, 210); CHK(NOT_MAPPED, 211); CHK(NOT_MAPPED_AS_ARRAY, 212);
CHK(NOT_MAPPED_AS_POINTER, 213); CHK(ECC_UNCORRECTABLE, 214); CHK(UNSUPPORTED_LIMIT, 215);
CHK(CONTEXT_ALREADY_IN_USE, 216); CHK(PEER_ACCESS_UNSUPPORTED, 217); CHK(INVALID_PTX, 218);
CHK(INVALID_GRAPHICS_CONTEXT, 219); CHK(NVLINK_UNCORRECTABLE, 220); CHK(JIT_COMPILER_NOT_FOUND,
221); CHK(UNSUPPORTED_PTX_VERSION, 222); CHK(JIT_COMPILATION_DISABLED, 223);
CHK(UNSUPPORTED_EXEC_AFFINITY, 224); CHK(UNSUPPORTED_DEVSIDE_SYNC, 225); CHK(CONTAINED, 226);
CHK(INVALID_SOURCE, 300); CHK(FILE_NOT_FOUND, 301); CHK(SHARED_OBJECT_SYMBOL_NOT_FOUND, 302);
CHK(SHARED_OBJECT_INIT_FAILED, 303); CHK(OPERATING_SYSTEM, 304); CHK(INVALID_HANDLE, 400);
CHK(ILLEGAL_STATE, 401); CHK(LOSSY_QUERY, 402); CHK(NOT_FOUND, 500); CHK(NOT_READY, 600);
CHK(ILLEGAL_ADDRESS, 700); CHK(LAUNCH_OUT_OF_RESOURCES, 701); CHK(LAUNCH_TIMEOUT, 702);
CHK(LAUNCH_INCOMPATIBLE_TEXTURING, 703); CHK(PEER_ACCESS_ALREADY_ENABLED, 704);
CHK(PEER_ACCESS_NOT_ENABLED, 705); CHK(PRIMARY_CONTEXT_ACTIVE, 708); CHK(CONTEXT_IS_DESTROYED,
709); CHK(ASSERT, 710); CHK(TOO_MANY_PEERS, 711); CHK(HOST_MEMORY_ALREADY_REGISTERED, 712);
CHK(HOST_MEMORY_NOT_REGISTERED, 713); CHK(HARDWARE_STACK_ERROR, 714); CHK(ILLEGAL_INSTRUCTION,
715); CHK(MISALIGNED_ADDRESS, 716); CHK(INVALID_ADDRESS_SPACE, 717); CHK(INVALID_PC, 718);
CHK(LAUNCH_FAILED, 719); CHK(COOPERATIVE_LAUNCH_TOO_LARGE, 720); CHK(TENSOR_MEMORY_LEAK, 721);
CHK(NOT_PERMITTED, 800); CHK(NOT_SUPPORTED, 801); CHK(SYSTEM_NOT_READY, 802);
CHK(SYSTEM_DRIVER_MISMATCH, 803); CHK(COMPAT_NOT_SUPPORTED_ON_DEVICE, 804);
CHK(MPS_CONNECTION_FAILED, 805); CHK(MPS_RPC_FAILURE, 806); CHK(MPS_SERVER_NOT_READY, 807);
CHK(MPS_MAX_CLIENTS_REACHED, 808); CHK(MPS_MAX_CONNECTIONS_REACHED, 809);
CHK(MPS_CLIENT_TERMINATED, 810); CHK(CDP_NOT_SUPPORTED, 811); CHK(CDP_VERSION_MISMATCH, 812);
CHK(STREAM_CAPTURE_UNSUPPORTED, 900); CHK(STREAM_CAPTURE_INVALIDATED, 901);
CHK(STREAM_CAPTURE_MERGE, 902); CHK(STREAM_CAPTURE_UNMATCHED, 903); CHK(STREAM_CAPTURE_UNJOINED,
904); CHK(STREAM_CAPTURE_ISOLATION, 905); CHK(STREAM_CAPTURE_IMPLICIT, 906); CHK(CAPTURED_EVENT,
907); CHK(STREAM_CAPTURE_WRONG_THREAD, 908); CHK(TIMEOUT, 909); CHK(GRAPH_EXEC_UPDATE_FAILURE,
910); CHK(EXTERNAL_DEVICE, 911); CHK(INVALID_CLUSTER_SIZE, 912); CHK(FUNCTION_NOT_LOADED, 913);
CHK(INVALID_RESOURCE_TYPE, 914); CHK(INVALID_RESOURCE_CONFIGURATION, 915); CHK(KEY_ROTATION,
916); CHK(UNKNOWN, 999);
#undef CHK
#endif

/* The table's name for r, or NULL. */
static const char *cu_error_name(rlcu_result r)
{
	for (size_t i = 0; i < CM_ARRAY_SIZE(cu_errors); i++)
		if (cu_errors[i].r == r)
			return cu_errors[i].name;
	return NULL;
}

const char *rlcu_name(const struct rlcu_api *cu, rlcu_result r, char *buf, size_t len)
{
	const char *n = NULL;

	if (!cu || cu->GetErrorName(r, &n) != RLCU_SUCCESS || !n)
		n = cu_error_name(r);
	if (!n)
		n = "CUDA error";
	snprintf(buf, len, "%s (%d)", n, r);
	return buf;
}
