package main

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/conformance/control"
	"github.com/stretchr/testify/require"
)

// TestScript feeds a request script and checks one reply line per request,
// each with the expected outcome.
func TestScript(t *testing.T) {
	script := []struct {
		req string
		ok  bool
	}{
		{"accept 10", false}, // listen first
		{"listen", true},
		{"listen", false}, // already listening
		{"post-recv 1 16 1", false},
		{"accept 50", false}, // nobody dials
		{"completions", true},
		{"frobnicate", false},
		{"send 1 zz 1", false},
		{"quit", true},
		{"listen", true}, // after quit: never read
	}
	var in bytes.Buffer
	for _, s := range script {
		in.WriteString(s.req + "\n")
	}
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"--seed", "3"}, &in, &out, &errb))
	sc := bufio.NewScanner(&out)
	n := 0
	for sc.Scan() {
		rep, err := control.ParseReply(sc.Bytes())
		require.NoError(t, err)
		require.Equal(t, script[n].ok, rep.OK, "%q → %s", script[n].req, sc.Text())
		if script[n].req == "listen" && rep.OK {
			require.True(t, strings.HasPrefix(rep.Addr, "127.0.0.1:"))
		}
		n++
	}
	require.Equal(t, len(script)-1, n, "one reply per request up to quit")
}

func TestUsage(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 2, run([]string{"--bogus"}, strings.NewReader(""), &out, &errb))
	require.Equal(t, 2, run([]string{"extra"}, strings.NewReader(""), &out, &errb))
}
