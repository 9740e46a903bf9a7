package main

import (
	"strings"

	"github.com/alecthomas/kong"

	"github.com/b10x/harness/internal/cliref"
	"github.com/b10x/harness/policy"
)

// manCmd is the hidden `man`: the manual page, written from the same model
// as --help and completion (fullModel), for make man.
type manCmd struct{}

func (manCmd) Run(k *kong.Context, e *env) error {
	app, err := fullModel(k.Model.Name, k.Model.Help)
	if err != nil {
		return err
	}
	return cliref.WriteMan(e.stdout, cliref.FromKong(app), manPage())
}

// exitInternal is realMain's status for a panic caught on its way out.
const exitInternal = 70

// manPage is what the page says beyond the commands and flags: the exit
// statuses every command shares and, when a command reads it (it has
// --no-user-defaults), the user defaults file where
// policy.UserDefaultsPath looks.
func manPage() cliref.Page {
	xdg, home := userDefaultsPaths()
	return cliref.Page{Version: version, Help: helpCommand,
		Exits: []cliref.Exit{
			{Code: exitOK, What: "success"},
			{Code: exitFailed, What: "the command failed"},
			{Code: exitUsage, What: "a usage or configuration error; nothing was done"},
			{Code: exitInternal, What: "an internal error (a bug), said on stderr"},
		},
		Files: []cliref.PageFile{{Paths: []string{xdg, home}, Flag: "no-user-defaults",
			About: strings.Replace(cliref.Roff("The user defaults file (the second where $XDG_CONFIG_HOME is not set): policy keys, below those of --policy and the flags."),
				cliref.Roff("--policy"), cliref.Bold("--policy"), 1)}},
	}
}

// userDefaultsPaths is where policy.UserDefaultsPath looks, written with
// $XDG_CONFIG_HOME and with ~.
func userDefaultsPaths() (xdg, home string) {
	const x, h = "/XDG_CONFIG_HOME", "/HOME"
	xdg = policy.UserDefaultsPath(func(k string) string { return map[string]string{"XDG_CONFIG_HOME": x}[k] })
	home = policy.UserDefaultsPath(func(k string) string { return map[string]string{"HOME": h}[k] })
	return "$XDG_CONFIG_HOME" + strings.TrimPrefix(xdg, x), "~" + strings.TrimPrefix(home, h)
}
