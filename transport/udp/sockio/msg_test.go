package sockio

import (
	"testing"
)

func TestMsgSegments(t *testing.T) {
	buf := make([]byte, 100)
	for i := range buf {
		buf[i] = byte(i)
	}
	for _, tc := range []struct {
		name    string
		n, seg  int
		lengths []int
	}{
		{"empty", 0, 0, []int{0}},
		{"single", 10, 0, []int{10}},
		{"seg larger than n", 10, 20, []int{10}},
		{"seg equal n", 10, 10, []int{10}},
		{"exact", 30, 10, []int{10, 10, 10}},
		{"short tail", 25, 10, []int{10, 10, 5}},
		{"one byte segments", 3, 1, []int{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Msg{Buf: buf, N: tc.n, Seg: tc.seg}
			require.Equal(t, len(tc.lengths), m.Segments())
			off := 0
			for i, l := range tc.lengths {
				s := m.Segment(i)
				require.Len(t, s, l)
				require.Equal(t, buf[off:off+l], s)
				off += l
			}
			require.Equal(t, tc.n, off)
		})
	}
}
