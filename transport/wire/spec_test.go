package wire_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"maps"
	"math/big"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/transport/wire"
)

// specPath is docs/spec.md relative to this package's directory, where go test
// runs it.
const specPath = "../../docs/spec.md"

// specExample is one worked example of docs/spec.md §2: the packet bytes and
// the documented field values (canonical form, see canon).
type specExample struct {
	Name   string
	Line   int // line of the hex block, for messages
	Bytes  []byte
	Fields map[string]string
}

// readSpec reads docs/spec.md.
func readSpec(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile(specPath)
	if err != nil {
		tb.Fatalf("the spec must be readable from the package directory: %v", err)
	}
	return b
}

// parseSpecExamples extracts the ```hex example=NAME``` and
// ```fields example=NAME``` blocks of the spec and pairs them by name.
func parseSpecExamples(doc []byte) ([]specExample, error) {
	byName := map[string]*specExample{}
	var order []string
	get := func(name string, line int) *specExample {
		e := byName[name]
		if e == nil {
			e = &specExample{Name: name, Line: line}
			byName[name] = e
			order = append(order, name)
		}
		return e
	}
	sc := bufio.NewScanner(bytes.NewReader(doc))
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "```") {
			continue
		}
		info := strings.Fields(strings.TrimPrefix(line, "```"))
		if len(info) != 2 || !strings.HasPrefix(info[1], "example=") || (info[0] != "hex" && info[0] != "fields") {
			if len(info) > 0 { // some other fenced block: skip to its end
				for sc.Scan() {
					lineNo++
					if strings.TrimSpace(sc.Text()) == "```" {
						break
					}
				}
			}
			continue
		}
		kind, name, start := info[0], strings.TrimPrefix(info[1], "example="), lineNo
		var body []string
		closed := false
		for sc.Scan() {
			lineNo++
			l := sc.Text()
			if strings.TrimSpace(l) == "```" {
				closed = true
				break
			}
			if i := strings.IndexByte(l, '#'); i >= 0 {
				l = l[:i]
			}
			if l = strings.TrimSpace(l); l != "" {
				body = append(body, l)
			}
		}
		if !closed {
			return nil, fmt.Errorf("line %d: %s block %q not closed", start, kind, name)
		}
		e := get(name, start)
		switch kind {
		case "hex":
			if e.Bytes != nil {
				return nil, fmt.Errorf("line %d: second hex block for %q", start, name)
			}
			e.Bytes = []byte{}
			for _, l := range body {
				for _, tok := range strings.Fields(l) {
					v, err := hex.DecodeString(tok)
					if err != nil || len(v) != 1 {
						return nil, fmt.Errorf("line %d: example %q: bad byte %q", start, name, tok)
					}
					e.Bytes = append(e.Bytes, v[0])
				}
			}
		case "fields":
			if e.Fields != nil {
				return nil, fmt.Errorf("line %d: second fields block for %q", start, name)
			}
			e.Fields = map[string]string{}
			for _, l := range body {
				k, v, ok := strings.Cut(l, "=")
				if !ok {
					return nil, fmt.Errorf("line %d: example %q: %q is not name = value", start, name, l)
				}
				k = strings.TrimSpace(k)
				if _, dup := e.Fields[k]; dup {
					return nil, fmt.Errorf("line %d: example %q: field %s listed twice", start, name, k)
				}
				c, err := canon(v)
				if err != nil {
					return nil, fmt.Errorf("line %d: example %q: field %s: %w", start, name, k, err)
				}
				e.Fields[k] = c
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := make([]specExample, 0, len(order))
	for _, n := range order {
		e := byName[n]
		if e.Bytes == nil || e.Fields == nil {
			return nil, fmt.Errorf("example %q needs both a hex and a fields block", n)
		}
		out = append(out, *e)
	}
	return out, nil
}

// specExamples returns the worked examples of the spec; fuzz targets seed
// their corpus with them.
func specExamples(tb testing.TB) []specExample {
	tb.Helper()
	ex, err := parseSpecExamples(readSpec(tb))
	if err != nil {
		tb.Fatalf("%s: %v", specPath, err)
	}
	return ex
}

// TestSpecExamples checks every worked example of docs/spec.md §2: it decodes
// without error, to exactly the documented fields, and re-encodes to the same
// bytes. Every packet type has an example, and so does the delivery state
// of a NACK FLOW_ABORTED (§2.7), whose value is not a plain number.
func TestSpecExamples(t *testing.T) {
	ex := specExamples(t)
	want := []string{"data", "data_piggy", "ack", "recv_ready", "nack", "nack_flow_aborted", "hello", "hello_ack", "probe", "close"}
	var got []string
	for _, e := range ex {
		got = append(got, e.Name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		t.Errorf("worked examples %v, want one per packet type: %v", got, want)
	}
	for _, e := range ex {
		t.Run(e.Name, func(t *testing.T) {
			p, n, err, ok := parseAny(e.Bytes)
			if !ok {
				t.Fatalf("spec line %d: opcode %v has no parser", e.Line, wire.PeekOpcode(e.Bytes))
			}
			if err != nil {
				t.Fatalf("spec line %d: %v", e.Line, err)
			}
			if n != len(e.Bytes) || p.Length() != len(e.Bytes) {
				t.Errorf("spec line %d: parsed %d bytes, Length %d, example has %d", e.Line, n, p.Length(), len(e.Bytes))
			}
			got := fieldMap(p)
			for _, k := range slices.Sorted(maps.Keys(got)) {
				if w, ok := e.Fields[k]; !ok {
					t.Errorf("spec line %d: field %s = %s not documented", e.Line, k, got[k])
				} else if w != got[k] {
					t.Errorf("spec line %d: field %s documented %s, decodes to %s", e.Line, k, w, got[k])
				}
			}
			for _, k := range slices.Sorted(maps.Keys(e.Fields)) {
				if _, ok := got[k]; !ok {
					t.Errorf("spec line %d: documented field %s does not exist", e.Line, k)
				}
			}
			if enc := p.Append(nil); !bytes.Equal(enc, e.Bytes) {
				t.Errorf("spec line %d: re-encoding differs:\n got %x\nwant %x", e.Line, enc, e.Bytes)
			}
		})
	}
}

// TestSpecExampleParser makes sure the example parser rejects what it must,
// so a broken spec fails loudly instead of silently testing nothing.
func TestSpecExampleParser(t *testing.T) {
	for _, tc := range []struct{ name, doc string }{
		{"unclosed", "```hex example=x\n01\n"},
		{"bad byte", "```hex example=x\n0g\n```\n```fields example=x\na = 1\n```\n"},
		{"two-digit tokens only", "```hex example=x\n0102\n```\n```fields example=x\na = 1\n```\n"},
		{"hex without fields", "```hex example=x\n01\n```\n"},
		{"fields without hex", "```fields example=x\na = 1\n```\n"},
		{"not name = value", "```hex example=x\n01\n```\n```fields example=x\na 1\n```\n"},
		{"duplicate field", "```hex example=x\n01\n```\n```fields example=x\na = 1\na = 2\n```\n"},
		{"bad bit set", "```hex example=x\n01\n```\n```fields example=x\na = {1, x}\n```\n"},
	} {
		if _, err := parseSpecExamples([]byte(tc.doc)); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	ex, err := parseSpecExamples([]byte("```go\nx := 1 # ```hex example=no\n```\n```hex example=x\n01 02 # c\n```\n```fields example=x\na = 0x10 # c\nb = {3, 1}\nc = hex:AB cd\n```\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "16", "b": "{1,3}", "c": "hex:abcd"}
	if len(ex) != 1 || !bytes.Equal(ex[0].Bytes, []byte{1, 2}) || !maps.Equal(ex[0].Fields, want) {
		t.Errorf("parsed %+v, want bytes 0102 and fields %v", ex, want)
	}
}

// TestSpecLimits compares the §4 table of docs/spec.md with the package's
// constants, both ways: every listed constant has the code's value and every
// constant is listed.
func TestSpecLimits(t *testing.T) {
	code := map[string]uint64{
		"Version":          wire.Version,
		"DefaultPort":      wire.DefaultPort,
		"HeaderLen":        wire.HeaderLen,
		"DataHeaderLen":    wire.DataHeaderLen,
		"MaxMessageLen":    wire.MaxMessageLen,
		"SackBits":         wire.SackBits,
		"MaxAckRecords":    wire.MaxAckRecords,
		"MaxRecvEntries":   wire.MaxRecvEntries,
		"NackLen":          wire.NackLen,
		"MaxPlanes":        wire.MaxPlanes,
		"MaxPathsPerPlane": wire.MaxPathsPerPlane,
		"MinDatagram":      wire.MinDatagram,
		"MaxAddrBlob":      wire.MaxAddrBlob,
		"CloseLen":         wire.CloseLen,
		"AuthTagLen":       wire.AuthTagLen,
		"FwdDelayUnit":     wire.FwdDelayUnit,
		"MaxFwdDelay":      wire.MaxFwdDelay,
	}
	doc := string(readSpec(t))
	start := strings.Index(doc, "\n## 4 ")
	if start < 0 {
		t.Fatal("spec has no §4")
	}
	sec := doc[start+1:]
	if end := strings.Index(sec, "\n## 5 "); end >= 0 {
		sec = sec[:end]
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(sec, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		want, ok := code[name]
		if !ok {
			continue
		}
		seen[name] = true
		got, err := specNumber(strings.TrimSpace(cells[2]))
		if err != nil {
			t.Errorf("spec §4 %s: %v", name, err)
		} else if got != want {
			t.Errorf("spec §4 %s = %d, code has %d", name, got, want)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(code)) {
		if !seen[name] {
			t.Errorf("spec §4 does not list %s", name)
		}
	}
}

// specNumber reads a §4 value: a decimal integer or a power of two "2^k".
func specNumber(s string) (uint64, error) {
	if base, exp, ok := strings.Cut(s, "^"); ok {
		b, okb := new(big.Int).SetString(base, 10)
		e, oke := new(big.Int).SetString(exp, 10)
		if !okb || !oke {
			return 0, fmt.Errorf("bad power %q", s)
		}
		r := new(big.Int).Exp(b, e, nil)
		if !r.IsUint64() {
			return 0, fmt.Errorf("%q overflows", s)
		}
		return r.Uint64(), nil
	}
	var n uint64
	_, err := fmt.Sscanf(s, "%d", &n)
	return n, err
}
