// Command hostprobe measures how fast one CPU of this host can hand bytes
// to another: a sender thread pinned to one CPU streams 65,000-byte UDP
// datagrams over loopback to a receiver thread pinned to another, for a
// fixed time, and it prints the bytes the receiver got per second.
//
// Why: on a virtual machine the same two vCPUs can be close (sharing a
// cache) for minutes and far apart for the next minutes, as the host moves
// them. Every loopback benchmark that crosses CPUs, ours and its peers',
// then runs two to three times slower, while a benchmark that stays on one
// CPU, or a loop that touches only its own cache, does not move. On the
// 2-vCPU host where docs/results.md was measured this probe read 4.5 to
// 5.5 GB/s in the fast state and 1.3 to 2.0 GB/s in the slow one, flipping
// between runs a few seconds apart. bench/peers/run.sh runs it before and
// after every measurement, so that a table compares peers measured in the
// same state of the host.
//
// Usage:
//
//	hostprobe [-t DURATION]
//
// It prints one line, "PROBE gbps=G cpus=A,B seconds=S", and exits 0; on a
// host with one CPU both threads share it (cpus=A,A).
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// datagram is the payload of each probe datagram, bytes: about the largest
// a UDP socket takes, as the transports under test send.
const datagram = 65000

func main() {
	d := flag.Duration("t", 200*time.Millisecond, "how long the stream runs")
	flag.Parse()
	if flag.NArg() > 0 || *d <= 0 {
		fmt.Fprintln(os.Stderr, "usage: hostprobe [-t DURATION] (a positive duration such as 200ms)")
		os.Exit(2)
	}
	r, err := probe(*d)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostprobe:", err)
		os.Exit(1)
	}
	fmt.Printf("PROBE gbps=%.2f cpus=%d,%d seconds=%.3f\n", r.gbps(), r.tx, r.rx, r.elapsed.Seconds())
}

// result is one probe: the CPUs of the sender and the receiver, the bytes
// received and the time the stream ran.
type result struct {
	tx, rx  int
	bytes   int64
	elapsed time.Duration
}

// gbps is the received bytes per second, in units of 10^9.
func (r result) gbps() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.bytes) / r.elapsed.Seconds() / 1e9
}

// twoCPUs returns the first two CPUs this process may run on, or the one
// twice.
func twoCPUs() (a, b int, err error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0, 0, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := 0; c < 1024 && len(cpus) < 2; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	switch len(cpus) {
	case 0:
		return 0, 0, errors.New("no CPU in this process's affinity mask")
	case 1:
		return cpus[0], cpus[0], nil
	}
	return cpus[0], cpus[1], nil
}

// pin locks the calling goroutine to its thread and that thread to cpu.
// The thread is not unlocked again: it exits with its goroutine.
func pin(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	return nil
}

// probe streams datagrams from one CPU to another for d and returns what
// arrived.
func probe(d time.Duration) (result, error) {
	txCPU, rxCPU, err := twoCPUs()
	if err != nil {
		return result{}, err
	}
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return result{}, err
	}
	defer rx.Close()
	rx.SetReadBuffer(4 << 20)
	tx, err := net.DialUDP("udp4", nil, rx.LocalAddr().(*net.UDPAddr))
	if err != nil {
		return result{}, err
	}
	defer tx.Close()
	tx.SetWriteBuffer(4 << 20)

	// Each side pins its own goroutine's thread (which exits with it, so
	// the caller's thread keeps its affinity) and reports; the stream
	// starts once both are in place and ends at t0+d for both.
	ready := make(chan error, 2)
	begin := make(chan struct{})
	var t0 time.Time
	type got struct {
		n   int64
		err error
	}
	done := make(chan got, 1)
	go func() {
		ready <- pin(rxCPU)
		<-begin
		var g got
		buf := make([]byte, datagram+1)
		for {
			// The deadline ends the stream: the sender stops at the same
			// instant, and what the receiver took by then counts.
			if g.err = rx.SetReadDeadline(t0.Add(d)); g.err != nil {
				break
			}
			k, err := rx.Read(buf)
			if err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					g.err = err
				}
				break
			}
			g.n += int64(k)
		}
		done <- g
	}()
	sent := make(chan struct{})
	go func() {
		ready <- pin(txCPU)
		<-begin
		buf := make([]byte, datagram)
		for end := t0.Add(d); time.Now().Before(end); {
			// A full receive buffer drops datagrams rather than blocking
			// the sender: the probe counts what the receiving CPU took.
			tx.Write(buf)
		}
		close(sent)
	}()
	pinErr := errors.Join(<-ready, <-ready)
	t0 = time.Now()
	close(begin)
	<-sent
	g := <-done
	res := result{tx: txCPU, rx: rxCPU, bytes: g.n, elapsed: d}
	return res, errors.Join(pinErr, g.err)
}
