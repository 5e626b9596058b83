//go:build !linux

package stack

import "syscall"

// sysProcAttr puts a child in a process group of its own.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitExited returns false at once where a process cannot be waited for
// without reaping it: the group is killed after exec.Cmd.Wait instead.
func waitExited(int) bool { return false }
