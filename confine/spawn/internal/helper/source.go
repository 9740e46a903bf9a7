package helper

import "embed"

// Sources holds this package's Go files. The harness compares their digest
// with the one recorded beside an embedded helper image (package
// helperimage), so an image built from other sources is never used. Only
// the harness refers to it; a helper binary does not carry it.
//
//go:embed *.go
var Sources embed.FS
