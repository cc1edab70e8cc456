/*
 * A stand-in for RCCL/NCCL over host memory, for tests of the dlopen
 * bindings without a GPU. A communicator of N ranks behaves as if every rank
 * held the same send buffer as the caller, so each collective has a known
 * result computed locally:
 *   all-reduce     x op x op ... (N times): sum = repeated addition,
 *                  prod = repeated product, max = min = avg = x
 *   reduce-scatter the same on block <rank> of send
 *   all-gather     N copies of send
 *   broadcast      a copy of send
 *   all-to-all     every block of recv = block <rank> of send
 *   send/recv      in a group, a receive from any peer gets what this rank
 *                  sends to itself (its peer's identical send to it)
 *
 * Controls, read from the environment at each call:
 *   FAKENCCL_FAIL=<symbol>  that entry point returns FAKENCCL_CODE (default 4)
 *                           and ncclGetLastError describes it
 *   FAKENCCL_VERSION=<n>    the code ncclGetVersion reports (default 22304)
 *   FAKENCCL_INIT_WAIT=<p>  ncclCommInitRank blocks, as when peers are
 *                           missing, until the file p exists; once released,
 *                           ncclCommAbort writes "aborted" into p
 *   FAKENCCL_SEND_SLEEP_US=<n>  ncclSend sleeps n µs (its thread may lose
 *                           its goroutine meanwhile)
 * As in the real libraries, a group (ncclGroupStart..ncclGroupEnd) belongs
 * to the calling thread, and a communicator to the device current on the
 * thread that created it (ncclCommCuDevice).
 * Build with -DNO_ALLTOALL to leave out ncclAllToAll, as NCCL does.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct { char internal[128]; } ncclUniqueId;

enum { ok = 0, sysErr = 2, invalidArg = 4, invalidUsage = 5 };

struct comm { int nranks, rank, device; };

extern __thread int fake_current_device; /* the fake runtime's (fakecudart.c) */

static char last[256];

static int fail(const char *name) {
	const char *f = getenv("FAKENCCL_FAIL");
	if (f == NULL || strcmp(f, name) != 0) return 0;
	const char *c = getenv("FAKENCCL_CODE");
	snprintf(last, sizeof last, "fake: %s failed as asked", name);
	return c ? atoi(c) : invalidArg;
}

#define FAIL(name) do { int rc_ = fail(name); if (rc_) return rc_; } while (0)

static size_t dtsize(int dt) {
	static const size_t s[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
	return dt >= 0 && dt < 10 ? s[dt] : 0;
}

int ncclGetVersion(int *v) {
	FAIL("ncclGetVersion");
	const char *e = getenv("FAKENCCL_VERSION");
	*v = e ? atoi(e) : 22304;
	return ok;
}

/* The id's bytes are i*3+1: a receiver can tell a truncated copy. */
int ncclGetUniqueId(ncclUniqueId *id) {
	FAIL("ncclGetUniqueId");
	for (int i = 0; i < 128; i++) id->internal[i] = (char)(i * 3 + 1);
	return ok;
}

int ncclCommInitRank(struct comm **c, int nranks, ncclUniqueId id, int rank) {
	FAIL("ncclCommInitRank");
	const char *wait = getenv("FAKENCCL_INIT_WAIT");
	if (wait != NULL && *wait != 0)
		while (access(wait, F_OK) != 0) usleep(1000);
	for (int i = 0; i < 128; i++)
		if (id.internal[i] != (char)(i * 3 + 1)) {
			snprintf(last, sizeof last, "fake: unique id byte %d is wrong", i);
			return invalidArg;
		}
	if (nranks < 1 || rank < 0 || rank >= nranks) return invalidArg;
	*c = calloc(1, sizeof **c);
	(*c)->nranks = nranks;
	(*c)->rank = rank;
	(*c)->device = fake_current_device;
	return ok;
}

int ncclCommDestroy(struct comm *c) { FAIL("ncclCommDestroy"); free(c); return ok; }
int ncclCommAbort(struct comm *c) {
	const char *wait = getenv("FAKENCCL_INIT_WAIT");
	if (wait != NULL && *wait != 0) {
		FILE *f = fopen(wait, "w");
		if (f != NULL) { fputs("aborted", f); fclose(f); }
	}
	free(c);
	return ok;
}
int ncclCommFinalize(struct comm *c) { FAIL("ncclCommFinalize"); return c ? ok : invalidArg; }
int ncclCommCount(const struct comm *c, int *n) { *n = c->nranks; return ok; }
int ncclCommUserRank(const struct comm *c, int *r) { *r = c->rank; return ok; }

int ncclCommCuDevice(const struct comm *c, int *d) { FAIL("ncclCommCuDevice"); *d = c->device; return ok; }

const char *ncclGetErrorString(int code) {
	switch (code) {
	case 0: return "fake: no error";
	case 1: return "fake: unhandled cuda error";
	case 2: return "fake: unhandled system error";
	case 3: return "fake: internal error";
	case 4: return "fake: invalid argument";
	case 5: return "fake: invalid usage";
	case 6: return "fake: remote process exited or there was a network error";
	case 7: return "fake: operation in progress";
	}
	return "fake: unknown result code";
}

const char *ncclGetLastError(struct comm *c) { (void)c; return last; }

/* reduce writes op applied over n copies of each of count elements. */
#define REDUCE(T)                                                         \
	do {                                                              \
		const T *s = src; T *d = dst;                             \
		for (size_t i = 0; i < count; i++) {                      \
			T x = s[i], acc = x;                              \
			for (int k = 1; k < n; k++) {                     \
				if (op == 0) acc += x;                    \
				else if (op == 1) acc *= x;               \
			}                                                 \
			d[i] = acc;                                       \
		}                                                         \
	} while (0)

static int reduce(const void *src, void *dst, size_t count, int dt, int op, int n) {
	if (op < 0 || op > 4) return invalidArg;
	switch (dt) {
	case 0: REDUCE(int8_t); break;
	case 1: REDUCE(uint8_t); break;
	case 2: REDUCE(int32_t); break;
	case 3: REDUCE(uint32_t); break;
	case 4: REDUCE(int64_t); break;
	case 5: REDUCE(uint64_t); break;
	case 7: REDUCE(float); break;
	case 8: REDUCE(double); break;
	default:
		snprintf(last, sizeof last, "fake: no arithmetic for data type %d", dt);
		return invalidArg;
	}
	return ok;
}

int ncclAllReduce(const void *s, void *r, size_t count, int dt, int op, struct comm *c, void *stream) {
	(void)stream;
	FAIL("ncclAllReduce");
	return reduce(s, r, count, dt, op, c->nranks);
}

int ncclReduceScatter(const void *s, void *r, size_t count, int dt, int op, struct comm *c, void *stream) {
	(void)stream;
	FAIL("ncclReduceScatter");
	if (dtsize(dt) == 0) return invalidArg;
	return reduce((const char *)s + (size_t)c->rank * count * dtsize(dt), r, count, dt, op, c->nranks);
}

int ncclAllGather(const void *s, void *r, size_t count, int dt, struct comm *c, void *stream) {
	(void)stream;
	FAIL("ncclAllGather");
	size_t b = count * dtsize(dt);
	if (b == 0 && count != 0) return invalidArg;
	for (int k = 0; k < c->nranks; k++) memmove((char *)r + k * b, s, b);
	return ok;
}

int ncclBroadcast(const void *s, void *r, size_t count, int dt, int root, struct comm *c, void *stream) {
	(void)stream;
	FAIL("ncclBroadcast");
	if (root < 0 || root >= c->nranks || dtsize(dt) == 0) return invalidArg;
	memmove(r, s, count * dtsize(dt));
	return ok;
}

#ifndef NO_ALLTOALL
int ncclAllToAll(const void *s, void *r, size_t count, int dt, struct comm *c, void *stream) {
	(void)stream;
	FAIL("ncclAllToAll");
	size_t b = count * dtsize(dt);
	if (dtsize(dt) == 0) return invalidArg;
	for (int k = 0; k < c->nranks; k++) memmove((char *)r + k * b, (const char *)s + c->rank * b, b);
	return ok;
}
#endif

/* Point-to-point calls are queued inside a group and matched at its end. */
#define MAXQ 1024
struct p2p { const void *sbuf; void *rbuf; size_t bytes; int peer; struct comm *c; };
static __thread struct p2p sends[MAXQ], recvs[MAXQ];
static __thread int nsend, nrecv, depth;

int ncclGroupStart(void) { FAIL("ncclGroupStart"); depth++; return ok; }

int ncclGroupEnd(void) {
	FAIL("ncclGroupEnd");
	if (depth == 0) return invalidUsage;
	if (--depth > 0) return ok;
	int rc = ok;
	for (int i = 0; i < nrecv; i++) {
		struct p2p *rv = &recvs[i];
		int found = 0;
		for (int j = 0; j < nsend && !found; j++) {
			struct p2p *sd = &sends[j];
			if (sd->c == rv->c && sd->peer == rv->c->rank && sd->bytes == rv->bytes) {
				memmove(rv->rbuf, sd->sbuf, rv->bytes);
				found = 1;
			}
		}
		if (!found) {
			snprintf(last, sizeof last, "fake: receive from peer %d has no matching send", rv->peer);
			rc = invalidUsage;
		}
	}
	nsend = nrecv = 0;
	return rc;
}

static int post(struct p2p *q, int *n, const void *sb, void *rb, size_t count, int dt, int peer, struct comm *c) {
	if (dtsize(dt) == 0 || peer < 0 || peer >= c->nranks) return invalidArg;
	if (depth == 0) {
		snprintf(last, sizeof last, "fake: send/recv outside a group");
		return invalidUsage;
	}
	if (*n == MAXQ) return sysErr;
	q[*n] = (struct p2p){sb, rb, count * dtsize(dt), peer, c};
	(*n)++;
	return ok;
}

int ncclSend(const void *s, size_t count, int dt, int peer, struct comm *c, void *stream) {
	(void)stream;
	FAIL("ncclSend");
	const char *nap = getenv("FAKENCCL_SEND_SLEEP_US");
	if (nap != NULL) usleep(atoi(nap));
	return post(sends, &nsend, s, NULL, count, dt, peer, c);
}

int ncclRecv(void *r, size_t count, int dt, int peer, struct comm *c, void *stream) {
	(void)stream;
	FAIL("ncclRecv");
	return post(recvs, &nrecv, NULL, r, count, dt, peer, c);
}
