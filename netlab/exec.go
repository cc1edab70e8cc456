package netlab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// commandTimeout bounds every ip and nft invocation.
const commandTimeout = 30 * time.Second

// run executes name with args and returns its standard output, or an error
// carrying the command line and its standard error.
func run(stdin string, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		return nil, fmt.Errorf("netlab: %s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	return out.Bytes(), nil
}

// RunInNamespace runs fn on a goroutine whose OS thread has joined the named
// network namespace (as listed by `ip netns list`), and returns fn's error.
//
// Threading caveat: only fn's own thread is in the namespace. Goroutines that
// fn starts run on other threads, in the original namespace. What fn creates
// there keeps its namespace afterwards: a socket opened inside fn belongs to
// the namespace for its whole life and may be used from any goroutine, which
// is the intended use (open sockets in Run, drive them from anywhere). After fn
// the thread returns to its original namespace; if that fails the thread is
// left locked, and Go discards it when the goroutine exits.
func RunInNamespace(ns string, fn func() error) error {
	target, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netlab: open namespace %q: %w", ns, err)
	}
	defer unix.Close(target)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- fmt.Errorf("netlab: open own namespace: %w", err)
			return // thread stays locked and is discarded
		}
		defer unix.Close(orig)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("netlab: enter namespace %q: %w", ns, err)
			return
		}
		var ferr error
		func() {
			defer func() {
				if r := recover(); r != nil {
					ferr = fmt.Errorf("netlab: panic in namespace %q: %v", ns, r)
				}
			}()
			ferr = fn()
		}()
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- ferr
	}()
	return <-done
}

// writeSysctl sets a sysctl of the calling thread's network namespace, for
// example "net/ipv4/ip_forward". It must run inside RunInNamespace.
func writeSysctl(key, value string) error {
	if err := os.WriteFile("/proc/sys/"+key, []byte(value), 0); err != nil {
		return fmt.Errorf("netlab: sysctl %s=%s: %w", key, value, err)
	}
	return nil
}
