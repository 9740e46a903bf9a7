package session

import (
	"os"
	"strings"

	"github.com/b10x/harness/record"
)

// hostFacts is run_start's runs_on: the host name and the confinement the
// harness process inherited. What cannot be read is left empty (and
// "unknown" for the seccomp mode): these facts describe, they decide
// nothing.
func hostFacts() *record.RunsOn {
	h := &record.RunsOn{Seccomp: "unknown"}
	h.Host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		h.Seccomp = seccompMode(string(b))
	}
	if b, err := os.ReadFile("/proc/self/uid_map"); err == nil {
		first, _, _ := strings.Cut(string(b), "\n")
		h.UIDMap = strings.Join(strings.Fields(first), " ")
		h.UserNamespace = h.UIDMap != "0 0 4294967295"
	}
	return h
}

// seccompMode reads the Seccomp: line of a /proc/PID/status.
func seccompMode(status string) string {
	for _, line := range strings.Split(status, "\n") {
		v, ok := strings.CutPrefix(line, "Seccomp:")
		if !ok {
			continue
		}
		switch strings.TrimSpace(v) {
		case "0":
			return "disabled"
		case "1":
			return "strict"
		case "2":
			return "filter"
		}
	}
	return "unknown"
}
