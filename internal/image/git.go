package image

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Stamp is what a build is stamped with: Options' Version, Commit and Created.
type Stamp struct {
	Version string
	Commit  string
	Created time.Time
}

// GitStamp describes the work tree at dir: the version is `git describe --tags
// --always --dirty` (a "-dirty" suffix when tracked files differ from the
// commit), the commit is HEAD, and the creation time is SOURCE_DATE_EPOCH when
// set (the reproducible-builds convention), otherwise HEAD's commit time.
func GitStamp(ctx context.Context, dir string) (Stamp, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	var s Stamp
	var err error
	if s.Version, err = git("describe", "--tags", "--always", "--dirty"); err != nil {
		return s, err
	}
	if s.Commit, err = git("rev-parse", "HEAD"); err != nil {
		return s, err
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = git("log", "-1", "--format=%ct"); err != nil {
			return s, err
		}
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return s, fmt.Errorf("creation time %q is not a Unix time: %w", epoch, err)
	}
	s.Created = time.Unix(sec, 0).UTC()
	return s, nil
}

// CleanSource returns a repository address fit for a public label: any user
// name or password in a URL is dropped.
func CleanSource(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	u.User = nil
	return u.String()
}
