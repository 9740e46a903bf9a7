package setting

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestError(t *testing.T) {
	e := &Error{Key: AllowProgram, Value: "x", Err: errors.New("not found in PATH")}
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
	e := &Error{Key: AllowProgram, Value: "x", Err: errors.New("not found in PATH")}
	if got, want := Flagged(e).Error(), `--allow-program "x": not found in PATH`; got != want {
		t.Errorf("Flagged = %q, want %q", got, want)
	}
	outer := fmt.Errorf("exec: %w", e)
	f := Flagged(outer)
	if got, want := f.Error(), `exec: --allow-program "x": not found in PATH`; got != want {
		t.Errorf("Flagged(wrapped) = %q, want %q", got, want)
	}
	var as *Error
	if !errors.As(f, &as) || as != e || !errors.Is(f, outer) {
		t.Error("Flagged hides the error it words")
	}
	plain := errors.New("no setting here")
	if Flagged(plain) != plain || Flagged(nil) != nil {
		t.Error("Flagged changed an error without a setting")
	}
	// A wrapping that does not end with the setting's text is left alone.
	odd := fmt.Errorf("%w (and more)", e)
	if Flagged(odd) != odd {
		t.Error("Flagged rewrote a message it does not end")
	}
}
