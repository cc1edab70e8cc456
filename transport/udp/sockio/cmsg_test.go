package sockio

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func TestParseControl(t *testing.T) {
	for _, tc := range []struct {
		name    string
		b       []byte
		want    RecvInfo
		wantErr bool
	}{
		{"empty", nil, RecvInfo{}, false},
		{"ipv4 tos ect0", AppendControl(nil, unix.IPPROTO_IP, unix.IP_TOS, []byte{0xb8 | 2}), RecvInfo{ECN: ECT0}, false},
		{"ipv6 tclass ce", AppendControl(nil, unix.IPPROTO_IPV6, unix.IPV6_TCLASS, u32(0x23)), RecvInfo{ECN: CE}, false},
		{"gro and tos", AppendControl(AppendControl(nil, unix.IPPROTO_UDP, unix.UDP_GRO, u32(1500)),
			unix.IPPROTO_IP, unix.IP_TOS, []byte{1}), RecvInfo{ECN: ECT1, Seg: 1500}, false},
		{"unknown skipped", AppendControl(AppendControl(nil, 99, 7, []byte{1, 2, 3}),
			unix.IPPROTO_IP, unix.IP_TOS, []byte{3}), RecvInfo{ECN: CE}, false},
		{"negative gro", AppendControl(nil, unix.IPPROTO_UDP, unix.UDP_GRO, u32(0xffffffff)), RecvInfo{}, false},
		{"short tclass ignored", AppendControl(nil, unix.IPPROTO_IPV6, unix.IPV6_TCLASS, []byte{3}), RecvInfo{}, false},
		{"length beyond buffer", AppendControl(nil, unix.IPPROTO_IP, unix.IP_TOS, []byte{3})[:16], RecvInfo{}, true},
		{"length below header", binary.NativeEndian.AppendUint64(make([]byte, 0, 16), 4), RecvInfo{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			if tc.name == "length below header" {
				b = append(b, make([]byte, 8)...)
				tc.wantErr = true
			}
			got, err := ParseControl(b)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestPutSegmentControl(t *testing.T) {
	var b [ctrlSendLen]byte
	n := putSegmentControl(b[:], 9000)
	require.Equal(t, unix.CmsgSpace(2), n)
	want := AppendControl(nil, unix.IPPROTO_UDP, unix.UDP_SEGMENT, binary.NativeEndian.AppendUint16(nil, 9000))
	require.Equal(t, want, b[:n])
}

// FuzzParseControl checks that any buffer parses without panic, that parsing
// is deterministic, and that a well-formed buffer built from the fuzzed
// values reads back what was written.
func FuzzParseControl(f *testing.F) {
	f.Add(AppendControl(nil, unix.IPPROTO_IP, unix.IP_TOS, []byte{2}), uint8(2), uint32(0))
	f.Add(AppendControl(AppendControl(nil, unix.IPPROTO_UDP, unix.UDP_GRO, u32(9000)),
		unix.IPPROTO_IPV6, unix.IPV6_TCLASS, u32(3)), uint8(3), uint32(1500))
	f.Add([]byte{1, 2, 3}, uint8(0), uint32(1))
	f.Fuzz(func(t *testing.T, b []byte, tos uint8, gro uint32) {
		a, errA := ParseControl(b)
		c, errC := ParseControl(b)
		if a != c || (errA == nil) != (errC == nil) {
			t.Fatal("parse is not deterministic")
		}
		if a.ECN > 3 || a.Seg < 0 {
			t.Fatalf("out of range: %+v", a)
		}
		gro &= 0x7fffffff
		built := AppendControl(AppendControl(nil, unix.IPPROTO_UDP, unix.UDP_GRO, u32(gro)),
			unix.IPPROTO_IP, unix.IP_TOS, []byte{tos})
		got, err := ParseControl(built)
		if err != nil || got.ECN != tos&3 || got.Seg != int(gro) {
			t.Fatalf("round trip: %+v %v, want ecn %d seg %d", got, err, tos&3, gro)
		}
	})
}
