package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// validateSchema checks doc against the subset of JSON Schema that
// schema.json uses: type, required, properties, items, enum, minimum,
// maximum and local $ref. It returns every violation, with its JSON path.
func validateSchema(root, schema map[string]any, doc any, path string) []string {
	if ref, ok := schema["$ref"].(string); ok {
		s := any(root)
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			s = s.(map[string]any)[part]
		}
		return validateSchema(root, s.(map[string]any), doc, path)
	}
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, path+": "+fmt.Sprintf(format, args...)) }
	if typ, ok := schema["type"].(string); ok {
		okType := false
		switch v := doc.(type) {
		case map[string]any:
			okType = typ == "object"
		case []any:
			okType = typ == "array"
		case string:
			okType = typ == "string"
		case bool:
			okType = typ == "boolean"
		case float64:
			okType = typ == "number" || (typ == "integer" && v == math.Trunc(v))
		}
		if !okType {
			bad("want %s, have %T %v", typ, doc, doc)
			return errs
		}
	}
	if enum, ok := schema["enum"].([]any); ok && !slices.Contains(enum, doc) {
		bad("%v is not one of %v", doc, enum)
	}
	if v, ok := doc.(float64); ok {
		if m, ok := schema["minimum"].(float64); ok && v < m {
			bad("%v below minimum %v", v, m)
		}
		if m, ok := schema["maximum"].(float64); ok && v > m {
			bad("%v above maximum %v", v, m)
		}
	}
	if obj, ok := doc.(map[string]any); ok {
		for _, r := range schema["required"].([]any) {
			if _, ok := obj[r.(string)]; !ok {
				bad("missing required %q", r)
			}
		}
		props, _ := schema["properties"].(map[string]any)
		for k, v := range obj {
			ps, ok := props[k].(map[string]any)
			if !ok {
				bad("property %q is not in the schema", k)
				continue
			}
			errs = append(errs, validateSchema(root, ps, v, path+"."+k)...)
		}
	}
	if arr, ok := doc.([]any); ok {
		if items, ok := schema["items"].(map[string]any); ok {
			for i, v := range arr {
				errs = append(errs, validateSchema(root, items, v, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	return errs
}

func loadSchema(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("schema.json")
	require.NoError(t, err)
	var s map[string]any
	require.NoError(t, json.Unmarshal(b, &s))
	return s
}

// validateReportFile checks a --json output file against schema.json.
func validateReportFile(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	s := loadSchema(t)
	assert.Empty(t, validateSchema(s, s, doc, "$"))
	return doc
}

// TestSchemaCoversReport: a report with every optional part filled in
// validates, and the validator rejects broken documents (it can fail).
func TestSchemaCoversReport(t *testing.T) {
	rep := Report{Schema: SchemaID, Command: []string{"mrbench"}, Start: "2025-01-01T00:00:00Z", Collective: "allreduce",
		Params: Params{MinBytes: 8, MaxBytes: 8, StepFactor: 2, Iters: 1, Paths: 4},
		Env:    Env{Hosts: 1, Ranks: 2, Launcher: "local"},
		Tables: []Table{{Transport: "metaroce", Backend: "host", Collective: "allreduce", Ranks: 2, PathsPerPlane: 4, Status: "ok",
			Rows:  []Row{{Bytes: 8, Count: 2, Type: "float", RedOp: "sum", Root: -1, InPlace: Measure{Wrong: -1}}},
			Peers: []PeerSummary{{Rank: 0, Peer: 1, Paths: []PathSummary{{Active: true}}}}}}}
	b, err := json.Marshal(rep)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	s := loadSchema(t)
	assert.Empty(t, validateSchema(s, s, doc, "$"))

	row := doc["tables"].([]any)[0].(map[string]any)["rows"].([]any)[0].(map[string]any)
	row["type"] = "float128"
	delete(row["in_place"].(map[string]any), "wrong")
	doc["extra"] = 1
	errs := validateSchema(s, s, doc, "$")
	assert.Len(t, errs, 3, "%v", errs)
}
