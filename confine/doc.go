// Package confine probes what the running kernel can enforce and applies it:
// Landlock rulesets for the harness itself and for run children, the confine
// modes (strict, auto, off) and the layers each mode requires.
//
// It knows nothing about tools or models.
package confine
