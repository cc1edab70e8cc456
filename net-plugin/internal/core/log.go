package core

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Level mirrors ncclDebugLogLevel.
type Level int32

// Log levels (NCCL_LOG_*).
const (
	LogNone    Level = 0
	LogVersion Level = 1
	LogWarn    Level = 2
	LogInfo    Level = 3
	LogAbort   Level = 4
	LogTrace   Level = 5
)

// Subsystem bits (ncclDebugLogSubSys) used by the plugin.
const (
	SubsysInit uint64 = 0x1
	SubsysNet  uint64 = 0x10
	SubsysEnv  uint64 = 0x80
	SubsysAll  uint64 = ^uint64(0)
)

// subsysNames are the NCCL_DEBUG_SUBSYS keywords and their bits.
var subsysNames = map[string]uint64{
	"INIT": 0x1, "COLL": 0x2, "P2P": 0x4, "SHM": 0x8, "NET": 0x10, "GRAPH": 0x20,
	"TUNING": 0x40, "ENV": 0x80, "ALLOC": 0x100, "CALL": 0x200, "PROXY": 0x400,
	"NVLS": 0x800, "BOOTSTRAP": 0x1000, "REG": 0x2000, "PROFILE": 0x4000,
	"RAS": 0x8000, "DESTROY": 0x10000, "ALLOC_HOST": 0x20000, "ALL": ^uint64(0),
}

// defaultSubsys is NCCL's mask when NCCL_DEBUG_SUBSYS is unset.
const defaultSubsys = 0x1 | 0x1000 | 0x80 // INIT, BOOTSTRAP, ENV

// ParseDebugLevel parses NCCL_DEBUG (case-insensitive); unset or unknown
// means NONE, as in NCCL.
func ParseDebugLevel(s string) Level {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "VERSION":
		return LogVersion
	case "WARN":
		return LogWarn
	case "INFO":
		return LogInfo
	case "ABORT":
		return LogAbort
	case "TRACE":
		return LogTrace
	}
	return LogNone
}

// ParseDebugSubsys parses NCCL_DEBUG_SUBSYS: a comma list of subsystem names,
// inverted by a leading '^'. Unknown names are ignored, as NCCL does; an
// empty value gives NCCL's default mask.
func ParseDebugSubsys(s string) uint64 {
	s = strings.TrimSpace(s)
	if s == "" {
		return defaultSubsys
	}
	invert := strings.HasPrefix(s, "^")
	if invert {
		s = s[1:]
	}
	var mask uint64
	for _, name := range strings.Split(s, ",") {
		mask |= subsysNames[strings.ToUpper(strings.TrimSpace(name))]
	}
	if invert {
		mask = ^mask
	}
	return mask
}

// LogSink receives formatted messages; the C layer installs one that calls
// NCCL's ncclDebugLogger_t. flags is the ncclDebugLogSubSys mask handed to
// NCCL with the message (see flagsFor).
type LogSink func(level Level, flags uint64, msg string)

type logState struct {
	level  Level
	subsys uint64
	sink   LogSink // nil: write to stderr
}

// logger is the filter and sink in use. It starts with NCCL's defaults
// (NCCL_DEBUG unset: nothing shown; default subsystems) and no sink. The
// filter is not read from the environment when the library is loaded:
// NCCL applies ~/.nccl.conf, /etc/nccl.conf and NCCL_CONF_FILE with
// setenv after the process started, so Plugin.Init reads it (SetLogFilter)
// through the plugin's LookupEnv.
var logger atomic.Pointer[logState]

func init() { logger.Store(&logState{level: LogNone, subsys: defaultSubsys}) }

// update replaces the log state with a modified copy, atomically with
// respect to concurrent updates.
func update(modify func(*logState)) {
	for {
		old := logger.Load()
		st := *old
		modify(&st)
		if logger.CompareAndSwap(old, &st) {
			return
		}
	}
}

// ConfigureLog sets the filter (NCCL_DEBUG / NCCL_DEBUG_SUBSYS values) and
// the sink. NCCL filters again on its side; filtering here only avoids
// formatting messages nobody will see, and applies the same rules when the
// plugin runs without NCCL's logger (harness, tests).
func ConfigureLog(level, subsys string, sink LogSink) {
	logger.Store(&logState{level: ParseDebugLevel(level), subsys: ParseDebugSubsys(subsys), sink: sink})
}

// SetLogFilter sets the filter from NCCL_DEBUG and NCCL_DEBUG_SUBSYS
// values, keeping the sink.
func SetLogFilter(level, subsys string) {
	l, m := ParseDebugLevel(level), ParseDebugSubsys(subsys)
	update(func(st *logState) { st.level, st.subsys = l, m })
}

// SetLogSink sets the sink (nil: stderr), keeping the filter.
func SetLogSink(sink LogSink) { update(func(st *logState) { st.sink = sink }) }

// Enabled reports whether a message at level for subsys would be shown:
// WARN and below always when the level allows, INFO and TRACE only for
// enabled subsystems.
func Enabled(level Level, subsys uint64) bool {
	st := logger.Load()
	if level > st.level || level == LogNone {
		return false
	}
	if (level == LogInfo || level == LogTrace) && st.subsys&subsys == 0 {
		return false
	}
	return true
}

// flagsFor returns the ncclDebugLogSubSys bits passed to NCCL's logger with
// a message at level. NCCL drops every message, WARN included, whose flags
// share no bit with NCCL_DEBUG_SUBSYS (default INIT,BOOTSTRAP,ENV), and its
// own WARN and VERSION lines pass NCCL_ALL for that reason; so do ours, or a
// failure would be invisible at NCCL_DEBUG=WARN with default subsystems.
// INFO and TRACE keep their subsystem so that NCCL_DEBUG_SUBSYS selects them.
func flagsFor(level Level, subsys uint64) uint64 {
	if level == LogWarn || level == LogVersion {
		return SubsysAll
	}
	return subsys
}

// Logf formats and emits a message if Enabled. Messages go to NCCL's logger
// when one is installed, else to stderr (never to stdout). A WARN goes to
// NCCL's logger whatever NCCL_DEBUG says: NCCL keeps the text of the last
// WARN it is handed before applying its own filter, and reports it as the
// reason of a failed call (ncclGetLastError, PyTorch's "Last error:"), so
// that a job run with the default environment still learns which peer
// failed and why.
func Logf(level Level, subsys uint64, format string, args ...any) {
	st := logger.Load()
	if !(level == LogWarn && st.sink != nil) && !Enabled(level, subsys) {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if st.sink != nil {
		st.sink(level, flagsFor(level, subsys), msg)
		return
	}
	tag := map[Level]string{LogVersion: "VERSION", LogWarn: "WARN", LogInfo: "INFO", LogAbort: "ABORT", LogTrace: "TRACE"}[level]
	host, _ := os.Hostname()
	fmt.Fprintf(os.Stderr, "%s:%d:%d [metaroce] NCCL %s %s\n", host, os.Getpid(), time.Now().Unix(), tag, msg)
}
