package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/b10x/harness/internal/termsafe"
	"github.com/b10x/harness/policy"
	"github.com/b10x/harness/session"
)

type policyCmd struct {
	Check  policyCheckCmd  `cmd:"" help:"Check a policy file: unknown keys, wrong types and bad values are refused with FILE:LINE:COL and the key (exit 2); nothing is started."`
	Show   policyShowCmd   `cmd:"" help:"Print the effective policy (flags, --policy FILE, the user defaults file) and where each value came from: a flag, a file's line, or the default."`
	Schema policySchemaCmd `cmd:"" help:"Print the JSON Schema of a policy file, for editors."`
}

type policyCheckCmd struct {
	File string `arg:"" help:"The policy file (TOML)." type:"path"`
}

func (c *policyCheckCmd) Run(e *env) error {
	lf, err := session.LoadFile(c.File)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s: ok, %d key(s), sha256 %s\n", termsafe.Line(c.File), len(lf.Pos), lf.Ref.SHA256)
	return nil
}

type policyShowCmd struct {
	PolicyFlags `for:"policy show"`
	JSON        bool `help:"Print the effective policy as JSON."`
}

func (c *policyShowCmd) Run(e *env) error {
	pol, err := c.policy(e)
	if err != nil {
		return err
	}
	eff := pol.Effective()
	if c.JSON {
		out := map[string]any{"policy": eff}
		if pol.File != nil {
			out["file"] = pol.File
		}
		if pol.UserDefaults != nil {
			out["user_defaults"] = pol.UserDefaults
		}
		return writeJSON(e.stdout, "  ", out)
	}
	if pol.File != nil {
		fmt.Fprintf(e.stdout, "# policy file %s, sha256 %s\n", termsafe.Line(pol.File.Path), pol.File.SHA256)
	}
	if u := pol.UserDefaults; u != nil {
		fmt.Fprintf(e.stdout, "# %s %s, sha256 %s\n", policy.UserDefaultsOrigin, termsafe.Line(u.Path), u.SHA256)
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	for _, kv := range eff {
		fmt.Fprintf(w, "%s = %s\t# %s\n", kv.Key, termsafe.Line(tomlValue(kv.Value)), termsafe.Line(kv.Source))
	}
	return w.Flush()
}

// tomlValue writes v as a TOML value.
func tomlValue(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case []string:
		q := make([]string, len(x))
		for i, s := range x {
			q[i] = fmt.Sprintf("%q", s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	return fmt.Sprint(v)
}

type policySchemaCmd struct{}

func (c *policySchemaCmd) Run(e *env) error {
	_, err := e.stdout.Write(policy.Schema())
	return err
}
