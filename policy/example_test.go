package policy_test

import (
	"fmt"

	"github.com/b10x/harness/policy"
)

// A policy file is read strictly: a bad value is refused at its position,
// naming the key.
func ExampleParse() {
	_, err := policy.Parse("ci.toml", []byte("confine = \"strict\"\npids_max = -1\n"), nil)
	fmt.Println(err)

	f, err := policy.Parse("ci.toml", []byte("confine = \"strict\"\npids_max = 1024\n"), nil)
	if err != nil {
		panic(err)
	}
	p := policy.Defaults()
	if err := f.Apply(&p); err != nil {
		panic(err)
	}
	fmt.Println(p.Confine, p.Run.PidsMax, p.Sources["pids_max"], p.Required("pids_max"), p.Required("memory_max"))
	// Output:
	// ci.toml:2:1: pids_max: must not be negative
	// strict 1024 ci.toml:2:1 true false
}

// Effective is what policy show prints: each setting as a file writes it,
// and where its value came from.
func ExamplePolicy_Effective() {
	p := policy.Defaults()
	p.Run.MemoryMax = 4 << 30
	p.Sources = map[string]string{"memory_max": "flag --memory-max"}
	for _, kv := range p.Effective() {
		switch kv.Key {
		case "memory_max", "tmp_size", "net":
			fmt.Printf("%s = %v (%s)\n", kv.Key, kv.Value, kv.Source)
		}
	}
	// Output:
	// memory_max = 4GiB (flag --memory-max)
	// tmp_size = 512MiB (default)
	// net = none (default)
}

// Every setting is one row of the table; a command's flags, the file's
// keys, the schema and policy show are made from the rows.
func ExampleLookup() {
	s, _ := policy.Lookup("pids_max")
	help, _ := s.FlagFor(policy.Exec)
	fmt.Printf("--%s (%s, default %s), taken by %s\n", s.Flag(), s.Kind, s.Default, s.Commands)
	fmt.Printf("needs the %s controller; the %s layer reports it\n", s.Controller, s.Layer)
	fmt.Println(help[:30])
	// Output:
	// --pids-max (int, default 512), taken by call, run, tools, mcp, policy show, exec
	// needs the pids controller; the pids-limit layer reports it
	// pids.max of each run call's cg
}

// Validate checks what needs no host: each value by its row, then the
// rules between settings.
func ExamplePolicy_Validate() {
	p := policy.Defaults()
	p.Run.Net = policy.NetHost
	p.Run.AllowDomain = []string{"proxy.golang.org"}
	fmt.Println(p.Validate(nil))
	// Output:
	// net host: contradicts allow_domain, deny_domain and allow_cidr, which need net proxy (the host's network admits everything)
}

// The user defaults file is where the XDG Base Directory Specification
// puts a program's configuration; its keys' sources name it.
func ExampleUserDefaultsPath() {
	env := map[string]string{"HOME": "/home/ada"}
	getenv := func(k string) string { return env[k] }
	fmt.Println(policy.UserDefaultsPath(getenv))
	env["XDG_CONFIG_HOME"] = "/srv/ada/config"
	fmt.Println(policy.UserDefaultsPath(getenv))
	env["XDG_CONFIG_HOME"] = "config" // relative: ignored
	fmt.Println(policy.UserDefaultsPath(getenv))
	// Output:
	// /home/ada/.config/b10x-harness/policy.toml
	// /srv/ada/config/b10x-harness/policy.toml
	// /home/ada/.config/b10x-harness/policy.toml
}
