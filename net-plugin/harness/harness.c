//go:build ignore

// harness.c - loads the MetaRoCE net plugin the way NCCL does and drives it
// from two processes like NCCL's proxy threads.
//
// usage: nccl-net-harness [-v VERSION] LIBRARY SCENARIO
//   LIBRARY   path or SONAME given to dlopen(RTLD_NOW|RTLD_LOCAL); "STATIC"
//             means dlopen(NULL) (NCCL_NET_PLUGIN=STATIC_PLUGIN)
//   VERSION   ABI version to use (6..12); default: newest exported, like NCCL
//   SCENARIO  data | kill | oversize | garbage | lateenv | bench
// Output: "RESULT key=value ..." lines on stdout; plugin logs on stderr,
// filtered as NCCL filters them (NCCL_DEBUG, NCCL_DEBUG_SUBSYS).
// Exit status 0 on success. Every wait has a deadline.
// HARNESS_SENDER_NETNS=NAME puts the sending process in the network
// namespace NAME (ip netns; root), so that the two sides talk over a real
// link (a veth, a netlab fabric) instead of loopback: run the harness in
// one namespace with METAROCE_IFNAMES naming an interface of each, e.g.
//   ip netns exec A env METAROCE_IFNAMES==a0,b0 HARNESS_SENDER_NETNS=B
//     nccl-net-harness LIBRARY bench
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "metaroce/nccl_net.h"

#define DEADLINE_S 20.0
#define NGROUP_MAX 8
#define INFLIGHT 32

static int ver;
static void* tab;
static void* lib;
static const char* role = "main";

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "harness[%s]: FAIL: ", role);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

/* debug_level parses NCCL_DEBUG as NCCL does: unset or unknown is NONE. */
static int debug_level(void) {
  static const char* names[] = {"VERSION", "WARN", "INFO", "ABORT", "TRACE"};
  const char* v = getenv("NCCL_DEBUG");
  for (int i = 0; v && i < 5; i++)
    if (strcasecmp(v, names[i]) == 0) return NCCL_LOG_VERSION + i;
  return NCCL_LOG_NONE;
}

/* debug_mask parses NCCL_DEBUG_SUBSYS as NCCL does: a comma list of
 * subsystem names, inverted by a leading '^'; unset or empty gives NCCL's
 * default, INIT,BOOTSTRAP,ENV. */
static unsigned long debug_mask(void) {
  static const struct { const char* name; unsigned long bit; } subsys[] = {
    {"INIT", NCCL_INIT}, {"COLL", NCCL_COLL}, {"P2P", NCCL_P2P}, {"SHM", NCCL_SHM}, {"NET", NCCL_NET},
    {"GRAPH", NCCL_GRAPH}, {"TUNING", NCCL_TUNING}, {"ENV", NCCL_ENV}, {"ALLOC", NCCL_ALLOC},
    {"CALL", NCCL_CALL}, {"PROXY", NCCL_PROXY}, {"NVLS", NCCL_NVLS}, {"BOOTSTRAP", NCCL_BOOTSTRAP},
    {"REG", NCCL_REG}, {"PROFILE", NCCL_PROFILE}, {"RAS", NCCL_RAS}, {"DESTROY", NCCL_DESTROY},
    {"ALLOC_HOST", NCCL_ALLOC_HOST}, {"ALL", ~0UL},
  };
  const char* v = getenv("NCCL_DEBUG_SUBSYS");
  if (!v || !*v) return NCCL_INIT | NCCL_BOOTSTRAP | NCCL_ENV;
  int invert = v[0] == '^';
  char buf[256];
  snprintf(buf, sizeof buf, "%s", v + invert);
  unsigned long mask = 0;
  char* save = NULL;
  for (char* tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
    for (size_t i = 0; i < sizeof subsys / sizeof subsys[0]; i++)
      if (strcasecmp(tok, subsys[i].name) == 0) mask |= subsys[i].bit;
  return invert ? ~mask : mask;
}

/* logger is the ncclDebugLogger_t handed to init. It drops what NCCL's
 * ncclDebugLog drops: a level above NCCL_DEBUG, or flags sharing no bit
 * with the NCCL_DEBUG_SUBSYS mask, WARN included. The variables are read
 * at every call, so that a scenario may change them. */
static void logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)file; (void)line;
  if ((int)level > debug_level() || (flags & debug_mask()) == 0) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "harness[%s] plugin-log level=%d: ", role, (int)level);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

#define T12 ((ncclNet_v12_t*)tab)
#define T11 ((ncclNet_v11_t*)tab)
#define T10 ((ncclNet_v10_t*)tab)
#define T9 ((ncclNet_v9_t*)tab)
#define T8 ((ncclNet_v8_t*)tab)
#define T7 ((ncclNet_v7_t*)tab)
#define T6 ((ncclNet_v6_t*)tab)

#define CHECK(call)                                                  \
  do {                                                               \
    ncclResult_t r_ = (call);                                        \
    if (r_ != ncclSuccess) die("%s returned %d", #call, (int)r_);    \
  } while (0)

static void load(const char* path, int forced) {
  lib = dlopen(strcmp(path, "STATIC") == 0 ? NULL : path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) die("dlopen %s: %s", path, dlerror());
  for (int v = 12; v >= 6; v--) {
    if (forced && v != forced) continue;
    char sym[64];
    snprintf(sym, sizeof sym, "ncclNetPlugin_v%d", v);
    tab = dlsym(lib, sym);
    if (tab) { ver = v; return; }
  }
  die("no ncclNetPlugin_v%s symbol in %s", forced ? "<forced>" : "12..6", path);
}

static void* ctx;

/* p_init_rc is the version's init; it returns its result. */
static ncclResult_t p_init_rc(void) {
  switch (ver) {
    case 12: return T12->init(&ctx, 0x1234, &(ncclNetCommConfig_v12_t){-1}, logger, NULL);
    case 11: return T11->init(&ctx, 0x1234, &(ncclNetCommConfig_v11_t){-1}, logger, NULL);
    case 10: return T10->init(logger, NULL);
    default: return T9->init(logger); /* same signature v6..v9 */
  }
}

static void p_init(void) {
  CHECK(p_init_rc());
  if (ver >= 11 && ctx == NULL) die("init returned a NULL context");
  int n = 0;
  CHECK(T12->devices(&n));
  if (n < 1) die("devices returned %d", n);
}

static void p_finalize(void) {
  if (ver >= 11) CHECK(T12->finalize(ctx));
}

/* props: checks the common fields and returns maxRecvs. */
static int p_props(void) {
  const char* name; int ptr, maxRecvs;
  if (ver == 12) {
    ncclNetProperties_v12_t p; memset(&p, 0xab, sizeof p);
    CHECK(T12->getProperties(0, &p));
    if (p.maxP2pBytes == 0 || p.maxP2pBytes > NCCL_MAX_NET_SIZE_BYTES) die("maxP2pBytes %zu", p.maxP2pBytes);
    if (p.railId != -1 || p.planeId != -1 || p.vProps.ndevs != 1 || p.vProps.devs[0] != 0) die("v12 ids/vProps not written");
    if (p.netDeviceType != NCCL_NET_DEVICE_HOST || p.regIsGlobal != 0 || p.forceFlush != 0) die("v12 device type");
    name = p.name; ptr = p.ptrSupport; maxRecvs = p.maxRecvs;
    printf("RESULT props name=%s pci=%s speed=%d maxRecvs=%d maxComms=%d\n", p.name, p.pciPath ? p.pciPath : "none", p.speed, p.maxRecvs, p.maxComms);
  } else if (ver >= 9) {
    ncclNetProperties_v11_t p; memset(&p, 0xab, sizeof p);
    if (ver == 11) CHECK(T11->getProperties(0, &p)); else CHECK(T9->getProperties(0, (ncclNetProperties_v9_t*)&p));
    if (p.vProps.ndevs != 1 || p.maxP2pBytes == 0) die("v%d vProps/maxP2pBytes not written", ver);
    name = p.name; ptr = p.ptrSupport; maxRecvs = p.maxRecvs;
  } else if (ver == 8) {
    ncclNetProperties_v8_t p; memset(&p, 0xab, sizeof p);
    CHECK(T8->getProperties(0, &p));
    if (p.regIsGlobal != 0 || p.netDeviceType != NCCL_NET_DEVICE_HOST) die("v8 fields");
    name = p.name; ptr = p.ptrSupport; maxRecvs = p.maxRecvs;
  } else if (ver == 7) {
    ncclNetProperties_v7_t p; memset(&p, 0xab, sizeof p);
    CHECK(T7->getProperties(0, &p));
    name = p.name; ptr = p.ptrSupport; maxRecvs = p.maxRecvs;
  } else {
    ncclNetProperties_v6_t p; memset(&p, 0xab, sizeof p);
    CHECK(T6->getProperties(0, &p));
    name = p.name; ptr = p.ptrSupport; maxRecvs = p.maxRecvs;
  }
  if (!name || strncmp(name, "metaroce_", 9) != 0) die("props.name %s", name ? name : "(null)");
  if (ptr != NCCL_PTR_HOST) die("ptrSupport %d", ptr);
  if (maxRecvs != 1) die("maxRecvs %d, want 1 (NCCL must not group receives)", maxRecvs);
  return maxRecvs;
}

static ncclResult_t p_listen(void* handle, void** lc) {
  if (ver >= 11) return T12->listen(ctx, 0, handle, lc);
  return T10->listen(0, handle, lc);
}

static ncclResult_t p_connect(void* handle, void** sc) {
  ncclNetDeviceHandle_v12_t* dev = NULL;
  switch (ver) {
    case 12: case 11: return T12->connect(ctx, 0, handle, sc, &dev);
    case 10: return T10->connect(0, &(ncclNetCommConfig_v10_t){-1}, handle, sc, &dev);
    case 6: return T6->connect(0, handle, sc);
    default: return T9->connect(0, handle, sc, &dev);
  }
}

static ncclResult_t p_accept(void* lc, void** rc) {
  ncclNetDeviceHandle_v12_t* dev = NULL;
  if (ver == 6) return T6->accept(lc, rc);
  return T12->accept(lc, rc, &dev);
}

static void* p_regmr(void* comm, void* data, size_t size) {
  void* mh = NULL;
  if (ver >= 8) CHECK(T12->regMr(comm, data, size, NCCL_PTR_HOST, &mh));
  else CHECK(T7->regMr(comm, data, (int)size, NCCL_PTR_HOST, &mh));
  if (!mh) die("regMr returned a NULL handle");
  /* GPU memory must be refused: the plugin is host-only. */
  void* bad = (void*)0x1;
  if (ver >= 8 && T12->regMr(comm, data, size, NCCL_PTR_CUDA, &bad) == ncclSuccess) die("regMr accepted NCCL_PTR_CUDA");
  return mh;
}

/* isend: *request is preset to 0x1 (as RCCL does) to check it is overwritten. */
static ncclResult_t p_isend(void* sc, void* data, size_t size, int tag, void* mh, void** req) {
  *req = (void*)NCCL_NET_OPTIONAL_RECV_COMPLETION;
  ncclResult_t r;
  if (ver >= 10) r = T12->isend(sc, data, size, tag, mh, NULL, req);
  else if (ver == 9) r = T9->isend(sc, data, size, tag, mh, req);
  else r = T8->isend(sc, data, (int)size, tag, mh, req);
  if (r == ncclSuccess && *req == (void*)NCCL_NET_OPTIONAL_RECV_COMPLETION) die("isend left *request at 0x1");
  return r;
}

static ncclResult_t p_irecv(void* rc, int n, void** data, size_t* sizes, int* tags, void** mhs, void** req) {
  *req = (void*)NCCL_NET_OPTIONAL_RECV_COMPLETION;
  ncclResult_t r;
  if (ver >= 10) r = T12->irecv(rc, n, data, sizes, tags, mhs, NULL, req);
  else if (ver == 9) r = T9->irecv(rc, n, data, sizes, tags, mhs, req);
  else {
    int s[NGROUP_MAX];
    for (int i = 0; i < n; i++) s[i] = (int)sizes[i];
    r = T8->irecv(rc, n, data, s, tags, mhs, req);
  }
  if (r == ncclSuccess && *req == (void*)NCCL_NET_OPTIONAL_RECV_COMPLETION) die("irecv left *request at 0x1");
  return r;
}

/* connect + accept from the two sides of the pipe. */
static void* setup_recv(int wfd, void** lcOut) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = NULL;
  CHECK(p_listen(handle, &lc));
  if (!lc) die("listen returned a NULL comm");
  if (write(wfd, handle, sizeof handle) != (ssize_t)sizeof handle) die("write handle: %s", strerror(errno));
  void* rc = NULL;
  double end = now_s() + DEADLINE_S;
  while (!rc) {
    CHECK(p_accept(lc, &rc));
    if (now_s() > end) die("accept did not complete");
  }
  *lcOut = lc;
  return rc;
}

static void* setup_send(int rfd) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  size_t got = 0;
  while (got < sizeof handle) {
    ssize_t k = read(rfd, handle + got, sizeof handle - got);
    if (k <= 0) die("read handle: %s", k == 0 ? "EOF" : strerror(errno));
    got += (size_t)k;
  }
  void* sc = NULL;
  double end = now_s() + DEADLINE_S;
  while (!sc) {
    CHECK(p_connect(handle, &sc));
    if (now_s() > end) die("connect did not complete");
  }
  return sc;
}

/* test_wait polls until done or error, with the deadline. */
static ncclResult_t test_wait(void* req, int* sizes, double deadline_s) {
  int done = 0;
  double end = now_s() + deadline_s;
  while (!done) {
    ncclResult_t r = T12->test(req, &done, sizes);
    if (r != ncclSuccess) return r;
    if (!done) sched_yield(); /* leave the CPU to the datapath on small hosts */
    if (now_s() > end) die("test did not complete within %.0f s", deadline_s);
  }
  return ncclSuccess;
}

/* ---- the data scenario: grouped receives, tags, 0-byte and max-size ---- */

#define CAP (512 * 1024)
#define GROUPS 96
static int ngrp;

static size_t msg_size(int g, int slot) {
  switch ((g + slot) % 6) {
    case 0: return 0;
    case 1: return CAP;
    case 2: return 1;
    case 3: return (size_t)((g * 7919 + slot * 104729) % CAP);
    case 4: return 4096;
    default: return 100 + (size_t)g;
  }
}
static unsigned char pat(int g, int slot, size_t i) { return (unsigned char)(g * 31 + slot * 17 + i * 13 + (i >> 9)); }
static int tag_of(int slot) { return 100 + slot; }
/* send order inside a group: a rotation, so tags (not order) pick buffers. */
static int slot_at(int g, int k) { return (k + g) % ngrp; }

static void run_data_recv(int wfd) {
  void* lc;
  void* rc = setup_recv(wfd, &lc);
  CHECK(T12->closeListen(lc));
  size_t slab = (size_t)INFLIGHT * ngrp * CAP;
  unsigned char* buf = malloc(slab);
  if (!buf) die("malloc");
  void* mh = p_regmr(rc, buf, slab);
  void* reqs[INFLIGHT] = {0};
  int grpOf[INFLIGHT];
  int posted = 0, completed = 0;
  double end = now_s() + DEADLINE_S;
  while (completed < GROUPS) {
    for (int s = 0; s < INFLIGHT && posted < GROUPS; s++) {
      if (reqs[s]) continue;
      void* data[NGROUP_MAX]; size_t sizes[NGROUP_MAX]; int tags[NGROUP_MAX]; void* mhs[NGROUP_MAX];
      for (int i = 0; i < ngrp; i++) {
        data[i] = buf + ((size_t)s * ngrp + i) * CAP;
        sizes[i] = CAP; tags[i] = tag_of(i); mhs[i] = mh;
        memset(data[i], 0xee, 64);
      }
      void* r = NULL;
      CHECK(p_irecv(rc, ngrp, data, sizes, tags, mhs, &r));
      if (!r) break; /* retry later */
      reqs[s] = r; grpOf[s] = posted++;
    }
    for (int s = 0; s < INFLIGHT; s++) {
      if (!reqs[s]) continue;
      int done = 0, sizes[64];
      memset(sizes, 0, sizeof sizes);
      sizes[ngrp] = -7; /* sentinel: exactly n entries must be written */
      CHECK(T12->test(reqs[s], &done, sizes));
      if (!done) continue;
      int g = grpOf[s];
      if (sizes[ngrp] != -7) die("test wrote more than n=%d sizes", ngrp);
      for (int i = 0; i < ngrp; i++) {
        size_t want = msg_size(g, i);
        if ((size_t)sizes[i] != want) die("group %d slot %d: size %d want %zu", g, i, sizes[i], want);
        unsigned char* d = buf + ((size_t)s * ngrp + i) * CAP;
        for (size_t k = 0; k < want; k++)
          if (d[k] != pat(g, i, k)) die("group %d slot %d byte %zu: %u want %u", g, i, k, d[k], pat(g, i, k));
      }
      reqs[s] = NULL; completed++;
    }
    if (now_s() > end) die("receive side stalled at %d/%d groups", completed, GROUPS);
  }
  CHECK(T12->deregMr(rc, mh));
  CHECK(T12->closeRecv(rc));
  free(buf);
  printf("RESULT data groups=%d n=%d version=%d\n", GROUPS, ngrp, ver);
}

static void run_data_send(int rfd) {
  void* sc = setup_send(rfd);
  size_t slab = (size_t)INFLIGHT * CAP;
  unsigned char* buf = malloc(slab);
  if (!buf) die("malloc");
  void* mh = p_regmr(sc, buf, slab);
  void* reqs[INFLIGHT] = {0};
  int total = GROUPS * ngrp, sent = 0, completed = 0;
  double end = now_s() + DEADLINE_S;
  while (completed < total) {
    for (int s = 0; s < INFLIGHT && sent < total; s++) {
      if (reqs[s]) continue;
      int g = sent / ngrp, slot = slot_at(g, sent % ngrp);
      size_t sz = msg_size(g, slot);
      unsigned char* d = buf + (size_t)s * CAP;
      for (size_t k = 0; k < sz; k++) d[k] = pat(g, slot, k);
      void* r = NULL;
      CHECK(p_isend(sc, d, sz, tag_of(slot), mh, &r));
      if (!r) break;
      reqs[s] = r; sent++;
    }
    for (int s = 0; s < INFLIGHT; s++) {
      if (!reqs[s]) continue;
      int done = 0, size = -1;
      CHECK(T12->test(reqs[s], &done, &size));
      if (done) { reqs[s] = NULL; completed++; }
    }
    if (now_s() > end) die("send side stalled at %d/%d", completed, total);
  }
  CHECK(T12->deregMr(sc, mh));
  CHECK(T12->closeSend(sc));
  free(buf);
}

/* ---- failure scenarios ---- */

static void run_kill_recv(int wfd) {
  void* lc;
  void* rc = setup_recv(wfd, &lc);
  CHECK(T12->closeListen(lc));
  static unsigned char buf[4 << 20];
  void* mh = p_regmr(rc, buf, sizeof buf);
  /* a group of two: the sender dies after (part of) the first message */
  void* data[2] = {buf, buf + sizeof buf / 2}; size_t sizes[2] = {sizeof buf / 2, sizeof buf / 2};
  int tags[2] = {1, 2}; void* mhs[2] = {mh, mh};
  void* r = NULL;
  double t0 = now_s();
  while (!r) CHECK(p_irecv(rc, 2, data, sizes, tags, mhs, &r));
  ncclResult_t res = test_wait(r, NULL, DEADLINE_S);
  printf("RESULT kill rc=%d ms=%.0f\n", (int)res, (now_s() - t0) * 1e3);
  if (res == ncclSuccess) die("receive completed although the sender died");
  T12->closeRecv(rc);
}

static void run_kill_send(int rfd) {
  void* sc = setup_send(rfd);
  static unsigned char buf[2 << 20];
  void* mh = p_regmr(sc, buf, sizeof buf);
  void* r = NULL;
  while (!r) CHECK(p_isend(sc, buf, sizeof buf, 1, mh, &r));
  /* die abruptly while the 4 MiB message is on its way */
  raise(SIGKILL);
}

static void run_oversize_recv(int wfd) {
  void* lc;
  void* rc = setup_recv(wfd, &lc);
  CHECK(T12->closeListen(lc));
  static unsigned char buf[256];
  void* mh = p_regmr(rc, buf, sizeof buf);
  void* data[1] = {buf}; size_t sizes[1] = {100}; int tags[1] = {3}; void* mhs[1] = {mh};
  void* r = NULL;
  while (!r) CHECK(p_irecv(rc, 1, data, sizes, tags, mhs, &r));
  ncclResult_t res = test_wait(r, NULL, DEADLINE_S);
  printf("RESULT oversize rc=%d\n", (int)res);
  if (res != ncclInvalidUsage) die("oversize send gave %d, want ncclInvalidUsage", (int)res);
  T12->deregMr(rc, mh);
  T12->closeRecv(rc);
}

static void run_oversize_send(int rfd) {
  void* sc = setup_send(rfd);
  static unsigned char buf[256];
  void* mh = p_regmr(sc, buf, sizeof buf);
  void* r = NULL;
  while (!r) CHECK(p_isend(sc, buf, 200, 3, mh, &r));
  int done = 0;
  ncclResult_t res = ncclSuccess;
  double end = now_s() + DEADLINE_S;
  while (!done && now_s() < end)
    if ((res = T12->test(r, &done, NULL)) != ncclSuccess) break;
  printf("RESULT oversize-send rc=%d\n", (int)res);
  T12->deregMr(sc, mh);
  T12->closeSend(sc);
}

static void run_garbage(void) {
  unsigned char handle[NCCL_NET_HANDLE_MAXSIZE];
  unsigned int seed = 12345;
  for (size_t i = 0; i < sizeof handle; i++) handle[i] = (unsigned char)(rand_r(&seed) >> 3);
  void* sc = (void*)0x1;
  ncclResult_t r = p_connect(handle, &sc);
  printf("RESULT garbage rc=%d comm=%p\n", (int)r, sc);
  if (r == ncclSuccess || sc != NULL) die("garbage handle accepted");
  memset(handle, 0, sizeof handle);
  if (p_connect(handle, &sc) == ncclSuccess) die("zero handle accepted");
  /* unknown comm and request handles must be refused, not dereferenced */
  int done = 0;
  if (T12->test((void*)0xdeadbeef, &done, NULL) == ncclSuccess) die("test accepted a garbage request");
  if (T12->closeSend((void*)0x1234) == ncclSuccess) die("closeSend accepted a garbage comm");
  void* req = NULL;
  if (p_isend((void*)0x77, NULL, 0, 0, NULL, &req) == ncclSuccess || req != NULL) die("isend on a garbage comm");

  /* Sizes no buffer can have: SIZE_MAX, which ABI <= v8 sees as the int -1
   * (an overflowed or sign-extended size). Each is refused with an error
   * naming the call, never reported as a plugin bug. */
  size_t (*last_error)(char*, size_t) = (size_t (*)(char*, size_t))dlsym(lib, "metaroce_net_last_error");
  if (!last_error) die("no metaroce_net_last_error symbol: %s", dlerror());
  char msg[512];
  static unsigned char one[1];
  msg[0] = 0;
  r = p_isend((void*)0x77, one, SIZE_MAX, 0, NULL, &req);
  (void)last_error(msg, sizeof msg);
  printf("RESULT garbage-isend-size rc=%d msg=%s\n", (int)r, msg);
  if (r == ncclSuccess || req != NULL) die("isend of SIZE_MAX bytes accepted");
  void* data[1] = {one}; size_t sizes[1] = {SIZE_MAX}; int tags[1] = {0}; void* mhs[1] = {NULL};
  msg[0] = 0;
  r = p_irecv((void*)0x77, 1, data, sizes, tags, mhs, &req);
  (void)last_error(msg, sizeof msg);
  printf("RESULT garbage-irecv-size rc=%d msg=%s\n", (int)r, msg);
  if (r == ncclSuccess || req != NULL) die("irecv of SIZE_MAX bytes on a garbage comm accepted");
  /* A NULL sizes array with a valid group size is refused naming the
   * array (ABI <= v8 converts the int sizes first: it must not read it). */
  msg[0] = 0;
  req = (void*)NCCL_NET_OPTIONAL_RECV_COMPLETION;
  if (ver >= 10) r = T12->irecv((void*)0x77, 1, data, NULL, tags, mhs, NULL, &req);
  else if (ver == 9) r = T9->irecv((void*)0x77, 1, data, NULL, tags, mhs, &req);
  else r = T8->irecv((void*)0x77, 1, data, NULL, tags, mhs, &req);
  (void)last_error(msg, sizeof msg);
  printf("RESULT garbage-irecv-null rc=%d msg=%s\n", (int)r, msg);
  if (r == ncclSuccess || req != NULL) die("irecv with NULL sizes accepted");
  /* A NULL request pointer is refused naming it: a receive posted without
   * one could never be tested or completed. */
  msg[0] = 0;
  size_t one_size[1] = {1};
  int one_int[1] = {1};
  if (ver >= 10) r = T12->irecv((void*)0x77, 1, data, one_size, tags, mhs, NULL, NULL);
  else if (ver == 9) r = T9->irecv((void*)0x77, 1, data, one_size, tags, mhs, NULL);
  else r = T8->irecv((void*)0x77, 1, data, one_int, tags, mhs, NULL);
  (void)last_error(msg, sizeof msg);
  printf("RESULT garbage-irecv-nullreq rc=%d msg=%s\n", (int)r, msg);
  if (r == ncclSuccess) die("irecv with a NULL request accepted");
  msg[0] = 0;
  if (ver >= 10) r = T12->isend((void*)0x77, one, 1, 0, NULL, NULL, NULL);
  else if (ver == 9) r = T9->isend((void*)0x77, one, 1, 0, NULL, NULL);
  else r = T8->isend((void*)0x77, one, 1, 0, NULL, NULL);
  (void)last_error(msg, sizeof msg);
  printf("RESULT garbage-isend-nullreq rc=%d msg=%s\n", (int)r, msg);
  if (r == ncclSuccess) die("isend with a NULL request accepted");
  if (ver <= 7) {
    void* mh = (void*)0x1;
    msg[0] = 0;
    r = T7->regMr((void*)0x77, one, -1, NCCL_PTR_HOST, &mh);
    (void)last_error(msg, sizeof msg);
    printf("RESULT garbage-regmr-size rc=%d msg=%s\n", (int)r, msg);
    if (r == ncclSuccess || mh != NULL) die("regMr of -1 bytes accepted");
  }
}

/* ---- environment set after load ----
 * NCCL applies ~/.nccl.conf, /etc/nccl.conf and NCCL_CONF_FILE with
 * setenv, and Python launchers set os.environ, after the library may have
 * been loaded (LD_PRELOAD, or an earlier dlopen that was never undone).
 * The plugin must read METAROCE_* and NCCL_DEBUG* at init, from the C
 * environment. */

static void run_lateenv(void) {
  /* A Go c-shared library finishes starting its runtime in the background
   * after dlopen returns; an exported Go function returns only once it is
   * done. Call one first, so that the setenv calls below come after the
   * library's start-up, never during it. */
  size_t (*last_error)(char*, size_t) = (size_t (*)(char*, size_t))dlsym(lib, "metaroce_net_last_error");
  if (!last_error) die("no metaroce_net_last_error symbol: %s", dlerror());
  (void)last_error(NULL, 0);
  const char* be = getenv("METAROCE_BACKEND");
  char* keep = be ? strdup(be) : NULL;
  /* NCCL's defaults for the failure: WARN, default subsystems. */
  setenv("NCCL_DEBUG", "WARN", 1);
  unsetenv("NCCL_DEBUG_SUBSYS");
  setenv("METAROCE_BACKEND", "bogus", 1);
  ncclResult_t r = p_init_rc();
  printf("RESULT lateenv-bogus rc=%d\n", (int)r);
  if (r != ncclInvalidUsage) die("init with METAROCE_BACKEND=bogus set after load returned %d, want ncclInvalidUsage (%d)", (int)r, (int)ncclInvalidUsage);
  /* A working backend, and the INFO init line through NCCL's filter. */
  if (keep) setenv("METAROCE_BACKEND", keep, 1); else unsetenv("METAROCE_BACKEND");
  free(keep);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
  p_init();
  p_props();
  p_finalize();
}

/* ---- benchmark: 8 x 512 KiB in flight, and small-message latency ----
 * The polling loops yield the CPU after a pass without progress, so that on
 * a small host the two spinning harness threads leave the plugin's
 * datapath threads room to run. */

#define BCHUNK (512 * 1024)
#define BOUT 8
#define BSECONDS 2.0
#define LAT_ITERS 2000

static void run_bench_recv(int wfd) {
  void* lc;
  void* rc = setup_recv(wfd, &lc);
  CHECK(T12->closeListen(lc));
  unsigned char* buf = malloc((size_t)BOUT * BCHUNK);
  void* mh = p_regmr(rc, buf, (size_t)BOUT * BCHUNK);
  void* reqs[BOUT] = {0};
  long got = 0;
  double t0 = 0, dt = 0;
  for (;;) {
    int progress = 0;
    for (int s = 0; s < BOUT; s++) {
      if (!reqs[s]) {
        void* data[1] = {buf + (size_t)s * BCHUNK}; size_t sizes[1] = {BCHUNK}; int tags[1] = {0}; void* mhs[1] = {mh};
        CHECK(p_irecv(rc, 1, data, sizes, tags, mhs, &reqs[s]));
      }
      if (!reqs[s]) continue;
      int done = 0, size = 0;
      CHECK(T12->test(reqs[s], &done, &size));
      if (!done) continue;
      reqs[s] = NULL;
      progress = 1;
      if (size == 0) goto out; /* end marker */
      if (size == 1 && dt == 0) dt = now_s() - t0; /* end of the bulk phase */
      if (size != BCHUNK) continue;
      if (got == 0) t0 = now_s();
      got += size;
    }
    if (!progress) sched_yield();
  }
out:;
  printf("RESULT bench goodput_GBps=%.3f bytes=%ld seconds=%.3f\n", got / dt / 1e9, got, dt);
  T12->closeRecv(rc);
  free(buf);
}

static void run_bench_send(int rfd, int waitfd) {
  void* sc = setup_send(rfd);
  unsigned char* buf = calloc(BOUT, BCHUNK);
  void* mh = p_regmr(sc, buf, (size_t)BOUT * BCHUNK);
  void* reqs[BOUT] = {0};
  double t0 = now_s();
  long msgs = 0;
  while (now_s() - t0 < BSECONDS) {
    int progress = 0;
    for (int s = 0; s < BOUT; s++) {
      if (!reqs[s]) { CHECK(p_isend(sc, buf + (size_t)s * BCHUNK, BCHUNK, 0, mh, &reqs[s])); if (reqs[s]) msgs++; }
      if (!reqs[s]) continue;
      int done = 0;
      CHECK(T12->test(reqs[s], &done, NULL));
      if (done) { reqs[s] = NULL; progress = 1; }
    }
    if (!progress) sched_yield();
  }
  for (int s = 0; s < BOUT; s++)
    if (reqs[s]) CHECK(test_wait(reqs[s], NULL, DEADLINE_S));
  /* a 1-byte message ends the bulk phase: the receiver stops its clock */
  void* mark = NULL;
  while (!mark) CHECK(p_isend(sc, buf, 1, 0, mh, &mark));
  CHECK(test_wait(mark, NULL, DEADLINE_S));
  /* small-message isend->test latency (until the plugin reports the send done) */
  double lat0 = now_s();
  for (int i = 0; i < LAT_ITERS; i++) {
    void* r = NULL;
    while (!r) CHECK(p_isend(sc, buf, 8, 0, mh, &r));
    CHECK(test_wait(r, NULL, DEADLINE_S));
  }
  double lat = (now_s() - lat0) / LAT_ITERS * 1e6;
  void* r = NULL;
  while (!r) CHECK(p_isend(sc, buf, 0, 0, mh, &r));
  CHECK(test_wait(r, NULL, DEADLINE_S));
  printf("RESULT bench-send msgs=%ld isend_test_latency_us=%.2f\n", msgs, lat);
  fflush(stdout);
  /* keep the connection open until the receiver drained everything */
  char c;
  (void)!read(waitfd, &c, 1);
  T12->closeSend(sc);
  free(buf);
}

int main(int argc, char** argv) {
  int forced = 0, a = 1, sendRole = 0, sendFds[2] = {-1, -1};
  pid_t child = -1;
  if (argc > 3 && strcmp(argv[a], "-r") == 0) { sendRole = 1; sendFds[0] = atoi(argv[a + 1]); sendFds[1] = atoi(argv[a + 2]); a += 3; }
  if (argc > a + 1 && strcmp(argv[a], "-v") == 0) { forced = atoi(argv[a + 1]); a += 2; }
  if (argc - a != 2) { fprintf(stderr, "usage: %s [-v VERSION] LIBRARY data|kill|oversize|garbage|lateenv|bench\n", argv[0]); return 2; }
  const char* path = argv[a];
  const char* sc = argv[a + 1];
  setvbuf(stdout, NULL, _IOLBF, 0);

  if (strcmp(sc, "lateenv") == 0) {
    load(path, forced);
    run_lateenv();
    printf("RESULT ok version=%d\n", ver);
    return 0;
  }
  if (strcmp(sc, "garbage") == 0) {
    load(path, forced);
    p_init();
    p_props();
    run_garbage();
    p_finalize();
    printf("RESULT ok version=%d\n", ver);
    return 0;
  }
  int pfd[2], back[2];
  int sender = 0;
  if (sendRole) {
    /* re-executed sender: the pipe ends arrive as fd numbers */
    sender = 1;
    pfd[0] = sendFds[0]; back[0] = sendFds[1];
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
    const char* ns = getenv("HARNESS_SENDER_NETNS");
    if (ns && *ns) {
      /* before the plugin loads: its runtime's threads stay where they start */
      char nsp[256];
      snprintf(nsp, sizeof nsp, "/run/netns/%s", ns);
      int fd = open(nsp, O_RDONLY | O_CLOEXEC);
      if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) die("HARNESS_SENDER_NETNS=%s: %s", ns, strerror(errno));
      close(fd);
    }
  } else {
    if (pipe(pfd) != 0 || pipe(back) != 0) die("pipe");
    /* The sender is a fresh exec of this program, never a plain fork: with
     * LD_PRELOAD the Go runtime is already running here and must not be
     * forked. */
    child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
      close(pfd[1]); close(back[1]);
      char f0[16], f1[16], fv[16];
      snprintf(f0, sizeof f0, "%d", pfd[0]);
      snprintf(f1, sizeof f1, "%d", back[0]);
      snprintf(fv, sizeof fv, "%d", forced);
      execl("/proc/self/exe", argv[0], "-r", f0, f1, "-v", fv, path, sc, (char*)NULL);
      _exit(127);
    }
    close(pfd[0]); close(back[0]);
  }
  role = sender ? "send" : "recv";
  load(path, forced);
  p_init();
  p_props();
  /* maxRecvs is 1 for NCCL, but irecv takes groups of up to 8 buffers from
     any caller: exercise groups of 3. */
  ngrp = 3;
  if (strcmp(sc, "data") == 0) {
    if (sender) run_data_send(pfd[0]); else run_data_recv(pfd[1]);
  } else if (strcmp(sc, "kill") == 0) {
    if (sender) run_kill_send(pfd[0]); else run_kill_recv(pfd[1]);
  } else if (strcmp(sc, "oversize") == 0) {
    if (sender) run_oversize_send(pfd[0]); else run_oversize_recv(pfd[1]);
  } else if (strcmp(sc, "bench") == 0) {
    if (sender) run_bench_send(pfd[0], back[0]); else run_bench_recv(pfd[1]);
  } else {
    die("unknown scenario %s", sc);
  }
  p_finalize();
  if (sender) _exit(0);
  if (strcmp(sc, "bench") == 0) (void)!write(back[1], "x", 1);
  int st = 0;
  double end = now_s() + DEADLINE_S;
  while (waitpid(child, &st, WNOHANG) == 0) {
    if (now_s() > end) { kill(child, SIGKILL); die("sender did not exit"); }
    usleep(1000);
  }
  if (strcmp(sc, "kill") != 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) die("sender failed (status %d)", st);
  /* survive dlclose and reload, as NCCL does with NCCL_NET_PLUGIN_REF_COUNT=0 */
  dlclose(lib);
  load(path, forced);
  p_init();
  p_props();
  p_finalize();
  printf("RESULT ok version=%d reload=1\n", ver);
  return 0;
}
