package imagebuild

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Source is what an image says about the tree it was built from.
type Source struct {
	// Version is the image tag and the binaries' version (the chart's
	// appVersion unless told otherwise).
	Version string
	// Commit is the full commit hash, Time its commit time: the time of
	// every file and of the image itself.
	Commit string
	Time   time.Time
	// Modified says the working tree differed from the commit.
	Modified bool
	// URL is the repository's address (org.opencontainers.image.source).
	URL string
}

// DefaultSourceURL is the repository the images' source label names.
const DefaultSourceURL = "https://github.com/hermod/hermod"

// ReadGit returns the commit checked out in the repository at root, its
// commit time and whether the tree has changes (tracked or untracked).
func ReadGit(ctx context.Context, root string) (commit string, at time.Time, modified bool, err error) {
	out, err := git(ctx, root, "log", "-1", "--format=%H %ct")
	if err != nil {
		return "", time.Time{}, false, err
	}
	var secs int64
	if _, err := fmt.Sscanf(out, "%s %d", &commit, &secs); err != nil {
		return "", time.Time{}, false, fmt.Errorf("parse git log output %q: %w", out, err)
	}
	status, err := git(ctx, root, "status", "--porcelain")
	if err != nil {
		return "", time.Time{}, false, err
	}
	return commit, time.Unix(secs, 0).UTC(), strings.TrimSpace(status) != "", nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// ErrNoAppVersion is returned when a Chart.yaml has no appVersion.
var ErrNoAppVersion = errors.New("no appVersion")

// ChartAppVersion reads the appVersion of the Helm chart file at path: the
// tag the chart's default image references carry.
func ChartAppVersion(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read chart: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "appVersion:")
		if !ok {
			continue
		}
		if i := strings.Index(v, "#"); i >= 0 {
			v = v[:i]
		}
		v = strings.Trim(strings.TrimSpace(v), `"'`)
		if v != "" {
			return v, nil
		}
	}
	return "", fmt.Errorf("read chart %s: %w", path, ErrNoAppVersion)
}
