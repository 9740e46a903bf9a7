package setting

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestError(t *testing.T) {
	e := &Error{Key: AllowProgram, Value: `"x"`, Err: errors.New("not found in PATH")}
	if got, want := e.Error(), `allow_program "x": not found in PATH`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := (&Error{Key: Model, Err: errors.New("none given")}).Error(), "model: none given"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := &Error{Key: Workspace, Value: "/w", Err: fs.ErrNotExist}
	if !errors.Is(wrapped, fs.ErrNotExist) {
		t.Error("Error does not unwrap to its Err")
	}
	if got, want := Errorf(MaxCalls, "-1", "must not be %s", "negative").Error(), `max_calls "-1": must not be negative`; got != want {
		t.Errorf("Errorf = %q, want %q", got, want)
	}
}

func TestFlag(t *testing.T) {
	for key, want := range map[string]string{AllowProgram: "--allow-program", Workspace: "--workspace", BaseURL: "--base-url", MaxCalls: "--max-calls"} {
		if got := Flag(key); got != want {
			t.Errorf("Flag(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestFlagged(t *testing.T) {
	e := Errorf(AllowProgram, "x", "not found in PATH")
	if got, want := Flagged(e).Error(), `--allow-program "x": not found in PATH`; got != want {
		t.Errorf("Flagged = %q, want %q", got, want)
	}
	in := &Error{In: "anthropic", Key: BaseURL, Value: Quote("ftp://h"), Err: errors.New("want http")}
	if got, want := Flagged(in).Error(), `anthropic: --base-url "ftp://h": want http`; got != want {
		t.Errorf("Flagged(In) = %q, want %q", got, want)
	}
	if got, want := in.Error(), `anthropic: base_url "ftp://h": want http`; got != want {
		t.Errorf("Error(In) = %q, want %q", got, want)
	}
	var as *Error
	if f := Flagged(e); !errors.As(f, &as) || as != e || !errors.Is(f, e.Err) {
		t.Error("Flagged hides the error it words")
	}
	plain := errors.New("no setting here")
	if Flagged(plain) != plain || Flagged(nil) != nil {
		t.Error("Flagged changed an error without a setting")
	}
	// Another's wrapping is not rewritten: its words are kept whole.
	outer := fmt.Errorf("exec: %w", e)
	if Flagged(outer) != outer {
		t.Error("Flagged rewrote a wrapping's message")
	}
	// A policy file's error keeps its position and key.
	filed := &Error{Pos: "ci.toml:3:1", Key: MaxCalls, Err: errors.New("must not be negative")}
	if got, want := Flagged(filed).Error(), "ci.toml:3:1: max_calls: must not be negative"; got != want {
		t.Errorf("Flagged(filed) = %q, want %q", got, want)
	}
}

func TestQuote(t *testing.T) {
	if Quote("") != "" || Quote(`a"b`) != `"a\"b"` {
		t.Errorf("Quote: %q %q", Quote(""), Quote(`a"b`))
	}
}
