package gpu

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// ParsePCI parses a PCI bus address in the forms the drivers print
// ("0000:c3:00.0", "00000000:18:00.0" from CUDA, "18:00.0" without domain,
// either case) and returns it in the canonical form "dddd:bb:dd.f", lower
// case, which is also the directory name under /sys/bus/pci/devices.
func ParsePCI(s string) (string, error) {
	s = strings.TrimSpace(s)
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("gpu: bad PCI address %q: %s (want domain:bus:device.function)", s, why)
	}
	dot := strings.LastIndexByte(s, '.')
	if dot < 0 {
		return bad("no '.' before the function")
	}
	fn, err := strconv.ParseUint(s[dot+1:], 16, 8)
	if err != nil || fn > 7 {
		return bad("function is not 0-7")
	}
	parts := strings.Split(s[:dot], ":")
	var dom uint64
	switch len(parts) {
	case 2:
	case 3:
		if dom, err = strconv.ParseUint(parts[0], 16, 32); err != nil || len(parts[0]) > 8 {
			return bad("domain is not hexadecimal")
		}
		if dom > 0xffff {
			return bad("domain above ffff")
		}
		parts = parts[1:]
	default:
		return bad("wrong number of ':'")
	}
	bus, err := strconv.ParseUint(parts[0], 16, 8)
	if err != nil || len(parts[0]) > 2 {
		return bad("bus is not 00-ff")
	}
	dev, err := strconv.ParseUint(parts[1], 16, 8)
	if err != nil || dev > 0x1f || len(parts[1]) > 2 {
		return bad("device is not 00-1f")
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", dom, bus, dev, fn), nil
}

// pciFromLocation builds the canonical address from KFD's domain and
// location_id, where location_id = bus<<8 | device<<3 | function.
func pciFromLocation(domain, loc uint64) string {
	return fmt.Sprintf("%04x:%02x:%02x.%x", domain&0xffff, (loc>>8)&0xff, (loc>>3)&0x1f, loc&7)
}

// pciExists reports whether sysfs below fsys (an fs.FS rooted at "/") has
// the device pci.
func pciExists(fsys fs.FS, pci string) bool {
	_, err := fs.Stat(fsys, "sys/bus/pci/devices/"+pci)
	return err == nil
}

// NUMANodeOf reads sys/bus/pci/devices/<pci>/numa_node below fsys (an fs.FS
// rooted at "/"). It returns -1 when the file is missing or says -1, which is
// what single-node machines and most virtual machines report.
func NUMANodeOf(fsys fs.FS, pci string) int {
	if pci == "" {
		return -1
	}
	b, err := fs.ReadFile(fsys, "sys/bus/pci/devices/"+pci+"/numa_node")
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 {
		return -1
	}
	return n
}
