package scenarios

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func smoke(t *testing.T, name string) *Result {
	t.Helper()
	res, err := Run(name, Options{Seed: 1, Smoke: true})
	require.NoError(t, err)
	return res
}

// get returns column col of the row whose key columns match.
func get(t *testing.T, tb *Table, col string, keys map[string]string) float64 {
	t.Helper()
	idx := map[string]int{}
	for i, c := range tb.Columns {
		idx[c] = i
	}
	for _, row := range tb.Rows {
		ok := true
		for k, v := range keys {
			if row[idx[k]] != v {
				ok = false
			}
		}
		if ok {
			f, err := strconv.ParseFloat(row[idx[col]], 64)
			require.NoError(t, err)
			return f
		}
	}
	t.Fatalf("no row %v in %s", keys, tb.Name)
	return 0
}

func TestLossSmoke(t *testing.T) {
	tb := smoke(t, "loss").Table("goodput")
	g := func(loss, proto string) float64 {
		return get(t, tb, "goodput_frac", map[string]string{"loss_pct": loss, "protocol": proto})
	}
	assert.Greater(t, g("0.0000", MetaRoCE), 0.9)
	assert.Greater(t, g("0.0000", RoCEv2), 0.9)
	// Selective repeat keeps most of the rate at 1% loss; go-back-N over a
	// bandwidth-delay product of packets does not (1/(1+pW)).
	assert.Greater(t, g("1.0000", MetaRoCE), 0.9)
	assert.Less(t, g("1.0000", RoCEv2), 0.5)
	assert.Greater(t, g("5.0000", MetaRoCE), 3*g("5.0000", RoCEv2))
	// Monotone and close to the ideal selective repeat (1 − p): a flow
	// that stalls for an RTO (a lost RECV_READY timed by a bogus RTT)
	// breaks both. The smoke's window opens 50 µs after the start, while
	// MetaRoCE's flows still ramp up to the line rate (about 150 µs in),
	// and how fast differs between runs by a few tenths of a percent:
	// 0.9839 without loss, 0.9855 at 1% (2 ms runs, whose window opens
	// at 200 µs: 0.9994 and 0.9893).
	const ramp = 0.005
	assert.GreaterOrEqual(t, g("0.0000", MetaRoCE), g("1.0000", MetaRoCE)-ramp)
	assert.Greater(t, g("1.0000", MetaRoCE), g("5.0000", MetaRoCE))
	assert.Greater(t, g("5.0000", MetaRoCE), 0.9) // ideal 0.95
}

// TestGoodputAtMostOne: goodput is a fraction of what the receivers'
// links carry in the protocol's own full DATA packets, so no run reads
// more than 1, and one whose links carry nothing else reads close to 1.
// Counting completed messages (up to one per flow too many at the
// window's start) against MetaRoCE's 56-byte header for both protocols
// read 1.0078 for RoCEv2 without loss.
func TestGoodputAtMostOne(t *testing.T) {
	for _, sc := range []struct{ name, table string }{{"loss", "goodput"}, {"incast", "summary"}} {
		tb := smoke(t, sc.name).Table(sc.table)
		for _, row := range tb.Rows {
			keys := map[string]string{"protocol": row[slices.Index(tb.Columns, "protocol")]}
			if sc.name == "loss" {
				keys["loss_pct"] = row[0]
			}
			f := get(t, tb, "goodput_frac", keys)
			assert.LessOrEqual(t, f, 1.0, "%s %v", sc.name, keys)
			assert.Positive(t, f, "%s %v", sc.name, keys)
		}
	}
	lt := smoke(t, "loss").Table("goodput")
	g := func(proto string) float64 {
		return get(t, lt, "goodput_frac", map[string]string{"loss_pct": "0.0000", "protocol": proto})
	}
	// Without loss go-back-N sends back to back at the line rate from the
	// start; MetaRoCE ramps up during the first 150 µs of the smoke's
	// 500, of which the window discards 50 (0.9994 over the full 2 ms).
	assert.Greater(t, g(RoCEv2), 0.999)
	assert.Greater(t, g(MetaRoCE), 0.98)
	// Lossless, PFC places every packet it delivers, and host 0's link
	// is busy nearly throughout.
	it := smoke(t, "incast").Table("summary")
	assert.Greater(t, get(t, it, "goodput_frac", map[string]string{"protocol": RoCEv2PFC}), 0.99)
}

// TestPayloadRate: a port's payload rate counts each protocol's own DATA
// header, and the wire's per-packet overhead: 4096 of 4218 bytes for
// MetaRoCE (56-byte header), of 4202 for RoCEv2 (40 bytes).
func TestPayloadRate(t *testing.T) {
	o := Options{}
	o.fill()
	c := o.fabric(2, 2, 2, 1)
	assert.InDelta(t, 50e9*4096/4218, payloadRate(&o, c, MetaRoCE), 1e-3)
	assert.InDelta(t, 50e9*4096/4202, payloadRate(&o, c, RoCEv2), 1e-3)
	assert.InDelta(t, 50e9*4096/4202, payloadRate(&o, c, RoCEv2PFC), 1e-3)
}

func TestIncastSmoke(t *testing.T) {
	tb := smoke(t, "incast").Table("summary")
	assert.Zero(t, get(t, tb, "drops", map[string]string{"protocol": RoCEv2PFC}), "PFC is lossless")
	assert.Greater(t, get(t, tb, "jain_2nd_half", map[string]string{"protocol": MetaRoCE}), 0.95)
	// Lossy RoCEv2 fills the bottleneck's 2 MiB buffer and drops tail.
	rk := map[string]string{"protocol": RoCEv2}
	assert.Positive(t, get(t, tb, "max_queue_kb", rk))
	assert.LessOrEqual(t, get(t, tb, "max_queue_kb", rk), float64(2<<20)/1e3)
	assert.Positive(t, get(t, tb, "drops", rk))
	// Hints that add up to a little under the receiver's port (wire
	// overhead included) and start at half a share: no drops, and the
	// shares are fair and the queue at or under Kmin (100 KB) for good
	// within the goal's 2 RTTs of the first ACK of DATA.
	mr := map[string]string{"protocol": MetaRoCE}
	assert.Zero(t, get(t, tb, "drops", mr))
	assert.Less(t, get(t, tb, "max_queue_kb", mr), 400.0)
	q := get(t, tb, "rtts_until_settled", mr)
	assert.True(t, q >= 0 && q <= 2, "settled after %v RTTs", q)
	assert.Greater(t, get(t, tb, "goodput_frac", mr), 0.9)
}

func TestCollectiveSmoke(t *testing.T) {
	res := smoke(t, "collective")
	tb := res.Table("collectives")
	// 2 operations × 2 sizes × 2 loss rates × 3 protocols.
	require.Len(t, tb.Rows, 24)
	for _, row := range tb.Rows {
		assert.Equal(t, "ok", row[6], "%v", row)
		bw, err := strconv.ParseFloat(row[5], 64)
		require.NoError(t, err)
		assert.Positive(t, bw)
		assert.Less(t, bw, 400.0*2, "bus bandwidth above what the links carry: %v", row)
	}
	// Under 1% loss selective repeat finishes ahead of go-back-N at every
	// size, and well ahead over the sizes together: go-back-N loses most
	// to the tail losses that only its timeout recovers, and whether one
	// small run draws one is chance (the 2 MiB all-reduce, 12 steps of the
	// hierarchical ring, drew none at this seed).
	for _, op := range []string{"allreduce", "alltoall"} {
		var ms, rs float64
		for _, size := range []string{"262144", "2097152"} {
			sel := map[string]string{"op": op, "size_bytes": size, "loss_pct": "1.0000"}
			sel["protocol"] = MetaRoCE
			m := get(t, tb, "time_us", sel)
			sel["protocol"] = RoCEv2
			r := get(t, tb, "time_us", sel)
			assert.Less(t, m, r, "%s of %s B at 1%% loss: MetaRoCE %v µs, RoCEv2 %v µs", op, size, m, r)
			ms, rs = ms+m, rs+r
		}
		assert.Less(t, 2*ms, rs, "%s at 1%% loss: MetaRoCE %v µs, RoCEv2 %v µs in all", op, ms, rs)
	}
}

func TestPlanesSmoke(t *testing.T) {
	tb := smoke(t, "planes").Table("throughput")
	for _, proto := range []string{MetaRoCE, RoCEv2} {
		prev := 0.0
		for _, p := range []string{"1", "2", "4"} {
			v := get(t, tb, "agg_tbit_s", map[string]string{"planes": p, "protocol": proto})
			assert.Greater(t, v, 1.5*prev, "%s: throughput grows with planes", proto)
			prev = v
		}
	}
	for _, p := range []string{"1", "2", "4"} {
		// Messages of a flow go one after another, so they complete
		// within the run (interleaved, none did at one plane).
		f := get(t, tb, "frac_of_capacity", map[string]string{"planes": p, "protocol": MetaRoCE})
		assert.Greater(t, f, 0.85, "MetaRoCE at %s planes", p)
	}
}

func TestFailureSmoke(t *testing.T) {
	res := smoke(t, "failure")
	// 400 Gb/s host links, 800 Gb/s uplinks (TestFailureFabricBaseRTT).
	params := map[string]string{}
	for _, p := range res.Params {
		params[p.Name] = p.Value
	}
	assert.Equal(t, "8258", params["base_rtt_ns"])
	assert.Equal(t, "8258", params["rtt_bin_ns"])
	tb := res.Table("summary")
	require.Len(t, tb.Rows, 4)
	for _, proto := range []string{MetaRoCE, RoCEv2} {
		assert.Positive(t, get(t, tb, "before_gbit_s", map[string]string{"case": "spine-link", "protocol": proto}))
	}
	// The surviving fabric carries half: one of two uplinks of leaf 0, or
	// one of two planes. MetaRoCE moves its paths off the dead routes
	// within the run and loses no connection.
	for _, kase := range []string{"spine-link", "plane"} {
		k := map[string]string{"case": kase, "protocol": MetaRoCE}
		assert.Greater(t, get(t, tb, "after_frac", k), 0.4, kase)
		assert.Zero(t, get(t, tb, "conn_errors", k), kase)
		assert.Greater(t, get(t, tb, "after_of_surviving", k), 0.85, kase)
		// No flow waits out the 100 µs RTO floor (12 base RTTs): dead
		// routes are found from the other paths' progress.
		assert.Less(t, get(t, tb, "max_flow_gap_rtts", k), 10.0, kase)
		// And no more than the surviving capacity: the failure took the
		// rest (a failure that took nothing reads about 2 here).
		assert.LessOrEqual(t, get(t, tb, "after_of_surviving", k), 1.05, kase)
	}
	// RoCEv2's go-back-N keeps resending into the dead spine link, and its
	// queue pairs cannot leave the dead plane.
	rk := map[string]string{"case": "spine-link", "protocol": RoCEv2}
	mk := map[string]string{"case": "spine-link", "protocol": MetaRoCE}
	assert.Less(t, get(t, tb, "after_of_surviving", rk), get(t, tb, "after_of_surviving", mk))
	assert.Less(t, get(t, tb, "after_frac", map[string]string{"case": "plane", "protocol": RoCEv2}), 0.1)
	// A RoCEv2 throughput that collapsed to zero with the plane never
	// recovers, on either measure: recovery is judged against the level
	// before the failure, not against the zero it ended at.
	pk := map[string]string{"case": "plane", "protocol": RoCEv2}
	assert.Zero(t, get(t, tb, "after_gbit_s", pk))
	assert.Equal(t, -1.0, get(t, tb, "recovery_us", pk))
	assert.Equal(t, -1.0, get(t, tb, "recovery_rtts", pk))
	// MetaRoCE regains its share of the level before on both cases.
	for _, kase := range []string{"spine-link", "plane"} {
		assert.GreaterOrEqual(t, get(t, tb, "recovery_us", map[string]string{"case": kase, "protocol": MetaRoCE}), 0.0, kase)
	}
}

// TestDeterministic: the same seed gives byte-identical JSON and CSV.
func TestDeterministic(t *testing.T) {
	out := func(seed uint64) ([]byte, []byte) {
		res, err := Run("incast", Options{Seed: seed, Smoke: true})
		require.NoError(t, err)
		var j, c bytes.Buffer
		require.NoError(t, res.WriteJSON(&j))
		require.NoError(t, res.WriteCSV(&c))
		return j.Bytes(), c.Bytes()
	}
	j1, c1 := out(3)
	j2, c2 := out(3)
	assert.Equal(t, j1, j2)
	assert.Equal(t, c1, c2)
	j3, _ := out(4)
	assert.NotEqual(t, j1, j3, "the seed must matter")
}

func TestOutputs(t *testing.T) {
	res := smoke(t, "loss")
	var b bytes.Buffer
	require.NoError(t, res.WriteText(&b))
	assert.Contains(t, b.String(), "[goodput]")
	dir := t.TempDir()
	p := filepath.Join(dir, "loss.png")
	require.NoError(t, res.WritePNG(0, p))
	st, err := os.Stat(p)
	require.NoError(t, err)
	assert.Positive(t, st.Size())
	assert.Error(t, res.WritePNG(5, p))
	_, err = Run("nope", Options{})
	assert.Error(t, err)
	assert.Equal(t, []string{"collective", "failure", "incast", "loss", "planes"}, Names())
}

func TestJain(t *testing.T) {
	assert.InDelta(t, 1.0, jain([]float64{2, 2, 2}), 1e-12)
	assert.InDelta(t, 0.25, jain([]float64{1, 0, 0, 0}), 1e-12)
	assert.True(t, math.IsNaN(jain([]float64{0, 0})))
	assert.InDelta(t, 0.5, meanJain([]float64{0.25, math.NaN(), 0.75}), 1e-12)
	assert.Equal(t, -1.0, meanJain([]float64{math.NaN(), math.NaN()}))
	assert.Equal(t, -1.0, meanJain(nil))
}
