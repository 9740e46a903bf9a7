package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/b10x/harness/policy"
	"github.com/b10x/harness/session"
)

// A session opened on a workspace, and one call through it. With confine
// off, as here, Open uses no kernel confinement and publishes the read
// tools only; with auto or strict it also confines this process's own
// reads and writes to the workspace for the rest of its life, which is why
// a process opens one session.
func ExampleOpen() {
	ws, err := os.MkdirTemp("", "b10x-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(ws)
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("hello\n"), 0o644); err != nil {
		panic(err)
	}

	p := session.Defaults()
	p.Workspace = ws
	p.Confine = policy.ConfineOff
	s, err := session.Open(context.Background(), p, session.Options{Command: "example", Version: "dev"})
	if err != nil {
		panic(err)
	}
	defer s.End("completed")

	fmt.Println(s.Gate().PublishedNames())
	args, _ := json.Marshal(map[string]string{"path": "notes.txt"})
	out := s.Call(context.Background(), "file_read", args)
	fmt.Printf("%s: %q\n", out.Status, out.Result)
	out = s.Call(context.Background(), "file_write", []byte(`{"path":"notes.txt","content":"bye\n"}`))
	fmt.Printf("%s (%s): %s\n", out.Status, out.Reason, out.Message)
	// Output:
	// [dir_list file_read find search]
	// executed: "hello\n"
	// refused (unpublished): tool "file_write" is not published in this run: needs a confined workspace: confine off
}
