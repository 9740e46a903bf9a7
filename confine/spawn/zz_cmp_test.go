package spawn

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"
)

func TestZZCompare(t *testing.T) {
	ws := workspace(t)
	d := NewDirect(testOptions())
	b, _ := StartBroker(BrokerOptions{})
	defer b.Close()
	s := Spec{Path: lookPath(t, "true"), Argv: []string{"true"}, Dir: ws, Workspace: ws}
	d.Run(context.Background(), s, Stdio{})
	b.Run(context.Background(), s, Stdio{})
	var od, ob, bw, bare []time.Duration
	for i := 0; i < 60; i++ {
		t0 := time.Now()
		d.Run(context.Background(), s, Stdio{})
		od = append(od, time.Since(t0))
		t0 = time.Now()
		b.Run(context.Background(), s, Stdio{})
		ob = append(ob, time.Since(t0))
		t0 = time.Now()
		exec.Command("bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--die-with-parent", "/bin/true").Run()
		bw = append(bw, time.Since(t0))
		t0 = time.Now()
		exec.Command("/bin/true").Run()
		bare = append(bare, time.Since(t0))
	}
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	t.Logf("median: direct %v broker %v bwrap %v bare %v; direct/bwrap %.2f broker/bwrap %.2f", med(od), med(ob), med(bw), med(bare), float64(med(od))/float64(med(bw)), float64(med(ob))/float64(med(bw)))
}
