package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
)

// crashContent is the content the crash writer alternates between: two
// versions, of different sizes, each made of one repeated
// byte so a mix is detectable.
func crashContent(v int) string {
	return strings.Repeat(string(rune('A'+v)), (3<<20)+v*(1<<20))
}

func init() {
	// The crash writer: file_write of several MB to one target, forever,
	// alternating two contents, until killed.
	reexec.Register("tools-crash-writer", func() {
		dir, mode := os.Args[1], os.Args[2]
		noTmpfile = mode == "named"
		ws, err := OpenWorkspace(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		args := [2]json.RawMessage{}
		for v := range 2 {
			args[v], _ = json.Marshal(FileWriteArgs{Path: "target.txt", Content: crashContent(v)})
		}
		// Start with the version the target does not hold: every round
		// then chooses between a real old and a real new content.
		cur, _ := os.ReadFile(filepath.Join(dir, "target.txt"))
		first := 0
		if len(cur) > 0 && cur[0] == 'A' {
			first = 1
		}
		os.Stdout.WriteString("ready\n")
		for i := first; ; i++ {
			p, err := FileWrite{}.Prepare(ws, args[i%2])
			if err == nil {
				_, err = p.Execute(context.Background(), Report{})
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
		}
	})
}

// A writer SIGKILLed at random moments during file_write of large content:
// the target always holds exactly the old or the new content; stray
// temporary files, if any, carry the recognisable name and do not stop a
// later write.
func TestFileWriteCrash(t *testing.T) {
	testenv.KernelIndependent(t, "a write killed at any point leaves the old file or the new")
	for _, mode := range []string{"tmpfile", "named"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "target.txt")
			if err := os.WriteFile(target, []byte(crashContent(0)), 0o644); err != nil {
				t.Fatal(err)
			}
			want := [2]string{crashContent(0), crashContent(1)}
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
			seen := map[string]int{}
			strays := 0
			for round := range 15 {
				before, err := os.ReadFile(target)
				if err != nil {
					t.Fatal(err)
				}
				cmd := reexec.Command("tools-crash-writer", dir, mode)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 6)
				if _, err := out.Read(buf); err != nil || string(buf) != "ready\n" {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("round %d: writer did not start: %q %v %s", round, buf, err, stderr.String())
				}
				// One write takes tens to hundreds of milliseconds here
				// (mostly fsync): kill anywhere across several writes.
				time.Sleep(time.Duration(rng.IntN(500_000)) * time.Microsecond)
				cmd.Process.Signal(syscall.SIGKILL)
				err = cmd.Wait()
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
					t.Fatalf("round %d: writer ended on its own: %v %s", round, err, stderr.String())
				}
				got, err := os.ReadFile(target)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				switch {
				case string(got) == string(before):
					seen["old"]++
				case string(got) == want[0] || string(got) == want[1]:
					seen["new"]++
				default:
					t.Fatalf("round %d: target holds %d bytes that are neither version (first %q)", round, len(got), got[:min(len(got), 16)])
				}
				ents, _ := os.ReadDir(dir)
				for _, e := range ents {
					switch {
					case e.Name() == "target.txt":
					case IsTempName(e.Name()):
						strays++
					default:
						t.Fatalf("round %d: unexpected file %q", round, e.Name())
					}
				}
			}
			t.Logf("%s: old content %d times, new %d times; %d stray temporary files", mode, seen["old"], seen["new"], strays)
			if mode == "tmpfile" && strays > 3 {
				t.Errorf("O_TMPFILE writes left %d stray files; the window should be tiny", strays)
			}
			// A later write is not disturbed by strays.
			ws, err := OpenWorkspace(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			mustCall(t, ws, FileWrite{}, `{"path":"target.txt","content":"final"}`)
			if readFile(t, target) != "final" {
				t.Fatal("final write")
			}
		})
	}
}
