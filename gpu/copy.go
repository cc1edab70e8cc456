package gpu

import "fmt"

// Copy copies the first n bytes of src into dst. Between host-visible
// buffers (host or pinned) it is a plain memory copy; when either side is
// device memory it goes through that buffer's runtime (hipMemcpy/cudaMemcpy)
// and returns once the bytes have arrived.
func Copy(dst, src Buffer, n int) error {
	if dst.Addr() == 0 || src.Addr() == 0 {
		return fmt.Errorf("gpu: copy between %s and %s buffers: a buffer was already freed", src.Kind(), dst.Kind())
	}
	if n < 0 || n > dst.Len() || n > src.Len() {
		return fmt.Errorf("gpu: copy of %d bytes from a %d-byte %s buffer to a %d-byte %s buffer: out of range",
			n, src.Len(), src.Kind(), dst.Len(), dst.Kind())
	}
	if n == 0 {
		return nil
	}
	dk, sk := dst.Kind() == KindDevice, src.Kind() == KindDevice
	if !dk && !sk {
		copy(dst.Host()[:n], src.Host()[:n])
		return nil
	}
	var rt *Runtime
	kind := DeviceToDevice
	switch {
	case dk && sk:
		rt = runtimeOf(dst)
		rs := runtimeOf(src)
		if rs == nil || rt == nil {
			return fmt.Errorf("gpu: copy: a device buffer without a runtime")
		}
		if rs != rt {
			return fmt.Errorf("gpu: copy between device buffers of two runtimes (%s and %s)", rs.Path(), rt.Path())
		}
	case dk:
		rt, kind = runtimeOf(dst), HostToDevice
	default:
		rt, kind = runtimeOf(src), DeviceToHost
	}
	if rt == nil {
		return fmt.Errorf("gpu: copy: a device buffer without a runtime")
	}
	return rt.Memcpy(dst.Addr(), src.Addr(), n, kind)
}

func runtimeOf(b Buffer) *Runtime {
	if rb, ok := b.(runtimeBuffer); ok {
		return rb.runtime()
	}
	return nil
}
