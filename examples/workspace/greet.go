// Package greet builds greetings.
package greet

import "strings"

// Greet returns a greeting for name, or for the world when name is blank.
func Greet(name string) string {
	name = strings.TrimSpace(name)
	if name == "" {
		name = "world"
	}
	return "Helo, " + name + "!"
}
