package spawn

// WarmHelper starts loading this process's helper image on another
// goroutine: its copy into a sealed memfd and the check of its digest
// against the stamp (decision 0043), about 2 ms of a one-shot call, which
// depend on nothing a call says. Run starts the load itself at a
// process's first call, while it plans the call; a process that knows
// sooner that it will make a call (exec, as soon as its command line names
// it) calls WarmHelper then, so that the load runs beside its parsing and
// preparing instead of after them. The first call waits for the load if
// it has not ended.
//
// It returns at once, does nothing once the load has begun, and is safe
// for concurrent use. It reports nothing: an image that cannot be used is
// found, and said (HelperSource, doctor), as it is without WarmHelper, and
// calls fall back to this binary.
func WarmHelper() { helperWarm.Do(func() { go currentHelper() }) }
