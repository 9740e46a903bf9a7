package tools

import (
	"strings"
	"testing"

	"github.com/b10x/harness/confine/audit"
	"github.com/b10x/harness/confine/spawn"
)

func TestKernelDenialsNote(t *testing.T) {
	if got := kernelDenialsNote(audit.Support{Why: "the kernel's audit is disabled"}); got != "kernel denials are not attributable here (the kernel's audit is disabled)" {
		t.Errorf("not attributable: %q", got)
	}
	if got := kernelDenialsNote(audit.Support{Attributable: true}); !strings.HasPrefix(got, "kernel denials are not attributable here (") {
		t.Errorf("attributable, no reader: %q", got)
	}
}

// TestCollectSeccompDenials: a call's seccomp refusals become denial lines
// of layer seccomp under the one cap, the last counting the rest, and the
// text lists them after Landlock's form.
func TestCollectSeccompDenials(t *testing.T) {
	res := spawn.Result{SeccompAttributed: true, SeccompRefused: []string{"unshare(CLONE_NEWUSER)", "socket(AF_PACKET)", "mount"}, SeccompRefusedAll: 100000}
	lines, text, count, ok := CollectDenials(nil, res, 2)
	if !ok || count != 100000 || len(lines) != 2 {
		t.Fatalf("%d lines, count %d, attributed %v", len(lines), count, ok)
	}
	if lines[0].Layer != "seccomp" || lines[0].Operation != "unshare(CLONE_NEWUSER)" || lines[1].Operation != "socket(AF_PACKET)" || lines[1].Dropped != 99998 || lines[0].Dropped != 0 {
		t.Errorf("lines %+v", lines)
	}
	for _, want := range []string{"\nkernel: 100000 request(s) of the program refused by the sandbox:", "\n  seccomp: unshare(CLONE_NEWUSER)", "\n  seccomp: socket(AF_PACKET)", "and 99998 more, counted, not listed"} {
		if !strings.Contains(text, want) {
			t.Errorf("text %q lacks %q", text, want)
		}
	}
	if strings.Contains(text, "mount") {
		t.Errorf("text lists beyond the cap: %q", text)
	}
	if lines, text, count, ok := CollectDenials(nil, spawn.Result{SeccompAttributed: true}, 0); !ok || count != 0 || text != "" || lines != nil {
		t.Errorf("none refused: %v %q %d %v", lines, text, count, ok)
	}
	if _, _, _, ok := CollectDenials(nil, spawn.Result{}, 0); ok {
		t.Error("nothing attributable, yet attributed")
	}
}

// TestCollectNoRouteDenials: a call's no-route refusals become denial
// lines of layer netns, one each, under the one cap shared with the other
// layers, the last counting the rest; the text says them in one line with
// their count, and does not count the unlisted ones again.
func TestCollectNoRouteDenials(t *testing.T) {
	res := spawn.Result{SeccompAttributed: true, SeccompRefused: []string{"mount"}, SeccompRefusedAll: 1, NoRouteCounted: true, NoRoute: 100000}
	lines, text, count, ok := CollectDenials(nil, res, 3)
	if !ok || count != 100001 || len(lines) != 3 {
		t.Fatalf("%d lines, count %d, attributed %v", len(lines), count, ok)
	}
	if lines[0].Layer != "seccomp" || lines[1].Layer != "netns" || lines[1].Operation != NoRouteOp || lines[2].Operation != NoRouteOp || lines[2].Dropped != 99998 || lines[1].Object != "" {
		t.Errorf("lines %+v", lines)
	}
	if !strings.Contains(text, "\n  netns: net.no_route ×100000 (") || strings.Contains(text, "more, counted, not listed") {
		t.Errorf("text %q", text)
	}
	few, text, count, ok := CollectDenials(nil, spawn.Result{NoRouteCounted: true, NoRoute: 2}, 0)
	if !ok || count != 2 || len(few) != 2 || few[1].Dropped != 0 || !strings.Contains(text, "×2") {
		t.Errorf("two refused: %+v %q %d %v", few, text, count, ok)
	}
	if lines, text, count, ok := CollectDenials(nil, spawn.Result{NoRouteCounted: true}, 0); !ok || count != 0 || text != "" || lines != nil {
		t.Errorf("none refused: %v %q %d %v", lines, text, count, ok)
	}
}

// TestPartialDenialsNote names each layer whose denials a call could not
// have, and only those.
func TestPartialDenialsNote(t *testing.T) {
	if got := partialDenialsNote(true, true, true, true); got != "" {
		t.Errorf("every layer attributed: %q", got)
	}
	got := partialDenialsNote(true, true, false, true)
	if !strings.HasPrefix(got, "the network namespace's no-route refusals are not counted") || strings.Contains(got, "Landlock") || strings.Contains(got, "seccomp") {
		t.Errorf("netns missing: %q", got)
	}
	got = partialDenialsNote(false, false, true, true)
	if !strings.Contains(got, "Landlock's denials are not attributable here") || !strings.Contains(got, "seccomp's refusals are not attributable here") || strings.Contains(got, "no-route") {
		t.Errorf("Landlock and seccomp missing: %q", got)
	}
}

// TestCollectMaskedDenials: the masked files a call's program read become
// denial lines of layer view (fs.read_file, the path, the rule), one each,
// between seccomp's and the network namespace's under the one cap; a call
// whose masks were examined and not read is attributed with none.
func TestCollectMaskedDenials(t *testing.T) {
	res := spawn.Result{SeccompAttributed: true, SeccompRefused: []string{"mount"}, SeccompRefusedAll: 1,
		MaskedWatched: true, MaskedOpened: []string{"/etc/shadow", "/w/.env"}, NoRouteCounted: true, NoRoute: 2}
	lines, text, count, ok := CollectDenials(nil, res, 0)
	if !ok || count != 5 || len(lines) != 5 {
		t.Fatalf("%d lines, count %d, attributed %v", len(lines), count, ok)
	}
	for i, want := range []string{"/etc/shadow", "/w/.env"} {
		l := lines[1+i]
		if l.Layer != "view" || l.Operation != MaskedOp || l.Object != want || l.Rule != MaskedRule {
			t.Errorf("line %d: %+v, want view %s %s (%s)", 1+i, l, MaskedOp, want, MaskedRule)
		}
	}
	if lines[0].Layer != "seccomp" || lines[3].Layer != "netns" {
		t.Errorf("order: %+v", lines)
	}
	for _, want := range []string{"\n  view: fs.read_file /etc/shadow (masked: reads as empty)", "\n  view: fs.read_file /w/.env (masked: reads as empty)", "kernel: 5 request(s)"} {
		if !strings.Contains(text, want) {
			t.Errorf("text %q lacks %q", text, want)
		}
	}
	// Under a cap of two: seccomp's and the first mask, the rest counted.
	lines, text, count, _ = CollectDenials(nil, res, 2)
	if count != 5 || len(lines) != 2 || lines[1].Object != "/etc/shadow" || lines[1].Dropped != 3 || strings.Contains(text, "/w/.env") {
		t.Errorf("capped: %d lines %+v, count %d, text %q", len(lines), lines, count, text)
	}
	if lines, text, count, ok := CollectDenials(nil, spawn.Result{MaskedWatched: true}, 0); !ok || count != 0 || text != "" || lines != nil {
		t.Errorf("none read: %v %q %d %v", lines, text, count, ok)
	}
	if got := partialDenialsNote(true, true, true, false); !strings.HasPrefix(got, "the masked files the program read are not known") {
		t.Errorf("view not examined: %q", got)
	}
}
