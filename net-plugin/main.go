// Command net-plugin is the MetaRoCE NCCL/RCCL network plugin, built with
// `go build -buildmode=c-shared` into libnccl-net-metaroce.so (and copies
// named libnccl-net.so / librccl-net.so).
//
// The library exports the data symbols ncclNetPlugin_v12 down to
// ncclNetPlugin_v6 (tables.c); NCCL and RCCL take the newest they know. All
// logic lives in internal/core; this package only converts C arguments and
// returns ncclResult_t values. Objects cross the boundary as integer handles
// from fixed-capacity tables, never as Go pointers.
//
// Only one Go c-shared library can live in a process: a second Go runtime
// in the same address space is unsupported by Go. Do not load this plugin
// into a process that already loaded another Go c-shared library (another Go
// NCCL plugin, tuner or profiler).
//
// The library is never unloaded (Go c-shared objects are NODELETE), so an
// NCCL dlclose + dlopen cycle finds the same state; init and finalize are
// reference counted for that reason. Go installs no handlers for
// asynchronous signals in a c-shared library and writes nothing to stdout.
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include -O2 -Wall
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"os"
	"runtime"
	"unsafe"

	"github.com/metaroce/metaroce/net-plugin/internal/core"
)

// plugin is the process-wide plugin instance.
var plugin = core.New(lookupEnv)

// lookupEnv reads a variable from the C library's environment. Go's os
// package serves a copy of the environment taken when the Go runtime
// started (at process start with LD_PRELOAD, at the first dlopen
// otherwise, and never again: the library is not unloaded), so it misses
// what the process sets later with setenv: NCCL's ~/.nccl.conf,
// /etc/nccl.conf and NCCL_CONF_FILE, or a Python launcher's os.environ.
// getenv is not safe against a concurrent setenv, the same contract NCCL's
// own getenv calls live with.
func lookupEnv(name string) (string, bool) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	v := C.getenv(cs)
	if v == nil {
		return "", false
	}
	return C.GoString(v), true
}

// init runs when the library is loaded: it bounds the Go scheduler
// (METAROCE_THREADS, default 2), installs the log sink and applies the
// NCCL_DEBUG filter as far as the environment tells now, for messages
// before the first init. The first init reads all of them again
// (core.Plugin.Init, applyThreads), so later settings win.
func init() {
	threads := core.DefaultThreads
	if cfg, err := core.ConfigFromEnv(lookupEnv); err == nil {
		threads = cfg.Threads
	}
	runtime.GOMAXPROCS(threads)
	level, _ := lookupEnv("NCCL_DEBUG")
	subsys, _ := lookupEnv("NCCL_DEBUG_SUBSYS")
	core.SetLogFilter(level, subsys)
	core.SetLogSink(sink)
}

// applyThreads sets GOMAXPROCS to the METAROCE_THREADS the plugin was
// initialised with, once it is; a no-op when unchanged.
func applyThreads() {
	if cfg, ok := plugin.Config(); ok && runtime.GOMAXPROCS(0) != cfg.Threads {
		runtime.GOMAXPROCS(cfg.Threads)
	}
}

// sink forwards a log line to NCCL's logger, or to stderr before NCCL has
// provided one.
func sink(level core.Level, flags uint64, msg string) {
	fn := C.mr_get_logger()
	if fn == nil {
		os.Stderr.WriteString("NCCL " + levelName(level) + " " + msg + "\n")
		return
	}
	cs := C.CString(msg)
	C.mr_log(fn, C.int(level), C.ulong(flags), cs)
	C.free(unsafe.Pointer(cs))
}

func levelName(l core.Level) string {
	switch l {
	case core.LogWarn:
		return "WARN"
	case core.LogInfo:
		return "INFO"
	case core.LogTrace:
		return "TRACE"
	}
	return "LOG"
}

func main() {}
