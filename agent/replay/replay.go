// Package replay is the replay provider of the agent loop: it plays a JSON
// Lines script of model turns, with no network, for security evaluations and
// demos. Each turn's calls go through the surface and the gate exactly like a
// real model's.
package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"unicode/utf8"

	"github.com/b10x/harness/agent"
)

// Replay plays a script of model turns: JSON Lines, one turn per line,
//
//	{"text": "...", "tool_calls": [{"name": "file_read", "arguments": {"path": "x"}}]}
//
// Either key may be absent. "arguments" is passed to the surface exactly as
// written (any JSON value; absent means {}); "arguments_raw", a string, is
// passed as raw bytes instead, to play a model that writes malformed JSON.
// Blank lines and lines starting with "#" are skipped. A turn without tool
// calls ends the run, so it may only be the last turn; when the script runs
// out, the run ends too (both with agent.StopScriptEnded). The tool results
// are not read: the script is the same whatever the gate decides.
//
// A Replay is immutable and safe for concurrent use; each Conversation is
// used by one goroutine. It checks only the script's shape: tool names and
// arguments are the gate's to judge, exactly as with a real model.
type Replay struct {
	file  string
	turns []agent.Turn
}

// ScriptError is a malformed replay script. It names the file and the line.
type ScriptError struct {
	File string
	Line int // 0 for the script as a whole
	Msg  string
}

func (e *ScriptError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("replay script %s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("replay script %s: %s", e.File, e.Msg)
}

// MaxScriptSize is the largest replay script read.
const MaxScriptSize = 64 << 20

// Load reads and parses a replay script.
func Load(file string) (*Replay, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("replay script: %w", err)
	}
	defer f.Close()
	turns, err := Parse(file, io.LimitReader(f, MaxScriptSize+1))
	if err != nil {
		return nil, err
	}
	return &Replay{file: file, turns: turns}, nil
}

// New returns a Replay of turns already parsed (file names it in
// transcripts).
func New(file string, turns []agent.Turn) *Replay {
	return &Replay{file: file, turns: append([]agent.Turn(nil), turns...)}
}

type replayLine struct {
	Text      *string           `json:"text"`
	ToolCalls *[]replayLineCall `json:"tool_calls"`
}

type replayLineCall struct {
	Name         *string         `json:"name"`
	Arguments    json.RawMessage `json:"arguments"`
	ArgumentsRaw *string         `json:"arguments_raw"`
}

// ParseLine parses one script line (not blank, not a comment) into a
// turn. Call ids are "L<line>.<n>".
func ParseLine(line int, b []byte) (agent.Turn, error) {
	if !utf8.Valid(b) {
		return agent.Turn{}, errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var l replayLine
	if err := dec.Decode(&l); err != nil {
		return agent.Turn{}, fmt.Errorf("not a turn object: %s", jsonErr(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return agent.Turn{}, errors.New("trailing data after the turn object")
	}
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("null")) {
		return agent.Turn{}, errors.New(`not a turn object: want {"text": ..., "tool_calls": [...]}`)
	}
	t := agent.Turn{}
	if l.Text != nil {
		t.Text = *l.Text
	}
	if l.ToolCalls != nil {
		for i, c := range *l.ToolCalls {
			if c.Name == nil || *c.Name == "" {
				return agent.Turn{}, fmt.Errorf("tool_calls[%d]: no name", i)
			}
			var args json.RawMessage
			switch {
			case c.ArgumentsRaw != nil && c.Arguments != nil:
				return agent.Turn{}, fmt.Errorf("tool_calls[%d]: both arguments and arguments_raw", i)
			case c.ArgumentsRaw != nil:
				args = json.RawMessage(*c.ArgumentsRaw)
			case c.Arguments != nil:
				args = append(json.RawMessage(nil), c.Arguments...)
			default:
				args = json.RawMessage("{}")
			}
			t.Calls = append(t.Calls, agent.ToolCall{ID: fmt.Sprintf("L%d.%d", line, i+1), Name: *c.Name, Args: args})
		}
	}
	if t.Text == "" && len(t.Calls) == 0 {
		return agent.Turn{}, errors.New("an empty turn: give text, tool_calls or both")
	}
	if len(t.Calls) == 0 {
		t.Stop = agent.StopScriptEnded
	} else {
		t.Stop = "tool_calls"
	}
	return t, nil
}

func jsonErr(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return fmt.Sprintf("the line must be a JSON object, not %s", te.Value)
		}
		want := "an object"
		switch te.Type.Kind() {
		case reflect.String:
			want = "a string"
		case reflect.Slice:
			want = "an array"
		}
		return fmt.Sprintf("%s must be %s, not %s", field, want, te.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the line ends inside the JSON value"
	}
	return err.Error()
}

// Parse parses a whole script read from r; file names it in errors.
// Errors are *ScriptError naming the line.
func Parse(file string, r io.Reader) ([]agent.Turn, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxScriptSize)
	var turns []agent.Turn
	n, total, endLine := 0, 0, 0
	for sc.Scan() {
		n++
		total += len(sc.Bytes()) + 1
		if total > MaxScriptSize {
			return nil, &ScriptError{File: file, Msg: fmt.Sprintf("larger than %d bytes", MaxScriptSize)}
		}
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		if endLine > 0 {
			return nil, &ScriptError{File: file, Line: n, Msg: fmt.Sprintf("never played: line %d has no tool calls, so it ends the run", endLine)}
		}
		t, err := ParseLine(n, b)
		if err != nil {
			return nil, &ScriptError{File: file, Line: n, Msg: err.Error()}
		}
		if len(t.Calls) == 0 {
			endLine = n
		}
		turns = append(turns, t)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &ScriptError{File: file, Line: n + 1, Msg: "line too long"}
		}
		return nil, &ScriptError{File: file, Line: n + 1, Msg: err.Error()}
	}
	if len(turns) == 0 {
		return nil, &ScriptError{File: file, Msg: "no turns"}
	}
	return turns, nil
}

// Name implements agent.Provider.
func (r *Replay) Name() string { return "replay" }

// File is the script's file name.
func (r *Replay) File() string { return r.file }

// Turns returns how many turns the script holds.
func (r *Replay) Turns() int { return len(r.turns) }

// Begin implements agent.Provider. The request is not used: the script
// does not depend on the task or the tools.
func (r *Replay) Begin(agent.Request) (agent.Conversation, error) {
	return &replayConv{turns: r.turns}, nil
}

type replayConv struct {
	turns []agent.Turn
	next  int
}

// Next implements agent.Conversation.
func (c *replayConv) Next(ctx context.Context, _ []agent.ToolResult) (agent.Turn, error) {
	if err := ctx.Err(); err != nil {
		return agent.Turn{}, err
	}
	if c.next >= len(c.turns) {
		return agent.Turn{Stop: agent.StopScriptEnded}, nil
	}
	t := c.turns[c.next]
	c.next++
	t.Calls = append([]agent.ToolCall(nil), t.Calls...)
	return t, nil
}
