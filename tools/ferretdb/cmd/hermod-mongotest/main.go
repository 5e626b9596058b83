// Command hermod-mongotest is a MongoDB wire-protocol server for tests:
// FerretDB embedded, storing in SQLite files under --dir. Tests start it
// as a process (testkit/mongotest), kill it to take MongoDB away and start it
// again on the same port and directory to bring it back with its data.
// It lives in a module of its own so that FerretDB's dependencies stay out
// of the services' builds.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:27017", "TCP address to serve the MongoDB wire protocol on")
	dir := flag.String("dir", "", "directory of the SQLite files (created)")
	verbose := flag.Bool("v", false, "log FerretDB's messages")
	var tls ferretdb.ListenerConfig
	flag.StringVar(&tls.TLSCertFile, "tls-cert-file", "", "serve TLS only, with this PEM certificate (and --tls-key-file)")
	flag.StringVar(&tls.TLSKeyFile, "tls-key-file", "", "PEM key of --tls-cert-file")
	flag.StringVar(&tls.TLSCAFile, "tls-ca-file", "", "PEM CA that clients' certificates must be signed by (required of every client)")
	flag.Parse()
	listener := ferretdb.ListenerConfig{TCP: *listen}
	if tls.TLSCertFile != "" {
		tls.TLS = *listen
		listener = tls
	}
	if err := run(listener, *dir, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "hermod-mongotest:", err)
		os.Exit(1)
	}
}

func run(listener ferretdb.ListenerConfig, dir string, verbose bool) error {
	if dir == "" {
		return fmt.Errorf("--dir is required")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	level := slog.LevelError
	if verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  listener,
		Logger:    log,
		Handler:   "sqlite",
		SQLiteURL: "file:" + abs + "/",
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return f.Run(ctx)
}
