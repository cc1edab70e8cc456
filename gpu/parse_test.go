package gpu

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParsePCI(t *testing.T) {
	cases := []struct{ in, want, err string }{
		{"0000:c3:00.0", "0000:c3:00.0", ""},
		{"00000000:18:00.0", "0000:18:00.0", ""},
		{"0000:C3:1F.7", "0000:c3:1f.7", ""},
		{"18:00.0", "0000:18:00.0", ""},
		{" 0001:c1:01.0\n", "0001:c1:01.0", ""},
		{"0000:c3:00", "", "no '.'"},
		{"0000:c3:00.8", "", "function"},
		{"0000:c3:20.0", "", "device"},
		{"0000:1c3:00.0", "", "bus"},
		{"10000:c3:00.0", "", "domain above"},
		{"0:0:0:0.0", "", "number of ':'"},
		{"zz:00.0", "", "bus"},
		{"", "", "no '.'"},
	}
	for _, c := range cases {
		got, err := ParsePCI(c.in)
		if c.err != "" {
			require.ErrorContains(t, err, c.err)
			continue
		}
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, got, c.in)
	}
}

func TestGfxArch(t *testing.T) {
	for v, want := range map[uint64]string{0: "", 90402: "gfx942", 90010: "gfx90a", 110000: "gfx1100", 100300: "gfx1030", 90008: "gfx908"} {
		require.Equal(t, want, gfxArch(v), v)
	}
}

func TestPCIFromLocation(t *testing.T) {
	require.Equal(t, "0000:c3:00.0", pciFromLocation(0, 0xc300), "bus c3")
	require.Equal(t, "0001:c1:01.0", pciFromLocation(1, 0xc108), "device 1")
	require.Equal(t, "0000:ff:1f.7", pciFromLocation(0, 0xffff), "all ones")
}

// FuzzParsePCI checks that every accepted address is canonical: parsing the
// output again gives the output.
func FuzzParsePCI(f *testing.F) {
	for _, s := range []string{"0000:c3:00.0", "00000000:18:00.0", "18:00.0", "0:0.0", "ffff:ff:1f.7", "a:b:c.d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParsePCI(s)
		if err != nil {
			return
		}
		again, err := ParsePCI(got)
		if err != nil || again != got || len(got) != len("dddd:bb:dd.f") {
			t.Fatalf("ParsePCI(%q) = %q, reparsed %q, %v", s, got, again, err)
		}
	})
}

// formatKV is the dumb reference writer for the KFD properties format.
func formatKV(m map[string]uint64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %d\n", k, m[k])
	}
	return b.String()
}

// FuzzParseKFDProperties round-trips accepted input through the reference
// writer: the parse of what was written must equal the first parse.
func FuzzParseKFDProperties(f *testing.F) {
	f.Add([]byte("cpu_cores_count 0\nsimd_count 1216\ngfx_target_version 90402\n"))
	f.Add([]byte("heap_type 1\nsize_in_bytes 206141652992\n"))
	f.Add([]byte("a 1\na 2\n"))
	f.Add([]byte("weird line here\nx -1\ny 18446744073709551615\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseKFDProperties(b)
		if err != nil {
			return
		}
		m2, err := ParseKFDProperties([]byte(formatKV(m)))
		if err != nil {
			t.Fatalf("reparse: %v", err)
		}
		require.Equal(t, m, m2, "round trip")
	})
}

func TestParseKFDProperties(t *testing.T) {
	m, err := ParseKFDProperties([]byte("simd_count 4\n\nbad\nneg -1\nbig 18446744073709551615\nname gfx\n"))
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{"simd_count": 4, "big": 1<<64 - 1}, m, "parsed")
}

// FuzzParseNVInformation round-trips accepted input through a reference
// writer of "Key: value" lines.
func FuzzParseNVInformation(f *testing.F) {
	f.Add([]byte("Model: \t\t NVIDIA H100 80GB HBM3\nBus Location: \t 0000:18:00.0\n"))
	f.Add([]byte("A: 1\nA: 2\n"))
	f.Add([]byte("no colon\n: empty key\nK:v:w\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseNVInformation(b)
		if err != nil {
			return
		}
		var sb strings.Builder
		for k, v := range m {
			fmt.Fprintf(&sb, "%s: %s\n", k, v)
		}
		m2, err := ParseNVInformation([]byte(sb.String()))
		if err != nil {
			t.Fatalf("reparse of %q: %v", sb.String(), err)
		}
		require.Equal(t, m, m2, "round trip")
	})
}

func TestParseNVInformation(t *testing.T) {
	m, err := ParseNVInformation([]byte("Model: \t\t NVIDIA X\nBus Location: \t 0000:18:00.0\nno colon\nK:v:w\n"))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"Model": "NVIDIA X", "Bus Location": "0000:18:00.0", "K": "v:w"}, m, "parsed")
}
