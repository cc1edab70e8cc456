package main

import (
	"bufio"
	"bytes"
	"io"
	"testing"
)

// FuzzReadLine compares readLine with the plain model of the contract's
// framing: lines end at '\n', a last line without one counts, a '\r'
// before the newline is dropped, and a line of more than max bytes (its
// '\r' included) is reported as too long, with nothing kept. A reader
// buffer smaller than max exercises lines read in several pieces.
func FuzzReadLine(f *testing.F) {
	for _, s := range []string{"", "\n", "listen\n", "a\r\nb", "xxxxxxxxxxxxxxxxxxxx\nyy\n", "\r\r\n\r", "abc"} {
		f.Add([]byte(s), uint8(4), uint8(16))
	}
	f.Fuzz(func(t *testing.T, in []byte, max, bufSize uint8) {
		type line struct {
			text    string
			tooLong bool
		}
		var want []line
		for rest := in; len(rest) > 0; {
			l, after, _ := bytes.Cut(rest, []byte("\n"))
			rest = after
			if len(l) > int(max) {
				want = append(want, line{"", true})
				continue
			}
			want = append(want, line{string(bytes.TrimSuffix(l, []byte("\r"))), false})
		}
		r := bufio.NewReaderSize(bytes.NewReader(in), int(bufSize))
		var got []line
		var buf []byte
		for {
			l, tooLong, err := readLine(r, int(max), buf[:0])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%q: %v", in, err)
			}
			if tooLong && len(l) != 0 {
				t.Fatalf("%q: a line too long kept %d bytes", in, len(l))
			}
			got = append(got, line{string(l), tooLong})
			buf = l
			if len(got) > len(in)+1 {
				t.Fatalf("%q: more lines than bytes", in)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%q max %d: %d lines %+v, want %d %+v", in, max, len(got), got, len(want), want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%q max %d: line %d is %+v, want %+v", in, max, i, got[i], want[i])
			}
		}
	})
}
