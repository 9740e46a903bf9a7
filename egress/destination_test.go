package egress

import "testing"

// TestDestination: what is known of a destination, never ":0".
func TestDestination(t *testing.T) {
	for _, c := range []struct {
		host string
		port int
		want string
	}{
		{"example.com", 443, "example.com:443"},
		{"::1", 80, "[::1]:80"},
		{"example.com", 0, "example.com"},
		{"", 8080, "(no host named):8080"},
		{"", 0, "(no destination named)"},
	} {
		if got := Destination(c.host, c.port); got != c.want {
			t.Errorf("Destination(%q, %d) = %q, want %q", c.host, c.port, got, c.want)
		}
	}
}
