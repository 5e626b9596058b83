package app

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// fileWatcher polls a config file and hands every new content to fn
// (polling works the same on every file system and with the atomic
// symlink swaps of Kubernetes ConfigMaps).
type fileWatcher struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// watchFile reads path (an error if it cannot), calls fn with it, then
// polls it every interval and calls fn whenever it changes. A file that
// cannot be read later is logged and skipped: the last content stays.
func watchFile(ctx context.Context, path string, interval time.Duration, fn func([]byte), log *slog.Logger) (*fileWatcher, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config file: %w", err)
	}
	fn(data)
	ctx, cancel := context.WithCancel(ctx)
	w := &fileWatcher{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		last, failing := data, false
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			b, err := os.ReadFile(path)
			if err != nil {
				if !failing {
					log.Warn("config file unreadable; keeping the config in force", "path", path, "error", err)
				}
				failing = true
				continue
			}
			failing = false
			if !bytes.Equal(b, last) {
				last = b
				fn(b)
			}
		}
	}()
	return w, nil
}

// Close stops the watcher and waits for it.
func (w *fileWatcher) Close() {
	w.once.Do(w.cancel)
	<-w.done
}
