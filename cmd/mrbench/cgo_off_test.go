//go:build !cgo

package main

// cgoEnabled says whether this test binary can load shared libraries.
const cgoEnabled = false
