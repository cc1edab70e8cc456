package harness

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// field is one expected member layout: offset and size in bytes.
type field struct {
	name         string
	offset, size int
}

// layout is one struct's expected size, alignment and members.
type layout struct {
	typ         string
	size, align int
	fields      []field
}

// netMembers lists the ncclNet_vN_t members in order; member i sits at 8*i.
var netMembers = []string{"name", "init", "devices", "getProperties", "listen", "connect", "accept",
	"regMr", "regMrDmaBuf", "deregMr", "isend", "irecv", "iflush", "test", "closeSend", "closeRecv",
	"closeListen", "getDeviceMr", "irecvConsumed", "makeVDevice", "finalize", "setNetAttr"}

// expectedLayouts is the measured x86_64 table of the ABI fact sheet, §7
// ("Verified x86_64 layouts"), for NCCL 2.30.7 headers.
func expectedLayouts() []layout {
	var ls []layout
	for v, n := range map[int]int{12: 22, 11: 22, 10: 20, 9: 20, 8: 19, 7: 19, 6: 17} {
		l := layout{typ: fmt.Sprintf("ncclNet_v%d_t", v), size: 8 * n, align: 8}
		for i := range n {
			l.fields = append(l.fields, field{netMembers[i], 8 * i, 8})
		}
		ls = append(ls, l)
	}
	base := []field{{"name", 0, 8}, {"pciPath", 8, 8}, {"guid", 16, 8}, {"ptrSupport", 24, 4}}
	v9 := append(append([]field{}, base...), field{"regIsGlobal", 28, 4}, field{"forceFlush", 32, 4},
		field{"speed", 36, 4}, field{"port", 40, 4}, field{"latency", 44, 4}, field{"maxComms", 48, 4},
		field{"maxRecvs", 52, 4}, field{"netDeviceType", 56, 4}, field{"netDeviceVersion", 60, 4})
	ls = append(ls,
		layout{typ: "ncclNetProperties_v12_t", size: 128, align: 8, fields: append(append([]field{}, v9...),
			field{"vProps", 64, 36}, field{"maxP2pBytes", 104, 8}, field{"maxCollBytes", 112, 8},
			field{"maxMultiRequestSize", 120, 4}, field{"railId", 124, 2}, field{"planeId", 126, 2})},
		layout{typ: "ncclNetProperties_v11_t", size: 112, align: 8, fields: append(append([]field{}, v9...),
			field{"vProps", 64, 20}, field{"maxP2pBytes", 88, 8}, field{"maxCollBytes", 96, 8},
			field{"maxMultiRequestSize", 104, 4})},
		layout{typ: "ncclNetProperties_v10_t", size: 104, align: 8, fields: append(append([]field{}, v9...),
			field{"vProps", 64, 20}, field{"maxP2pBytes", 88, 8}, field{"maxCollBytes", 96, 8})},
		layout{typ: "ncclNetProperties_v9_t", size: 104, align: 8, fields: append(append([]field{}, v9...),
			field{"vProps", 64, 20}, field{"maxP2pBytes", 88, 8}, field{"maxCollBytes", 96, 8})},
		layout{typ: "ncclNetProperties_v8_t", size: 64, align: 8, fields: append(append([]field{}, base...),
			field{"regIsGlobal", 28, 4}, field{"speed", 32, 4}, field{"port", 36, 4}, field{"latency", 40, 4},
			field{"maxComms", 44, 4}, field{"maxRecvs", 48, 4}, field{"netDeviceType", 52, 4}, field{"netDeviceVersion", 56, 4})},
		layout{typ: "ncclNetProperties_v7_t", size: 56, align: 8, fields: append(append([]field{}, base...),
			field{"speed", 28, 4}, field{"port", 32, 4}, field{"latency", 36, 4},
			field{"maxComms", 40, 4}, field{"maxRecvs", 44, 4}, field{"netDeviceType", 48, 4}, field{"netDeviceVersion", 52, 4})},
		layout{typ: "ncclNetProperties_v6_t", size: 48, align: 8, fields: append(append([]field{}, base...),
			field{"speed", 28, 4}, field{"port", 32, 4}, field{"latency", 36, 4},
			field{"maxComms", 40, 4}, field{"maxRecvs", 44, 4})},
		layout{typ: "ncclNetVDeviceProps_v12_t", size: 36, align: 4, fields: []field{{"ndevs", 0, 4}, {"devs", 4, 32}}},
		layout{typ: "ncclNetVDeviceProps_v11_t", size: 20, align: 4, fields: []field{{"ndevs", 0, 4}, {"devs", 4, 16}}},
		layout{typ: "ncclNetVDeviceProps_v10_t", size: 20, align: 4, fields: []field{{"ndevs", 0, 4}, {"devs", 4, 16}}},
		layout{typ: "ncclNetVDeviceProps_v9_t", size: 20, align: 4, fields: []field{{"ndevs", 0, 4}, {"devs", 4, 16}}},
	)
	for _, v := range []int{12, 11, 10} {
		ls = append(ls, layout{typ: fmt.Sprintf("ncclNetCommConfig_v%d_t", v), size: 4, align: 4, fields: []field{{"trafficClass", 0, 4}}})
	}
	for _, v := range []int{12, 11} {
		ls = append(ls,
			layout{typ: fmt.Sprintf("ncclNetCommAttr_v%d_t", v), size: 16, align: 4, fields: []field{
				{"maxConcurrentPeers", 0, 4}, {"minConcurrentPeers", 4, 4}, {"maxFlowsPerPeer", 8, 4}, {"minFlowsPerPeer", 12, 4}}},
			layout{typ: fmt.Sprintf("ncclNetAttr_v%d_t", v), size: 44, align: 4, fields: []field{
				{"sendCommAttr", 0, 16}, {"recvCommAttr", 16, 16}, {"op", 32, 4}, {"algo", 36, 4}, {"proto", 40, 4}}})
	}
	for v := 7; v <= 12; v++ {
		ls = append(ls, layout{typ: fmt.Sprintf("ncclNetDeviceHandle_v%d_t", v), size: 32, align: 8, fields: []field{
			{"netDeviceType", 0, 4}, {"netDeviceVersion", 4, 4}, {"handle", 8, 8}, {"size", 16, 8}, {"needsProxyProgress", 24, 4}}})
	}
	// Scalars (§7 "Scalar sizes").
	for _, e := range []string{"ncclResult_t", "ncclNetDeviceType", "ncclDebugLogLevel", "ncclDebugLogSubSys"} {
		ls = append(ls, layout{typ: e, size: 4, align: 4})
	}
	return ls
}

// TestHeaderLayoutMatchesFactSheet compiles include/metaroce/nccl_net.h and
// compares every sizeof/_Alignof/offsetof with the measured table.
func TestHeaderLayoutMatchesFactSheet(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	ls := expectedLayouts()
	var src strings.Builder
	src.WriteString("#include <stdio.h>\n#include <stddef.h>\n#include \"metaroce/nccl_net.h\"\nint main(void) {\n")
	want := map[string]bool{}
	for _, l := range ls {
		fmt.Fprintf(&src, "  printf(\"%s sizeof %%zu align %%zu\\n\", sizeof(%s), _Alignof(%s));\n", l.typ, l.typ, l.typ)
		want[fmt.Sprintf("%s sizeof %d align %d", l.typ, l.size, l.align)] = true
		for _, f := range l.fields {
			fmt.Fprintf(&src, "  printf(\"%s.%s %%zu %%zu\\n\", offsetof(%s, %s), sizeof(((%s*)0)->%s));\n", l.typ, f.name, l.typ, f.name, l.typ, f.name)
			want[fmt.Sprintf("%s.%s %d %d", l.typ, f.name, f.offset, f.size)] = true
		}
	}
	src.WriteString("  return 0;\n}\n")
	dir := t.TempDir()
	cfile := filepath.Join(dir, "layout.c")
	if err := os.WriteFile(cfile, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "layout")
	if out, err := exec.Command("gcc", "-std=c11", "-Wall", "-Werror", "-I", filepath.Join(repoRoot(), "include"), "-o", bin, cfile).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		got++
		if !want[sc.Text()] {
			t.Errorf("layout differs from the fact sheet: %s", sc.Text())
		}
	}
	if got != len(want) {
		t.Fatalf("printed %d lines, expected %d", got, len(want))
	}
}
