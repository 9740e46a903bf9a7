package spawn

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMaskedFiles: a file of Spec.Masked reads as empty in the child, and
// the child cannot get at its content: not by rename, unlink, a hard link,
// a copy, truncation, umount or a write through it (refused: the mask is
// an empty file of the call's own that is not the program's to write,
// decision 0095; a write to the null device that masked it before was
// discarded); outside, the file is untouched. A
// masked path that is now a link fails the call before the program runs.
func TestMaskedFiles(t *testing.T) {
	for name, r := range runners(t) {
		ws := workspace(t)
		secret := filepath.Join(ws, "sub", ".env")
		if err := os.MkdirAll(filepath.Dir(secret), 0o755); err != nil {
			t.Fatal(err)
		}
		own(t, filepath.Dir(secret))
		if err := os.WriteFile(secret, []byte("API_KEY=sk-live-77\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		own(t, secret)
		script := `cd sub
echo "cat:[$(cat .env)]"
cp .env copy 2>/dev/null; echo "copy:[$(cat copy 2>/dev/null)]"
ln .env hard 2>/dev/null && echo "hard:[$(cat hard)]" || echo "hard:refused"
mv .env moved 2>/dev/null && echo "mv:[$(cat moved)]" || echo "mv:refused"
rm -f .env 2>/dev/null; [ -e .env ] && echo "rm:refused" || echo "rm:done"
umount .env 2>/dev/null && echo "umount:[$(cat .env)]" || echo "umount:refused"
echo x > .env 2>/dev/null && echo "write:done" || echo "write:refused"; echo "after:[$(cat .env)]"
[ -f .env ] && [ ! -s .env ] && echo "kind:empty file"
echo done`
		s := shSpec(t, ws, script)
		s.Masked = []string{secret}
		_, out, err := run(t, r, s)
		o := string(out.stdout.Bytes())
		if err != nil || !strings.Contains(o, "done") {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		if strings.Contains(o, "sk-live") {
			t.Errorf("%s: the masked content reached the child:\n%s", name, o)
		}
		for _, want := range []string{"cat:[]", "hard:refused", "mv:refused", "rm:refused", "umount:refused", "write:refused", "after:[]", "kind:empty file"} {
			if !strings.Contains(o, want) {
				t.Errorf("%s: want %q in\n%s", name, want, o)
			}
		}
		if b, _ := os.ReadFile(secret); string(b) != "API_KEY=sk-live-77\n" {
			t.Errorf("%s: the file changed outside: %q", name, b)
		}

		// The masked path made a link before the call: refused, named.
		other := filepath.Join(ws, "sub", "real")
		if err := os.Rename(secret, other); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("real", secret); err != nil {
			t.Fatal(err)
		}
		_, out, err = run(t, r, s)
		var se *SetupError
		if !errors.As(err, &se) || se.Step != "mask "+secret || strings.Contains(string(out.stdout.Bytes()), "sk-live") {
			t.Errorf("%s: a masked path that is a link: %v, want a *SetupError at %q\n%s", name, err, "mask "+secret, out)
		}
	}
}
