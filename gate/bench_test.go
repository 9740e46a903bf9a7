package gate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/tools"
)

// BenchmarkGateFileRead1KiB is one file_read of a 1 KiB file through every
// gate step, including its record line written to a real file.
func BenchmarkGateFileRead1KiB(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(strings.Repeat("0123456789abcde\n", 64)), 0o644); err != nil {
		b.Fatal(err)
	}
	ws, err := tools.OpenWorkspace(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	rec, err := os.Create(filepath.Join(b.TempDir(), "run.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close()
	g, err := New(Config{Workspace: ws, Tools: tools.ReadTools(), Recorder: NewRecorder(rec)})
	if err != nil {
		b.Fatal(err)
	}
	c := Call{Surface: "flat", Name: "file_read", Args: json.RawMessage(`{"path":"f.txt"}`)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if o := g.Call(ctx, c); o.Status != Executed || len(o.Result) != 1024 {
			b.Fatalf("%+v", o)
		}
	}
}
