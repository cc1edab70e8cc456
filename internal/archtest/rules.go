package archtest

// Rule restricts the imports of one package or subtree. Patterns are import
// paths; a trailing "/..." matches the path itself and everything below it.
// Paths of our own packages are written relative to the module root
// ("transport/udp/...").
type Rule struct {
	// Pkg is the module-relative package (or "x/..." subtree) the rule
	// applies to. A rule whose packages do not exist yet is skipped.
	Pkg string
	// Why is printed with every violation: the reason for the rule.
	Why string
	// DirectStd lists standard-library packages Pkg must not import
	// itself. Only direct imports count: fmt reaches os and time inside the
	// standard library, which is harmless.
	DirectStd []string
	// External lists non-module packages (other modules, or the cgo
	// pseudo-package "C") forbidden anywhere in Pkg's dependency closure.
	External []string
	// StdOnly forbids every package of another module in the closure.
	StdOnly bool
	// Ours lists our packages forbidden anywhere in the closure.
	Ours []string
	// OnlyOurs, when non-nil, is the complete list of our packages allowed
	// in the closure; an empty non-nil list allows none.
	OnlyOurs []string
}

// sansIO is what a layer driven by calls (time passed in as an int64, no
// sockets, no goroutine-owned clock) must not import directly.
var sansIO = []string{
	"net", "net/...", "os", "os/...", "syscall", "time", "time/...",
	"math/rand", // v1 has a hidden global source; math/rand/v2 with an explicit seed is fine
	"C", "unsafe", "runtime/cgo", "plugin",
}

// drivers are our packages that own I/O, goroutines or a wall clock, or that
// sit above the transport.
var drivers = []string{
	"transport/udp/...", "fabric/...", "net-plugin/...", "collectives/...",
	"gpu/...", "cmd/...", "bench/...", "netlab/...",
}

// ioModules are the external modules that reach the operating system.
var ioModules = []string{"golang.org/x/sys/...", "golang.org/x/net/...", "C"}

// Rules is the layering of the repository (see the architecture document's
// package table). Add a line when adding a package with a constraint.
var Rules = []Rule{
	{
		Pkg:      "transport/wire/...",
		Why:      "the packet formats are shared by the core, the simulator and the conformance tester: standard library only",
		StdOnly:  true,
		OnlyOurs: []string{},
		External: []string{"C"},
	},
	{
		Pkg:       "transport",
		Why:       "the protocol core is sans-I/O: time comes in as an int64 argument, drivers own sockets and clocks",
		DirectStd: sansIO,
		External:  ioModules,
		Ours:      append(append([]string{}, drivers...), "transport/rocev2/..."),
	},
	{
		Pkg:       "transport/cc/...",
		Why:       "congestion control is driven by the core and must be sans-I/O like it",
		DirectStd: sansIO,
		External:  ioModules,
		Ours:      append(append([]string{}, drivers...), "transport", "transport/rocev2/..."),
	},
	{
		Pkg:       "transport/rocev2/...",
		Why:       "the RoCEv2 baseline runs under the same drivers as the core: wire, cc and the event queue only, no I/O",
		DirectStd: sansIO,
		External:  ioModules,
		OnlyOurs:  []string{"transport/wire/...", "transport/cc/...", "internal/eventq"},
	},
	{
		Pkg:       "internal/eventq",
		Why:       "the event queue is shared by sans-I/O code (the RoCEv2 baseline) and must stay pure",
		DirectStd: sansIO,
		External:  ioModules,
		OnlyOurs:  []string{},
	},
	{
		Pkg:  "fabric/sim/...",
		Why:  "the simulator runs the protocol code on virtual time and must never reach the UDP driver",
		Ours: []string{"transport/udp/..."},
	},
	{
		Pkg:  "collectives/reduce/...",
		Why:  "reduction kernels are pure arithmetic, usable without any transport",
		Ours: []string{"transport", "transport/..."},
	},
	{
		Pkg:  "collectives/sched/...",
		Why:  "schedules are data that both the real executor and the simulator run; they know no transport",
		Ours: []string{"transport", "transport/..."},
	},
}
