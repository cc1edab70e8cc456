/*
 * A stand-in for the CUDA runtime (or, built with -DFAKE_HIP, the HIP
 * runtime) whose "device" memory is host memory, for tests of the dlopen
 * bindings on machines without a GPU.
 *
 * Controls, read from the environment at each call:
 *   FAKE_FAIL=<symbol>    that entry point returns FAKE_CODE (default 2)
 *   FAKE_STREAM_PENDING=n streams created from now on report "not ready" to
 *                         the next n queries; n < 0 means forever
 *   FAKE_DEVICES=n        the number of devices (default 1); with 0 the
 *                         device count fails with "no device" (100)
 * The current device belongs to the calling thread, as in the real runtimes
 * (fake_current_device, for the fake RCCL/NCCL built with it).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef FAKE_HIP
#define SYM(cuda, hip) hip
#else
#define SYM(cuda, hip) cuda
#endif

#define NOT_READY 600
#define INVALID_VALUE 1
#define NO_DEVICE 100

__thread int fake_current_device;

static int devices(void) {
	const char *n = getenv("FAKE_DEVICES");
	return n ? atoi(n) : 1;
}

static int fail(const char *name) {
	const char *f = getenv("FAKE_FAIL");
	if (f == NULL || strcmp(f, name) != 0) return 0;
	const char *c = getenv("FAKE_CODE");
	return c ? atoi(c) : 2;
}

#define FAIL(name) do { int rc_ = fail(name); if (rc_) return rc_; } while (0)

struct fake_stream { int pending; };

int SYM(cudaMalloc, hipMalloc)(void **p, size_t n) {
	FAIL(SYM("cudaMalloc", "hipMalloc"));
	*p = malloc(n);
	return *p ? 0 : 2;
}

int SYM(cudaFree, hipFree)(void *p) {
	FAIL(SYM("cudaFree", "hipFree"));
	free(p);
	return 0;
}

int SYM(cudaHostAlloc, hipHostMalloc)(void **p, size_t n, unsigned int flags) {
	FAIL(SYM("cudaHostAlloc", "hipHostMalloc"));
	if (flags != 0) return INVALID_VALUE;
	*p = calloc(1, n);
	return *p ? 0 : 2;
}

int SYM(cudaFreeHost, hipHostFree)(void *p) {
	FAIL(SYM("cudaFreeHost", "hipHostFree"));
	free(p);
	return 0;
}

int SYM(cudaMemcpy, hipMemcpy)(void *dst, const void *src, size_t n, int kind) {
	FAIL(SYM("cudaMemcpy", "hipMemcpy"));
	if (kind < 0 || kind > 4) return INVALID_VALUE;
	memmove(dst, src, n);
	return 0;
}

int SYM(cudaStreamCreate, hipStreamCreate)(void **s) {
	FAIL(SYM("cudaStreamCreate", "hipStreamCreate"));
	struct fake_stream *fs = calloc(1, sizeof *fs);
	const char *p = getenv("FAKE_STREAM_PENDING");
	fs->pending = p ? atoi(p) : 0;
	*s = fs;
	return 0;
}

int SYM(cudaStreamDestroy, hipStreamDestroy)(void *s) {
	free(s);
	return 0;
}

int SYM(cudaStreamQuery, hipStreamQuery)(void *s) {
	FAIL(SYM("cudaStreamQuery", "hipStreamQuery"));
	struct fake_stream *fs = s;
	if (fs == NULL || fs->pending == 0) return 0;
	if (fs->pending > 0) fs->pending--;
	return NOT_READY;
}

int SYM(cudaStreamSynchronize, hipStreamSynchronize)(void *s) {
	FAIL(SYM("cudaStreamSynchronize", "hipStreamSynchronize"));
	struct fake_stream *fs = s;
	if (fs != NULL && fs->pending < 0) return NOT_READY;
	if (fs != NULL) fs->pending = 0;
	return 0;
}

int SYM(cudaGetDeviceCount, hipGetDeviceCount)(int *n) {
	FAIL(SYM("cudaGetDeviceCount", "hipGetDeviceCount"));
	*n = devices();
	/* The real runtimes answer "no device" rather than a count of 0. */
	return *n > 0 ? 0 : NO_DEVICE;
}

int SYM(cudaSetDevice, hipSetDevice)(int d) {
	if (d < 0 || d >= devices()) return 101; /* invalid device ordinal */
	fake_current_device = d;
	return 0;
}

int SYM(cudaDeviceSynchronize, hipDeviceSynchronize)(void) {
	FAIL(SYM("cudaDeviceSynchronize", "hipDeviceSynchronize"));
	return 0;
}

const char *SYM(cudaGetErrorString, hipGetErrorString)(int code) {
	switch (code) {
	case 0: return "no error";
	case INVALID_VALUE: return "fake: invalid argument";
	case 2: return "fake: out of memory";
	case NO_DEVICE: return "fake: no device";
	case 101: return "fake: invalid device ordinal";
	case NOT_READY: return "fake: device not ready";
	}
	return "fake: unknown error";
}
