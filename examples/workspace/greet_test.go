package greet

import "testing"

func TestGreet(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Ada", "Hello, Ada!"},
		{"  ", "Hello, world!"},
	} {
		if got := Greet(tc.in); got != tc.want {
			t.Errorf("Greet(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
