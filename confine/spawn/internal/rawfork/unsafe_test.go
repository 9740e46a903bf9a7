package rawfork

import "unsafe"

func uintptrOf(p *[2]uint32) uintptr { return uintptr(unsafe.Pointer(p)) }
