package netlab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// orphanEnv, when set in the environment of this test binary, makes it
// build a lab with that prefix, print the lab's ID and exit without Close:
// the remains of a crashed run, owned by a process that no longer exists.
const orphanEnv = "NETLAB_TEST_ORPHAN_PREFIX"

func TestMain(m *testing.M) {
	if prefix := os.Getenv(orphanEnv); prefix != "" {
		lab, err := New(Config{Planes: 1, Links: 1, Prefix: prefix})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(lab.ID())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// orphanLab runs this test binary as a child that builds a lab with prefix
// and exits without closing it; it returns the lab's ID once the child has
// exited (and been waited for, so it is not even a zombie).
func orphanLab(t *testing.T, prefix string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), orphanEnv+"="+prefix)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("orphan child: %v: %s", err, errb.String())
	}
	id := strings.TrimSpace(string(out))
	if got := labNamespaces(t, id); len(got) != 4 {
		t.Fatalf("orphan lab %q has namespaces %v, want 4", id, got)
	}
	return id
}

// testPrefix is a lab prefix unique to this test process among the
// processes running now: "t", tag and the PID in base 36, five digits (PIDs
// stay below 36^5), so concurrent test runs never share a prefix.
func testPrefix(tag string) string {
	pid := strconv.FormatInt(int64(os.Getpid()), 36)
	return "t" + tag + strings.Repeat("0", max(0, 5-len(pid))) + pid
}

func TestParseLabName(t *testing.T) {
	for _, tc := range []struct {
		name, prefix, id string
	}{
		{"mrl0a1b2c-h1", "mrl", "mrl0a1b2c"},
		{"mrl0a1b2c-h2", "mrl", "mrl0a1b2c"},
		{"mrlq0a1b2c-s1p0", "mrlq", "mrlq0a1b2c"},
		{"mrsoakffffff-s2p63", "mrsoak", "mrsoakffffff"},
		{"A9abcdef-s1p10", "A9", "A9abcdef"},
	} {
		p, id, ok := parseLabName(tc.name)
		if !ok || p != tc.prefix || id != tc.id {
			t.Errorf("parseLabName(%q) = %q, %q, %v; want %q, %q", tc.name, p, id, ok, tc.prefix, tc.id)
		}
	}
	for _, name := range []string{
		"", "mrl", "mrl0a1b2c", "mrl0a1b2c-", "mrl0a1b2c-h3", "mrl0a1b2c-h1x", "mrl0a1b2c-s1p", "mrl0a1b2c-s3p0",
		"mrl0a1b2c-s1p64", "mrl0a1b2c-s1p01", "mrl0a1b2c-s1p-1", "mrl0A1b2c-h1", "mrl0a1b2-h1", "0a1b2c-h1",
		"toolong120a1b2c-h1", "mr_0a1b2c-h1", "other", "mrl0a1b2c-h1-extra", "mrl0a1b2cz-h1",
	} {
		if p, id, ok := parseLabName(name); ok {
			t.Errorf("parseLabName(%q) = %q, %q: accepted a name New never gives", name, p, id)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	// The command name may hold blanks and parentheses.
	st, err := parseProcStat("4242 (a (b) c) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 1 1")
	must(t, err)
	if st.state != 'S' || st.start != 98765 {
		t.Fatalf("got %+v, want state S, start 98765", st)
	}
	for _, bad := range []string{"", "4242 (x) S 1 2", "4242 x S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
		"1 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 start"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("parseProcStat(%q) succeeded", bad)
		}
	}
}

func TestOwnerMarker(t *testing.T) {
	me, err := self()
	must(t, err)
	o, err := parseOwner(me.String())
	must(t, err)
	if o != me {
		t.Fatalf("marker round trip: %+v, want %+v", o, me)
	}
	for _, bad := range []string{"", "pid 1 start 2", "pid x start 2 pidns y", "pid 0 start 2 pidns y", "pid 1 begin 2 pidns y"} {
		if _, err := parseOwner(bad); err == nil {
			t.Errorf("parseOwner(%q) succeeded", bad)
		}
	}

	dir := t.TempDir()
	dead := exec.Command("true")
	must(t, dead.Run()) // exited and waited for: its PID names no process
	for i, tc := range []struct {
		name string
		o    *owner // nil: no marker
		want ownerState
	}{
		{"none", nil, ownerNone},
		{"self", &me, ownerAlive},
		{"reused pid", &owner{pid: me.pid, start: me.start + 1, pidNS: me.pidNS}, ownerDead},
		{"exited", &owner{pid: dead.ProcessState.Pid(), start: 1, pidNS: me.pidNS}, ownerDead},
		{"other pid namespace", &owner{pid: dead.ProcessState.Pid(), start: 1, pidNS: "pid:[1]"}, ownerAlive},
	} {
		id := fmt.Sprintf("tst%06x", 0x100+i)
		if tc.o != nil {
			must(t, writeOwner(dir, id, *tc.o))
		}
		if got := ownerOf(dir, id, me); got != tc.want {
			t.Errorf("%s: ownerOf = %v, want %v", tc.name, got, tc.want)
		}
		must(t, removeOwner(dir, id))
	}
	must(t, writeOwner(dir, "tst000000", me))
	if err := writeOwner(dir, "tst000000", me); err == nil {
		t.Error("a second marker of one ID was accepted")
	}
	must(t, os.WriteFile(filepath.Join(dir, "tst000001"), []byte("garbage"), 0o644))
	if got := ownerOf(dir, "tst000001", me); got != ownerDead {
		t.Errorf("malformed marker: %v, want dead", got)
	}
	ents, err := os.ReadDir(dir)
	must(t, err)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("temporary marker %s left behind", e.Name())
		}
	}
}
