package tools

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/workspace"
)

func BenchmarkFileRead1KiB(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(strings.Repeat("0123456789abcde\n", 64)), 0o644); err != nil {
		b.Fatal(err)
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	raw := json.RawMessage(`{"path":"f.txt"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := FileRead{}.Prepare(ws, raw)
		if err != nil {
			b.Fatal(err)
		}
		r, err := p.Execute(ctx, Report{})
		if err != nil || len(r.Text) != 1024 {
			b.Fatalf("read: %d bytes, %v", len(r.Text), err)
		}
	}
}

// BenchmarkSearchGoroot searches Go's own source tree for the pattern the
// search benchmark script uses, reporting every match (no early stop).
func BenchmarkSearchGoroot(b *testing.B) { benchSearchGoroot(b, `func New[A-Z]`) }

// BenchmarkSearchGorootNoLiteral is the same search with a pattern that
// has no required literal (case folded), so the whole-buffer regexp scan
// does the work.
func BenchmarkSearchGorootNoLiteral(b *testing.B) { benchSearchGoroot(b, `(?i)func new[a-z]*reader`) }

func benchSearchGoroot(b *testing.B, pattern string) {
	// The tree bench/search.sh searches: the go command's GOROOT.
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatalf("go env GOROOT: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "src")
	ws, err := workspace.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	raw, _ := json.Marshal(map[string]any{"pattern": pattern, "max_results": 1000000})
	ctx := context.Background()
	var matches int
	for b.Loop() {
		p, err := Search{}.Prepare(ws, raw)
		if err != nil {
			b.Fatal(err)
		}
		r, err := p.Execute(ctx, Report{})
		if err != nil {
			b.Fatal(err)
		}
		matches = r.Meta["matches"].(int)
	}
	if matches == 0 {
		b.Fatal("no matches in GOROOT/src")
	}
	b.ReportMetric(float64(matches), "matches")
}

// BenchmarkSearchLongLine searches one 4 MiB line of letters with a
// pattern without a required literal: the line is longer than a matching
// window, so it goes through the context-aware reader.
func BenchmarkSearchLongLine(b *testing.B) {
	dir := b.TempDir()
	line := make([]byte, 4<<20)
	for i := range line {
		line[i] = 'a' + byte(i*7%26)
	}
	if err := os.WriteFile(filepath.Join(dir, "long.txt"), line, 0o644); err != nil {
		b.Fatal(err)
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	raw := json.RawMessage(`{"pattern":"(?i)needle[0-9]"}`)
	ctx := context.Background()
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		p, err := Search{}.Prepare(ws, raw)
		if err != nil {
			b.Fatal(err)
		}
		r, err := p.Execute(ctx, Report{})
		if err != nil || r.Meta["matches"] != 0 {
			b.Fatalf("%v %v", r.Meta, err)
		}
	}
}
