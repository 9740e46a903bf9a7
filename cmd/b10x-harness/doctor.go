package main

import (
	"encoding/json"

	"github.com/b10x/harness/internal/setting"
	"github.com/b10x/harness/session"
)

type doctorCmd struct {
	JSON      bool   `help:"Print the probe, the layers and each mode's plan as JSON."`
	Workspace string `help:"The workspace whose run children doctor describes (who they run as, whether a run call starts there). Given, it also decides what each mode publishes and whether strict starts (the exit status); the default, the current directory, is only described." placeholder:"DIR"`
}

func (c *doctorCmd) Run(e *env) error {
	explicit := c.Workspace != ""
	if !explicit {
		c.Workspace = "."
	}
	d, strictOK := session.Doctor(c.Workspace, explicit)
	if c.JSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(d); err != nil {
			return err
		}
	} else if err := d.WriteText(e.stdout, c.Workspace, setting.Flag); err != nil {
		return err
	}
	if !strictOK {
		return exitError{exitFailed}
	}
	return nil
}
