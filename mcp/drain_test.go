package mcp

import (
	"bytes"
	"testing"
)

// FuzzHead: where head reads a message's start, it reads what decoding
// the whole message does: the kind (request, answer, neither) and the id.
func FuzzHead(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":"a\"b","error":{"code":1,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":-7,"method":"elicitation/create","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`,
		`{"jsonrpc":"2.0","id":1.5,"result":{}}`,
		`{"jsonrpc":"2.0","id":null,"error":{}}`,
		`[{"jsonrpc":"2.0","id":1,"result":{}}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		hs, ok := head(b)
		if !ok {
			return
		}
		ms := messages(b)
		if len(ms) != 1 || ms[0].Method != nil && ms[0].isResponse() || bytes.Count(b, []byte(`"id":`)) > 1 || bytes.Count(b, []byte(`"method":`)) > 1 {
			return // not JSON, or nothing the SDK writes (both kinds at once, a key twice)
		}
		kind := func(m message) string {
			switch {
			case m.Method != nil && idKey(m.ID) != "":
				return "request " + idKey(m.ID)
			case m.isResponse() && idKey(m.ID) != "":
				return "answer " + idKey(m.ID)
			}
			return "neither"
		}
		want := kind(ms[0])
		got := "neither"
		if len(hs) == 1 {
			got = kind(hs[0])
		}
		if got != want {
			t.Fatalf("%s: head reads %s, the message is %s", b, got, want)
		}
	})
}
