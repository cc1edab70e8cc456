package netlab

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// DefaultPrefix starts the ID of every lab whose Config has no Prefix.
const DefaultPrefix = "mrl"

// Limits of the addressing plan (see the package documentation).
const (
	MaxPlanes = 64
	MaxLinks  = 63
)

// Config describes a lab.
type Config struct {
	// Planes is the number of disjoint fabrics (1..MaxPlanes).
	Planes int
	// Links is the number of parallel spine links per plane (1..MaxLinks).
	Links int
	// Prefix starts the lab's ID and namespace names (DefaultPrefix when
	// empty; letters and digits, at most 8 characters).
	Prefix string
	// HashSeed, when nonzero, fixes the switches' multipath hash seed
	// (net.ipv4.fib_multipath_hash_seed, kernels 6.11 and later), so that the
	// same source port takes the same link in every run. Zero keeps the
	// kernel's random seed.
	HashSeed uint32
}

// Lab is a running fabric. Its methods may be called from several goroutines.
type Lab struct {
	id     string
	planes int
	links  int

	mu     sync.Mutex
	rules  []planeRules
	closed bool
	made   []string // namespaces created, in order
}

// Host is one end host of a lab.
type Host struct {
	lab *Lab
	n   int
}

// New builds the lab that cfg describes. On error, whatever was built is torn
// down again. Call Close when done (tests: t.Cleanup(func() { lab.Close() })).
func New(cfg Config) (*Lab, error) {
	if cfg.Planes < 1 || cfg.Planes > MaxPlanes {
		return nil, fmt.Errorf("netlab: %d planes, want 1..%d", cfg.Planes, MaxPlanes)
	}
	if cfg.Links < 1 || cfg.Links > MaxLinks {
		return nil, fmt.Errorf("netlab: %d links per plane, want 1..%d", cfg.Links, MaxLinks)
	}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	if err := Available(); err != nil {
		return nil, err
	}
	me, err := self()
	if err != nil {
		return nil, err
	}
	// The remains of runs that died without Close (a crash, SIGKILL)
	// would otherwise pile up; failing to reap them does not stop this
	// lab from being built, and the next New tries again.
	reapDead(OwnerDir, me)
	l := &Lab{
		planes: cfg.Planes,
		links:  cfg.Links,
		rules:  make([]planeRules, cfg.Planes),
	}
	// The marker goes in before the first namespace, so that no reaper or
	// Cleanup ever sees this lab's namespaces without their live owner.
	// A marker of the same ID (a random collision) makes us draw again.
	for try := 0; ; try++ {
		var suffix [suffixHex / 2]byte
		if _, err := rand.Read(suffix[:]); err != nil {
			return nil, fmt.Errorf("netlab: random suffix: %w", err)
		}
		l.id = prefix + hex.EncodeToString(suffix[:])
		err := writeOwner(OwnerDir, l.id, me)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || try == 3 {
			return nil, err
		}
	}
	if err := l.build(cfg); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, nil
}

// checkPrefix accepts 1..8 ASCII letters and digits.
func checkPrefix(p string) error {
	if len(p) < 1 || len(p) > 8 {
		return fmt.Errorf("netlab: prefix %q must have 1..8 characters", p)
	}
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return fmt.Errorf("netlab: prefix %q may hold only letters and digits", p)
		}
	}
	return nil
}

// ID is the lab's unique name; every namespace name starts with it.
func (l *Lab) ID() string { return l.id }

// Planes is the number of planes.
func (l *Lab) Planes() int { return l.planes }

// Links is the number of spine links per plane.
func (l *Lab) Links() int { return l.links }

// hostNS and switchNS name the namespaces.
func (l *Lab) hostNS(h int) string { return fmt.Sprintf("%s-h%d", l.id, h) }

func (l *Lab) switchNS(plane, side int) string {
	return fmt.Sprintf("%s-s%dp%d", l.id, side, plane)
}

// SwitchNamespace is the namespace of switch side (1 or 2) of plane.
func (l *Lab) SwitchNamespace(plane, side int) string { return l.switchNS(plane, side) }

// Host returns host 1 or 2; any other number panics (a programming error).
func (l *Lab) Host(n int) *Host {
	if n != 1 && n != 2 {
		panic("netlab: host must be 1 or 2")
	}
	return &Host{lab: l, n: n}
}

// Namespace is the host's network namespace name.
func (h *Host) Namespace() string { return h.lab.hostNS(h.n) }

// Addr is the host's IPv4 address on plane (0 <= plane < Planes).
func (h *Host) Addr(plane int) netip.Addr {
	base := 0
	if h.n == 2 {
		base = 128
	}
	return netip.AddrFrom4([4]byte{198, 18, byte(base + plane), 2})
}

// Interface is the name of the host's interface on plane, inside its namespace.
func (h *Host) Interface(plane int) string { return "p" + strconv.Itoa(plane) }

// Run runs fn inside host n's namespace; see RunInNamespace for the threading
// rules.
func (l *Lab) Run(host int, fn func() error) error {
	return RunInNamespace(l.Host(host).Namespace(), fn)
}

// Command prepares a subprocess that runs inside host n's namespace (through
// `ip netns exec`).
func (l *Lab) Command(host int, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", l.Host(host).Namespace(), name}, args...)...)
}

// build creates namespaces, links, addresses, routes and sysctls.
func (l *Lab) build(cfg Config) error {
	add := func(ns string) error {
		if _, err := run("", "ip", "netns", "add", ns); err != nil {
			return err
		}
		l.mu.Lock()
		l.made = append(l.made, ns)
		l.mu.Unlock()
		_, err := run("", "ip", "-n", ns, "link", "set", "lo", "up")
		return err
	}
	for h := 1; h <= 2; h++ {
		if err := add(l.hostNS(h)); err != nil {
			return err
		}
	}
	for p := 0; p < l.planes; p++ {
		for side := 1; side <= 2; side++ {
			ns := l.switchNS(p, side)
			if err := add(ns); err != nil {
				return err
			}
			if err := RunInNamespace(ns, func() error { return switchSysctls(cfg.HashSeed) }); err != nil {
				return err
			}
		}
		if err := l.buildPlane(p); err != nil {
			return err
		}
	}
	return nil
}

// switchSysctls turns a namespace into an ECMP router that hashes on the
// 5-tuple. Reverse-path filtering is off because the two directions of a flow
// may take different spine links; IPv6 is off so that neighbour discovery
// does not add packets to the link counters.
func switchSysctls(seed uint32) error {
	for _, kv := range [][2]string{
		{"net/ipv6/conf/all/disable_ipv6", "1"},
		{"net/ipv6/conf/default/disable_ipv6", "1"},
		{"net/ipv4/conf/all/rp_filter", "0"},
		{"net/ipv4/conf/default/rp_filter", "0"},
		{"net/ipv4/ip_forward", "1"},
		{"net/ipv4/fib_multipath_hash_policy", "1"},
	} {
		if err := writeSysctl(kv[0], kv[1]); err != nil {
			return err
		}
	}
	const seedKey = "net/ipv4/fib_multipath_hash_seed"
	if _, err := os.Stat("/proc/sys/" + seedKey); seed == 0 || err != nil {
		return nil // random seed, or a kernel older than 6.11 without the knob
	}
	return writeSysctl(seedKey, strconv.FormatUint(uint64(seed), 10))
}

// vethPair creates a veth pair with each end directly in its namespace and
// with the given MAC addresses, so that neighbour entries can be static.
func vethPair(nsA, a, macA, nsB, b, macB string) error {
	_, err := run("", "ip", "link", "add", "name", a, "address", macA, "netns", nsA,
		"type", "veth", "peer", "name", b, "address", macB, "netns", nsB)
	return err
}

// mac returns a locally administered MAC address for end (1 or 2) of link
// `link` of plane p; link 254 and 255 are the host links of hosts 1 and 2.
func mac(p, link, end int) string {
	return fmt.Sprintf("02:6d:%02x:%02x:%02x:00", p, link, end)
}

// ipBatch runs `ip -n ns -batch -` with the given commands, one a line.
func ipBatch(ns string, lines []string) error {
	_, err := run(strings.Join(lines, "\n")+"\n", "ip", "-n", ns, "-batch", "-")
	return err
}

func (l *Lab) buildPlane(p int) error {
	h1, h2 := l.hostNS(1), l.hostNS(2)
	s1, s2 := l.switchNS(p, 1), l.switchNS(p, 2)
	hif := "p" + strconv.Itoa(p)
	if err := vethPair(h1, hif, mac(p, 254, 1), s1, "h", mac(p, 254, 2)); err != nil {
		return err
	}
	if err := vethPair(h2, hif, mac(p, 255, 1), s2, "h", mac(p, 255, 2)); err != nil {
		return err
	}
	for i := 0; i < l.links; i++ {
		if err := vethPair(s1, fmt.Sprintf("a%d", i), mac(p, i, 1), s2, fmt.Sprintf("b%d", i), mac(p, i, 2)); err != nil {
			return err
		}
	}
	// Every neighbour entry is static: the first packets of a test then
	// never wait on ARP, which on a loaded machine can take longer than a
	// test's patience and lose whole bursts.
	net1 := fmt.Sprintf("198.18.%d", p)
	net2 := fmt.Sprintf("198.18.%d", 128+p)
	spine := func(i, end int) string { return fmt.Sprintf("198.19.%d.%d", p, 4*i+end) }
	if err := ipBatch(h1, []string{
		fmt.Sprintf("addr add %s.2/24 dev %s", net1, hif),
		"link set dev " + hif + " up",
		fmt.Sprintf("neigh replace %s.1 lladdr %s dev %s nud permanent", net1, mac(p, 254, 2), hif),
		fmt.Sprintf("route add %s.0/24 via %s.1 dev %s", net2, net1, hif),
	}); err != nil {
		return err
	}
	if err := ipBatch(h2, []string{
		fmt.Sprintf("addr add %s.2/24 dev %s", net2, hif),
		"link set dev " + hif + " up",
		fmt.Sprintf("neigh replace %s.1 lladdr %s dev %s nud permanent", net2, mac(p, 255, 2), hif),
		fmt.Sprintf("route add %s.0/24 via %s.1 dev %s", net1, net2, hif),
	}); err != nil {
		return err
	}
	for side, ns := range []string{s1, s2} {
		local, peer, dev, near := 1, 2, "a", net1
		if side == 1 {
			local, peer, dev, near = 2, 1, "b", net2
		}
		hostLink := 254 + side
		lines := []string{
			fmt.Sprintf("addr add %s.1/24 dev h", near),
			"link set dev h up",
			fmt.Sprintf("neigh replace %s.2 lladdr %s dev h nud permanent", near, mac(p, hostLink, 1)),
		}
		for i := 0; i < l.links; i++ {
			name := fmt.Sprintf("%s%d", dev, i)
			lines = append(lines,
				fmt.Sprintf("addr add %s/30 dev %s", spine(i, local), name),
				"link set dev "+name+" up",
				fmt.Sprintf("neigh replace %s lladdr %s dev %s nud permanent", spine(i, peer), mac(p, i, peer), name))
		}
		lines = append(lines, l.spineRoute(p, side+1, nil))
		if err := ipBatch(ns, lines); err != nil {
			return err
		}
	}
	return l.applyRules(p)
}

// spineRoute is the `ip route replace` line that sends switch side's (1 or
// 2) traffic for the far host of plane p over every spine link not in
// down, one nexthop each.
func (l *Lab) spineRoute(p, side int, down map[int]bool) string {
	far, dev, peer := fmt.Sprintf("198.18.%d", 128+p), "a", 2
	if side == 2 {
		far, dev, peer = fmt.Sprintf("198.18.%d", p), "b", 1
	}
	route := fmt.Sprintf("route replace %s.0/24", far)
	for i := 0; i < l.links; i++ {
		if !down[i] {
			route += fmt.Sprintf(" nexthop via 198.19.%d.%d dev %s%d", p, 4*i+peer, dev, i)
		}
	}
	return route
}

// Close deletes every namespace of the lab, and with them its links and rules,
// and then the lab's owner marker. It is idempotent, safe on a partly built
// lab, and skips namespaces that are already gone. When a namespace cannot be
// deleted, it and the marker stay: a later Close tries again, and so does
// the first New after this process has exited.
func (l *Lab) Close() error {
	l.mu.Lock()
	made := l.made
	l.made = nil
	l.closed = true
	l.mu.Unlock()
	var errs []error
	var left []string
	for i := len(made) - 1; i >= 0; i-- {
		if _, err := os.Stat("/run/netns/" + made[i]); errors.Is(err, fs.ErrNotExist) {
			continue // already deleted
		}
		if _, err := run("", "ip", "netns", "del", made[i]); err != nil {
			errs = append(errs, err)
			left = append([]string{made[i]}, left...)
		}
	}
	if len(left) > 0 {
		l.mu.Lock()
		l.made = append(left, l.made...)
		l.mu.Unlock()
		return errors.Join(errs...)
	}
	return removeOwner(OwnerDir, l.id)
}

// Cleanup deletes the labs with exactly this prefix that no live process
// owns: the remains of runs that crashed or were killed. A lab matches when
// its namespace names have the form New gives them, prefix followed by the
// random suffix and a role (-h1, -h2, -s1p<P>, -s2p<P>), so Cleanup("mrl")
// never touches a lab of prefix "mrlq", nor any namespace netlab did not
// name. A lab whose owner (recorded in OwnerDir) still runs, this process
// included, is left alone: close it with Close. A lab without an owner
// marker (from a netlab older than the markers) counts as abandoned: the
// caller, naming the exact prefix, vouches that such labs are its own and
// idle, which New's automatic reaping cannot know (see reapDead). The
// prefix must be a valid lab prefix. It returns the namespaces deleted.
func Cleanup(prefix string) ([]string, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	me, err := self()
	if err != nil {
		return nil, err
	}
	names, err := listNamespaces()
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, n := range names {
		if p, id, ok := parseLabName(n); ok && p == prefix {
			ids[id] = true
		}
	}
	var deleted []string
	var errs []error
	for id := range ids {
		if ownerOf(OwnerDir, id, me) == ownerAlive {
			continue
		}
		d, err := deleteLab(OwnerDir, id, names)
		deleted = append(deleted, d...)
		errs = append(errs, err)
	}
	return deleted, errors.Join(errs...)
}

// listNamespaces returns the names `ip netns list` shows.
func listNamespaces() ([]string, error) {
	out, err := run("", "ip", "netns", "list")
	if err != nil {
		return nil, err
	}
	return parseNetnsList(string(out)), nil
}

// parseNetnsList reads `ip netns list` output: one namespace a line, the name
// first, optionally followed by " (id: N)".
func parseNetnsList(s string) []string {
	var names []string
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}
