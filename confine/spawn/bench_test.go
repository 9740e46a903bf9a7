package spawn

import (
	"context"
	"testing"
)

// BenchmarkRunTrue spawns /bin/true end to end under every layer this host
// offers (without a cgroup), from this process.
func BenchmarkRunTrue(b *testing.B) {
	requireSpawn(b)
	benchRun(b, NewDirect(testOptions()))
}

// BenchmarkRunTrueBroker is BenchmarkRunTrue through a broker, the way a
// harness that restricts itself runs calls.
func BenchmarkRunTrueBroker(b *testing.B) {
	requireSpawn(b)
	br, err := StartBroker(BrokerOptions{Require: testOptions().Require})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	benchRun(b, br)
}

func benchRun(b *testing.B, r Runner) {
	ws := workspace(b)
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
