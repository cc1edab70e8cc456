package udpnet

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

func sampleHandles() []listenHandle {
	var v4, v6 []netip.AddrPort
	for i := range MaxPlanes4 {
		v4 = append(v4, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 1}), uint16(4000+i)))
	}
	for i := range MaxPlanes6 {
		v6 = append(v6, netip.AddrPortFrom(netip.MustParseAddr("fd00::7").Next(), uint16(9+i)))
	}
	return []listenHandle{
		{Flow: 1, Nonce: 1, Addrs: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:4242")}},
		{Flow: maxListenFlow, Nonce: ^uint64(0), Addrs: v4},
		{Flow: 7, Nonce: 99, Addrs: v6},
	}
}

func TestListenHandleRoundTrip(t *testing.T) {
	for _, h := range sampleHandles() {
		b, err := h.Append(nil)
		require.NoError(t, err)
		require.Len(t, b, h.Length())
		require.LessOrEqual(t, len(b), backend.HandleSize)
		var got listenHandle
		n, err := parseListenHandle(&got, append(b, make([]byte, backend.HandleSize-len(b))...))
		require.NoError(t, err)
		require.Equal(t, len(b), n)
		require.Equal(t, h, got)
	}
}

func TestListenHandleRefusesWhatDoesNotFit(t *testing.T) {
	h := sampleHandles()[2]
	h.Addrs = append(h.Addrs, h.Addrs[0])
	_, err := h.Append(nil)
	require.ErrorIs(t, err, backend.ErrInvalidUsage)
	mixed := listenHandle{Flow: 1, Nonce: 1, Addrs: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("[fd00::1]:1")}}
	_, err = mixed.Append(nil)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	_, err = (&listenHandle{Flow: 0, Nonce: 1, Addrs: mixed.Addrs[:1]}).Append(nil)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
}

func TestListenHandleRejectsGarbage(t *testing.T) {
	good, err := sampleHandles()[0].Append(nil)
	require.NoError(t, err)
	for name, mutate := range map[string]func(b []byte) []byte{
		"short":       func(b []byte) []byte { return b[:len(b)-1] },
		"header only": func(b []byte) []byte { return b[:hdrLen-1] },
		"magic":       func(b []byte) []byte { b[0] = 'X'; return b },
		"version":     func(b []byte) []byte { b[hOffVersion] = 9; return b },
		"family":      func(b []byte) []byte { b[hOffFamily] = 5; return b },
		"zero planes": func(b []byte) []byte { b[hOffPlanes] = 0; return b },
		"many planes": func(b []byte) []byte { b[hOffPlanes] = MaxPlanes4 + 1; return b },
		"zero flow":   func(b []byte) []byte { clear(b[hOffFlow : hOffFlow+4]); return b },
		"zero nonce":  func(b []byte) []byte { clear(b[hOffNonce : hOffNonce+8]); return b },
		"zero port":   func(b []byte) []byte { b[hdrLen+4], b[hdrLen+5] = 0, 0; return b },
		"unspecified": func(b []byte) []byte { clear(b[hdrLen : hdrLen+4]); return b },
		"tcp handle":  func(b []byte) []byte { return append([]byte("MRTC"), b[4:]...) },
		"all ones":    func(b []byte) []byte { return bytes.Repeat([]byte{0xff}, backend.HandleSize) },
		"all zero":    func(b []byte) []byte { return make([]byte, backend.HandleSize) },
	} {
		t.Run(name, func(t *testing.T) {
			var h listenHandle
			_, err := parseListenHandle(&h, mutate(bytes.Clone(good)))
			require.ErrorIs(t, err, backend.ErrInvalidArgument)
		})
	}
}

// foreignFlowHandle returns the encoding of a handle like
// sampleHandles()[0] naming flow, which Append would refuse when no
// listener can take it.
func foreignFlowHandle(t testing.TB, flow uint32) []byte {
	b, err := sampleHandles()[0].Append(nil)
	require.NoError(t, err)
	binary.BigEndian.PutUint32(b[hOffFlow:], flow)
	return b
}

// TestListenHandleFlowAboveListenersRefused: a handle whose flow id is
// above maxListenFlow was made by no listener of this backend (garbage, or
// a foreign handle). It is refused up front as a stale or foreign handle
// (ncclRemoteError, as the listener would refuse it), naming the flow,
// instead of being dialed and refused after a round trip; Dial starts no
// connect for it. The largest flow a listener takes still passes.
func TestListenHandleFlowAboveListenersRefused(t *testing.T) {
	for _, flow := range []uint32{maxListenFlow + 1, ^uint32(0)} {
		hb := foreignFlowHandle(t, flow)
		var h listenHandle
		_, err := parseListenHandle(&h, hb)
		require.ErrorIs(t, err, backend.ErrRemote, "flow %d", flow)
		require.ErrorContains(t, err, "flow "+strconv.FormatUint(uint64(flow), 10))
		require.ErrorContains(t, err, "stale")

		b := newBackend(t, 50)
		d, err := b.Dial(0, hb)
		require.True(t, d == nil, "Dial started a connect for flow %d", flow)
		require.ErrorIs(t, err, backend.ErrRemote)

		_, err = (&listenHandle{Flow: flow, Nonce: 1, Addrs: sampleHandles()[0].Addrs}).Append(nil)
		require.ErrorIs(t, err, backend.ErrInvalidArgument, "Append of flow %d", flow)
	}
	var h listenHandle
	_, err := parseListenHandle(&h, foreignFlowHandle(t, maxListenFlow))
	require.NoError(t, err)
	require.Equal(t, uint32(maxListenFlow), h.Flow)
}

func FuzzListenHandle(f *testing.F) {
	for _, h := range sampleHandles() {
		b, _ := h.Append(nil)
		f.Add(b)
	}
	f.Add(make([]byte, backend.HandleSize))
	f.Add(foreignFlowHandle(f, maxListenFlow+1))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h listenHandle
		n, err := parseListenHandle(&h, b)
		if err != nil {
			return
		}
		require.LessOrEqual(t, h.Flow, uint32(maxListenFlow))
		out, err := h.Append(nil)
		require.NoError(t, err)
		require.Equal(t, h.Length(), len(out))
		require.Equal(t, b[:n], out)
	})
}

func TestCtrlRoundTripAndRejects(t *testing.T) {
	for _, m := range []ctrlMsg{{ctrlAnnounce, 1, 2}, {ctrlAccept, ^uint32(0), ^uint64(0)}, {ctrlReject, 9, 9}, {ctrlWithdraw, 7, 8}} {
		b, err := m.Append(nil)
		require.NoError(t, err)
		require.Len(t, b, m.Length())
		var got ctrlMsg
		n, err := parseCtrl(&got, b)
		require.NoError(t, err)
		require.Equal(t, ctrlLen, n)
		require.Equal(t, m, got)
	}
	good, _ := (&ctrlMsg{ctrlAnnounce, 3, 4}).Append(nil)
	for name, mutate := range map[string]func(b []byte) []byte{
		"short":    func(b []byte) []byte { return b[:ctrlLen-1] },
		"magic":    func(b []byte) []byte { b[1] = 0; return b },
		"version":  func(b []byte) []byte { b[4] = 2; return b },
		"kind":     func(b []byte) []byte { b[5] = 5; return b },
		"reserved": func(b []byte) []byte { b[7] = 1; return b },
		"flow":     func(b []byte) []byte { clear(b[8:12]); return b },
		"nonce":    func(b []byte) []byte { clear(b[12:20]); return b },
	} {
		var m ctrlMsg
		_, err := parseCtrl(&m, mutate(bytes.Clone(good)))
		require.ErrorIs(t, err, backend.ErrRemote, name)
	}
	_, err := (&ctrlMsg{Kind: 0, Flow: 1, Nonce: 1}).Append(nil)
	require.ErrorIs(t, err, backend.ErrInternal)
}

func FuzzCtrl(f *testing.F) {
	for _, m := range []ctrlMsg{{ctrlAnnounce, 1, 2}, {ctrlReject, 5, 6}} {
		b, _ := m.Append(nil)
		f.Add(b)
	}
	f.Add(make([]byte, ctrlLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m ctrlMsg
		n, err := parseCtrl(&m, b)
		if err != nil {
			return
		}
		out, err := m.Append(nil)
		require.NoError(t, err)
		require.Equal(t, b[:n], out)
	})
}
