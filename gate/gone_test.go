package gate

import (
	"os"
	"strings"
	"testing"

	"github.com/b10x/harness/tools"
)

// TestWorkspaceRemoved: once the workspace's directory is removed, every
// call fails saying so (not "no such file" of whatever path it named),
// and the record's paths step says why.
func TestWorkspaceRemoved(t *testing.T) {
	g, dir, rec := newTestGate(t, Config{})
	if err := os.WriteFile(dir+"/a.txt", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if o := call(g, "file_read", `{"path":"a.txt"}`); o.Status != Executed {
		t.Fatalf("before: %+v", o)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{{"file_read", `{"path":"a.txt"}`}, {"dir_list", `{"path":"."}`}, {"file_write", `{"path":"b.txt","content":"y"}`}} {
		o := call(g, c[0], c[1])
		if o.Status != Failed || o.Reason != tools.ReasonToolError || !strings.Contains(o.Message, "the workspace "+dir+" was removed after the session started") {
			t.Errorf("%s after the removal: %+v", c[0], o)
		}
	}
	if !strings.Contains(rec.String(), `"step":"paths","verdict":"fail","detail":"the workspace `) {
		t.Errorf("the record does not say why at the paths step:\n%s", rec.String())
	}
	if _, err := os.Stat(dir + "/b.txt"); err == nil {
		t.Error("a file was written after the removal")
	}
}
