package confine

import (
	"errors"
	"testing"

	"github.com/b10x/harness/cgroup"
)

// TestOneNotSupported: the confine and cgroup layers' "not supported"
// errors match one sentinel, whichever package's name a caller uses.
func TestOneNotSupported(t *testing.T) {
	for _, err := range []error{
		&UnsupportedFeatureError{Name: "Landlock"},
		&StrictError{Missing: []Layer{{Name: LayerSeccomp}}},
		&cgroup.UnavailableError{Controller: "pids", Limit: "PidsMax"},
	} {
		if !errors.Is(err, ErrNotSupported) || !errors.Is(err, cgroup.ErrNotSupported) {
			t.Errorf("%T (%v) does not match both names of the sentinel", err, err)
		}
	}
	if errors.Is(errors.New("permission denied"), ErrNotSupported) {
		t.Error("an unrelated error matches the sentinel")
	}
}
