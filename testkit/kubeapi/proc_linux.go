package kubeapi

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal has the kernel kill kube-apiserver when the test
// process dies without closing the server (a panic, a timeout's exit).
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
