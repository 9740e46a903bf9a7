package spawn

import (
	"context"
	"testing"
)

// BenchmarkRunTrue spawns /bin/true end to end under every layer this host
// offers (without a cgroup), from this process.
func BenchmarkRunTrue(b *testing.B) {
	requireSpawn(b)
	ws := workspace(b)
	r := NewDirect(testOptions())
	s := Spec{Path: lookPath(b, "true"), Argv: []string{"true"}, Dir: ws, Workspace: ws}
	if _, err := r.Run(context.Background(), s, Stdio{}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := r.Run(context.Background(), s, Stdio{})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
	}
}
