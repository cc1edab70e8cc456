// Package harness tests the built net plugin the way NCCL loads it.
//
// harness.c is a stand-alone C program (excluded from the Go build) that
// dlopens the c-shared library with RTLD_NOW|RTLD_LOCAL, picks the newest
// ncclNetPlugin_vN symbol (or a forced version) and, in two processes over
// loopback, runs listen → connect/accept polling → regMr → grouped
// isend/irecv with tags → test → close → finalize → dlclose and reload. Its
// logger drops what NCCL's would (NCCL_DEBUG level, NCCL_DEBUG_SUBSYS
// mask), and the lateenv scenario sets variables with setenv after load.
// The Go tests build the library and the harness into a temporary folder and
// run every scenario; they skip when gcc is not installed.
package harness
