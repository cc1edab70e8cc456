package auth

import (
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"

	"github.com/metaroce/metaroce/transport/wire"
)

// Errors of Seal and Open. Open's errors are reasons to drop the datagram
// silently (no reply reveals why); Counters counts them.
var (
	// ErrShort: the packet is shorter than a header (Seal) or a header plus
	// the trailer (Open).
	ErrShort = errors.New("auth: packet too short")
	// ErrUnsealed: Open got a packet without the AUTH flag.
	ErrUnsealed = errors.New("auth: packet not authenticated")
	// ErrNoKey: no key for the connection the packet names (not
	// established, forgotten, or a forged id or token).
	ErrNoKey = errors.New("auth: no key for the packet's connection")
	// ErrTag: the tag does not verify: the packet was altered, forged, or
	// sealed with another secret.
	ErrTag = errors.New("auth: authentication failed (altered packet or different " + EnvSecret + ")")
	// ErrReplay: the sequence number was seen before or is older than the
	// replay window.
	ErrReplay = errors.New("auth: replayed or too old")
	// ErrFull: MaxConns connections hold keys; the handshake is refused.
	ErrFull = errors.New("auth: connection key table full")
	// ErrExhausted: a key's sequence numbers ran out; the connection must
	// be re-established.
	ErrExhausted = errors.New("auth: sequence numbers exhausted")
)

// Counters count what Open rejected, by reason, and what it accepted.
type Counters struct {
	Opened   uint64
	Sealed   uint64
	Short    uint64
	Unsealed uint64
	NoKey    uint64
	BadTag   uint64
	Replay   uint64
	Full     uint64 // handshakes refused because the table was full
}

// Rejected is the number of packets Open refused.
func (c Counters) Rejected() uint64 { return c.Short + c.Unsealed + c.NoKey + c.BadTag + c.Replay }

// connKey names one side's end of a connection: its id and token as
// carried in the DstConn and Token fields of the packets sent to it.
type connKey struct {
	conn uint32
	tok  uint64
}

// entry holds the keys of one connection.
type entry struct {
	local, peer connKey
	pending     bool // initiator: HELLO sealed, HELLO_ACK not yet opened
	tx          cipher.AEAD
	rx          cipher.AEAD
	txMAC       *gmac // authentication-only tags where the CPU runs gmac fast; else nil
	rxMAC       *gmac
	next        uint64 // next sequence number to seal with tx
	win         window
}

// seqLimit is where a key's sequence numbers end (ErrExhausted).
const seqLimit = 1 << 63

// Table holds the keys of one endpoint's connections and seals and opens
// its datagrams (see the package documentation).
type Table struct {
	cfg     Config
	prk     []byte
	mac     hash.Hash
	sum     [sha256.Size]byte
	nonce   [12]byte
	hsSeq   uint64
	byLocal map[uint32]*entry  // our connection id → keys
	byPeer  map[connKey]*entry // the peer's (id, token) → keys, for Seal
	hello   wire.Hello
	count   Counters
}

// New returns a Table for cfg, or an error naming a bad setting.
func New(cfg Config) (*Table, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	prk, err := master(cfg.Secret)
	if err != nil {
		return nil, err
	}
	hk, err := handshakeKey(prk)
	if err != nil {
		return nil, err
	}
	return &Table{
		cfg:     cfg,
		prk:     prk,
		mac:     hmac.New(sha256.New, hk),
		hsSeq:   randomSeq(),
		byLocal: make(map[uint32]*entry),
		byPeer:  make(map[connKey]*entry),
	}, nil
}

// randomSeq returns a uniformly random starting sequence number below 2^62.
func randomSeq() uint64 {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return binary.BigEndian.Uint64(b[:]) >> 2
}

// Counters returns the table's counters.
func (t *Table) Counters() Counters { return t.count }

// Conns returns the number of connections holding keys (pending included).
func (t *Table) Conns() int { return len(t.byLocal) }

// Forget drops the keys of our connection id; drivers call it when the
// connection's EvClosed is delivered. Later packets of it fail ErrNoKey.
func (t *Table) Forget(local uint32) {
	e := t.byLocal[local]
	if e == nil {
		return
	}
	delete(t.byLocal, local)
	if t.byPeer[e.peer] == e {
		delete(t.byPeer, e.peer)
	}
}

// handshakeClass reports whether pkt (a valid header) is sealed with the
// handshake key.
func handshakeClass(pkt []byte) bool {
	op := wire.Opcode(pkt[1])
	return op == wire.OpHello || op == wire.OpHelloAck ||
		op == wire.OpNack && binary.BigEndian.Uint32(pkt[4:]) == 0
}

// Seal appends the sealed form of pkt to dst and returns the extended
// slice. To seal in place pass pkt[:0] as dst: with cap(pkt) ≥
// len(pkt)+Overhead nothing is allocated. dst must not otherwise overlap
// pkt. pkt must start with a valid header. Sealing a HELLO_ACK registers the
// connection's keys; other connection packets fail with ErrNoKey until
// then.
func (t *Table) Seal(dst, pkt []byte) ([]byte, error) {
	var h wire.Header
	if _, err := wire.ParseHeader(&h, pkt); err != nil {
		return dst, fmt.Errorf("auth: seal: %w", err)
	}
	n := len(pkt)
	if handshakeClass(pkt) {
		if err := t.registerOut(&h, pkt); err != nil {
			return dst, err
		}
		head, out := grow(dst, n+Overhead)
		copy(out, pkt)
		setAuth(out)
		binary.BigEndian.PutUint64(out[n:], t.hsSeq)
		t.hsSeq++
		t.handTag(out[n+seqLen:], out[:n+seqLen])
		t.count.Sealed++
		return head, nil
	}
	e := t.byPeer[connKey{h.DstConn, h.Token}]
	if e == nil || e.pending {
		return dst, ErrNoKey
	}
	if e.next >= seqLimit {
		return dst, ErrExhausted
	}
	seq := e.next
	e.next++
	head, out := grow(dst, n+Overhead)
	copy(out, pkt) // a no-op move when sealing in place
	setAuth(out)
	binary.BigEndian.PutUint64(t.nonce[4:], seq)
	if t.cfg.Encrypt {
		// GCM writes ciphertext‖tag; the tag then moves after seq.
		body := out[wire.HeaderLen:n]
		e.tx.Seal(body[:0], t.nonce[:], body, out[:wire.HeaderLen])
		copy(out[n+seqLen:], out[n:n+tagLen])
	} else if e.txMAC != nil {
		e.txMAC.tag((*[tagLen]byte)(out[n+seqLen:]), t.nonce[:], out[:n])
	} else {
		e.tx.Seal(out[n+seqLen:n+seqLen], t.nonce[:], nil, out[:n])
	}
	binary.BigEndian.PutUint64(out[n:], seq)
	t.count.Sealed++
	return head, nil
}

// Open verifies the sealed packet pkt in place and returns the plain packet
// (a prefix of pkt, AUTH flag cleared), or an error; on error pkt's
// contents are unspecified and the datagram must be dropped. Opening a
// HELLO_ACK that answers a HELLO this table sealed registers the
// connection's keys.
func (t *Table) Open(pkt []byte) ([]byte, error) {
	if len(pkt) < wire.HeaderLen+Overhead {
		t.count.Short++
		return nil, ErrShort
	}
	if binary.BigEndian.Uint16(pkt[2:])&uint16(wire.FlagAuth) == 0 {
		t.count.Unsealed++
		return nil, ErrUnsealed
	}
	n := len(pkt) - Overhead
	seq := binary.BigEndian.Uint64(pkt[n:])
	if handshakeClass(pkt) {
		t.handTag(t.sum[:tagLen], pkt[:n+seqLen])
		if !hmac.Equal(t.sum[:tagLen], pkt[n+seqLen:]) {
			t.count.BadTag++
			return nil, ErrTag
		}
		plain := pkt[:n]
		clearAuth(plain)
		if wire.Opcode(pkt[1]) == wire.OpHelloAck {
			if err := t.registerIn(plain); err != nil {
				return nil, err
			}
		}
		t.count.Opened++
		return plain, nil
	}
	id := binary.BigEndian.Uint32(pkt[4:])
	e := t.byLocal[id]
	if e == nil || e.pending || e.local.tok != binary.BigEndian.Uint64(pkt[8:]) {
		t.count.NoKey++
		return nil, ErrNoKey
	}
	if !e.win.fresh(seq) {
		t.count.Replay++
		return nil, ErrReplay
	}
	binary.BigEndian.PutUint64(t.nonce[4:], seq)
	var err error
	if t.cfg.Encrypt {
		copy(pkt[n:], pkt[n+seqLen:]) // ciphertext‖tag, contiguous for GCM
		body := pkt[wire.HeaderLen : n+tagLen]
		_, err = e.rx.Open(body[:0], t.nonce[:], body, pkt[:wire.HeaderLen])
	} else if e.rxMAC != nil {
		if !e.rxMAC.verify(pkt[n+seqLen:], t.nonce[:], pkt[:n]) {
			err = ErrTag
		}
	} else {
		_, err = e.rx.Open(pkt[n:n], t.nonce[:], pkt[n+seqLen:], pkt[:n])
	}
	if err != nil {
		t.count.BadTag++
		return nil, ErrTag
	}
	e.win.mark(seq)
	plain := pkt[:n]
	clearAuth(plain)
	t.count.Opened++
	return plain, nil
}

// handTag writes the 16-byte handshake tag of msg to out.
func (t *Table) handTag(out, msg []byte) {
	t.mac.Reset()
	t.mac.Write(msg)
	copy(out, t.mac.Sum(t.sum[:0]))
}

// registerOut notes the handshake packets we send: a HELLO opens a pending
// entry for our side (the initiator), a HELLO_ACK gives the responder both
// halves of the connection.
func (t *Table) registerOut(h *wire.Header, pkt []byte) error {
	if h.Op != wire.OpHello && h.Op != wire.OpHelloAck {
		return nil
	}
	hl := &t.hello
	if _, err := wire.ParseHello(hl, pkt); err != nil {
		return fmt.Errorf("auth: seal: %w", err)
	}
	local := connKey{hl.SrcConn, hl.SrcTok}
	if h.Op == wire.OpHello {
		if e := t.byLocal[local.conn]; e != nil && e.local == local {
			return nil // a retransmitted HELLO
		}
		if len(t.byLocal) >= t.cfg.MaxConns {
			t.count.Full++
			return ErrFull
		}
		t.Forget(local.conn)
		t.byLocal[local.conn] = &entry{local: local, pending: true}
		return nil
	}
	peer := connKey{h.DstConn, h.Token}
	tu := tuple{iConn: peer.conn, iTok: peer.tok, rConn: local.conn, rTok: local.tok}
	return t.install(local, peer, tu, dirRespToInit, dirInitToResp)
}

// registerIn completes the initiator's pending entry from a verified
// HELLO_ACK; a HELLO_ACK for no HELLO of ours (a replay after the
// connection ended, or a stale duplicate) is refused.
func (t *Table) registerIn(plain []byte) error {
	hl := &t.hello
	if _, err := wire.ParseHello(hl, plain); err != nil {
		t.count.BadTag++ // sealed by a peer with our secret: cannot happen
		return fmt.Errorf("auth: open: %w", err)
	}
	local := connKey{hl.DstConn, hl.Token}
	e := t.byLocal[local.conn]
	if e == nil || e.local != local {
		t.count.NoKey++
		return ErrNoKey
	}
	peer := connKey{hl.SrcConn, hl.SrcTok}
	tu := tuple{iConn: local.conn, iTok: local.tok, rConn: peer.conn, rTok: peer.tok}
	return t.install(local, peer, tu, dirInitToResp, dirRespToInit)
}

// install gives connection local its keys, unless it already has the same
// ones: re-deriving would restart its sequence numbers and replay window.
func (t *Table) install(local, peer connKey, tu tuple, txDir, rxDir byte) error {
	if e := t.byLocal[local.conn]; e != nil && !e.pending && e.local == local && e.peer == peer {
		return nil
	}
	if e := t.byLocal[local.conn]; (e == nil || e.local != local) && len(t.byLocal) >= t.cfg.MaxConns {
		t.count.Full++
		return ErrFull
	}
	tx, txMAC, err := connKeys(t.prk, tu, txDir)
	if err != nil {
		return err
	}
	rx, rxMAC, err := connKeys(t.prk, tu, rxDir)
	if err != nil {
		return err
	}
	t.Forget(local.conn)
	if old := t.byPeer[peer]; old != nil {
		t.Forget(old.local.conn)
	}
	e := &entry{local: local, peer: peer, tx: tx, rx: rx, txMAC: txMAC, rxMAC: rxMAC, next: randomSeq(), win: newWindow(t.cfg.ReplayWindow)}
	t.byLocal[local.conn] = e
	t.byPeer[peer] = e
	return nil
}

func setAuth(p []byte) {
	binary.BigEndian.PutUint16(p[2:], binary.BigEndian.Uint16(p[2:])|uint16(wire.FlagAuth))
}

func clearAuth(p []byte) {
	binary.BigEndian.PutUint16(p[2:], binary.BigEndian.Uint16(p[2:])&^uint16(wire.FlagAuth))
}

// grow extends b by n bytes, reallocating only when its capacity is short,
// and returns the whole slice and the n new bytes.
func grow(b []byte, n int) (whole, tail []byte) {
	total := len(b) + n
	if cap(b) >= total {
		whole = b[:total]
	} else {
		whole = make([]byte, total, total+total/4)
		copy(whole, b)
	}
	return whole, whole[len(b):]
}
