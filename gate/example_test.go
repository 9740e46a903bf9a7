package gate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
)

// A gate over a workspace, given the read and the write tools. Its Host is
// the zero value, which holds no confinement, so only the read tools are
// published: a call to file_write is refused as unpublished. A path out of
// the workspace is refused before any tool runs.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "b10x-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello\n"), 0o644); err != nil {
		panic(err)
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		panic(err)
	}
	defer ws.Close()

	g, err := gate.New(gate.Config{
		Workspace: ws,
		Tools:     append(tools.ReadTools(), tools.WriteTools()...),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(g.PublishedNames())
	fmt.Println("file_write:", g.Unpublished()["file_write"])

	call := func(name, args string) gate.Outcome {
		return g.Call(context.Background(), gate.Call{Surface: "flat", Name: name, Args: json.RawMessage(args)})
	}
	out := call("file_read", `{"path":"notes.txt"}`)
	fmt.Printf("%s: %q\n", out.Status, out.Result)
	out = call("file_write", `{"path":"notes.txt","content":"bye\n"}`)
	fmt.Printf("%s (%s)\n", out.Status, out.Reason)
	out = call("file_read", `{"path":"../outside.txt"}`)
	fmt.Printf("%s (%s)\n", out.Status, out.Reason)
	// Output:
	// [dir_list file_read find search]
	// file_write: needs a confined workspace: not available
	// executed: "hello\n"
	// refused (unpublished)
	// refused (denied_path)
}
