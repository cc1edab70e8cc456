package wire_test

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/metaroce/metaroce/transport/wire"
)

// packet is the codec shape every wire type shares.
type packet interface {
	Append(b []byte) []byte
	Length() int
}

// parseAny parses b with the body parser its opcode selects, the way a
// receiver dispatches, and returns the decoded packet. ok is false when no
// version-1 body parser exists for the opcode (including WRITE, §5.1).
func parseAny(b []byte) (p packet, n int, err error, ok bool) {
	switch op := wire.PeekOpcode(b); op {
	case wire.OpData:
		var d wire.Data
		n, err = wire.ParseData(&d, b)
		return &d, n, err, true
	case wire.OpAck:
		var a wire.Ack
		n, err = wire.ParseAck(&a, b)
		return &a, n, err, true
	case wire.OpRecvReady:
		var r wire.RecvReady
		n, err = wire.ParseRecvReady(&r, b)
		return &r, n, err, true
	case wire.OpNack:
		var k wire.Nack
		n, err = wire.ParseNack(&k, b)
		return &k, n, err, true
	case wire.OpHello, wire.OpHelloAck:
		var h wire.Hello
		n, err = wire.ParseHello(&h, b)
		return &h, n, err, true
	case wire.OpProbe:
		var p wire.Probe
		n, err = wire.ParseProbe(&p, b)
		return &p, n, err, true
	case wire.OpClose:
		var c wire.Close
		n, err = wire.ParseClose(&c, b)
		return &c, n, err, true
	}
	return nil, 0, nil, false
}

// fieldMap names every decoded field of a packet the way docs/spec.md §2 does,
// with values in canonical form (see canon), so a worked example can be
// compared field by field.
func fieldMap(p packet) map[string]string {
	m := map[string]string{}
	u := func(k string, v uint64) { m[k] = strconv.FormatUint(v, 10) }
	hdr := func(h *wire.Header) {
		u("version", wire.Version)
		m["opcode"] = h.Op.String()
		u("flags", uint64(h.Flags))
		u("dst_conn", uint64(h.DstConn))
		u("token", h.Token)
		u("path", uint64(h.Path))
		u("psn", uint64(h.PSN))
	}
	// piggy lists a piggybacked acknowledgement (docs/spec.md §2.11) only
	// when the packet carries one, so examples without one need not say so.
	piggy := func(pg *wire.Piggyback) {
		if !pg.HasPiggy {
			return
		}
		r := &pg.Piggy
		u("piggy.rate_hint", uint64(pg.PiggyHint))
		u("piggy.path", uint64(r.Path))
		u("piggy.fwd_delay", uint64(r.FwdDelay))
		u("piggy.cum", uint64(r.Cum))
		u("piggy.ce", uint64(r.CE))
		u("piggy.echo_ts", uint64(r.EchoTS))
		u("piggy.delay", uint64(r.Delay))
		m["piggy.sack"] = sackString(&r.Sack)
	}
	switch x := p.(type) {
	case *wire.Data:
		hdr(&x.Header)
		piggy(&x.Piggyback)
		u("flow", uint64(x.Flow))
		u("msg", uint64(x.Msg))
		u("index", uint64(x.Index))
		u("timestamp", uint64(x.Timestamp))
		u("offset", x.Offset)
		u("msg_len", x.MsgLen)
		m["payload"] = "hex:" + hex.EncodeToString(x.Payload)
	case *wire.Ack:
		hdr(&x.Header)
		u("rate_hint", uint64(x.RateHint))
		u("count", uint64(x.N))
		for i := 0; i < x.N; i++ {
			r := &x.Records[i]
			p := fmt.Sprintf("records[%d].", i)
			u(p+"path", uint64(r.Path))
			u(p+"fwd_delay", uint64(r.FwdDelay))
			u(p+"cum", uint64(r.Cum))
			u(p+"ce", uint64(r.CE))
			u(p+"echo_ts", uint64(r.EchoTS))
			u(p+"delay", uint64(r.Delay))
			m[p+"sack"] = sackString(&r.Sack)
		}
	case *wire.RecvReady:
		hdr(&x.Header)
		piggy(&x.Piggyback)
		u("flow", uint64(x.Flow))
		u("msg", uint64(x.Msg))
		u("count", uint64(x.N))
		for i := 0; i < x.N; i++ {
			p := fmt.Sprintf("entries[%d].", i)
			u(p+"capacity", x.Entries[i].Capacity)
			u(p+"tag", uint64(x.Entries[i].Tag))
		}
	case *wire.Nack:
		hdr(&x.Header)
		piggy(&x.Piggyback)
		u("reason", uint64(x.Reason))
		u("index", uint64(x.Index))
		u("flow", uint64(x.Flow))
		u("msg", uint64(x.Msg))
		u("value", x.Value)
	case *wire.Hello:
		hdr(&x.Header)
		u("src_conn", uint64(x.SrcConn))
		u("src_token", x.SrcTok)
		u("caps", uint64(x.Caps))
		u("planes", uint64(x.Planes))
		u("paths", uint64(x.Paths))
		u("max_dgram", uint64(x.MaxDgram))
		u("addr_len", uint64(len(x.Addr)))
		m["addr"] = "hex:" + hex.EncodeToString(x.Addr)
	case *wire.Probe:
		hdr(&x.Header)
		piggy(&x.Piggyback)
	case *wire.Close:
		hdr(&x.Header)
		u("reason", uint64(x.Reason))
	default:
		panic(fmt.Sprintf("fieldMap: unhandled %T", p))
	}
	return m
}

// sackString writes the set bits of s as "{i,j,…}", ascending.
func sackString(s *wire.SackBitmap) string {
	var idx []string
	for i := 0; i < wire.SackBits; i++ {
		if s.Has(i) {
			idx = append(idx, strconv.Itoa(i))
		}
	}
	return "{" + strings.Join(idx, ",") + "}"
}

// canon puts a field value of the spec's `fields` notation into one canonical
// form: integers (decimal or 0x) as decimal, bit sets sorted without spaces,
// byte strings as lower-case hex; anything else (opcode names) unchanged.
func canon(v string) (string, error) {
	v = strings.TrimSpace(v)
	switch {
	case strings.HasPrefix(v, "{") && strings.HasSuffix(v, "}"):
		inner := strings.TrimSpace(v[1 : len(v)-1])
		var idx []int
		if inner != "" {
			for _, f := range strings.Split(inner, ",") {
				i, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil {
					return "", fmt.Errorf("bit set %q: %w", v, err)
				}
				idx = append(idx, i)
			}
		}
		slices.Sort(idx)
		s := make([]string, len(idx))
		for k, i := range idx {
			s[k] = strconv.Itoa(i)
		}
		return "{" + strings.Join(s, ",") + "}", nil
	case strings.HasPrefix(v, "hex:"):
		h := strings.ToLower(strings.Join(strings.Fields(v[4:]), ""))
		if _, err := hex.DecodeString(h); err != nil {
			return "", fmt.Errorf("byte string %q: %w", v, err)
		}
		return "hex:" + h, nil
	}
	if n, err := strconv.ParseUint(v, 0, 64); err == nil {
		return strconv.FormatUint(n, 10), nil
	}
	return v, nil
}
