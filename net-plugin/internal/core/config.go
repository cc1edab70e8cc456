package core

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
	"github.com/metaroce/metaroce/net-plugin/internal/tcpnet"
	"github.com/metaroce/metaroce/net-plugin/internal/udpnet"
	"github.com/metaroce/metaroce/transport/auth"
)

// LookupEnv looks an environment variable up, with os.LookupEnv's contract:
// ok is false when the variable is unset. The c-shared library passes one
// that calls the C library's getenv: Go's os package reads a copy of the
// environment taken when the runtime started, which misses every setenv
// made afterwards (NCCL applies ~/.nccl.conf, /etc/nccl.conf and
// NCCL_CONF_FILE with setenv; Python programs set os.environ before
// init_process_group). Tests pass a map lookup.
type LookupEnv func(name string) (value string, ok bool)

// get returns the variable's value, "" when unset.
func (l LookupEnv) get(name string) string {
	v, _ := l(name)
	return v
}

// Config is the plugin configuration, read from METAROCE_* variables.
type Config struct {
	// Backend names the transport (METAROCE_BACKEND, default "udp").
	Backend string
	// IfNames selects devices (METAROCE_IFNAMES, NCCL_SOCKET_IFNAME syntax).
	IfNames string
	// Socks is the TCP backend's sockets per connection (METAROCE_TCP_SOCKS, 2).
	Socks int
	// Timeout bounds connection setup and dead-peer detection
	// (METAROCE_TIMEOUT_MS, 30000): the udp backend's handshake and idle
	// timeouts, the tcp backend's connect timeout and TCP_USER_TIMEOUT.
	Timeout time.Duration
	// MaxPeers bounds the udp backend's connections per device
	// (METAROCE_MAX_PEERS, udpnet.DefaultMaxPeers).
	MaxPeers int
	// Threads is the Go scheduler's thread count, GOMAXPROCS (METAROCE_THREADS, 2).
	Threads int
	// Secret is the udp backend's shared secret for per-packet
	// authentication (METAROCE_SECRET, at least auth.MinSecretLen bytes);
	// nil when unset. It is read here, through LookupEnv, and handed to the
	// datapath, which would otherwise read it with os.LookupEnv.
	Secret []byte
}

// DefaultBackend is METAROCE_BACKEND when unset: the MetaRoCE datapath.
const DefaultBackend = "udp"

// DefaultThreads is GOMAXPROCS when METAROCE_THREADS is unset: the plugin
// shares the host with NCCL's own busy-polling proxy threads.
const DefaultThreads = 2

// ConfigFromEnv reads the configuration through lookup, rejecting malformed
// values with an error that names the variable.
func ConfigFromEnv(lookup LookupEnv) (Config, error) {
	getenv := lookup.get
	c := Config{Backend: DefaultBackend, Socks: tcpnet.DefaultConfig.Socks, Timeout: tcpnet.DefaultConfig.Timeout, Threads: DefaultThreads}
	if v := strings.TrimSpace(getenv("METAROCE_BACKEND")); v != "" {
		c.Backend = strings.ToLower(v)
	}
	c.IfNames = getenv("METAROCE_IFNAMES")
	if s := getenv(auth.EnvSecret); s != "" {
		// The value itself is never part of a message.
		if len(s) < auth.MinSecretLen {
			return c, fmt.Errorf("%s has %d bytes, want at least %d; generate one with `head -c 32 /dev/urandom | base64` and give every rank the same value: %w", auth.EnvSecret, len(s), auth.MinSecretLen, backend.ErrInvalidUsage)
		}
		c.Secret = []byte(s)
	}
	ints := []struct {
		name     string
		min, max int
		set      func(int)
	}{
		{"METAROCE_TCP_SOCKS", 1, tcpnet.MaxSocks, func(v int) { c.Socks = v }},
		{"METAROCE_TIMEOUT_MS", 100, 3600_000, func(v int) { c.Timeout = time.Duration(v) * time.Millisecond }},
		{"METAROCE_THREADS", 1, 256, func(v int) { c.Threads = v }},
		{"METAROCE_MAX_PEERS", 16, 1 << 20, func(v int) { c.MaxPeers = v }},
	}
	for _, iv := range ints {
		s := strings.TrimSpace(getenv(iv.name))
		if s == "" {
			continue
		}
		v, err := strconv.Atoi(s)
		if err != nil || v < iv.min || v > iv.max {
			return c, fmt.Errorf("%s=%q: want an integer in %d..%d: %w", iv.name, s, iv.min, iv.max, backend.ErrInvalidUsage)
		}
		iv.set(v)
	}
	return c, nil
}

// Backends maps METAROCE_BACKEND values to constructors. A new transport
// registers itself here.
var Backends = map[string]func(Config) (backend.Backend, error){
	"tcp": func(c Config) (backend.Backend, error) {
		return tcpnet.New(tcpnet.Config{IfNames: c.IfNames, Socks: c.Socks, Timeout: c.Timeout, Logf: func(format string, args ...any) {
			Logf(LogInfo, SubsysNet, format, args...)
		}})
	},
	"udp": func(c Config) (backend.Backend, error) {
		return udpnet.New(udpnet.Config{IfNames: c.IfNames, Timeout: c.Timeout, MaxPeers: c.MaxPeers, Secret: c.Secret, Logf: func(format string, args ...any) {
			Logf(LogInfo, SubsysNet, format, args...)
		}})
	},
}

// newBackend builds the configured backend.
func newBackend(c Config) (backend.Backend, error) {
	mk, ok := Backends[c.Backend]
	if !ok {
		names := make([]string, 0, len(Backends))
		for n := range Backends {
			names = append(names, n)
		}
		return nil, fmt.Errorf("METAROCE_BACKEND=%q is not available in this build (have %v): %w", c.Backend, names, backend.ErrInvalidUsage)
	}
	return mk(c)
}
