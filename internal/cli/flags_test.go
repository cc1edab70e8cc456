package cli

import (
	"bytes"
	"errors"
	"flag"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseFlags: -h prints the usage on stdout and reports flag.ErrHelp;
// bad flags and values come back as one error naming them as typed and
// what the flag takes; good ones parse.
func TestParseFlags(t *testing.T) {
	newSet := func() (*flag.FlagSet, *int, *bool) {
		fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
		fs.Usage = func() { fs.Output().Write([]byte("usage: cmd [flags]\n")) }
		return fs, fs.Int("n", 1, "count"), fs.Bool("v", false, "verbose")
	}
	for _, c := range []struct {
		args []string
		err  string // "" for success
	}{
		{[]string{"-n", "3", "--v"}, ""},
		{[]string{"--n", "x"}, `invalid value "x" for flag --n: want a whole number (cmd -h lists the flags)`},
		{[]string{"-v=maybe"}, `invalid value "maybe" for flag -v: want true or false (or the flag alone, for true) (cmd -h lists the flags)`},
		{[]string{"--bogus=1"}, "unknown flag --bogus (cmd -h lists the flags)"},
		{[]string{"-n"}, "flag -n needs a value (cmd -h lists the flags)"},
	} {
		fs, n, _ := newSet()
		var out bytes.Buffer
		err := ParseFlags(fs, c.args, &out, "cmd")
		if c.err == "" {
			require.NoError(t, err, "%v", c.args)
			require.Equal(t, 3, *n)
			continue
		}
		require.EqualError(t, err, c.err, "%v", c.args)
		require.Empty(t, out.String(), "no usage for a mistake: %v", c.args)
	}
	fs, _, _ := newSet()
	var out bytes.Buffer
	err := ParseFlags(fs, []string{"--help"}, &out, "cmd")
	require.True(t, errors.Is(err, flag.ErrHelp))
	require.Equal(t, "usage: cmd [flags]\n", out.String())
}
