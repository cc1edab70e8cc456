// Package auth is MetaRoCE's optional per-packet authentication
// (docs/spec.md §5.2, threat model in docs/security.md): every datagram
// carries a trailer that proves it was produced by an endpoint holding the
// job's shared secret (METAROCE_SECRET) for this very connection, and that
// no byte of it changed on the way.
//
// # Trailer
//
// A sealed packet is the plain packet with the header's AUTH flag set,
// followed by Overhead (24) bytes:
//
//	offset      size  field
//	n           8     seq: the sender's per-key sequence number, big-endian
//	n+8         16    tag (wire.AuthTagLen)
//
// where n is the length of the plain packet. No length field of the packet
// counts the trailer; Open verifies and strips it, and clears the AUTH flag,
// before the core parses anything.
//
// # Two packet classes
//
// Handshake packets (HELLO, HELLO_ACK, and the connection-less NACK
// UNKNOWN_CONN, whose DstConn is 0) are sent before, or without, a
// connection key. Their tag is HMAC-SHA256 truncated to 16 bytes, keyed by
// a handshake key derived from the secret alone, over the whole packet
// including seq. They are never encrypted.
//
// Every other packet belongs to a connection and is sealed with AES-128-GCM
// under that connection's key for its direction:
//
//	K(i→r), K(r→i) = HKDF-SHA256(secret, salt "metaroce v1",
//	                 info "metaroce v1 conn" ‖ dir ‖ iConn ‖ iTok ‖ rConn ‖ rTok)
//
// i is the connection's initiator (it sent the HELLO), r the responder;
// Conn and Tok are the connection ids and 64-bit tokens each announced in
// its HELLO or HELLO_ACK. Both sides learn all four from the HELLO_ACK, so
// the table registers a connection when it seals (responder) or opens
// (initiator) one; the initiator only accepts a HELLO_ACK for a HELLO it
// sealed itself. The GCM nonce is four zero bytes followed by seq. By
// default the whole packet is associated data and the payload travels in
// clear (authentication only); with Config.Encrypt the 24-byte header is
// associated data and the rest of the packet is encrypted.
//
// # Nonces never repeat
//
// seq is a per-key counter kept by the sender: each key seals with strictly
// increasing seq values, starting from a random value below 2^62 drawn from
// crypto/rand when the key is registered, so that even a connection whose
// ids and tokens repeat (an endpoint restarted with a fixed seed) does not
// reuse a (key, nonce) pair in practice. A counter that would reach 2^63
// refuses to seal (ErrExhausted), which at 10^9 packets per second takes
// about 150 years.
//
// # Replays
//
// The receiver keeps, per key, a sliding window of the last ReplayWindow seq
// values (default 4096, enough for the reordering of multipath delivery):
// a seq seen before or older than the window is dropped (ErrReplay) before
// the tag is checked, and marked only after the tag verified. Handshake
// packets have no window; a replayed HELLO is answered like a retransmitted
// one by the core (docs/security.md).
//
// A Table is not safe for concurrent use; it belongs to the one goroutine
// that drives an endpoint, like the endpoint itself. Seal and Open
// allocate nothing per packet.
package auth
