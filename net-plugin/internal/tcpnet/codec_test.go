package tcpnet

import (
	"bytes"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
)

func TestListenHandleRoundTrip(t *testing.T) {
	for _, h := range []listenHandle{
		{Addr: netip.MustParseAddrPort("127.0.0.1:4242"), Socks: 1, Nonce: 1},
		{Addr: netip.MustParseAddrPort("[fd00::7]:65535"), Socks: MaxSocks, Nonce: ^uint64(0)},
	} {
		b, err := h.Append(nil)
		noErr(t, err)
		eq(t, len(b), h.Length())
		if len(b) > backend.HandleSize {
			t.Fatalf("%v > %v", len(b), backend.HandleSize)
		}
		var got listenHandle
		n, err := parseListenHandle(&got, append(b, make([]byte, backend.HandleSize-len(b))...))
		noErr(t, err)
		eq(t, handleLen, n)
		eq(t, h, got)
	}
}

func TestListenHandleRejectsGarbage(t *testing.T) {
	good, err := (&listenHandle{Addr: netip.MustParseAddrPort("10.0.0.1:99"), Socks: 2, Nonce: 7}).Append(nil)
	noErr(t, err)
	for name, mutate := range map[string]func(b []byte) []byte{
		"short":       func(b []byte) []byte { return b[:handleLen-1] },
		"magic":       func(b []byte) []byte { b[0] = 'X'; return b },
		"version":     func(b []byte) []byte { b[hOffVersion] = 9; return b },
		"zero socks":  func(b []byte) []byte { b[hOffSocks] = 0; return b },
		"many socks":  func(b []byte) []byte { b[hOffSocks] = MaxSocks + 1; return b },
		"zero port":   func(b []byte) []byte { b[hOffPort], b[hOffPort+1] = 0, 0; return b },
		"zero nonce":  func(b []byte) []byte { clear(b[hOffNonce : hOffNonce+8]); return b },
		"unspecified": func(b []byte) []byte { clear(b[hOffAddr : hOffAddr+16]); return b },
		"all ones":    func(b []byte) []byte { return bytes.Repeat([]byte{0xff}, backend.HandleSize) },
	} {
		t.Run(name, func(t *testing.T) {
			var h listenHandle
			_, err := parseListenHandle(&h, mutate(bytes.Clone(good)))
			if !errors.Is(err, backend.ErrInvalidArgument) {
				t.Fatalf("error %v, want %v", err, backend.ErrInvalidArgument)
			}
		})
	}
}

func FuzzListenHandle(f *testing.F) {
	for _, h := range []listenHandle{
		{Addr: netip.MustParseAddrPort("127.0.0.1:1"), Socks: 1, Nonce: 1},
		{Addr: netip.MustParseAddrPort("[::1]:9"), Socks: 4, Nonce: 99},
	} {
		b, _ := h.Append(nil)
		f.Add(b)
	}
	f.Add(make([]byte, backend.HandleSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h listenHandle
		n, err := parseListenHandle(&h, b)
		if err != nil {
			return
		}
		out, err := h.Append(nil)
		noErr(t, err)
		eq(t, h.Length(), len(out))
		eq(t, n, len(out))
		var again listenHandle
		_, err = parseListenHandle(&again, out)
		noErr(t, err)
		eq(t, h, again)
	})
}

func FuzzFrameHeader(f *testing.F) {
	for _, fh := range []frameHeader{{}, {Tag: -1, Size: 1 << 20}, {Tag: 7, Size: MaxMessage}} {
		b, _ := fh.Append(nil)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fh frameHeader
		n, err := parseFrameHeader(&fh, b)
		if err != nil {
			return
		}
		if fh.Size > uint64(MaxMessage) {
			t.Fatalf("%v > %v", fh.Size, uint64(MaxMessage))
		}
		out, err := fh.Append(nil)
		noErr(t, err)
		eq(t, fh.Length(), len(out))
		eq(t, b[:n], out)
	})
}

func FuzzHello(f *testing.F) {
	for _, h := range []hello{{Index: 0, Socks: 1, Nonce: 1, ConnID: 2}, {Index: 7, Socks: 8, Nonce: 3, ConnID: 4}} {
		b, _ := h.Append(nil)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h hello
		n, err := parseHello(&h, b)
		if err != nil {
			return
		}
		out, err := h.Append(nil)
		noErr(t, err)
		eq(t, h.Length(), len(out))
		eq(t, b[:n], out)
	})
}

func TestFrameHeaderRejects(t *testing.T) {
	var fh frameHeader
	_, err := (&frameHeader{Size: MaxMessage + 1}).Append(nil)
	if !errors.Is(err, backend.ErrInvalidUsage) {
		t.Fatalf("error %v, want %v", err, backend.ErrInvalidUsage)
	}
	_, err = parseFrameHeader(&fh, make([]byte, frameLen))
	if err == nil || !strings.Contains(err.Error(), "bad magic") {
		t.Fatalf("error %v, want %s", err, "bad magic")
	}
}

// noErr fails the test on a non-nil error.
func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// eq fails the test unless want and got are deeply equal.
func eq(t testing.TB, want, got any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("want %v, got %v", want, got)
	}
}
