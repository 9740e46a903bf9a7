package mcp

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/surface"
)

// FuzzServer drives ServeStdio with arbitrary input: it must neither panic
// nor hang, whatever the bytes (an approval waiting for an answer that
// never comes included: the end of input ends it).
func FuzzServer(f *testing.F) {
	elicitInit := strings.Replace(initLine, `"capabilities":{}`, `"capabilities":{"elicitation":{}}`, 1)
	write := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"file_write","arguments":{"path":"n.txt","content":"x"},"_meta":{"progressToken":1}}}`
	for _, seed := range []string{
		initLine + "\n" + initdLine + "\n" + listLine + "\n" + callLine + "\n",
		elicitInit + "\n" + initdLine + "\n" + write + "\n",
		elicitInit + "\n" + initdLine + "\n" + write + "\n" + `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}` + "\n",
		initLine + "\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope","arguments":null}}` + "\n",
		initLine + "\n" + `[` + listLine + `,` + callLine + `]` + "\n",
		callLine + "\n",
		"\n\n{}\n",
	} {
		f.Add([]byte(seed))
	}
	fx := newFixture(f, surface.Flat, ApproveAuto, gate.Config{Recorder: gate.NewRecorder(io.Discard)}, Config{MaxMessage: 1 << 20})
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			fx.srv.ServeStdio(ctx, bytes.NewReader(data), io.Discard)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("ServeStdio did not end on %q", data)
		}
	})
}
