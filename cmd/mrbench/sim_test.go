package main

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/gpu/rccl"
)

func TestSimScenario(t *testing.T) {
	dir := t.TempDir()
	jp, pp := filepath.Join(dir, "loss.json"), filepath.Join(dir, "loss.png")
	code, out, errs := runMrbench(t, "sim", "loss", "--smoke", "--json", jp, "--plot", pp)
	require.Equal(t, exitOK, code, errs)
	assert.Contains(t, out, "scenario loss  seed 1")
	b, err := os.ReadFile(jp)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	assert.Equal(t, "loss", doc["scenario"])
	f, err := os.Open(pp)
	require.NoError(t, err)
	defer f.Close()
	_, err = png.Decode(f)
	require.NoError(t, err)
}

func TestSimUsage(t *testing.T) {
	code, _, errs := runMrbench(t, "sim")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, "name a scenario")
	code, _, errs = runMrbench(t, "sim", "nosuch", "--smoke")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, "unknown scenario")
	code, _, _ = runMrbench(t, "sim", "loss", "--plot", "x.svg")
	assert.Equal(t, exitUsage, code)
}

// TestRCCLBackendWithoutLibrary: without RCCL or NCCL the backend fails at
// once with the binding's explanation and a non-zero exit.
func TestRCCLBackendWithoutLibrary(t *testing.T) {
	if lib, err := rccl.Open(""); err == nil {
		t.Skipf("an RCCL/NCCL library is installed (%s)", lib.Path())
	}
	t.Setenv("NCCL_NET_PLUGIN", "libnccl-net-metaroce.so")
	code, out, errs := runMrbench(t, "--backend", "rccl", "-np", "1")
	assert.Equal(t, exitFail, code)
	assert.Empty(t, out)
	assert.Contains(t, errs, "--backend rccl: ")
	assert.Contains(t, errs, "METAROCE_RCCL_LIB")
	assert.Contains(t, errs, "NCCL_NET_PLUGIN=libnccl-net-metaroce.so ignored")
	assert.Equal(t, "none", os.Getenv("NCCL_NET_PLUGIN"))
}
