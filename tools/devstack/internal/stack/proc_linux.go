package stack

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts a child in a process group of its own and has the
// kernel kill it when devstack dies (even by SIGKILL).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitExited waits until process pid has exited, leaving it to be reaped
// (by exec.Cmd.Wait): until then its pid, which is its group's id, cannot
// be reused, and the group can be killed safely. It says whether it
// waited.
func waitExited(pid int) bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err == nil
		}
	}
}
