package bytesize

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const tib = 1 << 40

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int64
		want  int64
		err   bool
	}{
		{"0", tib, 0, false}, {"8", tib, 8, false}, {"1K", tib, 1024, false}, {"1k", tib, 1024, false},
		{"64M", tib, 64 << 20, false}, {"2G", tib, 2 << 30, false}, {"1T", tib, 1 << 40, false},
		{"16MB", tib, 16 << 20, false}, {"4KiB", tib, 4096, false}, {"100B", tib, 100, false},
		{" 32 ", tib, 32, false}, {"1M", 1 << 20, 1 << 20, false},
		{"", tib, 0, true}, {"B", tib, 0, true}, {"K", tib, 0, true}, {"-1", tib, 0, true},
		{"1.5M", tib, 0, true}, {"2T", tib, 0, true}, {"1X", tib, 0, true},
		{"9223372036854775807", tib, 0, true}, {"1 M", tib, 0, true},
		{"1025K", 1 << 20, 0, true}, {"1048577", 1 << 20, 0, true},
	} {
		got, err := Parse(tc.in, tc.limit)
		if tc.err {
			assert.Error(t, err, "%q", tc.in)
			continue
		}
		require.NoError(t, err, "%q", tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0", 100: "100", 1000: "1000", 1024: "1K", 3 << 19: "1536K", 16 << 20: "16M",
		1 << 30: "1G", 3 << 40: "3T", 1<<30 + 1<<20: "1025M", -5: "-5",
	} {
		assert.Equal(t, want, Format(n), "%d", n)
	}
}

// FuzzParse: no panics, results within the limit, and Format's output
// parses back to the same value.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"8", "64M", "1KiB", "2gb", "", "-3", "99999999999999999999", "1T"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s, tib)
		if err != nil {
			return
		}
		if v < 0 || v > tib {
			t.Fatalf("Parse(%q) = %d out of range", s, v)
		}
		back, err := Parse(Format(v), tib)
		if err != nil || back != v {
			t.Fatalf("Format(%d) = %q parses to %d, %v", v, Format(v), back, err)
		}
	})
}
