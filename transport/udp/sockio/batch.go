package sockio

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// MaxBatch is the most kernel message headers one sendmmsg/recvmmsg call
	// carries; ReadBatch fills at most this many Msgs per call.
	MaxBatch = 64
	// MaxSegments is the most segments one GSO message may hold (the
	// kernel's UDP_MAX_SEGMENTS is 64 on older kernels).
	MaxSegments = 64
	// MaxDatagram is the largest UDP payload a receive can return, and the
	// size every receive buffer needs once GRO is on: the kernel hands a
	// coalesced batch over whole and truncates it to a smaller buffer.
	MaxDatagram = 65535
	// maxGSOBytes caps the total payload of one GSO send: an IPv4 packet is
	// at most 65535 bytes, IP and UDP headers included.
	maxGSOBytes = 65535 - 20 - 8
	ctrlRecvLen = 64
	ctrlSendLen = 24
)

// ErrShortBuffer is returned by ReadBatch on a GRO socket when a receive buffer
// is shorter than MaxDatagram, and by WriteBatch when N exceeds len(Buf).
var ErrShortBuffer = errors.New("sockio: buffer too short")

// ErrTooManySegments is returned by WriteBatch for a message of more than
// MaxSegments segments or more than 65507 bytes with Seg set.
var ErrTooManySegments = errors.New("sockio: GSO message too large")

// ErrGSORefused is wrapped by WriteBatch's error when the kernel refused a
// GSO message for the size of its segments; see WriteBatch.
var ErrGSORefused = errors.New("sockio: GSO send refused")

// mmsghdr is struct mmsghdr of 64-bit Linux.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

// sendScratch holds the preallocated kernel structures of the send path.
type sendScratch struct {
	hdrs  [MaxBatch]mmsghdr
	iovs  [MaxBatch][2]unix.Iovec // Buf and Tail of each entry
	names [MaxBatch]unix.RawSockaddrInet6
	ctrl  [MaxBatch][ctrlSendLen]byte
	owner [MaxBatch]int // index in msgs of the message each entry carries
	pfd   [1]unix.PollFd
	v6    bool
}

func (s *sendScratch) init(v6 bool) { s.v6 = v6 }

// recvScratch holds the preallocated kernel structures of the receive path.
type recvScratch struct {
	hdrs  [MaxBatch]mmsghdr
	iovs  [MaxBatch]unix.Iovec
	names [MaxBatch]unix.RawSockaddrInet6
	ctrl  [MaxBatch][ctrlRecvLen]byte
}

func (s *recvScratch) init() {
	for i := range s.hdrs {
		h := &s.hdrs[i].hdr
		h.Name = (*byte)(unsafe.Pointer(&s.names[i]))
		h.Iov = &s.iovs[i]
		h.SetIovlen(1)
		h.Control = &s.ctrl[i][0]
	}
}

// WriteBatch sends msgs in as few system calls as it can and returns how many
// messages it handed to the kernel. A message with Seg set goes out as one GSO
// entry where the kernel offers GSO, else as one entry per segment. On error,
// the first n messages were sent and message n was not, or only in part (a
// message split into single datagrams may have lost its tail). EAGAIN is
// reported as ErrWouldBlock. A GSO entry the kernel refuses for its size
// (EMSGSIZE or EINVAL: segments larger than the route's MTU, which a single
// datagram would pass by fragmenting) is reported as ErrGSORefused, so that
// the caller can send that message's segments one by one.
func (c *Conn) WriteBatch(msgs []Msg) (int, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	s := &c.send
	done := 0
	for done < len(msgs) {
		cnt, next, err := c.fillSend(msgs, done)
		if err != nil {
			return done, err
		}
		off := 0
		for off < cnt {
			sent, errno := mmsg(unix.SYS_SENDMMSG, c.fd, &s.hdrs[off], cnt-off)
			if errno == unix.EINTR {
				continue
			}
			if errno != 0 {
				// sendmmsg fails only when it sent nothing: entry off
				// failed, and every entry before it went out.
				failed := s.owner[off]
				gsoEntry := c.gso && s.hdrs[off].hdr.Controllen > 0
				if errno == unix.EIO && gsoEntry {
					// The device cannot checksum GSO segments: fall back
					// to one datagram per segment from now on.
					c.gso = false
					done = failed
					goto refill
				}
				if (errno == unix.EMSGSIZE || errno == unix.EINVAL) && gsoEntry {
					return failed, fmt.Errorf("%w: sendmmsg at message %d: %w", ErrGSORefused, failed, errno)
				}
				return failed, sendErr(errno, failed)
			}
			off += sent
		}
		done = next
	refill:
	}
	return done, nil
}

func sendErr(errno unix.Errno, n int) error {
	if errno == unix.EAGAIN {
		return ErrWouldBlock
	}
	return fmt.Errorf("sockio: sendmmsg at message %d: %w", n, errno)
}

// fillSend prepares kernel headers for messages from msgs[first:] and returns
// the number of entries and the index of the first message not included.
func (c *Conn) fillSend(msgs []Msg, first int) (int, int, error) {
	s := &c.send
	cnt := 0
	i := first
	for ; i < len(msgs); i++ {
		m := &msgs[i]
		if m.N < 0 || m.N > len(m.Buf) {
			return 0, 0, fmt.Errorf("%w: message %d has N=%d, len(Buf)=%d", ErrShortBuffer, i, m.N, len(m.Buf))
		}
		if len(m.Tail) > 0 && (m.Seg > 0 || m.N+len(m.Tail) > maxGSOBytes) {
			return 0, 0, fmt.Errorf("%w: message %d has a %d-byte tail after %d bytes with Seg=%d", ErrTooManySegments, i, len(m.Tail), m.N, m.Seg)
		}
		segs := 1
		split := m.Seg > 0 && m.N > m.Seg
		if split {
			segs = m.Segments()
			if segs > MaxSegments || m.N > maxGSOBytes || m.Seg > 0xffff {
				return 0, 0, fmt.Errorf("%w: message %d has %d bytes in %d segments", ErrTooManySegments, i, m.N, segs)
			}
		}
		need := 1
		if split && !c.gso {
			need = segs
		}
		if cnt+need > MaxBatch {
			break
		}
		nameLen := putRawSockaddr(&s.names[cnt], m.Addr, s.v6)
		if need == 1 {
			ctrl := 0
			if split {
				ctrl = putSegmentControl(s.ctrl[cnt][:], uint16(m.Seg))
			}
			c.putEntry(cnt, i, m.Buf[:m.N], nameLen, ctrl)
			if len(m.Tail) > 0 {
				iov := &s.iovs[cnt][1]
				iov.Base = &m.Tail[0]
				iov.SetLen(len(m.Tail))
				s.hdrs[cnt].hdr.SetIovlen(2)
			}
			cnt++
			continue
		}
		for k := 0; k < segs; k++ {
			if k > 0 {
				s.names[cnt] = s.names[cnt-1]
			}
			c.putEntry(cnt, i, m.Segment(k), nameLen, 0)
			cnt++
		}
	}
	return cnt, i, nil
}

// putEntry points kernel header j at payload p for message index owner.
func (c *Conn) putEntry(j, owner int, p []byte, nameLen uint32, ctrl int) {
	s := &c.send
	s.owner[j] = owner
	iov := &s.iovs[j][0]
	iov.Base = nil
	if len(p) > 0 {
		iov.Base = &p[0]
	}
	iov.SetLen(len(p))
	h := &s.hdrs[j].hdr
	h.Name = (*byte)(unsafe.Pointer(&s.names[j]))
	h.Namelen = nameLen
	h.Iov = iov
	h.SetIovlen(1)
	h.Control = nil
	h.SetControllen(0)
	if ctrl > 0 {
		h.Control = &s.ctrl[j][0]
		h.SetControllen(ctrl)
	}
	h.Flags = 0
	s.hdrs[j].n = 0
}

// ReadBatch receives up to min(len(msgs), MaxBatch) datagrams without
// blocking and returns how many Msgs it filled. Each Msg's Buf must be
// non-empty, and at least MaxDatagram bytes long when c.GRO() is true. With
// nothing to read it returns 0 and ErrWouldBlock.
func (c *Conn) ReadBatch(msgs []Msg) (int, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	s := &c.recv
	n := min(len(msgs), MaxBatch)
	for i := 0; i < n; i++ {
		b := msgs[i].Buf
		if len(b) == 0 || (c.gro && len(b) < MaxDatagram) {
			return 0, ErrShortBuffer
		}
		s.iovs[i].Base = &b[0]
		s.iovs[i].SetLen(len(b))
		h := &s.hdrs[i].hdr
		h.Namelen = unix.SizeofSockaddrInet6
		h.SetControllen(ctrlRecvLen)
		h.Flags = 0
	}
	var got int
	var errno unix.Errno
	for {
		got, errno = mmsg(unix.SYS_RECVMMSG, c.fd, &s.hdrs[0], n)
		if errno != unix.EINTR {
			break
		}
	}
	if errno != 0 {
		if errno == unix.EAGAIN {
			return 0, ErrWouldBlock
		}
		return 0, fmt.Errorf("sockio: recvmmsg: %w", errno)
	}
	for i := 0; i < got; i++ {
		m := &msgs[i]
		h := &s.hdrs[i].hdr
		m.N = int(s.hdrs[i].n)
		m.Addr = rawToAddrPort(&s.names[i])
		m.Trunc = h.Flags&unix.MSG_TRUNC != 0
		info, _ := ParseControl(s.ctrl[i][:h.Controllen])
		m.ECN = info.ECN
		m.Seg = info.Seg
		if m.Seg >= m.N {
			m.Seg = 0
		}
	}
	return got, nil
}

// mmsg makes the sendmmsg or recvmmsg system call (trap) for the n headers
// starting at hdrs, and returns how many messages it moved.
//
// It is a raw system call. The sockets are non-blocking, so neither call
// ever waits: it copies and runs the kernel's UDP path for at most MaxBatch
// datagrams (64 of 64 KiB, a few hundred µs) and returns. syscall.Syscall6
// would tell the Go scheduler that the thread may block, and once a thread
// has been in the kernel for 20 µs the runtime hands its P to another
// thread. A sendmmsg of nine 65,000-byte loopback datagrams takes about
// 37 µs, so on a two-CPU host every long send gave the CPU it was using to
// a second thread, and the goroutine had to win a P back when its copy
// ended. Kept, the P made the 2-rank 16 and 64 MiB all-reduce and
// all-to-all a quarter to a third faster (BenchmarkBusBW in collectives;
// docs/results.md). The price: nothing else runs on that P meanwhile, a
// time the CPU spends on this call anyway, and a stop-the-world pause
// waits for the call to return.
func mmsg(trap uintptr, fd int, hdrs *mmsghdr, n int) (int, unix.Errno) {
	r1, _, errno := unix.RawSyscall6(trap, uintptr(fd), uintptr(unsafe.Pointer(hdrs)), uintptr(n), 0, 0, 0)
	return int(r1), errno
}
