package netlab

import (
	"reflect"
	"strings"
	"testing"
)

func TestRenderRules(t *testing.T) {
	r := planeRules{lossAll: 1.5}
	setKey(&r.blackhole, 2, true, false)
	setKey(&r.loss, 1, 10.0, false)
	setKey(&r.loss, 0, 0.01, false)
	setKey(&r.rate, 3, 100, false)
	setKey(&r.ce, 3, true, false)
	setKey(&r.ceOver, 0, 50, false)
	want := `flush ruleset
table inet metaroce {
	chain faults {
		type filter hook forward priority 0; policy accept;
		oifname "a2" drop
		oifname "a*" numgen random mod 10000 < 150 drop
		oifname "a0" numgen random mod 10000 < 1 drop
		oifname "a1" numgen random mod 10000 < 1000 drop
		oifname "a3" limit rate over 100 mbytes/second drop
		oifname "a3" ip ecn != not-ect ip ecn set ce
		oifname "a0" ip ecn != not-ect limit rate over 50 mbytes/second ip ecn set ce
	}
}
`
	if got := r.render(); got != want {
		t.Fatalf("render:\n%s\nwant:\n%s", got, want)
	}
	setKey(&r.blackhole, 2, true, true)
	if strings.Contains(r.render(), `"a2" drop`) {
		t.Fatal("removed black hole still rendered")
	}
	var empty planeRules
	if strings.Count(empty.render(), "\n") != 6 {
		t.Fatalf("empty rules render extra lines:\n%s", empty.render())
	}
}

func TestCheckPrefix(t *testing.T) {
	for _, tc := range []struct {
		p  string
		ok bool
	}{{"mrl", true}, {"a", true}, {"Ab3", true}, {"", false}, {"toolong12", false}, {"a-b", false}, {"a b", false}, {"é", false}} {
		if err := checkPrefix(tc.p); (err == nil) != tc.ok {
			t.Errorf("checkPrefix(%q) = %v, want ok=%v", tc.p, err, tc.ok)
		}
	}
}

func TestParseNetnsList(t *testing.T) {
	got := parseNetnsList("mrlab12-h1 (id: 3)\nother\n\n  mrlab12-s1p0\n")
	want := []string{"mrlab12-h1", "other", "mrlab12-s1p0"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Planes: 0, Links: 1}, {Planes: 1, Links: 0}, {Planes: MaxPlanes + 1, Links: 1},
		{Planes: 1, Links: MaxLinks + 1}, {Planes: 1, Links: 1, Prefix: "bad-prefix"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	if _, err := Cleanup(""); err == nil {
		t.Error("Cleanup with an empty prefix must refuse")
	}
}

const statsSample = `[{"ifindex":1,"ifname":"lo","stats64":{"rx":{"bytes":0,"packets":0},"tx":{"bytes":0,"packets":0}}},
{"ifindex":2,"ifname":"a0","stats64":{"rx":{"bytes":10,"packets":1},"tx":{"bytes":3000,"packets":7}}}]`

func TestParseLinkStats(t *testing.T) {
	m, err := parseLinkStats([]byte(statsSample))
	must(t, err)
	if a := m["a0"]; a.Stats.Tx.Packets != 7 || a.Stats.Tx.Bytes != 3000 {
		t.Fatalf("a0 = %+v", a)
	}
	for _, bad := range []string{"", "{}", `[{"ifname":""}]`, `[{"ifname":"x","stats64":{"tx":{"bytes":-1}}}]`} {
		if _, err := parseLinkStats([]byte(bad)); err == nil {
			t.Errorf("parseLinkStats(%q) succeeded", bad)
		}
	}
}

// FuzzParseLinkStats checks that arbitrary input never panics and that every
// accepted entry has a name.
func FuzzParseLinkStats(f *testing.F) {
	f.Add([]byte(statsSample))
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"ifname":"b3","stats64":{"tx":{"packets":18446744073709551615}}}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseLinkStats(b)
		if err != nil {
			return
		}
		for name, s := range m {
			if name == "" || s.Name != name {
				t.Fatalf("entry %q: %+v", name, s)
			}
		}
	})
}
