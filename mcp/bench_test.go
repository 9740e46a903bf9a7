package mcp

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/surface"
)

// BenchmarkStdioFileRead1KiB is one tools/call of file_read on a 1 KiB file
// through ServeStdio, request line in, answer line out, over pipes: what
// bench/mcp.sh measures of the server, without the client.
func BenchmarkStdioFileRead1KiB(b *testing.B) {
	f := newFixture(b, surface.Flat, ApproveDeny, gate.Config{}, Config{})
	if err := os.WriteFile(filepath.Join(f.dir, "k.txt"), []byte(strings.Repeat("abcdefghijklmno\n", 64)), 0o644); err != nil {
		b.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go f.srv.ServeStdio(context.Background(), inR, outW)
	out := bufio.NewReader(outR)
	io.WriteString(inW, initLine+"\n"+initdLine+"\n")
	out.ReadBytes('\n')
	call := []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"file_read","arguments":{"path":"k.txt"}}}` + "\n")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		inW.Write(call)
		l, err := out.ReadBytes('\n')
		if err != nil || !strings.Contains(string(l), `"executed"`) {
			b.Fatalf("%s %v", l, err)
		}
	}
	b.StopTimer()
	inW.Close()
}
