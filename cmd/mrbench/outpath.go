package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// checkOutputs verifies, before any measurement, that every output file
// asked for (flag name → path; empty paths are skipped) can be written: its
// directory exists and takes new files, the path is not a directory, and
// no two flags name the same file. A sweep can run for an hour; finding
// out only at its end that its results have nowhere to go loses them.
func checkOutputs(paths map[string]string) error {
	var errs []error
	seen := map[string]string{}
	for _, flag := range slices.Sorted(maps.Keys(paths)) {
		path := paths[flag]
		if path == "" {
			continue
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s %q: %w", flag, path, err))
			continue
		}
		if other, ok := seen[abs]; ok {
			errs = append(errs, fmt.Errorf("--%s %q: --%s writes the same file", flag, path, other))
			continue
		}
		seen[abs] = flag
		if err := writable(abs); err != nil {
			errs = append(errs, fmt.Errorf("--%s %q: %w", flag, path, err))
		}
	}
	return errors.Join(errs...)
}

// writable reports why path could not be replaced by writeFileAtomic: a
// directory in its place, or a directory that refuses new files (the
// probe file it creates there is removed at once).
func writable(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return errors.New("is a directory")
	}
	dir := filepath.Dir(path)
	switch fi, err := os.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("directory %s does not exist", dir)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("directory %s does not exist (a file stands in its path)", dir)
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is named once, here
		}
		return fmt.Errorf("directory %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".mrbench-probe-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the probe's name is ours, not the user's
		}
		return fmt.Errorf("cannot create files in %s: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// writeFileAtomic replaces path with data: it writes a temporary file in
// the same directory and renames it over path, so that a failed or
// interrupted write leaves the previous file whole rather than truncated.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
