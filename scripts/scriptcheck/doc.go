// Package scriptcheck tests the shell scripts in its parent directory, which
// holds no Go. fuzz.sh is run over small trees with a stub go command on a
// PATH without git, as in a release tarball: it must find the fuzz targets
// of the tree's test files, leave out what the go command ignores, and fail
// when it finds none instead of passing with nothing fuzzed.
package scriptcheck
