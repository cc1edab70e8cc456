// tables.c - the exported ncclNetPlugin_vN tables.
//
// Every version points at thin C adapters over one set of Go functions
// (exports.go) that speak the newest (v12) semantics. Handles cross the
// boundary as uintptr_t values, never as Go pointers.
#include <stdint.h>
#include <string.h>
#include "shim.h"
#include "_cgo_export.h"

#define H(p) ((uintptr_t)(p))

static ncclDebugLogger_t mr_logger;

void mr_set_logger(ncclDebugLogger_t fn) { __atomic_store_n(&mr_logger, fn, __ATOMIC_RELEASE); }
ncclDebugLogger_t mr_get_logger(void) { return __atomic_load_n(&mr_logger, __ATOMIC_ACQUIRE); }

void mr_log(ncclDebugLogger_t fn, int level, unsigned long flags, const char* msg) {
  if (fn) fn((ncclDebugLogLevel)level, flags, "net-plugin", 0, "%s", msg);
}

/* ---- property conversion from the canonical v12 layout ---- */

static void props_v11(const ncclNetProperties_v12_t* s, ncclNetProperties_v11_t* d) {
  memset(d, 0, sizeof(*d));
  d->name = s->name; d->pciPath = s->pciPath; d->guid = s->guid;
  d->ptrSupport = s->ptrSupport; d->regIsGlobal = s->regIsGlobal; d->forceFlush = s->forceFlush;
  d->speed = s->speed; d->port = s->port; d->latency = s->latency;
  d->maxComms = s->maxComms; d->maxRecvs = s->maxRecvs;
  d->netDeviceType = s->netDeviceType; d->netDeviceVersion = s->netDeviceVersion;
  d->vProps.ndevs = s->vProps.ndevs > NCCL_NET_MAX_DEVS_PER_NIC_V11 ? NCCL_NET_MAX_DEVS_PER_NIC_V11 : s->vProps.ndevs;
  for (int i = 0; i < d->vProps.ndevs; i++) d->vProps.devs[i] = s->vProps.devs[i];
  d->maxP2pBytes = s->maxP2pBytes; d->maxCollBytes = s->maxCollBytes;
  d->maxMultiRequestSize = s->maxMultiRequestSize;
}

static ncclResult_t get_props(int dev, ncclNetProperties_v12_t* p) {
  memset(p, 0, sizeof(*p));
  return metaroce_net_get_properties(dev, p);
}

static ncclResult_t gp_v12(int dev, ncclNetProperties_v12_t* props) { return get_props(dev, props); }
static ncclResult_t gp_v11(int dev, ncclNetProperties_v11_t* props) {
  ncclNetProperties_v12_t p; ncclResult_t r = get_props(dev, &p);
  if (r == ncclSuccess) props_v11(&p, props);
  return r;
}
static ncclResult_t gp_v10(int dev, ncclNetProperties_v10_t* props) {
  ncclNetProperties_v12_t p; ncclNetProperties_v11_t q; ncclResult_t r = get_props(dev, &p);
  if (r != ncclSuccess) return r;
  props_v11(&p, &q);
  memcpy(props, &q, sizeof(*props)); /* v10 is the v11 prefix */
  return r;
}
static ncclResult_t gp_v8(int dev, ncclNetProperties_v8_t* d) {
  ncclNetProperties_v12_t s; ncclResult_t r = get_props(dev, &s);
  if (r != ncclSuccess) return r;
  memset(d, 0, sizeof(*d));
  d->name = s.name; d->pciPath = s.pciPath; d->guid = s.guid; d->ptrSupport = s.ptrSupport;
  d->regIsGlobal = s.regIsGlobal; d->speed = s.speed; d->port = s.port; d->latency = s.latency;
  d->maxComms = s.maxComms; d->maxRecvs = s.maxRecvs;
  d->netDeviceType = s.netDeviceType; d->netDeviceVersion = s.netDeviceVersion;
  return r;
}
static ncclResult_t gp_v7(int dev, ncclNetProperties_v7_t* d) {
  ncclNetProperties_v12_t s; ncclResult_t r = get_props(dev, &s);
  if (r != ncclSuccess) return r;
  memset(d, 0, sizeof(*d));
  d->name = s.name; d->pciPath = s.pciPath; d->guid = s.guid; d->ptrSupport = s.ptrSupport;
  d->speed = s.speed; d->port = s.port; d->latency = s.latency;
  d->maxComms = s.maxComms; d->maxRecvs = s.maxRecvs;
  d->netDeviceType = s.netDeviceType; d->netDeviceVersion = s.netDeviceVersion;
  return r;
}
static ncclResult_t gp_v6(int dev, ncclNetProperties_v6_t* d) {
  ncclNetProperties_v12_t s; ncclResult_t r = get_props(dev, &s);
  if (r != ncclSuccess) return r;
  memset(d, 0, sizeof(*d));
  d->name = s.name; d->pciPath = s.pciPath; d->guid = s.guid; d->ptrSupport = s.ptrSupport;
  d->speed = s.speed; d->port = s.port; d->latency = s.latency;
  d->maxComms = s.maxComms; d->maxRecvs = s.maxRecvs;
  return r;
}

/* ---- init / finalize ---- */

static ncclResult_t init_ctx(int abi, void** ctx, uint64_t commId, ncclDebugLogger_t log) {
  uintptr_t h = 0;
  if (log) mr_set_logger(log);
  ncclResult_t r = metaroce_net_init(abi, commId, &h);
  if (ctx) *ctx = (void*)h;
  return r;
}
static ncclResult_t init_v12(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config,
                             ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  (void)config; (void)prof;
  return init_ctx(12, ctx, commId, log);
}
static ncclResult_t init_v11(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                             ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  (void)config; (void)prof;
  return init_ctx(11, ctx, commId, log);
}
static ncclResult_t init_legacy(int abi, ncclDebugLogger_t log) {
  if (log) mr_set_logger(log);
  return metaroce_net_init_legacy(abi);
}
static ncclResult_t init_v10(ncclDebugLogger_t log, ncclProfilerCallback_t prof) { (void)prof; return init_legacy(10, log); }
static ncclResult_t init_v9(ncclDebugLogger_t log) { return init_legacy(9, log); }
static ncclResult_t init_v8(ncclDebugLogger_t log) { return init_legacy(8, log); }
static ncclResult_t init_v7(ncclDebugLogger_t log) { return init_legacy(7, log); }
static ncclResult_t init_v6(ncclDebugLogger_t log) { return init_legacy(6, log); }
static ncclResult_t finalize_v12(void* ctx) { return metaroce_net_finalize(H(ctx)); }

/* ---- connection setup; device handles are never touched ---- */

static ncclResult_t devices(int* ndev) { return metaroce_net_devices(ndev); }

/* OUT calls a Go export that fills a uintptr_t handle, then stores the
 * handle (NULL on failure or "not yet") in the caller's out-pointer. */
#define OUT(out, call)                 \
  do {                                 \
    uintptr_t h = 0;                   \
    ncclResult_t r_ = (call);          \
    if (out) *(out) = (void*)h;        \
    return r_;                         \
  } while (0)
static ncclResult_t listen_ctx(void* ctx, int dev, void* handle, void** listenComm) {
  OUT(listenComm, metaroce_net_listen(H(ctx), dev, handle, &h));
}
static ncclResult_t listen_legacy(int dev, void* handle, void** listenComm) { return listen_ctx(NULL, dev, handle, listenComm); }

static ncclResult_t connect_ctx(void* ctx, int dev, void* handle, void** sendComm) {
  OUT(sendComm, metaroce_net_connect(H(ctx), dev, handle, &h));
}
static ncclResult_t connect_v12(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t** devComm) {
  (void)devComm; return connect_ctx(ctx, dev, handle, sendComm);
}
static ncclResult_t connect_v10(int dev, ncclNetCommConfig_v10_t* config, void* handle, void** sendComm, ncclNetDeviceHandle_v10_t** devComm) {
  (void)config; (void)devComm; return connect_ctx(NULL, dev, handle, sendComm);
}
static ncclResult_t connect_v7(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v7_t** devComm) {
  (void)devComm; return connect_ctx(NULL, dev, handle, sendComm);
}
static ncclResult_t connect_v6(int dev, void* handle, void** sendComm) { return connect_ctx(NULL, dev, handle, sendComm); }

static ncclResult_t accept_v6(void* listenComm, void** recvComm) {
  OUT(recvComm, metaroce_net_accept(H(listenComm), &h));
}
static ncclResult_t accept_v7(void* listenComm, void** recvComm, ncclNetDeviceHandle_v7_t** devComm) {
  (void)devComm; return accept_v6(listenComm, recvComm);
}

/* ---- memory registration ---- */

static ncclResult_t regmr(void* comm, void* data, size_t size, int type, void** mhandle) {
  OUT(mhandle, metaroce_net_reg_mr(H(comm), data, size, type, &h));
}
/* The *_int adapters serve ABI v6..v8, whose sizes are C ints. A negative
 * one (an overflowed size) is refused as an invalid argument through
 * metaroce_net_bad_int_size, which logs it and records the last error like
 * every other failure, before it could become a huge size_t. */
static ncclResult_t regmr_int(void* comm, void* data, int size, int type, void** mhandle) {
  if (size < 0) { if (mhandle) *mhandle = NULL; return metaroce_net_bad_int_size("regMr", size); }
  return regmr(comm, data, (size_t)size, type, mhandle);
}
static ncclResult_t regmr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  (void)offset; (void)fd;
  return regmr(comm, data, size, type, mhandle);
}
static ncclResult_t deregmr(void* comm, void* mhandle) { return metaroce_net_dereg_mr(H(comm), H(mhandle)); }

/* ---- data path ---- */

static ncclResult_t isend_v12(void* comm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request) {
  (void)mhandle; (void)phandle;
  /* As for irecv below: a NULL request is refused, not a send posted and
   * its handle lost. */
  if (request == NULL) return metaroce_net_isend(H(comm), data, size, tag, NULL);
  OUT(request, metaroce_net_isend(H(comm), data, size, tag, &h));
}
static ncclResult_t isend_v9(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  return isend_v12(comm, data, size, tag, mhandle, NULL, request);
}
static ncclResult_t isend_int(void* comm, void* data, int size, int tag, void* mhandle, void** request) {
  if (size < 0) { if (request) *request = NULL; return metaroce_net_bad_int_size("isend", size); }
  return isend_v12(comm, data, (size_t)size, tag, mhandle, NULL, request);
}

/* A NULL request goes to the Go side as NULL, which refuses it naming it:
 * through OUT's local handle the receive would be posted and its handle
 * lost, leaving a request that nothing can test or complete. */
static ncclResult_t irecv_v12(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles, void** request) {
  (void)mhandles; (void)phandles;
  if (request == NULL) return metaroce_net_irecv(H(comm), n, data, sizes, tags, NULL);
  OUT(request, metaroce_net_irecv(H(comm), n, data, sizes, tags, &h));
}
static ncclResult_t irecv_v9(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  return irecv_v12(comm, n, data, sizes, tags, mhandles, NULL, request);
}
/* irecv_int converts ABI v6..v8's int sizes to size_t. A group size out of
 * range or a NULL sizes array goes to the Go side unconverted (sizes NULL),
 * which refuses it naming what is wrong, without reading the array. */
static ncclResult_t irecv_int(void* comm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request) {
  size_t s[NCCL_NET_MAX_DEVS_PER_NIC_V12];
  if (n < 1 || n > (int)(sizeof(s) / sizeof(s[0])) || sizes == NULL) { if (request) *request = NULL; return metaroce_net_irecv(H(comm), n, data, NULL, tags, NULL); }
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0) { if (request) *request = NULL; return metaroce_net_bad_int_size("irecv", sizes[i]); }
    s[i] = (size_t)sizes[i];
  }
  return irecv_v12(comm, n, data, s, tags, mhandles, NULL, request);
}

static ncclResult_t iflush(void* comm, int n, void** data, int* sizes, void** mhandles, void** request) {
  (void)n; (void)data; (void)sizes; (void)mhandles;
  if (request) *request = NULL;
  return metaroce_net_iflush(H(comm));
}
static ncclResult_t test(void* request, int* done, int* sizes) { return metaroce_net_test(H(request), done, sizes); }
static ncclResult_t close_send(void* comm) { return metaroce_net_close_send(H(comm)); }
static ncclResult_t close_recv(void* comm) { return metaroce_net_close_recv(H(comm)); }
static ncclResult_t close_listen(void* comm) { return metaroce_net_close_listen(H(comm)); }

/* ---- the exported tables ---- */

#define NAME "MetaRoCE"
#define EXPORT __attribute__((visibility("default")))

EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
  NAME, init_v12, devices, gp_v12, listen_ctx, connect_v12, accept_v7, regmr, regmr_dmabuf, deregmr,
  isend_v12, irecv_v12, iflush, test, close_send, close_recv, close_listen,
  NULL, NULL, NULL, finalize_v12, NULL,
};
EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
  NAME, init_v11, devices, gp_v11, listen_ctx, connect_v12, accept_v7, regmr, regmr_dmabuf, deregmr,
  isend_v12, irecv_v12, iflush, test, close_send, close_recv, close_listen,
  NULL, NULL, NULL, finalize_v12, NULL,
};
EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
  NAME, init_v10, devices, gp_v10, listen_legacy, connect_v10, accept_v7, regmr, regmr_dmabuf, deregmr,
  isend_v12, irecv_v12, iflush, test, close_send, close_recv, close_listen,
  NULL, NULL, NULL,
};
EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
  NAME, init_v9, devices, gp_v10, listen_legacy, connect_v7, accept_v7, regmr, regmr_dmabuf, deregmr,
  isend_v9, irecv_v9, iflush, test, close_send, close_recv, close_listen,
  NULL, NULL, NULL,
};
EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
  NAME, init_v8, devices, gp_v8, listen_legacy, connect_v7, accept_v7, regmr, regmr_dmabuf, deregmr,
  isend_int, irecv_int, iflush, test, close_send, close_recv, close_listen,
  NULL, NULL,
};
EXPORT const ncclNet_v7_t ncclNetPlugin_v7 = {
  NAME, init_v7, devices, gp_v7, listen_legacy, connect_v7, accept_v7, regmr_int, regmr_dmabuf, deregmr,
  isend_int, irecv_int, iflush, test, close_send, close_recv, close_listen,
  NULL, NULL,
};
EXPORT const ncclNet_v6_t ncclNetPlugin_v6 = {
  NAME, init_v6, devices, gp_v6, listen_legacy, connect_v6, accept_v6, regmr_int, regmr_dmabuf, deregmr,
  isend_int, irecv_int, iflush, test, close_send, close_recv, close_listen,
};
