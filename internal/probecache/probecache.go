// Package probecache keeps the result of a probe once it is conclusive.
//
// A probe has three outcomes: supported, not supported, and inconclusive
// (the probe itself failed: an unexpected errno, a child that did not
// report). The first two are facts about the host and are kept for the life
// of the cache; an inconclusive result is returned but not kept, so the
// next Get probes again. Every probe cache of the module is one of these
// types, not a mutex and a flag of its own.
package probecache

import "sync"

// Outcome is how a probe ended. The zero value is Inconclusive, so a probe
// that forgets to say is never cached.
type Outcome uint8

const (
	Inconclusive Outcome = iota // the probe failed; not cached
	Supported                   // the host has the feature; cached
	NotSupported                // the host conclusively lacks it; cached
)

// Conclusive reports whether o is Supported or NotSupported.
func (o Outcome) Conclusive() bool { return o == Supported || o == NotSupported }

// Value caches one probe's result. The zero value is empty and ready. Get is
// safe for concurrent use; a Value must not be copied after first use.
type Value[T any] struct {
	mu   sync.Mutex
	done bool
	v    T
}

// Get returns the kept result when there is one; otherwise it runs probe
// and returns its result, keeping it when the outcome is conclusive.
// Concurrent calls wait for one another: probe runs at most once at a time.
func (c *Value[T]) Get(probe func() (T, Outcome)) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return c.v
	}
	v, o := probe()
	if o.Conclusive() {
		c.done, c.v = true, v
	}
	return v
}

// Map caches one probe result per key. The zero value is empty and ready.
// Get is safe for concurrent use: probes of different keys run in
// parallel, probes of one key one at a time. A Map must not be copied
// after first use.
type Map[K comparable, T any] struct {
	mu sync.Mutex
	m  map[K]*Value[T]
}

// Get is Value.Get for the value of key.
func (c *Map[K, T]) Get(key K, probe func() (T, Outcome)) T {
	c.mu.Lock()
	v, ok := c.m[key]
	if !ok {
		if c.m == nil {
			c.m = map[K]*Value[T]{}
		}
		v = new(Value[T])
		c.m[key] = v
	}
	c.mu.Unlock()
	return v.Get(probe)
}
