package netlab

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// OwnerDir holds one marker file per lab, named by the lab's ID, that says
// which process owns the lab. New writes the marker before it creates the
// first namespace and Close removes it after the last namespace is gone, so
// a lab's namespaces never exist without their marker. Cleanup and the
// reaping in New use it to tell the remains of a crashed run (owner gone)
// from a lab that another process is still using. The directory is under
// /run, a tmpfs like /run/netns, so markers and namespaces both vanish at a
// reboot.
const OwnerDir = "/run/metaroce-netlab"

// suffixHex is the length of the random part of a lab ID: 3 random bytes in
// lower-case hexadecimal.
const suffixHex = 6

// owner identifies the process that built a lab. A PID alone can be reused
// once its process has exited, so the marker also records the process's
// start time (clock ticks after boot, field 22 of /proc/PID/stat) and its
// PID namespace, within which the PID means something.
type owner struct {
	pid   int
	start uint64
	pidNS string // the target of /proc/self/ns/pid, e.g. "pid:[4026531836]"
}

// String is the marker file's content.
func (o owner) String() string {
	return fmt.Sprintf("pid %d start %d pidns %s\n", o.pid, o.start, o.pidNS)
}

// parseOwner reads a marker file's content.
func parseOwner(s string) (owner, error) {
	f := strings.Fields(s)
	if len(f) != 6 || f[0] != "pid" || f[2] != "start" || f[4] != "pidns" {
		return owner{}, fmt.Errorf("netlab: owner marker %.60q is malformed", s)
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil || pid <= 0 {
		return owner{}, fmt.Errorf("netlab: owner marker: bad pid %q", f[1])
	}
	start, err := strconv.ParseUint(f[3], 10, 64)
	if err != nil {
		return owner{}, fmt.Errorf("netlab: owner marker: bad start time %q", f[3])
	}
	return owner{pid: pid, start: start, pidNS: f[5]}, nil
}

// procStat is the part of /proc/PID/stat the owner check needs.
type procStat struct {
	state byte   // R, S, D, Z (zombie), X (dead), ...
	start uint64 // clock ticks after boot
}

// parseProcStat reads /proc/PID/stat content. The command name (field 2)
// is in parentheses and may itself hold blanks and parentheses, so the
// fields are counted from the last ')'.
func parseProcStat(s string) (procStat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, errors.New("netlab: /proc stat without a command name")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), so field 22 (starttime) is f[19].
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, errors.New("netlab: /proc stat too short")
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("netlab: /proc stat start time %q: %v", f[19], err)
	}
	return procStat{state: f[0][0], start: start}, nil
}

// self describes the calling process as a lab owner.
func self() (owner, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return owner{}, fmt.Errorf("netlab: reading own process status: %w", err)
	}
	st, err := parseProcStat(string(b))
	if err != nil {
		return owner{}, err
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return owner{}, fmt.Errorf("netlab: reading own PID namespace: %w", err)
	}
	return owner{pid: os.Getpid(), start: st.start, pidNS: ns}, nil
}

// alive reports whether o still runs. A marker from another PID namespace
// cannot be judged (its PID names a different process here), so it counts
// as alive: the lab is left alone.
func (o owner) alive(me owner) bool {
	if o.pidNS != me.pidNS {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(o.pid) + "/stat")
	if err != nil {
		return false // no such process
	}
	st, err := parseProcStat(string(b))
	if err != nil {
		return true // unreadable: do not risk deleting a live lab
	}
	// A different start time means the PID was reused; a zombie has
	// exited and only waits for its parent to collect its status.
	return st.start == o.start && st.state != 'Z' && st.state != 'X'
}

// ownerState is what a lab's marker says about its owner.
type ownerState int

const (
	ownerNone  ownerState = iota // no marker: a lab of an older netlab, someone else's namespace, or none at all
	ownerAlive                   // the owner runs (or cannot be judged)
	ownerDead                    // the owner has exited
)

// ownerOf reads the marker of lab id in dir and judges its owner against
// me. A malformed marker counts as a dead owner: New writes markers whole
// (see writeOwner), so only something else can have left it.
func ownerOf(dir, id string, me owner) ownerState {
	b, err := os.ReadFile(filepath.Join(dir, id))
	if errors.Is(err, fs.ErrNotExist) {
		return ownerNone
	}
	if err != nil {
		return ownerAlive // unreadable: do not risk deleting a live lab
	}
	o, err := parseOwner(string(b))
	if err != nil {
		return ownerDead
	}
	if o.alive(me) {
		return ownerAlive
	}
	return ownerDead
}

// writeOwner records o as the owner of lab id in dir, creating dir if
// needed. The content is written to a temporary file first and then linked
// under the final name, so a reader never sees half a marker, and the link
// fails when a marker of that ID exists already (fs.ErrExist).
func writeOwner(dir, id string, o owner) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("netlab: owner marker directory: %w", err)
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".tmp-%d-%s", o.pid, id))
	if err := os.WriteFile(tmp, []byte(o.String()), 0o644); err != nil {
		return fmt.Errorf("netlab: owner marker: %w", err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, filepath.Join(dir, id)); err != nil {
		return fmt.Errorf("netlab: owner marker: %w", err)
	}
	return nil
}

// removeOwner deletes the marker of lab id in dir; a missing one is fine.
func removeOwner(dir, id string) error {
	if err := os.Remove(filepath.Join(dir, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("netlab: owner marker: %w", err)
	}
	return nil
}

// parseLabName splits a namespace name of the form New gives them, ID "-"
// role, where ID is a valid prefix followed by suffixHex lower-case
// hexadecimal digits and role is h1, h2, s1p<P> or s2p<P> (P in
// 0..MaxPlanes-1, decimal, no leading zero). It returns the ID's prefix and
// the whole ID; ok is false for any other name, so that nothing else is
// ever taken for a lab's namespace.
func parseLabName(name string) (prefix, id string, ok bool) {
	id, role, found := strings.Cut(name, "-")
	if !found || !validRole(role) {
		return "", "", false
	}
	if prefix, ok = idPrefix(id); !ok {
		return "", "", false
	}
	return prefix, id, true
}

// idPrefix returns the prefix of a lab ID (a valid prefix followed by
// suffixHex lower-case hexadecimal digits); ok is false for anything else.
func idPrefix(id string) (prefix string, ok bool) {
	if len(id) <= suffixHex {
		return "", false
	}
	prefix, hexPart := id[:len(id)-suffixHex], id[len(id)-suffixHex:]
	for _, c := range hexPart {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	if checkPrefix(prefix) != nil {
		return "", false
	}
	return prefix, true
}

// validRole accepts the role part of a lab's namespace name.
func validRole(role string) bool {
	if role == "h1" || role == "h2" {
		return true
	}
	if len(role) < 4 || (role[:3] != "s1p" && role[:3] != "s2p") {
		return false
	}
	num := role[3:]
	if len(num) > 1 && num[0] == '0' {
		return false
	}
	p, err := strconv.Atoi(num)
	return err == nil && p >= 0 && p < MaxPlanes && strconv.Itoa(p) == num
}

// reapDead deletes the labs whose marker in dir names an owner that has
// exited (a crashed or killed run) and then their markers, and removes the
// temporary files of markers whose writer has exited. Failures are
// returned but are not fatal to the caller: reaping is best effort,
// repeated by every New.
//
// Namespaces without a marker are left alone, on purpose. New writes the
// marker before the lab's first namespace and Close removes it after the
// last, so no crash of this netlab leaves a lab unmarked; unmarked
// namespaces come from a netlab older than the markers, from a marker
// removed by hand, or from other software whose names merely fit the
// pattern (any 1..8 letters and digits, six hex digits, a role). Without a
// marker there is no owner to judge, and a build older than the markers
// may still be using its lab, so deleting them unasked could destroy a
// live fabric, ours or not. Cleanup, which an operator runs for one exact
// prefix, is the path that deletes them.
func reapDead(dir string, me owner) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netlab: reading %s: %w", dir, err)
	}
	var dead []string
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".tmp-") {
			reapTemp(dir, name, me)
			continue
		}
		if _, ok := idPrefix(name); !ok {
			continue // not a marker of ours
		}
		if ownerOf(dir, name, me) == ownerDead {
			dead = append(dead, name)
		}
	}
	if len(dead) == 0 {
		return nil, nil
	}
	names, err := listNamespaces()
	if err != nil {
		return nil, err
	}
	var deleted []string
	var errs []error
	for _, id := range dead {
		d, err := deleteLab(dir, id, names)
		deleted = append(deleted, d...)
		errs = append(errs, err)
	}
	return deleted, errors.Join(errs...)
}

// reapTemp removes a marker's temporary file (".tmp-PID-ID") whose writer
// has exited.
func reapTemp(dir, name string, me owner) {
	pidStr, _, ok := strings.Cut(strings.TrimPrefix(name, ".tmp-"), "-")
	pid, err := strconv.Atoi(pidStr)
	if !ok || err != nil || pid == me.pid {
		return
	}
	if _, err := os.Stat("/proc/" + pidStr); errors.Is(err, fs.ErrNotExist) {
		os.Remove(filepath.Join(dir, name))
	}
}

// deleteLab deletes the namespaces of lab id among names (the output of
// listNamespaces) and then its marker in dir, and returns the namespaces
// deleted. A namespace that another process deleted first is not an error.
// The marker stays when a namespace could not be deleted, so that a later
// reaper tries again.
func deleteLab(dir, id string, names []string) ([]string, error) {
	var deleted []string
	var errs []error
	for _, n := range names {
		if _, nid, ok := parseLabName(n); !ok || nid != id {
			continue
		}
		if _, err := run("", "ip", "netns", "del", n); err != nil {
			if _, serr := os.Stat("/run/netns/" + n); !errors.Is(serr, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		deleted = append(deleted, n)
	}
	if len(errs) == 0 {
		errs = append(errs, removeOwner(dir, id))
	}
	return deleted, errors.Join(errs...)
}
