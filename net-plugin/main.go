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

	"github.com/metaroce/metaroce/net-plugin/internal/core"
)

// plugin is the process-wide plugin instance.
var plugin = core.New(os.Getenv)

// init runs when the library is loaded: it bounds the Go scheduler
// (METAROCE_THREADS, default 2) and routes logs to NCCL once NCCL hands its
// logger to ncclNet.init.
func init() {
	threads := core.DefaultThreads
	if cfg, err := core.ConfigFromEnv(os.Getenv); err == nil {
		threads = cfg.Threads
	}
	runtime.GOMAXPROCS(threads)
	core.ConfigureLog(os.Getenv("NCCL_DEBUG"), os.Getenv("NCCL_DEBUG_SUBSYS"), sink)
}

// sink forwards a log line to NCCL's logger, or to stderr before NCCL has
// provided one.
func sink(level core.Level, subsys uint64, msg string) {
	fn := C.mr_get_logger()
	if fn == nil {
		os.Stderr.WriteString("NCCL " + levelName(level) + " " + msg + "\n")
		return
	}
	cs := C.CString(msg)
	C.mr_log(fn, C.int(level), C.ulong(subsys), cs)
	C.free(unsafePointer(cs))
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
