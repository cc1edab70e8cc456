package netlab

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/transport/udp/sockio"
)

// newLab builds a lab for the test, or skips the test where labs cannot be
// built, and always tears it down.
func newLab(t *testing.T, cfg Config) *Lab {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
	lab, err := New(cfg)
	must(t, err)
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return lab
}

// flowStats is what the receiver saw from one source port.
type flowStats struct{ got, ce int }

// traffic is a sender pool on one host and a receiver on the other, both
// on one plane.
type traffic struct {
	rx    *sockio.Conn
	pool  *sockio.Pool
	plane int
}

const (
	rxPort    = 9000
	basePort  = 20000
	flowCount = 64
)

// newTraffic sends from h1 to h2, the direction the fault rules act on.
func newTraffic(t *testing.T, lab *Lab, plane int, cfg sockio.Config) *traffic {
	t.Helper()
	return newTrafficFrom(t, lab, plane, 1, cfg)
}

// newTrafficFrom sends from host `from` (1 or 2) to the other host.
func newTrafficFrom(t *testing.T, lab *Lab, plane, from int, cfg sockio.Config) *traffic {
	t.Helper()
	to := 3 - from
	tr := &traffic{plane: plane}
	must(t, lab.Run(to, func() (err error) {
		tr.rx, err = sockio.Open(sockio.Config{Local: netip.AddrPortFrom(lab.Host(to).Addr(plane), rxPort)})
		return err
	}))
	t.Cleanup(func() { tr.rx.Close() })
	must(t, lab.Run(from, func() (err error) {
		cfg.Local = netip.AddrPortFrom(lab.Host(from).Addr(plane), basePort)
		tr.pool, err = sockio.OpenPool(cfg, flowCount)
		return err
	}))
	t.Cleanup(func() { tr.pool.Close() })
	return tr
}

// send sends per datagrams of 200 bytes from every source port of the pool
// and returns what arrived per source port. It reads until every datagram
// arrived or none arrived for quiet (the rest are lost).
func (tr *traffic) send(t *testing.T, per int) map[uint16]*flowStats {
	t.Helper()
	dst := tr.rx.LocalAddr()
	msgs := make([]sockio.Msg, per)
	for i := range msgs {
		msgs[i] = sockio.Msg{Buf: make([]byte, 200), N: 200, Addr: dst}
	}
	for _, c := range tr.pool.Conns() {
		n, err := c.WriteBatch(msgs)
		must(t, err)
		if n != per {
			t.Fatalf("sent %d of %d", n, per)
		}
	}
	return receive(t, tr.rx, flowCount*per)
}

func receive(t *testing.T, rx *sockio.Conn, want int) map[uint16]*flowStats {
	t.Helper()
	const quiet = 300 * time.Millisecond
	p, err := sockio.NewPoller()
	must(t, err)
	defer p.Close()
	must(t, p.Add(rx.Fd(), 0))
	in := make([]sockio.Msg, 32)
	for i := range in {
		in[i].Buf = make([]byte, sockio.MaxDatagram)
	}
	stats := map[uint16]*flowStats{}
	total := 0
	ready := make([]int32, 1)
	for total < want {
		n, _, err := p.Wait(quiet, ready)
		must(t, err)
		if n == 0 {
			break // quiet: the rest was lost
		}
		for {
			k, err := rx.ReadBatch(in)
			if errors.Is(err, sockio.ErrWouldBlock) {
				break
			}
			must(t, err)
			for _, m := range in[:k] {
				s := stats[m.Addr.Port()]
				if s == nil {
					s = &flowStats{}
					stats[m.Addr.Port()] = s
				}
				s.got++
				if m.ECN == sockio.CE {
					s.ce++
				}
				total++
			}
		}
	}
	return stats
}

func counters(t *testing.T, lab *Lab) []LinkCounter {
	t.Helper()
	c, err := lab.LinkCounters()
	must(t, err)
	return c
}

// fwdDelta returns the forward packets per link between two readings.
func fwdDelta(before, after []LinkCounter) []uint64 {
	d := make([]uint64, len(after))
	for i := range after {
		d[i] = after[i].FwdPackets - before[i].FwdPackets
	}
	return d
}

func sum(stats map[uint16]*flowStats) (got, ce int) {
	for _, s := range stats {
		got += s.got
		ce += s.ce
	}
	return
}

// TestFabric builds one plane of four spine links and checks, in order, ECMP
// spreading, a black hole, CE marking, random loss and a link flap.
func TestFabric(t *testing.T) {
	lab := newLab(t, Config{Planes: 1, Links: 4, HashSeed: 12345})
	tr := newTraffic(t, lab, 0, sockio.Config{})
	const per = 20
	sent := flowCount * per

	t.Run("ecmp spreads source ports", func(t *testing.T) {
		before := counters(t, lab)
		stats := tr.send(t, per)
		d := fwdDelta(before, counters(t, lab))
		t.Logf("packets per link: %v", d)
		for i, n := range d {
			if n == 0 {
				t.Errorf("link %d carried nothing", i)
			}
		}
		if got, ce := sum(stats); got != sent || ce != 0 {
			t.Fatalf("received %d of %d, %d CE", got, sent, ce)
		}
	})

	t.Run("blackhole", func(t *testing.T) {
		link := Link{0, 1}
		must(t, lab.Blackhole(link, true))
		before := counters(t, lab)
		stats := tr.send(t, per)
		d := fwdDelta(before, counters(t, lab))
		if d[1] != 0 {
			t.Errorf("black-holed link transmitted %d packets", d[1])
		}
		dead := 0
		for _, c := range tr.pool.Conns() {
			s := stats[c.LocalAddr().Port()]
			switch {
			case s == nil:
				dead++
			case s.got != per:
				t.Errorf("port %d: %d of %d arrived, want all or none", c.LocalAddr().Port(), s.got, per)
			}
		}
		if dead == 0 || dead == flowCount {
			t.Fatalf("%d of %d flows dead, want some", dead, flowCount)
		}
		must(t, lab.Blackhole(link, false))
		if got, _ := sum(tr.send(t, per)); got != sent {
			t.Fatalf("after healing: %d of %d arrived", got, sent)
		}
	})

	t.Run("mark ce", func(t *testing.T) {
		must(t, lab.MarkCE(Link{0, 2}, true))
		before := counters(t, lab)
		stats := tr.send(t, per)
		d := fwdDelta(before, counters(t, lab))
		marked := 0
		for port, s := range stats {
			if s.ce != 0 && s.ce != s.got {
				t.Errorf("port %d: %d of %d CE, want all or none", port, s.ce, s.got)
			}
			if s.ce > 0 {
				marked++
			}
		}
		got, ce := sum(stats)
		if got != sent || ce == 0 || uint64(ce) > d[2] {
			t.Fatalf("received %d of %d, %d CE, link 2 carried %d", got, sent, ce, d[2])
		}
		t.Logf("%d flows marked, %d CE datagrams", marked, ce)
		must(t, lab.MarkCE(Link{0, 2}, false))
		if _, ce := sum(tr.send(t, per)); ce != 0 {
			t.Fatalf("%d CE after unmarking", ce)
		}
	})

	t.Run("random loss", func(t *testing.T) {
		const pct = 20
		must(t, lab.SetLoss(Link{0, AllLinks}, pct))
		defer func() { must(t, lab.SetLoss(Link{0, AllLinks}, 0)) }()
		const rounds = 3
		got := 0
		for r := 0; r < rounds; r++ {
			g, _ := sum(tr.send(t, per))
			got += g
		}
		lost := 1 - float64(got)/float64(rounds*sent)
		t.Logf("lost %.3f, configured %.2f", lost, pct/100.0)
		// 3840 packets: the standard deviation of the loss fraction is 0.0065.
		if lost < 0.15 || lost > 0.25 {
			t.Fatalf("lost fraction %.3f, want about %.2f", lost, pct/100.0)
		}
	})

	// s1's forward hook also carries the h2→h1 direction, out of its host
	// port: loss on every spine link must leave it alone, as the fault
	// rules act on h1→h2 only (acknowledgements travel h2→h1).
	t.Run("all-link loss spares h2 to h1", func(t *testing.T) {
		back := newTrafficFrom(t, lab, 0, 2, sockio.Config{})
		must(t, lab.SetLoss(Link{0, AllLinks}, 50))
		defer func() { must(t, lab.SetLoss(Link{0, AllLinks}, 0)) }()
		if got, _ := sum(back.send(t, per)); got != sent {
			t.Errorf("h2 to h1 under 50%% loss on every link: %d of %d arrived, want all", got, sent)
		}
		// 1280 datagrams at 50 %: losing none has probability 2^-1280.
		if got, _ := sum(tr.send(t, per)); got == sent {
			t.Errorf("h1 to h2 under 50%% loss on every link: all %d arrived", sent)
		}
	})

	t.Run("link flap", func(t *testing.T) {
		link := Link{0, 3}
		must(t, lab.SetLinkDown(link, true))
		before := counters(t, lab)
		stats := tr.send(t, per)
		d := fwdDelta(before, counters(t, lab))
		if d[3] != 0 {
			t.Errorf("downed link transmitted %d packets", d[3])
		}
		if got, _ := sum(stats); got != sent {
			t.Fatalf("with link down: %d of %d arrived (flows should move)", got, sent)
		}
		must(t, lab.SetLinkDown(link, false))
		before = counters(t, lab)
		if got, _ := sum(tr.send(t, per)); got != sent {
			t.Fatalf("after link up: %d of %d arrived", got, sent)
		}
		if d := fwdDelta(before, counters(t, lab)); d[3] == 0 {
			t.Errorf("link 3 unused after coming back: %v", d)
		}
	})

	// With every spine link of the plane down the kernel deletes the
	// switches' multipath routes; links coming back must restore them,
	// in both directions, or the plane stays dead for good.
	t.Run("every link flapped", func(t *testing.T) {
		back := newTrafficFrom(t, lab, 0, 2, sockio.Config{})
		for i := 0; i < 4; i++ {
			must(t, lab.SetLinkDown(Link{0, i}, true))
		}
		if got, _ := sum(tr.send(t, 1)); got != 0 {
			t.Errorf("with every link down: %d datagrams arrived", got)
		}
		must(t, lab.SetLinkDown(Link{0, 2}, false))
		before := counters(t, lab)
		if got, _ := sum(tr.send(t, per)); got != sent {
			t.Fatalf("with link 2 back: %d of %d arrived", got, sent)
		}
		if got, _ := sum(back.send(t, per)); got != sent {
			t.Fatalf("h2 to h1 with link 2 back: %d of %d arrived", got, sent)
		}
		if d := fwdDelta(before, counters(t, lab)); d[0]+d[1]+d[3] != 0 {
			t.Errorf("with only link 2 up, link packets %v", d)
		}
		for _, i := range []int{0, 1, 3} {
			must(t, lab.SetLinkDown(Link{0, i}, false))
		}
		before = counters(t, lab)
		if got, _ := sum(tr.send(t, per)); got != sent {
			t.Fatalf("after every link came back: %d of %d arrived", got, sent)
		}
		if d := fwdDelta(before, counters(t, lab)); slices.Contains(d, 0) {
			t.Errorf("a link unused after every link came back: %v", d)
		}
	})

	t.Run("bad arguments", func(t *testing.T) {
		for _, err := range []error{
			lab.SetLoss(Link{0, 4}, 1), lab.SetLoss(Link{1, 0}, 1), lab.SetLoss(Link{0, 0}, 101),
			lab.Blackhole(Link{0, AllLinks}, true), lab.MarkCEOver(Link{0, 0}, -1), lab.RateCap(Link{-1, 0}, 1),
			lab.SetLinkDown(Link{0, 9}, true),
		} {
			if err == nil {
				t.Error("bad argument accepted")
			}
		}
	})
}

func TestMultiPlane(t *testing.T) {
	lab := newLab(t, Config{Planes: 2, Links: 2})
	for p := 0; p < 2; p++ {
		tr := newTraffic(t, lab, p, sockio.Config{})
		if got, _ := sum(tr.send(t, 5)); got != flowCount*5 {
			t.Fatalf("plane %d: %d of %d arrived", p, got, flowCount*5)
		}
	}
	c := counters(t, lab)
	if len(c) != 4 {
		t.Fatalf("%d counters, want 4", len(c))
	}
	if lab.Host(1).Addr(1) != netip.MustParseAddr("198.18.1.2") || lab.Host(2).Addr(1) != netip.MustParseAddr("198.18.129.2") {
		t.Fatal("addressing plan changed")
	}
}

func TestCommandRunsInHost(t *testing.T) {
	lab := newLab(t, Config{Planes: 1, Links: 1})
	out, err := lab.Command(2, "ip", "-brief", "addr", "show", "p0").CombinedOutput()
	must(t, err)
	if !strings.Contains(string(out), "198.18.128.2/24") {
		t.Fatalf("h2 address missing: %s", out)
	}
	if err := lab.Run(1, func() error { return errors.New("boom") }); err == nil || err.Error() != "boom" {
		t.Fatalf("Run lost fn's error: %v", err)
	}
	if err := lab.Run(1, func() error { panic("inside") }); err == nil {
		t.Fatal("Run lost a panic")
	}
}

func TestCloseAndCleanup(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	lab, err := New(Config{Planes: 1, Links: 2, Prefix: testPrefix("c")})
	must(t, err)
	if _, err := os.Stat(filepath.Join(OwnerDir, lab.ID())); err != nil {
		t.Fatalf("owner marker of a live lab: %v", err)
	}
	must(t, lab.Close())
	must(t, lab.Close()) // idempotent
	if left := labNamespaces(t, lab.ID()); len(left) > 0 {
		t.Fatalf("namespaces left behind: %v", left)
	}
	if _, err := os.Stat(filepath.Join(OwnerDir, lab.ID())); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("owner marker left behind: %v", err)
	}
	if err := lab.SetLoss(Link{0, 0}, 1); err == nil {
		t.Fatal("closed lab accepted a rule")
	}
}

// TestCleanupSparesLiveAndOtherLabs: Cleanup(prefix) deletes the lab of a
// process that exited without Close, and neither a lab of the same prefix
// whose owner still runs nor a lab whose prefix merely starts with prefix.
func TestCleanupSparesLiveAndOtherLabs(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	prefix := testPrefix("k")
	live := newLab(t, Config{Planes: 1, Links: 1, Prefix: prefix})
	longer := newLab(t, Config{Planes: 1, Links: 1, Prefix: prefix + "z"})
	orphan := orphanLab(t, prefix)
	t.Cleanup(func() { Cleanup(prefix) }) // should the test fail before Cleanup

	deleted, err := Cleanup(prefix)
	must(t, err)
	slices.Sort(deleted)
	want := []string{orphan + "-h1", orphan + "-h2", orphan + "-s1p0", orphan + "-s2p0"}
	if !slices.Equal(deleted, want) {
		t.Fatalf("deleted %v, want %v", deleted, want)
	}
	if _, err := os.Stat(filepath.Join(OwnerDir, orphan)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("owner marker of the deleted lab left behind: %v", err)
	}
	for _, l := range []*Lab{live, longer} {
		if got := labNamespaces(t, l.ID()); len(got) != 4 {
			t.Fatalf("lab %s lost namespaces to Cleanup(%q): %v left", l.ID(), prefix, got)
		}
	}
}

// TestNewReapsDeadOwners: building a lab deletes the labs whose owner
// exited without Close, as a killed run leaves them.
func TestNewReapsDeadOwners(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	prefix := testPrefix("r")
	orphan := orphanLab(t, prefix)
	t.Cleanup(func() { Cleanup(prefix) }) // should the test fail before New
	newLab(t, Config{Planes: 1, Links: 1, Prefix: prefix})
	if left := labNamespaces(t, orphan); len(left) > 0 {
		t.Fatalf("New left the dead owner's namespaces: %v", left)
	}
	if _, err := os.Stat(filepath.Join(OwnerDir, orphan)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("New left the dead owner's marker: %v", err)
	}
}

// TestUnmarkedLabsLeftToCleanup: namespaces named like a lab but without an
// owner marker (a netlab older than the markers left them, or another
// program named them so) survive New's automatic reaping, which cannot
// tell whether they are in use, and Cleanup of their exact prefix deletes
// them; a name that only resembles a lab's survives Cleanup too.
func TestUnmarkedLabsLeftToCleanup(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	prefix := testPrefix("u")
	id := prefix + "0abc12"
	unmarked := []string{id + "-h1", id + "-h2", id + "-s1p0", id + "-s2p0"}
	lookalike := prefix + "0abc1z-h1" // not six hex digits: never a lab's name
	for _, n := range append([]string{lookalike}, unmarked...) {
		if _, err := run("", "ip", "netns", "add", n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { run("", "ip", "netns", "del", n) })
	}
	if _, err := os.Stat(filepath.Join(OwnerDir, id)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("lab %s has a marker: %v", id, err)
	}

	newLab(t, Config{Planes: 1, Links: 1, Prefix: prefix}) // reaps on its way
	if got := labNamespaces(t, id); len(got) != len(unmarked) {
		t.Fatalf("New's reaping took an unmarked lab's namespaces: %v left", got)
	}

	deleted, err := Cleanup(prefix)
	must(t, err)
	slices.Sort(deleted)
	want := slices.Clone(unmarked)
	slices.Sort(want)
	if !slices.Equal(deleted, want) {
		t.Fatalf("Cleanup(%q) deleted %v, want %v", prefix, deleted, want)
	}
	names, err := listNamespaces()
	must(t, err)
	if !slices.Contains(names, lookalike) {
		t.Fatalf("Cleanup(%q) deleted %s, which no lab is named", prefix, lookalike)
	}
}

// labNamespaces lists the namespaces of lab id.
func labNamespaces(t *testing.T, id string) []string {
	t.Helper()
	names, err := listNamespaces()
	must(t, err)
	var out []string
	for _, n := range names {
		if _, nid, ok := parseLabName(n); ok && nid == id {
			out = append(out, n)
		}
	}
	return out
}
