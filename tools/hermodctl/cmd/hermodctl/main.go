// Command hermodctl is Hermod's operator CLI.
package main

import (
	"context"
	"os"
	"os/signal"

	_ "github.com/hermod/hermod/libs/plugins/standard"
	"github.com/hermod/hermod/tools/hermodctl/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
