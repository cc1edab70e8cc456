/*
 * A stand-in for libcuda's driver API: FAKE_CU_COUNT devices (default 2)
 * named "Fake GPU <i>", with (i+1)*16 GiB each, at PCI buses 0x18, 0x28, ...
 * reported in the driver's 8-digit-domain, upper-case form. FAKE_CU_INIT=<rc>
 * makes cuInit return rc; FAKE_CU_PCI=<text> makes cuDeviceGetPCIBusId
 * write text instead of the bus address.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int count(void) {
	const char *c = getenv("FAKE_CU_COUNT");
	return c ? atoi(c) : 2;
}

int cuInit(unsigned int flags) {
	const char *rc = getenv("FAKE_CU_INIT");
	if (flags != 0) return 1;
	return rc ? atoi(rc) : 0;
}

int cuDeviceGetCount(int *n) { *n = count(); return 0; }

int cuDeviceGet(int *dev, int ordinal) {
	if (ordinal < 0 || ordinal >= count()) return 101;
	*dev = ordinal;
	return 0;
}

int cuDeviceGetName(char *name, int len, int dev) {
	snprintf(name, len, "Fake GPU %d", dev);
	return 0;
}

int cuDeviceTotalMem_v2(size_t *bytes, int dev) {
	*bytes = (size_t)(dev + 1) << 34;
	return 0;
}

int cuDeviceGetPCIBusId(char *bus, int len, int dev) {
	const char *pci = getenv("FAKE_CU_PCI");
	if (pci) {
		snprintf(bus, len, "%s", pci);
		return 0;
	}
	snprintf(bus, len, "00000000:%02X:00.0", 0x18 + 0x10 * dev);
	return 0;
}

int cuGetErrorString(int code, const char **s) {
	switch (code) {
	case 100: *s = "fake: no CUDA-capable device is detected"; return 0;
	case 999: *s = "fake: unknown error"; return 0;
	}
	return 1;
}
