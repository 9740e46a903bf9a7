package tools

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/internal/testenv"
)

// The max tags of the argument types are the documented limits.
func TestFieldLimits(t *testing.T) {
	want := map[string]int{
		"path": MaxPathFieldBytes, "cwd": MaxPathFieldBytes,
		"pattern": MaxPatternBytes, "glob": MaxPatternBytes,
		"old_string": MaxEditStringBytes, "new_string": MaxEditStringBytes,
		"content": MaxWriteBytes,
	}
	for _, v := range []any{FileReadArgs{}, DirListArgs{}, SearchArgs{}, FindArgs{}, FileWriteArgs{}, FileEditArgs{}, RunArgs{}} {
		st := reflect.TypeOf(v)
		for i := range st.NumField() {
			f := st.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			lim, ok := want[name]
			if !ok {
				continue
			}
			if got, _ := strconv.Atoi(f.Tag.Get("max")); got != lim {
				t.Errorf("%s.%s: max tag %q, want %d", st.Name(), f.Name, f.Tag.Get("max"), lim)
			}
		}
	}
}

// Every field is refused past its limit with a one-line message naming
// the field, the limit and the size, before any work: an 8 MB pattern is
// not compiled, a 7 MB invalid one does not come back in the message.
func TestFieldCapsRefuseEarly(t *testing.T) {
	testenv.KernelIndependent(t, "over-long fields are refused before any work")
	fx := newFixture(t)
	big := func(n int, c string) string { return strings.Repeat(c, n) }
	cases := []struct {
		tool  Tool
		args  map[string]any
		field string
		size  int
		limit int
	}{
		{Search{}, map[string]any{"pattern": big(8<<20, "a")}, "pattern", 8 << 20, MaxPatternBytes},
		{Search{}, map[string]any{"pattern": big(7<<20, "(")}, "pattern", 7 << 20, MaxPatternBytes},
		{Search{}, map[string]any{"pattern": "x", "glob": big(5000, "*")}, "glob", 5000, MaxPatternBytes},
		{Find{}, map[string]any{"pattern": big(5000, "{")}, "pattern", 5000, MaxPatternBytes},
		{FileRead{}, map[string]any{"path": big(20000, "a/")}, "path", 40000, MaxPathFieldBytes},
		{FileEdit{}, map[string]any{"path": "file.txt", "old_string": big(5<<20, "h"), "new_string": "x"}, "old_string", 5 << 20, MaxEditStringBytes},
		{FileEdit{}, map[string]any{"path": "file.txt", "old_string": "h", "new_string": big(5<<20, "x")}, "new_string", 5 << 20, MaxEditStringBytes},
		{FileWrite{}, map[string]any{"path": "new.txt", "content": big(MaxWriteBytes+1, "x")}, "content", MaxWriteBytes + 1, MaxWriteBytes},
	}
	for _, tc := range cases {
		raw, _ := json.Marshal(tc.args)
		start := time.Now()
		_, err := tc.tool.Prepare(fx.ws, raw)
		took := time.Since(start)
		e, ok := err.(*Error)
		if !ok || e.Reason != ReasonInvalidArgument {
			t.Errorf("%s %s: %v, want invalid_argument", tc.tool.Name(), tc.field, err)
			continue
		}
		want := "field " + strconv.Quote(tc.field) + " is " + strconv.Itoa(tc.size) + " bytes; the limit is " + strconv.Itoa(tc.limit) + " bytes"
		if e.Public != want {
			t.Errorf("%s: message %q, want %q", tc.tool.Name(), e.Public, want)
		}
		if len(e.Error()) > 300 {
			t.Errorf("%s %s: error is %d bytes", tc.tool.Name(), tc.field, len(e.Error()))
		}
		// Compiling the 8 MB pattern took 9-13 s; decoding it takes
		// milliseconds. (The 64 MiB content's JSON alone takes about a
		// second, so only the patterns are timed.)
		// Under emulation (the VM shapes) everything is about five times
		// slower, the compile it guards against too.
		bound := 3 * time.Second
		if testenv.InVM() {
			bound = 15 * time.Second
		}
		if tc.field == "pattern" && took > bound {
			t.Errorf("%s %s: refusal took %v", tc.tool.Name(), tc.field, took)
		}
	}
}

// Model input repeated in a message is capped: an invalid pattern within
// the limit, an unknown field with a huge name.
func TestMessagesStayShort(t *testing.T) {
	fx := newFixture(t)
	for _, args := range []map[string]any{
		{"pattern": "(" + strings.Repeat("a", MaxPatternBytes-1)},
		{"pattern": "x", strings.Repeat("k", 1<<20): 1},
		{"pattern": "x", "glob": strings.Repeat("[", MaxPatternBytes)},
	} {
		raw, _ := json.Marshal(args)
		_, err := Search{}.Prepare(fx.ws, raw)
		e, ok := err.(*Error)
		if !ok || e.Reason != ReasonInvalidArgument || strings.Contains(e.Public, "\n") {
			t.Fatalf("%v", err)
		}
		if len(e.Public) > 600 || len(e.Error()) > 2048 {
			t.Errorf("message of %d bytes: %.200q", len(e.Public), e.Public)
		}
	}
}
